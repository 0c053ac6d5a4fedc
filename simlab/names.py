"""Every metric, tag and run-param name simlab writes or reads, defined once.

The trainer, the credit layer's health summary, the tracking layer, the sweep runner, the report and
the findings import their names from here; ``tests/test_names.py`` fails when a run logs a key that
:func:`declared` does not know. The strings themselves never change: running experiments, the findings
specs under ``sweeps/findings/`` and their exports refer to them.

Metric keys are ``<prefix>/<name>``:

- rollout outcomes under :data:`TRAIN`, :data:`EVAL_COMPACTED`, :data:`EVAL_SINGLE_WINDOW` and
  :data:`BASE_TEACHER` (:data:`ROLLOUT`), plus what the trunk spent per evaluation episode (:data:`COST`);
- the update's diagnostics (:data:`LOSS`) and timings (:data:`PERF`);
- the credit layer's health summary under :data:`HEALTH` (:data:`HEALTH_KEYS`, and one
  ``segments/count_<k>`` per segment count), and the advantage errors (:data:`ADV_ERRORS`);
- value-pretraining steps log every step metric again under :data:`PRETRAIN`.
"""

from __future__ import annotations

import re

# ------------------------------------------------------------------------------------ metric prefixes
TRAIN = "train"
"""Rollouts of a training step."""
EVAL_COMPACTED = "eval/compacted"
"""Held-out rollouts under the run's own harness."""
EVAL_SINGLE_WINDOW = "eval/single_window"
"""Held-out rollouts with compaction disabled (trigger ``none``)."""
BASE_TEACHER = "base/teacher"
"""The reference agent's demonstrations during behaviour cloning."""
EVALUATIONS = {"compacted": EVAL_COMPACTED, "single_window": EVAL_SINGLE_WINDOW}
"""The two configurations every run is evaluated in, by the name the report uses."""
ROLLOUT_PREFIXES = (TRAIN, EVAL_COMPACTED, EVAL_SINGLE_WINDOW, BASE_TEACHER)

# ------------------------------------------------------------------------------- rollout outcomes
SUCCESS = "success"
RETURN = "return"
"""Mean reward over rollouts (each counts once; :data:`RETURN_PER_ROW` weighs them by their rows)."""
OVERLONG_RATE = "overlong_rate"
SEGMENTS_MEAN = "segments_mean"
COMPACTION_RATE = "compaction_rate"
STEPS = "steps"
SUMMARISED_SUCCESS = "summarised_success"
SUMMARY_HOLDS_ANSWER = "summary_holds_answer"
SUMMARY_HOLDS_CUED = "summary_holds_cued"
"""Share of summaries holding the fact the cue names (a task with a cue; NaN elsewhere)."""
SUMMARY_HOLDS_UNCUED = "summary_holds_uncued"
"""Share of summaries holding at least one fact the cue does not name (a task with a cue; NaN elsewhere)."""
SUMMARY_HOLDS_ALL_FACTS = "summary_holds_all_facts"
"""Share of summaries holding the value of every fact the episode states (a task that states facts; NaN
elsewhere): on keyrecall-duo, both pairs."""
SUMMARY_HOLDS = {"answer": SUMMARY_HOLDS_ANSWER, "cued": SUMMARY_HOLDS_CUED, "uncued": SUMMARY_HOLDS_UNCUED,
                 "all_facts": SUMMARY_HOLDS_ALL_FACTS}
