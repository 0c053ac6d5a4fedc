"""Run configuration: one section per part of a run, resolved from layered settings in one place.

A run is described by a nested mapping (a TOML file, a sweep cell, ``--set`` overrides) with sections
``task``, ``harness``, ``policy``, ``base``, ``train`` and ``eval`` plus top-level ``seed`` and
``device``. :func:`resolve` layers it over the defaults:

    section defaults < task preset (task, harness, policy, base, train) < recipe (harness, train)
    < the mapping itself

Every section is checked when it is built (:mod:`simlab.schema`), and the settings a user gives are
checked one by one before any preset or recipe arithmetic reads them. Errors name the key path, the
bad value and what is allowed, Optuna style: "`train.eps_low=0` is invalid; choose a finite value > 0".
When a recipe derives a bad value from a user's setting (supo's L = 0.95 W from ``harness.window``),
the error names the user's setting. :func:`flatten` gives the ``{"section.key": value}`` form that is
logged as run params.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

from simlab.credit import (
    BASELINES,
    COSTS,
    ESTIMATORS,
    LAMBDA_READINGS,
    NORMALISERS,
    ROW_WEIGHTS,
    estimator_family,
    estimators_of,
)
from simlab.errors import ConfigError
from simlab.harness.agents import AGENTS, SCRIPTED_QUALITY
from simlab.harness.config import THRESHOLD_DRAWS, HarnessConfig, window_need
from simlab.harness.triggers import TRIGGERS
from simlab.policy.config import PolicyConfig
from simlab.recipes import RECIPES, Recipe
from simlab.rules import (
    BATCH_MAX,
    Either,
    FilePath,
    Flag,
    Instance,
    IntIn,
    Maybe,
    NameIn,
    OneOf,
    RealIn,
    check_value,
    seed_rule,
)
from simlab.schema import Section, loggable, parse_overrides, parse_value, plain, read_toml, section, set_path
from simlab.schema import flatten as flatten_paths
from simlab.tasks.config import TaskConfig
from simlab.tasks.presets import PRESET_NAMES, PRESETS, get_preset

SECTIONS = ("task", "harness", "policy", "base", "train", "eval")
TOP_LEVEL = ("seed", "device")
DEFAULT_PRESET = "keyrecall-tiny"
DEVICES = ("auto", "cpu", "cuda")


def _update() -> Any:
    """:mod:`simlab.update`, imported when a ratio or schedule name is checked: it needs torch, and a bad
    value elsewhere is refused without it."""
    import simlab.update

    return simlab.update


MINIBATCH_TOKENS = 1024
"""Token slots per mini-batch by default: on one CPU core, larger mini-batches spill out of its cache
(``benchmarks/bench_throughput.py``)."""

Positive = Annotated[float, RealIn(0.0, lo_open=True)]
"""A finite number > 0."""
Unit = Annotated[float, RealIn(0.0, 1.0)]
"""A number in [0, 1]."""
UnitOpen = Annotated[float, RealIn(0.0, 1.0, lo_open=True)]
"""A number in (0, 1]."""
SUMMARY_LOSSES = ("train", "mask")
"""``train.summary_loss``: the summary tokens trained with the outcome's advantage, or their loss masked."""
SCHEDULE_UNITS = ("rollouts", "rows")
"""``train.schedule_unit``: what the learning-rate schedule's clock counts."""


