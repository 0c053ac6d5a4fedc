"""Run configuration: one frozen dataclass per section, resolved from layered settings in one place.

A run is described by a nested mapping (a TOML file, a sweep cell, ``--set`` overrides) with sections
``task``, ``harness``, ``policy``, ``base``, ``train`` and ``eval`` plus top-level ``seed`` and
``device``. :func:`resolve` layers it over the defaults:

    section defaults < task preset (task, harness, policy, base, train) < recipe (harness, train)
    < the mapping itself

and validates every value. Errors name the key path, the bad value and what is allowed, Optuna style:
"`train.eps_low=0` is invalid; choose a value > 0". :func:`flatten` gives the ``{"section.key": value}``
form that is logged as run params.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tomllib
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

from simlab.credit import ESTIMATORS, LAMBDA_READINGS, NORMALISERS, estimator_family
from simlab.harness.agents import AGENTS
from simlab.harness.config import HarnessConfig
from simlab.policy.model import PolicyConfig
from simlab.recipes import RECIPES
from simlab.tasks.config import ConfigError, TaskConfig, check_choice, check_float, check_int
from simlab.tasks.presets import PRESETS, get_preset

SECTIONS = ("task", "harness", "policy", "base", "train", "eval")
TOP_LEVEL = ("seed", "device")


def _check_bool(path: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"`{path}={value!r}` is invalid; choose true or false")


def _check_positive(path: str, value: Any) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    if not ok:
        raise ConfigError(f"`{path}={value!r}` is invalid; choose a value > 0")


@dataclass(frozen=True)
class TrainConfig:
    """The RL recipe: algorithm, credit assignment, optimisation. Every field is a sweep axis."""

    recipe: str = "supo"
    """Named defaults from ``simlab.recipes`` (supo, compactionrl, resum, autocompact, baselines)."""
    algorithm: str = "auto"
    """``grpo`` (group estimators, no critic) or ``ppo`` (GAE estimators with a critic); ``auto`` picks
    by the estimator's family, so a sweep over estimators switches algorithm with it."""
    estimator: str = "rollout_group"
    """Advantage estimator, a name in ``simlab.credit.ESTIMATORS``."""
    normaliser: str = "token"
    """Loss normaliser, a name (or verl alias) in ``simlab.credit.NORMALISERS``."""
    overlong_mask: bool = True
    """SUPO: unfinished rollouts get zero loss weight (they still count in advantage statistics)."""
    whiten: bool = False
    """Batch-level masked whitening of advantages (verl applies it after GAE)."""
    std_normalize: bool = True
    """Group estimators: divide by the group std (False: Dr. GRPO's R - mean)."""
    unbiased_std: bool = False
    """Group estimators: ddof=1 std as verl's torch.std; default population std."""
    gamma: float = 1.0
    """GAE discount, in (0, 1]."""
    lam: float | str = 0.95
    """GAE lambda in (0, 1], or a length-adaptive reading (response_cap, segment_length, trajectory_length)."""
    alpha: float | None = None
    """Length-adaptive lambda: lam = 1 - 1/(alpha * l). Required with a reading."""
    response_cap: int | None = None
    """Per-response token cap ``l`` of the ``response_cap`` reading."""
    group_size: int = 8
    """G: rollouts per prompt (GRPO); PPO recipes use 1."""
    prompts: int = 16
    """Prompts per training step; the step runs prompts x G rollouts."""
    steps: int = 30
    """RL training steps."""
    lr: float = 3e-4
    """Policy learning rate (Adam)."""
    critic: str = "auto"
    """``none`` (GRPO), ``head`` (value head on the policy trunk) or ``separate`` (CompactionRL: a critic
    initialised from the policy checkpoint, with its own optimiser); ``auto``: none for GRPO, separate
    for PPO."""
    critic_lr_scale: float = 1.5
    """Critic learning rate = lr x this (CompactionRL: 3e-6 / 2e-6)."""
    value_pretrain_steps: int = 0
    """Critic-only steps before RL (CompactionRL: 50 at full scale)."""
    value_updates: int = 2
    """Critic updates per policy update (CompactionRL: 2)."""
    eps_low: float = 0.2
    """Lower clip range of the ratio, > 0."""
    eps_high: float = 0.28
    """Upper clip range (clip-higher), > 0."""
    epochs: int = 1
    """Passes over each rollout batch."""
    minibatch_segments: int = 256
    """Segments per mini-batch; the batch is padded to a multiple with dummy zero-weight segments."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip."""
    temperature: float = 1.0
    """Sampling temperature during training rollouts."""
    entropy_coef: float = 0.0
    """Entropy bonus (0: none, as SUPO)."""
    summariser_checkpoint: str | None = None
    """With ``harness.summariser='frozen'``: the frozen summariser's checkpoint (default: the base)."""

    def validate(self, prefix: str = "train") -> None:
        check_choice(f"{prefix}.recipe", self.recipe, RECIPES.names())
        for key, registry in (("estimator", ESTIMATORS), ("normaliser", NORMALISERS)):
            value = getattr(self, key)
            if value not in registry:
                raise ConfigError(f"`{prefix}.{key}={value!r}` is invalid; choose one of {registry.choices()}")
        check_choice(f"{prefix}.algorithm", self.algorithm, ("grpo", "ppo"))
        family = estimator_family(self.estimator)
        if (self.algorithm == "grpo") != (family == "group"):
            want = "a group estimator" if self.algorithm == "grpo" else "a GAE estimator"
            names = [n for n in ESTIMATORS.names() if estimator_family(n) == ("group" if want[2] == "g" else "gae")]
            raise ConfigError(f"`{prefix}.estimator={self.estimator!r}` is invalid with algorithm="
                              f"{self.algorithm!r}; choose {want}: {names}")
        for key in ("overlong_mask", "whiten", "std_normalize", "unbiased_std"):
            _check_bool(f"{prefix}.{key}", getattr(self, key))
        check_float(f"{prefix}.gamma", self.gamma, 0.0, 1.0, lo_open=True)
        if isinstance(self.lam, str):
            if self.lam not in LAMBDA_READINGS:
                raise ConfigError(f"`{prefix}.lam={self.lam!r}` is invalid; choose a float in (0, 1] or one of "
                                  f"{LAMBDA_READINGS.choices()}")
            if self.alpha is None:
                raise ConfigError(f"`{prefix}.alpha=None` is invalid with lam={self.lam!r}; choose a value > 0")
            _check_positive(f"{prefix}.alpha", self.alpha)
            if self.lam == "response_cap":
                check_int(f"{prefix}.response_cap", self.response_cap, 1)
        else:
            check_float(f"{prefix}.lam", self.lam, 0.0, 1.0, lo_open=True)
        check_int(f"{prefix}.group_size", self.group_size, 1)
        check_int(f"{prefix}.prompts", self.prompts, 1)
        check_int(f"{prefix}.steps", self.steps, 0)
        _check_positive(f"{prefix}.lr", self.lr)
        check_choice(f"{prefix}.critic", self.critic, ("none", "head", "separate"))
        if self.algorithm == "ppo" and self.critic == "none":
            raise ConfigError(f"`{prefix}.critic='none'` is invalid with algorithm='ppo'; choose 'head' or "
                              "'separate'")
        _check_positive(f"{prefix}.critic_lr_scale", self.critic_lr_scale)
        check_int(f"{prefix}.value_pretrain_steps", self.value_pretrain_steps, 0)
        check_int(f"{prefix}.value_updates", self.value_updates, 1)
        _check_positive(f"{prefix}.eps_low", self.eps_low)
        _check_positive(f"{prefix}.eps_high", self.eps_high)
        check_int(f"{prefix}.epochs", self.epochs, 1)
        check_int(f"{prefix}.minibatch_segments", self.minibatch_segments, 1)
        _check_positive(f"{prefix}.max_grad_norm", self.max_grad_norm)
        _check_positive(f"{prefix}.temperature", self.temperature)
        check_float(f"{prefix}.entropy_coef", self.entropy_coef, 0.0, 1.0)
        if self.summariser_checkpoint is not None and not Path(self.summariser_checkpoint).is_file():
            raise ConfigError(f"`{prefix}.summariser_checkpoint={self.summariser_checkpoint!r}` is invalid; "
                              "no such checkpoint file")

    def estimator_options(self) -> dict[str, Any]:
        """Keyword options for ``simlab.credit.advantages``."""
        if estimator_family(self.estimator) == "group":
            return {"std_normalize": self.std_normalize, "unbiased_std": self.unbiased_std}
        opts: dict[str, Any] = {"gamma": self.gamma, "lam": self.lam}
        if isinstance(self.lam, str):
            opts["alpha"] = self.alpha
            if self.lam == "response_cap":
                opts["response_cap"] = self.response_cap
        return opts