"""What a task's summary probe (``Instances.summary_holds``) reports, by key, and each share's metric name: the
harness counts the keys a task reports and the episodes they apply to, and knows no task. A new task metric
is a key here and in the task's probe."""
SUMMARY_CUT = "summary_cut"
"""Share of summaries that reached ``harness.summary_budget`` without their end token (0 for fixed-length
summaries, which are never cut)."""
SUMMARY_LENGTH = "summary_length"
"""Mean tokens a summary leaves in the next segment (a variable-length summary's end token excluded)."""
QUANTILES = (0.1, 0.5, 0.9)
"""The quantiles the health summary and the summary lengths report (``q10``, ``q50``, ``q90``)."""
SUMMARY_LENGTH_QUANTILE = "summary_length_q{q}"
"""Quantile ``q`` (percent, of :data:`QUANTILES`) of the summaries' lengths."""
SUMMARY_LENGTH_QUANTILES = tuple(SUMMARY_LENGTH_QUANTILE.format(q=int(q * 100)) for q in QUANTILES)
"""``summary_length_q10``, ``_q50``, ``_q90``, in the order of :data:`QUANTILES`."""

# ------------------------------------------- training-health charts: tied groups, rows, compaction by index
RETURN_PER_ROW = "return_per_row"
"""Mean reward over segment rows, where a rollout with K segments counts K times (:data:`RETURN` counts each
rollout once): the reward a per-row loss sees, which leans toward the rollouts that compacted (miles #2710)."""
GROUP_ALL_FAIL = "group_all_fail_rate"
"""Share of a training step's prompt groups whose rollouts all scored 0 (groups of one rollout left out)."""
GROUP_ALL_SUCCESS = "group_all_success_rate"
"""Share of a training step's prompt groups whose rollouts all scored 1, the tasks' full reward."""
GROUP_NO_GRADIENT = "group_no_gradient_rate"
"""Share of a training step's prompt groups whose rewards are all equal: their group-relative advantages are 0,
so they carry no GRPO gradient (miles #1034, TRL #3502); with simlab's 0/1 rewards, all-fail plus all-success."""
GROUPS = (GROUP_ALL_FAIL, GROUP_ALL_SUCCESS, GROUP_NO_GRADIENT)
"""What :func:`simlab.train.rollouts.group_metrics` logs, under :data:`TRAIN` only: an evaluation plays one
rollout per prompt, and a group of one is always tied, so there a share would say nothing."""
SUMMARY_INDEX_CAP = 5
"""Summary length by compaction index pools a rollout's summaries from this one on in its last bucket
(``5plus``): at the default ``harness.max_compactions = 4`` no rollout writes more."""
SUMMARY_INDEX_LABELS = (*(str(i) for i in range(1, SUMMARY_INDEX_CAP)), f"{SUMMARY_INDEX_CAP}plus")
"""The buckets of summary length by compaction index: ``1`` to ``4``, then ``5plus``."""
SUMMARY_LENGTH_AT = "summary_length_at{index}"
"""Mean tokens of the summaries written at compaction ``index`` of their rollout (1: the first)."""
SUMMARY_LENGTH_BY_INDEX = tuple(SUMMARY_LENGTH_AT.format(index=label) for label in SUMMARY_INDEX_LABELS)
"""``summary_length_at1`` to ``summary_length_at4``, then ``summary_length_at5plus``."""
CONTEXT_BEFORE_COMPACTION = "context_before_compaction"
"""Mean working context (tokens) when a compaction began, before its summary: what the trigger read."""
CONTEXT_AFTER_COMPACTION = "context_after_compaction"
"""Mean context (tokens) the next segment opened with: prompt, summary block and kept tail. The gap between
the two is what a compaction removed."""
COMPACTION_BY_INDEX = (*SUMMARY_LENGTH_BY_INDEX, CONTEXT_BEFORE_COMPACTION, CONTEXT_AFTER_COMPACTION)
"""Summary length by compaction index and the context around a compaction (NaN where none happened)."""

ROLLOUT = (SUCCESS, RETURN, OVERLONG_RATE, SEGMENTS_MEAN, COMPACTION_RATE, STEPS, SUMMARISED_SUCCESS,
           *SUMMARY_HOLDS.values(), SUMMARY_LENGTH, *SUMMARY_LENGTH_QUANTILES,
           SUMMARY_CUT, RETURN_PER_ROW, *COMPACTION_BY_INDEX)