@section
class TrainConfig(Section):
    """The RL recipe: algorithm, credit assignment, optimisation. Every field is a sweep axis."""

    SECTION = "train"

    recipe: Annotated[str, NameIn(lambda: RECIPES)] = "supo"
    """Named defaults from ``simlab.recipes`` (supo, compactionrl, resum, autocompact, baselines)."""
    algorithm: Annotated[str, OneOf(("auto", "grpo", "ppo"))] = "auto"
    """``grpo`` (group estimators, no critic) or ``ppo`` (GAE estimators with a critic); ``auto`` picks
    by the estimator's family, so a sweep over estimators switches algorithm with it."""
    estimator: Annotated[str, NameIn(lambda: ESTIMATORS)] = "rollout_group"
    """Advantage estimator, a name in ``simlab.credit.ESTIMATORS``."""
    normaliser: Annotated[str, NameIn(lambda: NORMALISERS)] = "token"
    """Loss normaliser, a name (or verl alias) in ``simlab.credit.NORMALISERS``."""
    row_weight: Annotated[str, NameIn(lambda: ROW_WEIGHTS)] = "none"
    """Per-row loss weight c_j, times the normaliser's (verl PR #7580's ``loss_weight``): ``none``,
    ``inverse_k`` (1/K: every rollout counts once) or ``length_ratio`` (n_j / mean n)."""
    overlong_mask: Annotated[bool, Flag()] = True
    """SUPO: unfinished rollouts get zero loss weight (they still count in advantage statistics)."""
    summary_loss: Annotated[str, OneOf(SUMMARY_LOSSES)] = "train"
    """The summary tokens the policy writes: ``train`` them with the outcome's advantage, or ``mask`` their
    loss (weight 0, out of every normaliser's denominators; the critic still regresses on them)."""
    baseline: Annotated[str, NameIn(lambda: BASELINES)] = "all"
    """Group estimators: which rollouts enter the group's mean and std, ``all`` or ``finished`` (invalid,
    overlong rollouts out of the baseline, NeMo-RL #4078); every rollout still gets an advantage."""
    cost: Annotated[str, NameIn(lambda: COSTS)] = "none"
    """A per-segment cost summed over the rollout's segments and subtracted from its reward (``tokens``,
    ``segments``, ``context``: keys attended), x ``cost_coef``; ``none``: the task's reward."""
    cost_coef: Annotated[float, RealIn(0.0)] = 0.0
    """Reward units per unit of ``cost`` (per token, per segment, per attended key), >= 0."""
    ratio: Annotated[str, NameIn(lambda: _update().RATIOS)] = "token"
    """Importance ratio of the clipped loss: ``token`` (PPO) or ``segment`` (GSPO's geometric mean over a
    segment's tokens, clipped per segment; set eps_low/eps_high to GSPO's 3e-4/4e-4 scale)."""
    whiten: Annotated[bool, Flag()] = False
    """Batch-level masked whitening of advantages (verl applies it after GAE)."""
    std_normalize: Annotated[bool, Flag()] = True
    """Group estimators: divide by the group std (False: Dr. GRPO's R - mean)."""
    unbiased_std: Annotated[bool, Flag()] = False
    """Group estimators: ddof=1 std as verl's torch.std; default population std."""
    gamma: UnitOpen = 1.0
    """GAE discount, in (0, 1]."""
    lam: Annotated[
        float | str,
        Either((RealIn(0.0, 1.0, lo_open=True), NameIn(lambda: LAMBDA_READINGS)),
               lambda: f"choose a float in (0, 1] or one of {LAMBDA_READINGS.choices()}"),
    ] = 0.95
    """GAE lambda in (0, 1], or a length-adaptive reading (response_cap, segment_length, trajectory_length)."""
    alpha: Annotated[float | None, Maybe(RealIn(0.0, lo_open=True))] = None
    """Length-adaptive lambda: lam = 1 - 1/(alpha * l). Required with a reading."""
    response_cap: Annotated[int | None, Maybe(IntIn(1))] = None
    """Per-response token cap ``l`` of the ``response_cap`` reading."""
    group_size: Annotated[int, IntIn(1, BATCH_MAX)] = 8
    """G: rollouts per prompt (GRPO); PPO recipes use 1."""
    prompts: Annotated[int, IntIn(1, BATCH_MAX)] = 16
    """Prompts per training step; the step runs prompts x G rollouts."""
    steps: Annotated[int, IntIn(0)] = 30
    """RL training steps."""
    lr: Positive = 3e-4
    """Policy learning rate (Adam)."""
    lr_schedule: Annotated[str, NameIn(lambda: _update().SCHEDULES)] = "constant"
    """Learning-rate schedule over the planned ``steps x prompts x group_size`` units: ``constant``,
    ``linear`` or ``cosine`` decay to 0 (policy and critic alike)."""
    schedule_unit: Annotated[str, OneOf(SCHEDULE_UNITS)] = "rollouts"
    """What the schedule's clock counts: logical ``rollouts`` (NeMo-RL #4078) or ``rows`` (segments), so
    that a compacting policy runs through its schedule K times faster."""
    threshold_draw: Annotated[str, OneOf(THRESHOLD_DRAWS)] = "fixed"
    """Training rollouts' threshold L = floor(frac x W): ``fixed`` (harness.frac), drawn once per
    ``group`` (its G rollouts share it) or per ``rollout``, uniformly in harness.frac +- frac_spread.
    Evaluation always plays harness.frac."""
    frac_spread: Annotated[float, RealIn(0.0, 1.0, hi_open=True)] = 0.0
    """Half-width of the threshold draw around harness.frac; > 0 needs a ``group`` or ``rollout`` draw
    (0 with a draw is the control: every draw gives harness.frac)."""
    critic: Annotated[str, OneOf(("auto", "none", "head", "separate"))] = "auto"
    """``none`` (GRPO), ``head`` (value head on the policy trunk) or ``separate`` (CompactionRL: a critic
    initialised from the policy checkpoint, with its own optimiser); ``auto``: none for GRPO, separate
    for PPO."""
    critic_lr_scale: Positive = 1.5
    """Critic learning rate = lr x this (CompactionRL: 3e-6 / 2e-6)."""
    value_pretrain_steps: Annotated[int, IntIn(0)] = 0
    """Critic-only steps before RL (CompactionRL: 50 at full scale)."""
    value_updates: Annotated[int, IntIn(1)] = 2
    """Critic updates per policy update (CompactionRL: 2)."""
    eps_low: Positive = 0.2
    """Lower clip range of the ratio, > 0."""
    eps_high: Positive = 0.28
    """Upper clip range (clip-higher), > 0."""
    epochs: Annotated[int, IntIn(1)] = 1
    """Passes over each rollout batch."""
    minibatch_segments: Annotated[int, IntIn(1, 2**16)] = 256
    """Most segments in one update mini-batch (a memory bound; the loss is the whole batch's either way)."""
    minibatch_tokens: Annotated[int, IntIn(0, 2**24)] = MINIBATCH_TOKENS
    """With ``length_buckets``: most token slots (segments x the longest of them) in one mini-batch; 0: no
    bound. Small mini-batches stay in a CPU core's cache (1,024 suits d = 64-128); on a GPU raise both."""
    length_buckets: Annotated[bool, Flag()] = True
    """Group segments of similar length into mini-batches, each cut to its longest segment. False: random
    mini-batches of ``minibatch_segments`` rows at the batch's longest, padded with dummy zero-weight rows
    (the update before issue 21). The loss is the same; float rounding differs."""
    max_grad_norm: Positive = 1.0
    """Gradient-norm clip."""
    temperature: Positive = 1.0
    """Sampling temperature during training rollouts."""
    entropy_coef: Unit = 0.0
    """Entropy bonus (0: none, as SUPO)."""
    summariser_checkpoint: Annotated[str | None, Maybe(FilePath("checkpoint file"))] = None
    """With ``harness.summariser='frozen'``: the frozen summariser's checkpoint (default: the base)."""

    def check(self) -> None:
        """The algorithm, estimator, critic and lambda reading must go together."""
        if self.algorithm != "auto" and (self.algorithm == "grpo") != (estimator_family(self.estimator) == "group"):
            family = "group" if self.algorithm == "grpo" else "gae"
            names = estimators_of(family)
            raise self.invalid("estimator", f"it does not go with algorithm={self.algorithm!r}; choose a "
                               f"{'group' if family == 'group' else 'GAE'} estimator: {names}")
        if isinstance(self.lam, str):
            if self.alpha is None:
                raise self.invalid("alpha", f"lam={self.lam!r} needs it; choose a finite value > 0")
            if self.lam == "response_cap" and self.response_cap is None:
                raise self.invalid("response_cap", "lam='response_cap' needs it; choose an integer >= 1")
        if self.algorithm == "ppo" and self.critic == "none":
            raise self.invalid("critic", "algorithm='ppo' needs a critic; choose 'head' or 'separate'")
        if self.baseline != "all" and estimator_family(self.estimator) != "group":
            raise self.invalid("baseline", f"it applies to group estimators, not {self.estimator!r}; choose 'all'")
        if self.cost_coef > 0 and COSTS.canonical(self.cost) == "none":
            raise self.invalid("cost_coef", "cost='none' has nothing to scale; choose 0 or set train.cost")
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