@dataclass(frozen=True)
class BaseConfig:
    """The "base model": behaviour cloning from a reference agent, built once per task preset and cached."""

    teacher: str = "scripted"
    """Reference agent to clone (``scripted`` at quality q gives an imperfect summariser)."""
    quality: float = 0.7
    """Summary quality q of the scripted teacher, in [0, 1]."""
    steps: int = 200
    """Behaviour-cloning steps (0: start RL from a random policy)."""
    episodes: int = 128
    """Teacher rollouts per behaviour-cloning step."""
    lr: float = 1e-3
    """Learning rate of behaviour cloning."""
    compact_demos: bool = True
    """Collect demonstrations under the ``policy`` trigger so the base model also learns when to emit
    COMPACT (AutoCompact's cold-start SFT); other triggers simply never allow COMPACT."""
    cache: bool = True
    """Reuse a cached checkpoint addressed by this config, the task and the policy shape."""
    seed: int | str = 0
    """Seed of behaviour cloning (initial weights, demonstration stream). An integer gives every run seed
    and every arm of a sweep one shared base model; ``"run"`` builds one base model per run seed, so
    seed-to-seed spread also covers the base model. Either way, arms that share a seed share a base."""

    def validate(self, prefix: str = "base") -> None:
        AGENTS.canonical(self.teacher)
        if self.seed != "run":
            if isinstance(self.seed, str):
                raise ConfigError(f"`{prefix}.seed={self.seed!r}` is invalid; choose an integer >= 0 or 'run'")
            check_int(f"{prefix}.seed", self.seed, 0)
        check_float(f"{prefix}.quality", self.quality, 0.0, 1.0)
        check_int(f"{prefix}.steps", self.steps, 0)
        check_int(f"{prefix}.episodes", self.episodes, 1)
        _check_positive(f"{prefix}.lr", self.lr)
        _check_bool(f"{prefix}.compact_demos", self.compact_demos)
        _check_bool(f"{prefix}.cache", self.cache)


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation on held-out seeds, in both configurations (compacted and single-window)."""

    every: int = 10
    """Evaluate every this many RL steps (and before the first and after the last)."""
    episodes: int = 128
    """Held-out rollouts per configuration."""
    seed: int = 1_000_000
    """First held-out instance seed; training seeds stay below it."""
    single_window: bool = True
    """Also evaluate with compaction disabled (trigger ``none``); the seed warns the two diverge."""

    def validate(self, prefix: str = "eval") -> None:
        check_int(f"{prefix}.every", self.every, 1)
        check_int(f"{prefix}.episodes", self.episodes, 1)
        check_int(f"{prefix}.seed", self.seed, 0)
        _check_bool(f"{prefix}.single_window", self.single_window)


@dataclass(frozen=True)
class RunConfig:
    """Everything one training run needs; every field is logged."""

    preset: str
    """The task preset name (``simlab.tasks.presets``)."""
    env_id: str
    """The Gymnasium id of the preset's task."""
    task: TaskConfig
    harness: HarnessConfig
    policy: PolicyConfig
    base: BaseConfig
    train: TrainConfig
    eval: EvalConfig
    seed: int = 0
    """Seeds torch, numpy and the training instances."""
    device: str = "auto"
    """``auto`` (CUDA when present), ``cpu`` or ``cuda``."""

    def to_nested(self) -> dict[str, Any]:
        """The resolved config as a nested mapping that :func:`resolve` accepts back unchanged."""
        out: dict[str, Any] = {"seed": self.seed, "device": self.device}
        out["task"] = {"preset": self.preset, **_plain(self.task)}
        for name in ("harness", "base", "train", "eval"):
            out[name] = _plain(getattr(self, name))
        policy = _plain(self.policy)
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
    def base_seed(self) -> int:
        """The seed the base model is built with: ``base.seed``, or the run's seed when it is ``"run"``."""
        return self.seed if self.base.seed == "run" else int(self.base.seed)

    def base_key(self) -> str:
        """Address of this run's base checkpoint: the task, the preset's harness, the policy shape, ``base``."""
        policy = {k: v for k, v in _plain(self.policy).items() if k != "value_head"}  # heads are added later
        base = {**{k: v for k, v in _plain(self.base).items() if k != "cache"}, "seed": self.base_seed}
        payload = {"env": self.env_id, "task": _plain(self.task), "harness": self.base_harness_settings(),
                   "policy": policy, "base": base,
                   "v_sum": self.harness.v_sum}
        blob = json.dumps(payload, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _plain(obj: Any) -> dict[str, Any]:
    return {f.name: _jsonable(getattr(obj, f.name)) for f in fields(obj)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if is_dataclass(value) and not isinstance(value, type):
        return _plain(value)
    return value


def _build(cls: type, data: dict[str, Any], prefix: str) -> Any:
    names = [f.name for f in fields(cls)]
    for key in data:
        if key not in names:
            raise ConfigError(f"`{prefix}.{key}` is not a setting; choose one of {names}")
    try:
        obj = cls(**data)
    except TypeError as exc:  # a value of the wrong shape reached a dataclass
        raise ConfigError(f"`{prefix}` is invalid: {exc}") from None
    validate = getattr(obj, "validate", None)
    if validate is not None:
        validate(prefix)
    return obj


def _section(nested: dict[str, Any], name: str) -> dict[str, Any]:
    value = nested.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"`{name}={value!r}` is invalid; it must be a table of settings")
    return dict(value)


def _check_window(env_id: str, task_cfg: TaskConfig, harness_cfg: HarnessConfig) -> None:
    """The window must hold the task's prompt, a summary and one step: checked before any work starts."""
    import gymnasium

    from simlab import tasks  # noqa: F401  (registers the envs)
    from simlab.harness.phases import check_window

    env = gymnasium.make_vec(env_id, num_envs=1, vectorization_mode="vector_entry_point", config=task_cfg)
    try:
        check_window(env, harness_cfg)
    finally:
        env.close()


POLICY_MARGIN = 16
"""Tokens a policy row may hold beyond the window: the v_sum cue and the summary of the last segment."""


def resolve(nested: dict[str, Any] | None = None) -> RunConfig:
    """Layer ``nested`` over the preset, the recipe and the defaults; validate everything."""
    nested = copy.deepcopy(nested or {})
    for key in nested:
        if key not in SECTIONS and key not in TOP_LEVEL:
            raise ConfigError(f"`{key}` is not a setting; choose one of {list(TOP_LEVEL) + list(SECTIONS)}")
    task = _section(nested, "task")
    preset_name = task.pop("preset", "keyrecall-tiny")
    if preset_name not in PRESETS:
        raise ConfigError(f"`task.preset={preset_name!r}` is invalid; choose one of {tuple(PRESETS)}")
    preset = get_preset(preset_name)
    task_cfg = preset.task.replace(**task)

    train = _section(nested, "train")
    recipe_name = train.get("recipe", TrainConfig.recipe)
    if recipe_name not in RECIPES:
        raise ConfigError(f"`train.recipe={recipe_name!r}` is invalid; choose one of {RECIPES.choices()}")
    recipe = RECIPES.get(recipe_name)

    user_harness = _section(nested, "harness")
    # the recipe sees the window the run will have, so its ratios (L = 0.95 W, T_comp = W/6) scale with it
    harness_data = {**preset.harness, **recipe.harness({**preset.harness, **user_harness}), **user_harness}
    harness_cfg = HarnessConfig().replace(**harness_data)
    train_data = {**preset.train, **recipe.train(_plain(harness_cfg)), **train}
    estimator = train_data.get("estimator", TrainConfig.estimator)
    if estimator in ESTIMATORS and train_data.get("algorithm", "auto") == "auto":
        train_data["algorithm"] = "grpo" if estimator_family(estimator) == "group" else "ppo"
    if train_data.get("critic", "auto") == "auto":
        train_data["critic"] = "none" if train_data.get("algorithm") == "grpo" else "separate"
    train_cfg = _build(TrainConfig, train_data, "train")

    policy = {**preset.policy, **_section(nested, "policy")}
    if "vocab_size" in policy:
        raise ConfigError("`policy.vocab_size` is set by the task (task.vocab_size); remove it")
    policy.setdefault("max_len", harness_cfg.window + POLICY_MARGIN)
    policy.setdefault("value_head", train_cfg.critic == "head")
    policy_cfg = _build(PolicyConfig, {"vocab_size": task_cfg.vocab_size, **policy}, "policy")
    if policy_cfg.max_len < harness_cfg.window + POLICY_MARGIN:
        raise ConfigError(f"`policy.max_len={policy_cfg.max_len}` is invalid; it must hold the window plus "
                          f"the summary cue: choose an integer >= {harness_cfg.window + POLICY_MARGIN}")

    _check_window(preset.env_id, task_cfg, harness_cfg)
    seed = nested.get("seed", 0)
    check_int("seed", seed, 0)
    device = nested.get("device", "auto")
    check_choice("device", device, ("auto", "cpu", "cuda"))
    return RunConfig(
        preset=preset.name,
        env_id=preset.env_id,
        task=task_cfg,
        harness=harness_cfg,
        policy=policy_cfg,
        base=_build(BaseConfig, {**preset.base, **_section(nested, "base")}, "base"),
        train=train_cfg,
        eval=_build(EvalConfig, _section(nested, "eval"), "eval"),
        seed=seed,
        device=device,
    )


def parse_value(text: str) -> Any:
    """A ``--set`` value as TOML would read it (numbers, booleans, arrays); anything else is a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(nested: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``nested`` with ``{"section.key": value}`` overrides set (``seed`` and ``device`` bare)."""
    out = copy.deepcopy(nested)
    for path, value in overrides.items():
        parts = path.split(".")
        if len(parts) == 1 and parts[0] in TOP_LEVEL:
            out[parts[0]] = value
            continue
        if len(parts) != 2 or parts[0] not in SECTIONS:
            raise ConfigError(f"`{path}` is not a key path; use section.key with a section in {list(SECTIONS)} "
                              f"or one of {list(TOP_LEVEL)}")
        section = out.setdefault(parts[0], {})
        if not isinstance(section, dict):
            raise ConfigError(f"`{parts[0]}` must be a table of settings")
        section[parts[1]] = value
    return out


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["train.lr=1e-3", ...]`` -> ``{"train.lr": 0.001}``."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"`--set {item}` is invalid; write key=value, e.g. --set train.lr=0.001")
        out[key.strip()] = parse_value(value.strip())
    return out


def load(path: Path | str, overrides: list[str] | None = None) -> RunConfig:
    """Read a TOML run config, apply ``--set`` overrides and resolve."""
    path = Path(path)
    try:
        nested = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from None
    return resolve(apply_overrides(nested, parse_overrides(overrides or [])))


def flatten(cfg: RunConfig) -> dict[str, Any]:
    """``{"section.key": value}`` of every resolved setting (tuples and None as strings), for logging."""
    out: dict[str, Any] = {}
    for section, values in cfg.to_nested().items():
        if isinstance(values, dict):
            for key, value in values.items():
                out[f"{section}.{key}"] = value if isinstance(value, (int, float, str, bool)) else str(value)
        else:
            out[section] = values
    return out


__all__ = [
    "PRESETS", "BaseConfig", "ConfigError", "EvalConfig", "RunConfig", "TrainConfig", "apply_overrides",
    "flatten", "load", "parse_overrides", "parse_value", "resolve",
]