"""What :func:`simlab.train.rollouts.rollout_metrics` logs under each rollout prefix."""
EPISODES = "episodes"
"""Under each evaluation prefix: how many held-out episodes that evaluation played (intermediate
evaluations may play a subset, ``eval.curve_episodes``)."""
TOKENS_PER_EPISODE = "tokens_per_episode"
KEYS_PER_EPISODE = "keys_per_episode"
MFLOPS_PER_EPISODE = "mflops_per_episode"
COST = (EPISODES, TOKENS_PER_EPISODE, KEYS_PER_EPISODE, MFLOPS_PER_EPISODE)
"""What :func:`simlab.train.rollouts.cost_metrics` logs under each evaluation prefix."""


def metric(prefix: str, name: str) -> str:
    """``prefix/name``: ``metric(EVAL_COMPACTED, SUCCESS)`` is ``eval/compacted/success``."""
    return f"{prefix}/{name}"


EVAL_COMPACTED_SUCCESS = metric(EVAL_COMPACTED, SUCCESS)
"""``eval/compacted/success``: the objective of most sweeps."""
EVAL_SINGLE_WINDOW_SUCCESS = metric(EVAL_SINGLE_WINDOW, SUCCESS)
EVAL_COMPACTED_COMPACTION_RATE = metric(EVAL_COMPACTED, COMPACTION_RATE)
TRAIN_COMPACTION_RATE = metric(TRAIN, COMPACTION_RATE)
TRAIN_SUMMARISED_SUCCESS = metric(TRAIN, SUMMARISED_SUCCESS)

# ------------------------------------------------------------------------------------- the update
LOSS_PREFIX = "loss"
LOSS_POLICY = "loss/loss"
LOSS_CLIP_FRACTION = "loss/clip_fraction"
LOSS_APPROX_KL = "loss/approx_kl"
LOSS_ENTROPY = "loss/entropy"
LOSS_GRAD_NORM = "loss/grad_norm"
LOSS_VALUE = "loss/value"
LOSS_EXPLAINED_VARIANCE = "loss/explained_variance"
LOSS_LR = "loss/lr"
"""The policy's learning rate in the step's update (``train.lr`` x the schedule's factor)."""
LOSS_SHAPED_RETURN = "loss/shaped_return"
"""Mean reward after the per-segment cost (``train.cost``) was subtracted: what the estimator saw."""
LOSS = (LOSS_POLICY, LOSS_CLIP_FRACTION, LOSS_APPROX_KL, LOSS_ENTROPY, LOSS_GRAD_NORM, LOSS_VALUE,
        LOSS_EXPLAINED_VARIANCE, LOSS_LR, LOSS_SHAPED_RETURN)
BASE_LOSS = "base/loss"
"""Behaviour cloning's loss."""

# ----------------------------------------------------------------- base quality (simlab.train.quality)
BASE_HELDOUT = "base/heldout"
"""The base model on the run's held-out set before any RL (its own summaries; logged at step 0)."""
BASE_HELDOUT_TEACHER = "base/heldout_teacher"
"""The base's teacher on the same held-out instances, under the run's task and harness."""
BASE_HELDOUT_FLOOR = "base/heldout_floor"
"""The base with its summaries emptied (``harness.summariser = "none"``) on the same instances."""
BASE_HELDOUT_PREFIXES = {"base": BASE_HELDOUT, "teacher": BASE_HELDOUT_TEACHER, "floor": BASE_HELDOUT_FLOOR}
"""Each player of the base-quality measurement, by name, and the prefix of its rollout metrics."""
BASE_GAIN = "base/heldout_gain"
"""The base's held-out success over its floor's (a rate difference, paired by instance)."""
BASE_GAIN_SE = "base/heldout_gain_se"
"""SE of :data:`BASE_GAIN` over held-out instances."""
BASE_ABOVE_FLOOR = "base/heldout_above_floor"
"""1 when the base is clearly above its floor (gain > ``simlab.train.quality.CLEAR_SIGMAS`` SEs), else 0."""
BASE_TEACHER_LEAD = "base/heldout_teacher_lead"
"""The teacher's held-out success over the base's (a rate difference, paired by instance)."""
BASE_QUALITY = (BASE_GAIN, BASE_GAIN_SE, BASE_ABOVE_FLOOR, BASE_TEACHER_LEAD)
BASE_CHECK_SUCCESS = "base/check/success"
"""Behaviour cloning's check (``base.check_every``): the base's success on its check set."""
BASE_CHECK_FLOOR_SUCCESS = "base/check/floor_success"
"""The check's floor: the same model with its summaries emptied, on the same instances."""
BASE_CHECK_GAIN = "base/check/gain"
BASE_CHECK_GAIN_SE = "base/check/gain_se"
BASE_CHECK = (BASE_CHECK_SUCCESS, BASE_CHECK_FLOOR_SUCCESS, BASE_CHECK_GAIN, BASE_CHECK_GAIN_SE)