@section
class BaseConfig(Section):
    """The "base model": behaviour cloning from a reference agent, built once per task preset and cached."""

    SECTION = "base"

    teacher: Annotated[str, NameIn(lambda: AGENTS)] = "scripted"
    """Reference agent to clone (``scripted`` at quality q gives an imperfect summariser)."""
    quality: Unit = SCRIPTED_QUALITY
    """Summary quality q of the scripted teacher, in [0, 1]."""
    steps: Annotated[int, IntIn(0)] = 200
    """Behaviour-cloning steps (0: start RL from a random policy)."""
    episodes: Annotated[int, IntIn(1, BATCH_MAX)] = 128
    """Teacher rollouts per behaviour-cloning step."""
    lr: Positive = 1e-3
    """Learning rate of behaviour cloning."""
    minibatch_tokens: Annotated[int, IntIn(0, 2**24)] = MINIBATCH_TOKENS
    """A step's gradient is accumulated over length buckets of at most this many token slots (segments x
    the longest of them); 0: the step's batch in one padded pass (the base model before issue 21)."""
    teach: Annotated[str, OneOf(("task", "full"))] = "task"
    """What the demonstrations are played on: ``task`` (the run's task) or ``full`` (the task with nothing
    withheld, ``TaskConfig.full_information``: no hard instances, and on PeekRead peeks that show the fact
    and no fact lost to the coupling). ``full`` teaches the copy of the fact on every demonstration, where
    the real task shows it in only some; the route choice stays the teacher's."""
    compact_demos: Annotated[bool, Flag()] = True
    """Collect demonstrations under the ``policy`` trigger so the base model also learns when to emit
    COMPACT (AutoCompact's cold-start SFT); other triggers simply never allow COMPACT."""
    cache: Annotated[bool, Flag()] = True
    """Reuse a cached checkpoint addressed by this config, the task and the policy shape."""
    seed: Annotated[int | str, seed_rule(0, run=True)] = 0
    """Seed of behaviour cloning (initial weights, demonstration stream). An integer gives every run seed
    and every arm of a sweep one shared base model; ``"run"`` builds one base model per run seed, so
    seed-to-seed spread also covers the base model. Either way, arms that share a seed share a base."""


