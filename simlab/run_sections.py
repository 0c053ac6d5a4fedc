"""The run's own sections: ``train`` (the RL recipe), ``base`` (the base model) and ``eval`` (held-out play).

The task, harness and policy sections live with their layers (``simlab.tasks.config``,
``simlab.harness.config``, ``simlab.policy.config``); :mod:`simlab.config` gathers all six into a
``RunConfig`` and resolves it. Like :mod:`simlab.config`, this module loads no torch at import: the
ratio and schedule names are looked up in :mod:`simlab.update` only when a value is checked.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from simlab.credit import (
    BASELINES,
    COSTS,
    ESTIMATORS,
    NORMALISERS,
    ROW_WEIGHTS,
    estimator_family,
    estimators_of,
)
from simlab.credit.lambdas import LAM
from simlab.harness.agents import AGENTS, SCRIPTED_QUALITY
from simlab.harness.config import THRESHOLD_DRAWS
from simlab.recipes import RECIPES
from simlab.rules import (
    BATCH_MAX,
    COUNT_MAX,
    SEED_MAX,
    ExistingFile,
    Names,
    NonNegative,
    Positive,
    Real,
    Unit,
    UnitOpen,
)
from simlab.schema import Section


def _update() -> Any:
    """:mod:`simlab.update`, imported when a ratio or schedule name is checked: it needs torch, and a bad
    value elsewhere is refused without it."""
    import simlab.update

    return simlab.update


MINIBATCH_TOKENS = 1024
"""Token slots per mini-batch by default: on one CPU core, larger mini-batches spill out of its cache
(``benchmarks/bench_throughput.py``)."""

SUMMARY_LOSSES = ("train", "mask", "separate")
"""``train.summary_loss``: the summary tokens trained with the outcome's advantage in the one loss, their loss
masked, or in a loss of their own (FoldAct's separated loss, scaled by ``train.summary_weight``)."""
SCHEDULE_UNITS = ("rollouts", "rows")
"""``train.schedule_unit``: what the learning-rate schedule's clock counts."""


class TrainConfig(Section):
    """The RL recipe: algorithm, credit assignment, optimisation. Every field is a sweep axis."""

    SECTION = "train"

    recipe: Annotated[str, Names(lambda: RECIPES)] = "supo"
    """Named defaults from ``simlab.recipes``: supo, compactionrl, resum, autocompact, and the baselines react,
    sliding, mem1, memagent and grpo."""
    algorithm: Literal["auto", "grpo", "ppo"] = "auto"
    """``grpo`` (group estimators, no critic) or ``ppo`` (GAE estimators with a critic); ``auto`` picks
    by the estimator's family, so a sweep over estimators switches algorithm with it."""
    estimator: Annotated[str, Names(lambda: ESTIMATORS)] = "rollout_group"
    """Advantage estimator, a name in ``simlab.credit.ESTIMATORS``."""
    normaliser: Annotated[str, Names(lambda: NORMALISERS)] = "token"
    """Loss normaliser, a name (or verl alias) in ``simlab.credit.NORMALISERS``."""
    row_weight: Annotated[str, Names(lambda: ROW_WEIGHTS)] = "none"
    """Per-row loss weight c_j, times the normaliser's (verl PR #7580's ``loss_weight``): ``none``,
    ``inverse_k`` (1/K: every rollout counts once) or ``length_ratio`` (n_j / mean n)."""
    overlong_mask: bool = True
    """SUPO: unfinished rollouts get zero loss weight (they still count in advantage statistics)."""
    summary_loss: Annotated[str, Names(lambda: SUMMARY_LOSSES)] = "train"
    """The summary tokens the policy writes: ``train`` them with the outcome's advantage, ``mask`` their
    loss (weight 0, out of every normaliser's denominators; the critic still regresses on them), or
    ``separate``: FoldAct's separated loss, L_act + summary_weight x L_sum, each normalised over its own
    tokens (``simlab.credit.separated_loss_weights``)."""
    summary_weight: NonNegative = 1.0
    """w_sum of ``summary_loss='separate'``: the weight of the summary tokens' own loss, a finite number >= 0."""
    answer_loss: Literal["train", "mask"] = "train"
    """The answer tokens the policy writes: ``train`` them with the outcome's advantage, or ``mask`` their loss
    (weight 0, out of every normaliser's denominators, as ``summary_loss='mask'`` does for summaries): the
    answer stays the base model's, so what RL changes is what the summaries and actions give it to read."""
    baseline: Annotated[str, Names(lambda: BASELINES)] = "all"
    """Group estimators: which rollouts enter the group's mean and std, ``all`` or ``finished`` (invalid,
    overlong rollouts out of the baseline, NeMo-RL #4078); every rollout still gets an advantage."""
    cost: Annotated[str, Names(lambda: COSTS)] = "none"
    """A per-segment cost summed over the rollout's segments and subtracted from its reward (``tokens``,
    ``segments``, ``context``: keys attended), x ``cost_coef``; ``none``: the task's reward."""
    cost_coef: NonNegative = 0.0
    """Reward units per unit of ``cost`` (per token, per segment, per attended key), >= 0."""
    cost_on: Literal["all", "success"] = "all"
    """Which rollouts pay ``cost``: ``all``, or only those that succeeded (``success``: FoldGRPO's rule, as in
    mastery-gated compression; a failure keeps its 0 whatever its length). ``simlab.credit.shaping.CHARGED``."""
    ratio: Annotated[str, Names(lambda: _update().RATIOS)] = "token"
    """Importance ratio of the clipped loss: ``token`` (PPO) or ``segment`` (GSPO's geometric mean over a
    segment's tokens, clipped per segment; set eps_low/eps_high to GSPO's 3e-4/4e-4 scale)."""
    whiten: bool = False
    """Batch-level masked whitening of advantages (verl applies it after GAE)."""
    std_normalize: bool = True
    """Group estimators: divide by the group std (False: Dr. GRPO's R - mean)."""
    unbiased_std: bool = False
    """Group estimators: ddof=1 std as verl's torch.std; default population std."""
    gamma: UnitOpen = 1.0
    """GAE discount, in (0, 1]."""
    lam: LAM = 0.95
    """GAE lambda in (0, 1], or a length-adaptive reading (response_cap, segment_length, trajectory_length)."""
    alpha: Positive | None = None
    """Length-adaptive lambda: lam = 1 - 1/(alpha * l). Required with a reading."""
    response_cap: Annotated[int, Field(ge=1, le=COUNT_MAX)] | None = None
    """Per-response token cap ``l`` of the ``response_cap`` reading."""
    group_size: Annotated[int, Field(ge=1, le=BATCH_MAX)] = 8
    """G: rollouts per prompt (GRPO); PPO recipes use 1."""
    prompts: Annotated[int, Field(ge=1, le=BATCH_MAX)] = 16
    """Prompts per training step; the step runs prompts x G rollouts."""
    steps: Annotated[int, Field(ge=0, le=COUNT_MAX)] = 30
    """RL training steps."""
    lr: Positive = 3e-4
    """Policy learning rate (of ``optimizer``)."""
    optimizer: Annotated[str, Names(lambda: _update().OPTIMISERS)] = "adam"
    """The policy's optimiser, a name in ``simlab.update.OPTIMISERS``: ``adam`` (every recipe's) or ``sgd``
    (plain, no momentum: its step follows the gradient's scale, where Adam's barely does); ``lr`` must suit
    it (the third campaign's calibration is in docs/findings.md). A separate critic always uses Adam, at
    ``lr x critic_lr_scale``: set the scale so that its lr stays an Adam one."""
    lr_schedule: Annotated[str, Names(lambda: _update().SCHEDULES)] = "constant"
    """Learning-rate schedule over the planned ``steps x prompts x group_size`` units: ``constant``,
    ``linear`` or ``cosine`` decay to 0 (policy and critic alike)."""
    schedule_unit: Annotated[str, Names(lambda: SCHEDULE_UNITS)] = "rollouts"
    """What the schedule's clock counts: logical ``rollouts`` (NeMo-RL #4078) or ``rows`` (segments), so
    that a compacting policy runs through its schedule K times faster."""
    threshold_draw: Annotated[str, Names(lambda: THRESHOLD_DRAWS)] = "fixed"
    """Training rollouts' threshold L = floor(frac x W): ``fixed`` (harness.frac), drawn once per
    ``group`` (its G rollouts share it) or per ``rollout``, uniformly in harness.frac +- frac_spread.
    Evaluation always plays harness.frac."""
    frac_spread: Annotated[Real, Field(ge=0, lt=1)] = 0.0
    """Half-width of the threshold draw around harness.frac; > 0 needs a ``group`` or ``rollout`` draw
    (0 with a draw is the control: every draw gives harness.frac)."""
    critic: Literal["auto", "none", "head", "separate"] = "auto"
    """``none`` (GRPO), ``head`` (value head on the policy trunk) or ``separate`` (CompactionRL: a critic
    initialised from the policy checkpoint, with its own optimiser); ``auto``: none for GRPO, separate
    for PPO."""
    critic_lr_scale: Positive = 1.5
    """Critic learning rate = lr x this (CompactionRL: 3e-6 / 2e-6)."""
    value_pretrain_steps: Annotated[int, Field(ge=0, le=COUNT_MAX)] = 0
    """Critic-only steps before RL (CompactionRL: 50 at full scale)."""
    value_updates: Annotated[int, Field(ge=1, le=COUNT_MAX)] = 2
    """Critic updates per policy update (CompactionRL: 2)."""
    eps_low: Positive = 0.2
    """Lower clip range of the ratio, > 0."""
    eps_high: Positive = 0.28
    """Upper clip range (clip-higher), > 0."""
    epochs: Annotated[int, Field(ge=1, le=COUNT_MAX)] = 1
    """Passes over each rollout batch."""
    minibatch_segments: Annotated[int, Field(ge=1, le=2**16)] = 256
    """Most segments in one update mini-batch (a memory bound; the loss is the whole batch's either way)."""
    minibatch_tokens: Annotated[int, Field(ge=0, le=2**24)] = MINIBATCH_TOKENS
    """With ``length_buckets``: most token slots (segments x the longest of them) in one mini-batch; 0: no
    bound. Small mini-batches stay in a CPU core's cache (1,024 suits d = 64-128); on a GPU raise both."""
    length_buckets: bool = True
    """Group segments of similar length into mini-batches, each cut to its longest segment. False: random
    mini-batches of ``minibatch_segments`` rows at the batch's longest, padded with dummy zero-weight rows
    (the update before the length buckets). The loss is the same; float rounding differs."""
    max_grad_norm: Positive = 1.0
    """Gradient-norm clip."""
    temperature: Positive = 1.0
    """Sampling temperature during training rollouts."""
    entropy_coef: Unit = 0.0
    """Entropy bonus (0: none, as SUPO)."""
    summariser_checkpoint: Annotated[str, ExistingFile("checkpoint file")] | None = None
    """With ``harness.summariser='frozen'``: the frozen summariser's checkpoint (default: the base)."""

    def check(self) -> None:
        """The algorithm, estimator, critic and lambda reading must go together."""
        if self.algorithm != "auto" and (self.algorithm == "grpo") != (estimator_family(self.estimator) == "group"):
            family, shown = ("group", "group") if self.algorithm == "grpo" else ("gae", "GAE")
            raise self.invalid("estimator", f"it does not go with algorithm={self.algorithm!r}; choose a "
                               f"{shown} estimator: {estimators_of(family)}")
        if isinstance(self.lam, str):
            if self.alpha is None:
                raise self.invalid("alpha", f"lam={self.lam!r} needs it; choose a finite value > 0")
            if self.lam == "response_cap" and self.response_cap is None:
                raise self.invalid("response_cap", "lam='response_cap' needs it; choose an integer >= 1")
        if self.algorithm == "ppo" and self.critic == "none":
            raise self.invalid("critic", "algorithm='ppo' needs a critic; choose 'head' or 'separate'")
        if self.baseline != "all" and estimator_family(self.estimator) != "group":
            raise self.invalid("baseline", f"it applies to group estimators, not {self.estimator!r}; choose 'all'")
        if self.summary_weight != 1.0 and self.summary_loss != "separate":
            raise self.invalid("summary_weight", f"summary_loss={self.summary_loss!r} has no summary loss of its own "
                               "to weigh; choose 1.0 or set train.summary_loss='separate'")
        if self.answer_loss == "mask" and self.summary_loss == "separate":
            raise self.invalid("answer_loss", "summary_loss='separate' normalises every token that is not a summary "
                               "token as the action loss; choose 'train' or set train.summary_loss to 'train' or "
                               "'mask'", involves=("train.summary_loss",))
        if self.cost_coef > 0 and COSTS.canonical(self.cost) == "none":
            raise self.invalid("cost_coef", "cost='none' has nothing to scale; choose 0 or set train.cost")
        if self.cost_on != "all" and (COSTS.canonical(self.cost) == "none" or self.cost_coef == 0):
            raise self.invalid("cost_on", "no cost is charged (train.cost and train.cost_coef); choose 'all' or set "
                               "both", involves=("train.cost", "train.cost_coef"))
        if self.frac_spread > 0 and self.threshold_draw == "fixed":
            raise self.invalid("frac_spread", "threshold_draw='fixed' draws nothing; choose 0 or a 'group' or "
                               "'rollout' draw")
        if self.prompts * self.group_size > BATCH_MAX:
            raise self.invalid("prompts", f"prompts x group_size = {self.prompts * self.group_size} rollouts per "
                               f"step; choose an integer <= {BATCH_MAX // self.group_size}")

    def estimator_options(self) -> dict[str, Any]:
        """Keyword options for ``simlab.credit.advantages``."""
        if estimator_family(self.estimator) == "group":
            return {"std_normalize": self.std_normalize, "unbiased_std": self.unbiased_std, "baseline": self.baseline}
        opts: dict[str, Any] = {"gamma": self.gamma, "lam": self.lam}
        if isinstance(self.lam, str):
            opts["alpha"] = self.alpha
            if self.lam == "response_cap":
                opts["response_cap"] = self.response_cap
        return opts


class BaseConfig(Section):
    """The "base model": behaviour cloning from a reference agent, built once per task preset and cached."""

    SECTION = "base"

    teacher: Annotated[str, Names(lambda: AGENTS)] = "scripted"
    """Reference agent to clone (``scripted`` at quality q gives an imperfect summariser)."""
    quality: Unit = SCRIPTED_QUALITY
    """Summary quality q of the scripted teacher, in [0, 1]."""
    steps: Annotated[int, Field(ge=0, le=COUNT_MAX)] = 200
    """Behaviour-cloning steps (0: start RL from a random policy)."""
    episodes: Annotated[int, Field(ge=1, le=BATCH_MAX)] = 128
    """Teacher rollouts per behaviour-cloning step."""
    lr: Positive = 1e-3
    """Learning rate of behaviour cloning."""
    minibatch_tokens: Annotated[int, Field(ge=0, le=2**24)] = MINIBATCH_TOKENS
    """A step's gradient is accumulated over length buckets of at most this many token slots (segments x
    the longest of them); 0: the step's batch in one padded pass (the base model before the length buckets)."""
    teach: Literal["task", "full"] = "task"
    """What the demonstrations are played on: ``task`` (the run's task) or ``full`` (the task with nothing
    withheld, ``TaskConfig.full_information``: no hard instances, on PeekRead peeks that show the fact and
    no fact lost to the coupling, on KeyRecall with a cue a cue that always names the asked fact, so the
    cue's doses share one base model per seed). ``full`` teaches the copy of the fact on every demonstration, where
    the real task shows it in only some; the route choice stays the teacher's."""
    compact_demos: bool = True
    """Collect demonstrations under the ``policy`` trigger so the base model also learns when to emit
    COMPACT (AutoCompact's cold-start SFT); other triggers simply never allow COMPACT."""
    compact_hazard: Unit = 0.0
    """Under the ``policy`` trigger, the teacher's chance per action step of emitting COMPACT before its usual
    point (0.8 W), in [0, 1]: its demonstrations then compact at varied points, so the base model's
    compactions vary within a group (0: the teacher compacts at 0.8 W, as before the setting existed)."""
    cache: bool = True
    """Reuse a cached checkpoint addressed by this config, the task and the policy shape."""
    seed: Annotated[int, Field(ge=0, le=SEED_MAX)] | Literal["run"] = 0
    """Seed of behaviour cloning (initial weights, demonstration stream). An integer gives every run seed
    and every arm of a sweep one shared base model; ``"run"`` builds one base model per run seed, so
    seed-to-seed spread also covers the base model. Either way, arms that share a seed share a base."""
    check_every: Annotated[int, Field(ge=1, le=COUNT_MAX)] | None = None
    """Check the base every this many cloning steps on its check set (``check_episodes`` instances of its
    own, apart from every run's held-out set): its success, and its floor's (the same model with its
    summaries emptied, ``harness.summariser = "none"``). None: no checks (cloning as before the setting)."""
    check_episodes: Annotated[int, Field(ge=2, le=BATCH_MAX)] = 128
    """Instances of the check set; one rollout each for the base and one for its floor."""
    max_steps: Annotated[int, Field(ge=1, le=COUNT_MAX)] | None = None
    """Cloning may go on past ``steps`` up to this many steps, in ``check_every`` chunks, until the gate
    (``min_gain``) is cleared or the checks plateau (``patience``). None: exactly ``steps``."""
    min_gain: Annotated[Real, Field(ge=0, le=100)] | None = None
    """The base-quality gate: points of success the base must hold over its floor on the check set when
    cloning ends; a base that misses it stops the run before RL (exit 2). None: no gate."""
    patience: Annotated[int, Field(ge=1, le=COUNT_MAX)] | None = None
    """Past ``steps``, stop cloning after this many checks in a row without a new best check success (a
    plateau). None: go on to ``max_steps`` (or until the gate is cleared)."""

    summary_weight: Positive = 1.0
    """Weight of the teacher's summary tokens in the cloning loss (every other token weighs 1; the loss is the
    weighted mean): above 1, cloning leans on what the summaries copy, a small share of the tokens."""

    def check(self) -> None:
        """The gate and the plateau read checks; going past ``steps`` needs a reason to stop."""
        for name in ("min_gain", "patience"):
            if getattr(self, name) is not None and self.check_every is None:
                raise self.invalid(name, "it reads the cloning checks; set base.check_every too, or choose None",
                                   involves=("base.check_every",))
        if self.max_steps is not None:
            if self.max_steps < self.steps:
                raise self.invalid("max_steps", f"it caps cloning past base.steps={self.steps}; choose an integer "
                                   f">= {self.steps} or None", involves=("base.steps",))
            if self.min_gain is None and self.patience is None:
                raise self.invalid("max_steps", "cloning goes past base.steps only until the gate (base.min_gain) "
                                   "or a plateau (base.patience) stops it; set one of them, or choose None",
                                   involves=("base.min_gain", "base.patience"))


RUN_EVAL_SEEDS = 1_000_000
"""Where per-run held-out sets start (``eval.seed = "run"``); training instances stay below it."""
EVAL_SEED_STRIDE = 100_000
"""Distance between the held-out sets of consecutive run seeds."""


class EvalConfig(Section):
    """Evaluation on held-out seeds, in both configurations (compacted and single-window)."""

    SECTION = "eval"

    every: Annotated[int, Field(ge=1, le=COUNT_MAX)] = 10
    """Evaluate every this many RL steps (and before the first and after the last)."""
    episodes: Annotated[int, Field(ge=1, le=BATCH_MAX)] = 128
    """Held-out rollouts per configuration."""
    seed: Annotated[int, Field(ge=1, le=SEED_MAX)] | Literal["run"] = 1_000_000
    """First held-out instance seed; training seeds stay below it. ``"run"``: a held-out set per run seed
    (from ``RUN_EVAL_SEEDS`` on, ``EVAL_SEED_STRIDE`` apart), for statistics over instances; arms that share
    a seed still share their instances."""
    single_window: bool = True
    """Also evaluate with compaction disabled (trigger ``none``); the seed warns the two diverge."""
    base_quality: bool = True
    """Before RL, play the base model's held-out set three ways (its own summaries, its teacher's on the same
    instances, and its floor: the base with its summaries emptied) and log them under ``base/heldout*``
    (:mod:`simlab.train.quality`); computed once per base and held-out set, and cached beside the base."""
    curve_episodes: Annotated[int, Field(ge=1, le=BATCH_MAX)] | None = None
    """Held-out episodes of each intermediate evaluation (the first ones of the held-out set), for cheap
    learning curves when ``every`` is small; ``None``: all ``episodes``. The final evaluation always plays
    the full set."""
    curve_single_window: bool = True
    """Intermediate evaluations also play single-window (when ``single_window``); ``False``: compacted only."""

    def check(self) -> None:
        """The learning-curve subset is part of the held-out set."""
        if self.curve_episodes is not None and self.curve_episodes > self.episodes:
            raise self.invalid("curve_episodes", f"it is a subset of the held-out set: choose an integer in "
                               f"[1, {self.episodes}] (eval.episodes) or leave it unset")

    @property
    def curve_size(self) -> int:
        """Episodes of an intermediate evaluation."""
        return self.episodes if self.curve_episodes is None else self.curve_episodes

__all__ = [
    "EVAL_SEED_STRIDE", "MINIBATCH_TOKENS", "RUN_EVAL_SEEDS", "SCHEDULE_UNITS", "SUMMARY_LOSSES", "BaseConfig",
    "EvalConfig", "TrainConfig",
]