PERF_ROLLOUT_S = "perf/rollout_s"
PERF_UPDATE_S = "perf/update_s"
PERF_ENV_STEPS_PER_S = "perf/env_steps_per_s"
PERF_ROLLOUT_TOKENS = "perf/rollout_tokens"
PERF_ROLLOUT_TOKENS_PER_S = "perf/rollout_tokens_per_s"
PERF_UPDATE_TOKENS = "perf/update_tokens"
PERF_UPDATE_TOKENS_PER_S = "perf/update_tokens_per_s"
PERF_OPTIMISED_TOKENS = "perf/optimised_tokens"
PERF = (PERF_ROLLOUT_S, PERF_UPDATE_S, PERF_ENV_STEPS_PER_S, PERF_ROLLOUT_TOKENS, PERF_ROLLOUT_TOKENS_PER_S,
        PERF_UPDATE_TOKENS, PERF_UPDATE_TOKENS_PER_S, PERF_OPTIMISED_TOKENS)

PRETRAIN = "pretrain/"
"""Prefix of every step metric logged during value pretraining (CompactionRL)."""

# --------------------------------------------------------------------------- the credit layer's health
HEALTH = "health/"
"""Prefix the trainer logs the health summary under."""
SEG_MEAN = "segments/mean"
SEG_MAX = "segments/max"
SEG_QUANTILE = "segments/q{q}"
"""Quantile ``q`` (percent) of segments per rollout."""
SEG_COUNT = "segments/count_"
"""Prefix of the rollout count with ``k`` segments: ``segments/count_<k>``."""
HEALTH_COMPACTION_RATE = "compaction_rate"
BASELINE_SHIFT_MEAN = "baseline_shift/mean"
LONGER_LOSS_SHARE = "longer/loss_share"
LONGER_TOKEN_SHARE = "longer/token_share"
LONGER_RATE = "longer/rate"
WITHIN_GROUP = "within_group/"
"""Prefix of the within-group statistics: ``segments_sd`` and ``corr``."""
WITHIN_GROUP_SD = "within_group/segments_sd"
WITHIN_GROUP_CORR = "within_group/corr"
N_AFTER_QUANTILE = "n_after/q{q}"
LAMBDA_MEAN = "lambda/mean"
LAMBDA_MIN = "lambda/min"
FIRST_SEGMENT_WEIGHT_MEAN = "first_segment_weight/mean"
FIRST_SEGMENT_WEIGHT_MIN = "first_segment_weight/min"
STALL = "stall"
"""1 when, over the last :data:`STALL_WINDOW` training steps, segments per rollout rose while the success
of compacted rollouts fell (least-squares lines, by :data:`STALL_RISE` and :data:`STALL_FALL`): the seed's
sign of a summariser learning to stall; 0 otherwise, NaN until the window has filled."""
STALL_WINDOW = 8
"""Training steps the stall signal fits its two lines over."""
STALL_RISE = 0.1
"""Segments per rollout the stall signal's fitted line must rise by across its window."""
STALL_FALL = 0.05
"""Success of compacted rollouts (a rate) the stall signal's fitted line must fall by across its window."""
HEALTH_KEYS = (
    SEG_MEAN, SEG_MAX, HEALTH_COMPACTION_RATE, BASELINE_SHIFT_MEAN, LONGER_LOSS_SHARE, LONGER_TOKEN_SHARE,
    LONGER_RATE, WITHIN_GROUP_SD, WITHIN_GROUP_CORR, LAMBDA_MEAN, LAMBDA_MIN, FIRST_SEGMENT_WEIGHT_MEAN,
    FIRST_SEGMENT_WEIGHT_MIN,
    *(SEG_QUANTILE.format(q=int(q * 100)) for q in QUANTILES),
    *(N_AFTER_QUANTILE.format(q=int(q * 100)) for q in QUANTILES),
)
"""Every key of :func:`simlab.credit.health.summary` but the per-count ones."""