RUN_EVAL_SEEDS = 1_000_000
"""Where per-run held-out sets start (``eval.seed = "run"``); training instances stay below it."""
EVAL_SEED_STRIDE = 100_000
"""Distance between the held-out sets of consecutive run seeds."""


@section
class EvalConfig(Section):
    """Evaluation on held-out seeds, in both configurations (compacted and single-window)."""

    SECTION = "eval"

    every: Annotated[int, IntIn(1)] = 10
    """Evaluate every this many RL steps (and before the first and after the last)."""
    episodes: Annotated[int, IntIn(1, BATCH_MAX)] = 128
    """Held-out rollouts per configuration."""
    seed: Annotated[int | str, seed_rule(1, run=True)] = 1_000_000
    """First held-out instance seed; training seeds stay below it. ``"run"``: a held-out set per run seed
    (from ``RUN_EVAL_SEEDS`` on, ``EVAL_SEED_STRIDE`` apart), for statistics over instances; arms that share
    a seed still share their instances."""
    single_window: Annotated[bool, Flag()] = True
    """Also evaluate with compaction disabled (trigger ``none``); the seed warns the two diverge."""
    curve_episodes: Annotated[int | None, Maybe(IntIn(1, BATCH_MAX))] = None
    """Held-out episodes of each intermediate evaluation (the first ones of the held-out set), for cheap
    learning curves when ``every`` is small; ``None``: all ``episodes``. The final evaluation always plays
    the full set."""
    curve_single_window: Annotated[bool, Flag()] = True
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