def health(key: str) -> str:
    """A health-summary key as the trainer logs it: ``health/<key>``."""
    return HEALTH + key


def seg_count(k: int) -> str:
    """``segments/count_<k>``: rollouts with ``k`` segments."""
    return f"{SEG_COUNT}{k}"


ADV_ERROR_ROLLOUT_GROUP = "adv_error/rollout_group/rel_l2"
"""A group estimator's advantages against rollout_group's on the same batch (relative L2)."""
ADV_ERROR_FINAL_REL_L2 = "adv_error/final/rel_l2"
ADV_ERROR_FINAL_CORR = "adv_error/final/corr"
ADV_ERROR_PRE_FINAL_REL_L2 = "adv_error/pre_final/rel_l2"
ADV_ERROR_PRE_FINAL_CORR = "adv_error/pre_final/corr"
ADV_ERRORS = (ADV_ERROR_ROLLOUT_GROUP, ADV_ERROR_FINAL_REL_L2, ADV_ERROR_FINAL_CORR, ADV_ERROR_PRE_FINAL_REL_L2,
              ADV_ERROR_PRE_FINAL_CORR)
"""A GAE estimator's advantages against the concatenated-GAE reference (final and pre-final segments)."""

FINAL = "final/"
"""Prefix an earlier runner logged the trial's returned result under; the report still reads it."""
SEGMENT_HISTOGRAM = "segment_histogram"
"""Image key (step-indexed) of the segment-count histogram a trial run logs at its end."""

# ------------------------------------------------------------------------------------------- tags
ROLE_TAG = "simlab.role"
"""``parent`` (a sweep's run) or ``trial``."""
SWEEP_TAG = "simlab.sweep"
TRIAL_TAG = "simlab.trial_number"
REASON_TAG = "simlab.status_reason"
CELL_TAG = "simlab.cell"
"""The trial's grid cell with its seed, e.g. ``train.estimator=rollout_group,train.normaliser=token,seed=0``."""
VARIANT_TAG = "simlab.variant"
"""The cell without its seed: the unit ``simlab report`` pools seeds over."""
SEED_TAG = "simlab.seed"
BASELINE_TAG = "simlab.baseline"
"""On a parent run: the variant ``simlab report`` compares against by default."""
FAILURE_TAG = "simlab.failure"
"""On a failed trial's run: ``diverged``, ``error``, ``pruned`` or ``killed`` (a ``base_gate`` trial's run is
deleted)."""
SAMPLER_TAG = "simlab.sampler"
OBJECTIVE_TAG = "simlab.objective"
STORAGE_TAG = "simlab.storage"
GIT_COMMIT_TAG = "simlab.git_commit"
VERSION_TAG = "simlab.version"
CONFIG_TAG_KEYS = ("train.recipe", "train.estimator", "train.normaliser", "train.lam", "train.overlong_mask",
                   "harness.v_sum", "harness.summariser", "harness.trigger", "task.preset")
"""Config settings a trial's run is also tagged with (``simlab.<key path>``), so runs can be searched by them."""
NOTE_TAG = "mlflow.note.content"
"""MLflow's description of a run (a sweep's description goes on its parent)."""
PARENT_TAG = "mlflow.parentRunId"
"""The tag MLflow's UI nests child runs by."""
RUN_NAME_TAG = "mlflow.runName"
METRICS_TABLE_TAG = "simlab.metrics_table"
"""On a trial's run: the artifact path of its metric-history export (``simlab.tracking.METRICS_TABLE``)."""
EPISODES_TABLE = "tables/episodes.parquet"
"""A run's per-episode evaluation outcomes: one row per held-out episode of every evaluation
(:data:`EPISODE_COLUMNS`)."""
EPISODES_TABLE_TAG = "simlab.episodes_table"
"""On a trial's run: the artifact path of its per-episode export (:data:`EPISODES_TABLE`)."""
EPISODE_COLUMNS = ("step", "evaluation", "instance", "success", "reward", "segments", "tokens", "overlong")
"""The per-episode table: the RL step evaluated at, the evaluation (``compacted``, ``single_window``), the
held-out instance seed, success (0/1), reward, segments, trunk tokens processed, and the overlong flag."""
EPISODE_SUMMARY_COLUMNS = ("summaries", "summaries_holding_answer")
"""After :data:`EPISODE_COLUMNS` in the per-episode table: the summaries the episode wrote, and how many held
its answer (the task's summary probe, ``Instances.summary_holds``; null on an env without one), so success can
be read against summary content. Runs logged before these columns lack them (their readers fill nulls)."""
KIND_TAG = "mlflow.experimentKind"
"""MLflow 3's UI opens an untyped experiment on its GenAI (traces) overview; this selects the runs view."""
RUN_COLOR_TAG = "mlflow.runColor"
"""The colour MLflow's UI draws a run in: a trial's is its variant's (``simlab.tracking.views.variant_colors``)."""
SUMMARY = "summary/"
"""On a parent run: the per-variant summary, a metric ``summary/<evaluation>/<variant>/<stat>`` per number
and a tag ``summary/<evaluation>/<variant>`` that reads ``74.7 ± 1.6, diff +24.3 ± 0.5 (+51.9σ)``."""


def config_tag(key: str) -> str:
    """``simlab.<key path>``: the tag of a config setting (:data:`CONFIG_TAG_KEYS`)."""
    return f"simlab.{key}"


TAGS = (ROLE_TAG, SWEEP_TAG, TRIAL_TAG, REASON_TAG, CELL_TAG, VARIANT_TAG, SEED_TAG, BASELINE_TAG, FAILURE_TAG,
        SAMPLER_TAG, OBJECTIVE_TAG, STORAGE_TAG, GIT_COMMIT_TAG, VERSION_TAG, NOTE_TAG, PARENT_TAG, RUN_NAME_TAG,
        METRICS_TABLE_TAG, EPISODES_TABLE_TAG, RUN_COLOR_TAG,
        *(config_tag(k) for k in CONFIG_TAG_KEYS))
"""Every run tag simlab writes."""

# --------------------------------------------------------------------- what a trial records in Optuna
ATTR_CELL = "cell"
ATTR_OWNER = "owner"
ATTR_RUN = "mlflow_run_id"
ATTR_FAILURE = "failure"
ATTR_REASON = "reason"
ATTR_REPLACES = "replaces"
"""On a retry queued by the heartbeat check: the number of the stale trial it runs again."""
ATTR_SEED = "seed"
"""The trial's seed: a user attribute, not a parameter, so Optuna's importance ranks only the searched axes."""
STUDY_FINGERPRINT = "simlab.fingerprint"
"""A study's user attr: the spec it was made from (a changed spec under the same name is refused)."""