POLICY_MARGIN = 16
"""Tokens a policy row may hold beyond the window: the v_sum cue and the summary of the last segment."""


@section
class RunConfig(Section):
    """Everything one training run needs; every field is logged."""

    preset: Annotated[str, PRESET_NAMES]
    """The task preset name (``simlab.tasks.presets``)."""
    env_id: str
    """The Gymnasium id of the preset's task."""
    task: Annotated[TaskConfig, Instance(TaskConfig)]
    harness: Annotated[HarnessConfig, Instance(HarnessConfig)]
    policy: Annotated[PolicyConfig, Instance(PolicyConfig)]
    base: Annotated[BaseConfig, Instance(BaseConfig)]
    train: Annotated[TrainConfig, Instance(TrainConfig)]
    eval: Annotated[EvalConfig, Instance(EvalConfig)]
    seed: Annotated[int, seed_rule(0)] = 0
    """Seeds torch, numpy and the training instances."""
    device: Annotated[str, OneOf(DEVICES)] = "auto"
    """``auto`` (CUDA when present), ``cpu`` or ``cuda``."""

    def check(self) -> None:
        """Rules across sections: the policy holds the window; held-out seeds stay above training ones."""
        if self.policy.vocab_size != self.task.vocab_size:
            raise ConfigError.invalid("policy.vocab_size", self.policy.vocab_size,
                                      f"it is set by the task (task.vocab_size={self.task.vocab_size}); remove it")
        least = self.harness.window + POLICY_MARGIN
        if self.policy.max_len < least:
            raise ConfigError.invalid("policy.max_len", self.policy.max_len, "it must hold the window plus the "
                                      f"summary cue: choose an integer >= {least}")
        need = max(self.train.prompts, self.base.episodes)
        if self.train_seed_limit <= need:  # training instances are drawn from [0, eval.seed - batch)
            raise ConfigError.invalid("eval.seed", self.eval.seed, "held-out seeds start above the training "
                                      f"instances, so choose an integer > {need} (train.prompts, base.episodes) "
                                      "or 'run'")

    def to_nested(self) -> dict[str, Any]:
        """The resolved config as a nested mapping that :func:`resolve` accepts back unchanged."""
        out: dict[str, Any] = {"seed": self.seed, "device": self.device}
        out["task"] = {"preset": self.preset, **plain(self.task)}
        for name in ("harness", "base", "train", "eval"):
            out[name] = plain(getattr(self, name))
        policy = plain(self.policy)
        policy.pop("vocab_size")
        out["policy"] = policy
        return out

    def base_harness_settings(self) -> dict[str, Any]:
        """Harness settings of the base model's demonstrations (see ``trainer.base_harness``)."""
        geometry = ("window", "summary_tokens", "max_compactions", "max_steps", "v_sum")
        settings = {**get_preset(self.preset).harness, **{k: getattr(self.harness, k) for k in geometry}}
        settings["summariser"] = "self"
        if self.base.compact_demos:
            settings["trigger"] = "policy"
        return settings

    @property
    def eval_seed(self) -> int:
        """The first held-out instance seed: ``eval.seed``, or the run seed's own set when it is ``"run"``."""
        return RUN_EVAL_SEEDS + self.seed * EVAL_SEED_STRIDE if self.eval.seed == "run" else int(self.eval.seed)

    @property
    def train_seed_limit(self) -> int:
        """Training and behaviour-cloning instance seeds stay below this, so no held-out instance is trained on."""
        return RUN_EVAL_SEEDS if self.eval.seed == "run" else int(self.eval.seed)

    @property
    def base_seed(self) -> int:
        """The seed the base model is built with: ``base.seed``, or the run's seed when it is ``"run"``."""
        return self.seed if self.base.seed == "run" else int(self.base.seed)

    def base_task(self) -> TaskConfig:
        """The task the base model's demonstrations are played on (``base.teach``)."""
        return self.task.full_information() if self.base.teach == "full" else self.task

    def base_key(self) -> str:
        """Address of this run's base checkpoint: the task it was taught on (``base_task``), the preset's
        harness, the policy shape, ``base``. Tasks that differ only in what ``teach = "full"`` takes away
        (PeekRead's coupling) share one base model."""
        policy = {k: v for k, v in plain(self.policy).items() if k != "value_head"}  # heads are added later
        base = {**{k: v for k, v in plain(self.base).items() if k != "cache"}, "seed": self.base_seed}
        if base["teach"] == "task":
            del base["teach"]  # the default leaves the keys of base models built before the setting unchanged
        payload = {"env": self.env_id, "task": plain(self.base_task()), "harness": self.base_harness_settings(),
                   "policy": policy, "base": base,
                   "v_sum": self.harness.v_sum}
        blob = json.dumps(payload, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------- resolving
def _section(nested: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = nested.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError.invalid(name, value, "it must be a table of settings")
    return dict(value)


def _env_need(env_id: str, task_cfg: TaskConfig) -> tuple[int, int]:
    """(prompt tokens, tokens of one step) of the task: what the window check needs."""
    import gymnasium

    from simlab import tasks  # noqa: F401  (registers the envs)

    env = gymnasium.make_vec(env_id, num_envs=1, vectorization_mode="vector_entry_point", config=task_cfg)
    try:
        return window_need(env)
    finally:
        env.close()


def _nearest(value: int, works: Callable[[int], bool], limit: int = 4096) -> str | None:
    """``choose an integer >= n`` (or ``<= n``) for the valid value closest to ``value``, if one is near."""
    for step in range(1, limit + 1):
        for cand, how in ((value + step, ">="), (value - step, "<=")):
            if cand >= 0 and works(cand):
                return f"choose an integer {how} {cand}"
    return None


class _Layers:
    """The harness layers of a run (preset < recipe < user) and which of the user's settings a bad
    recipe-derived value came from."""

    def __init__(self, preset: Any, recipe: Recipe, need: tuple[int, int]) -> None:
        self.preset, self.recipe, self.need = preset, recipe, need

    def derived(self, user: Mapping[str, Any]) -> dict[str, Any]:
        # the recipe sees the window the run will have, so its ratios (L = 0.95 W, T_comp = W/6) scale with it
        return self.recipe.harness({**self.preset.harness, **user})

    def build(self, user: Mapping[str, Any]) -> HarnessConfig:
        cfg = HarnessConfig(**{**self.preset.harness, **self.derived(user), **user})
        cfg.check_fits(*self.need)
        return cfg

    def works(self, user: Mapping[str, Any]) -> bool:
        try:
            HarnessConfig.check_fields(user)
            self.build(user)
        except ConfigError:
            return False
        return True

    def blame(self, exc: ConfigError, user: Mapping[str, Any]) -> ConfigError:
        """``exc`` re-keyed to the user's setting it came from, with the nearest value that works.

        A bad value the recipe derived (supo's frac from ``harness.window``), or a preset value that
        clashes with a user's setting (the preset's window with a long ``harness.summary_tokens``), is
        reported against the user's setting; an error on the user's own setting gets the nearest
        value that works under the recipe too.
        """
        field = (exc.key or "").removeprefix("harness.").split("[")[0]
        reason = _WHY.sub("", exc.allowed).strip()
        if field in user:
            return self._with_fix(exc, field, user, reason)
        derived = self.derived(user)
        for key in user:
            rest = {k: v for k, v in user.items() if k != key}
            moved = field in derived and self.derived(rest).get(field) != derived[field]
            if moved:
                why = f"train.recipe={self.recipe.name!r} derives harness.{field}={derived[field]!r} from it"
            elif self.works(rest):
                why = f"it clashes with harness.{field}={exc.value!r} (not set by you)"
            else:
                continue
            why += f": {reason}" if reason else f", and harness.{field} allows: {exc.allowed.removeprefix('choose ')}"
            return self._with_fix(exc, key, user, why)
        return exc

    def _with_fix(self, exc: ConfigError, key: str, user: Mapping[str, Any], why: str) -> ConfigError:
        value = user[key]
        if isinstance(value, bool) or not isinstance(value, int):
            return exc if key == (exc.key or "").removeprefix("harness.") else ConfigError.invalid(
                f"harness.{key}", value, why)
        fix = _nearest(value, lambda v: self.works({**user, key: v}))
        text = "; ".join(part for part in (why, fix) if part)
        return ConfigError.invalid(f"harness.{key}", value, text or exc.allowed)


_WHY = re.compile(r"[;,]?\s*(choose|raise it|lower it)\b[^;]*$")
"""The closing "choose ..." of an error's allowed text, replaced by a fix for the user's setting."""


def _harness(preset: Any, recipe: Recipe, user: dict[str, Any], need: tuple[int, int]) -> HarnessConfig:
    layers = _Layers(preset, recipe, need)
    try:
        return layers.build(user)
    except ConfigError as exc:
        raise layers.blame(exc, user) from None


def _train(preset: Any, recipe: Recipe, harness: HarnessConfig, user: dict[str, Any]) -> TrainConfig:
    data = {**preset.train, **recipe.train(plain(harness)), **user}
    estimator = data.get("estimator", TrainConfig.estimator)
    if estimator in ESTIMATORS and data.get("algorithm", "auto") == "auto":
        data["algorithm"] = "grpo" if estimator_family(estimator) == "group" else "ppo"
    if data.get("critic", "auto") == "auto":
        data["critic"] = "none" if data.get("algorithm") == "grpo" else "separate"
    return TrainConfig(**data)


def _check_draw(harness: HarnessConfig, train: TrainConfig, need: tuple[int, int]) -> None:
    """A drawn threshold needs a trigger that reads frac, and every draw, harness.frac +- frac_spread, must
    be a fraction in (0, 1] whose L passes the window check."""
    if train.threshold_draw == "fixed":
        return
    if not TRIGGERS.get(harness.trigger).reads_frac:
        readers = [n for n in TRIGGERS.names() if TRIGGERS.get(n).reads_frac]
        raise ConfigError.invalid("train.threshold_draw", train.threshold_draw, f"trigger {harness.trigger!r} does "
                                  f"not read harness.frac; choose 'fixed' or a trigger in {readers}")
    spread = train.frac_spread
    for end in (harness.frac - spread, harness.frac + spread):
        if not 0.0 < end <= 1.0:
            raise ConfigError.invalid("train.frac_spread", spread, f"the draw reaches harness.frac={end:g}, outside "
                                      f"(0, 1]; choose a value < {harness.frac:g} and <= {1 - harness.frac:g}")
        try:
            harness.replace(frac=end).check_fits(*need)
        except ConfigError as exc:
            raise ConfigError.invalid("train.frac_spread", spread, f"the draw reaches harness.frac={end:g}, where "
                                      f"{exc.allowed}") from None


def resolve(nested: Mapping[str, Any] | None = None) -> RunConfig:
    """Layer ``nested`` over the preset, the recipe and the defaults; validate everything.

    The user's settings are checked one by one first, then each section as a whole, then the rules
    across sections and the window check. Raises :class:`~simlab.errors.ConfigError`.
    """
    nested = copy.deepcopy(dict(nested or {}))
    for key in nested:
        if key not in SECTIONS and key not in TOP_LEVEL:
            raise ConfigError.unknown(key, [*TOP_LEVEL, *SECTIONS])
    user = {name: _section(nested, name) for name in SECTIONS}
    preset = get_preset(user["task"].pop("preset", DEFAULT_PRESET))
    type(preset.task).check_fields(user["task"])
    recipe = RECIPES.get(check_value("train.recipe", user["train"].get("recipe", TrainConfig.recipe),
                                     TrainConfig.rule("recipe")))
    for cls in (HarnessConfig, TrainConfig, PolicyConfig, BaseConfig, EvalConfig):
        cls.check_fields(user[cls.SECTION])
    seed = check_value("seed", nested.get("seed", 0), RunConfig.rule("seed"))
    device = check_value("device", nested.get("device", "auto"), RunConfig.rule("device"))
    if "vocab_size" in user["policy"]:
        raise ConfigError.invalid("policy.vocab_size", user["policy"]["vocab_size"],
                                  "it is set by the task (task.vocab_size); remove it")

    task_cfg = preset.task.replace(**user["task"])
    need = _env_need(preset.env_id, task_cfg)
    harness_cfg = _harness(preset, recipe, user["harness"], need)
    train_cfg = _train(preset, recipe, harness_cfg, user["train"])
    _check_draw(harness_cfg, train_cfg, need)
    policy = {"max_len": harness_cfg.window + POLICY_MARGIN, "value_head": train_cfg.critic == "head",
              **preset.policy, **user["policy"]}
    return RunConfig(
        preset=preset.name,
        env_id=preset.env_id,
        task=task_cfg,
        harness=harness_cfg,
        policy=PolicyConfig(vocab_size=task_cfg.vocab_size, **policy),
        base=BaseConfig(**{**preset.base, **user["base"]}),
        train=train_cfg,
        eval=EvalConfig(**user["eval"]),
        seed=seed,
        device=device,
    )


def apply_overrides(nested: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``nested`` with ``{"section.key": value}`` overrides set (``seed`` and ``device`` bare)."""
    out = copy.deepcopy(dict(nested))
    for path, value in overrides.items():
        parts = path.split(".")
        ok = (len(parts) == 1 and parts[0] in TOP_LEVEL) or (len(parts) == 2 and parts[0] in SECTIONS)
        if not ok:
            raise ConfigError(f"`{path}` is not a key path; use section.key with a section in {list(SECTIONS)} "
                              f"or one of {list(TOP_LEVEL)}", key=path, allowed="use section.key")
        set_path(out, path, value)
    return out


def load(path: Path | str, overrides: list[str] | None = None) -> RunConfig:
    """Read a TOML run config, apply ``--set`` overrides and resolve."""
    return resolve(apply_overrides(read_toml(path), parse_overrides(overrides or [])))


def flatten(cfg: RunConfig) -> dict[str, Any]:
    """``{"section.key": value}`` of every resolved setting (tuples and None as strings), for logging."""
    return {key: loggable(value) for key, value in flatten_paths(cfg.to_nested()).items()}


__all__ = [
    "PRESETS", "BaseConfig", "ConfigError", "EvalConfig", "RunConfig", "TrainConfig", "apply_overrides",
    "flatten", "load", "parse_overrides", "parse_value", "read_toml", "resolve",
]