# ------------------------------------------------------------------------------------- run params
CELL_PARAM = "sweep.cell"
"""The param a trial's run records its cell label in, beside the flattened run config."""
PARAM_EPISODES = "eval.episodes"
PARAM_WINDOW = "harness.window"
PARAM_FRAC = "harness.frac"
PARAM_MAX_COMPACTIONS = "harness.max_compactions"
PARAM_TRIGGER = "harness.trigger"
PARAM_T_COMP = "harness.t_comp"
PARAM_BASE_SEED = "base.seed"
PARAM_EVAL_SEED = "eval.seed"
"""Params (flattened run config keys) the report reads: the evaluation size, the harness geometry, and
what the seeds vary."""


# ----------------------------------------------------------------------------------------- checking
STEP_METRICS = (
    *(metric(p, n) for p in ROLLOUT_PREFIXES for n in ROLLOUT + COST), *LOSS, *PERF, *ADV_ERRORS, BASE_LOSS,
    *(metric(p, n) for p in BASE_HELDOUT_PREFIXES.values() for n in ROLLOUT), *BASE_QUALITY, *BASE_CHECK,
    *(health(k) for k in HEALTH_KEYS), health(STALL), *(metric(TRAIN, n) for n in GROUPS),
)
"""Every metric a step can log by its fixed name; the per-count ``health/segments/count_<k>`` family aside."""
_STEP_METRIC = re.compile(
    "^(?:" + "|".join(map(re.escape, STEP_METRICS)) + "|" + re.escape(health(SEG_COUNT)) + r"\d+)$"
)


RATE_SUFFIXES = (SUCCESS, "_rate", *SUMMARY_HOLDS.values(), SUMMARY_CUT)
"""A metric whose name ends so is a rate in [0, 1], reported in points (x 100) like the papers."""


def is_rate(key: str) -> bool:
    """Whether ``key`` is a rate (reported in points), by :data:`RATE_SUFFIXES`."""
    return key.endswith(RATE_SUFFIXES)


def declared(key: str) -> bool:
    """Whether ``key`` is a metric name defined here (a ``pretrain/`` or ``final/`` copy included)."""
    for prefix in (PRETRAIN, FINAL):
        key = key.removeprefix(prefix)
    return bool(_STEP_METRIC.match(key))


def result_metrics(*, single_window: bool = True) -> tuple[str, ...]:
    """What a run returns (:func:`simlab.train.rollouts.evaluate`, its final evaluation): the rollout and
    cost metrics of the compacted evaluation, and of the single-window one when the run plays it
    (``eval.single_window``). A sweep's objective is one of these: a trial's value is read from them."""
    prefixes = (EVAL_COMPACTED, EVAL_SINGLE_WINDOW) if single_window else (EVAL_COMPACTED,)
    return tuple(metric(p, n) for p in prefixes for n in ROLLOUT + COST)


def check_metric(key: str, value: str, among: tuple[str, ...] | None = None,
                 what: str = "a metric the trainer logs") -> None:
    """Raise :class:`~simlab.errors.ConfigError` unless ``value`` is a metric simlab's trainer logs
    (:func:`declared`), or one of ``among`` when given (``what`` says what they are), naming the closest
    ones: a typo must not run every trial to fail each."""
    import difflib

    from simlab.errors import ConfigError

    if (among is None and declared(value)) or (among is not None and value in among):
        return
    near = difflib.get_close_matches(value, among or STEP_METRICS, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(map(repr, near))}? " if near else ""
    every = "simlab.names.result_metrics()" if among is not None else f"simlab.names.STEP_METRICS, or " \
                                                                       f"{health(SEG_COUNT)}<k>"
    raise ConfigError.invalid(key, value, f"{hint}choose {what}, e.g. {EVAL_COMPACTED_SUCCESS!r} (every name: "
                                          f"{every})")
