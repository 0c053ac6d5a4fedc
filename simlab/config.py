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
the error names the user's setting (:mod:`simlab.blame`). :func:`flatten` gives the
``{"section.key": value}`` form that is logged as run params.

This module owns ``RunConfig``, the resolution and the public entry points (:func:`resolve`,
:func:`load`, :func:`apply_overrides`, :func:`flatten`); the ``train``, ``base`` and ``eval`` sections
are declared in :mod:`simlab.run_sections` and exported from here.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import InstanceOf

from simlab import smoke
from simlab.blame import layered_harness
from simlab.credit import ESTIMATORS, estimator_family
from simlab.errors import ConfigError
from simlab.harness.agents import agent_fits
from simlab.harness.config import HarnessConfig, window_need
from simlab.harness.triggers import TRIGGERS
from simlab.policy.config import PolicyConfig
from simlab.recipes import RECIPES, Recipe
from simlab.rules import Names, Seed, check_value
from simlab.run_sections import (
    BASE_LATER_SETTINGS,
    EVAL_SEED_STRIDE,
    RUN_EVAL_SEEDS,
    BaseConfig,
    EvalConfig,
    TrainConfig,
)
from simlab.schema import Section, loggable, parse_overrides, parse_value, plain, read_toml, set_path
from simlab.schema import flatten as flatten_paths
from simlab.tasks.config import TaskConfig
from simlab.tasks.presets import BASE_LATER_FIELDS, PRESET_NAMES, PRESETS, get_preset, hashed_fields

SECTIONS = ("task", "harness", "policy", "base", "train", "eval")
TOP_LEVEL = ("seed", "device")
DEFAULT_PRESET = "keyrecall-tiny"
DEVICES = ("auto", "cpu", "cuda")

POLICY_MARGIN = 16
"""Tokens a policy row may hold beyond the window: the v_sum cue and the summary of the last segment."""


class RunConfig(Section):
    """Everything one training run needs; every field is logged."""

    preset: PRESET_NAMES
    """The task preset name (``simlab.tasks.presets``)."""
    env_id: str
    """The Gymnasium id of the preset's task."""
    task: InstanceOf[TaskConfig]
    harness: InstanceOf[HarnessConfig]
    policy: InstanceOf[PolicyConfig]
    base: InstanceOf[BaseConfig]
    train: InstanceOf[TrainConfig]
    eval: InstanceOf[EvalConfig]
    seed: Seed = 0
    """Seeds torch, numpy and the training instances."""
    device: Annotated[str, Names(lambda: DEVICES)] = "auto"
    """``auto`` (CUDA when present), ``cpu`` or ``cuda``."""

    def check(self) -> None:
        """Rules across sections: the policy holds the window; held-out seeds stay above training ones; a
        summariser checkpoint is a policy of this task's vocabulary that holds the window."""
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
        if self.base.compact_hazard and not (self.harness.trigger == "policy" and self.base.compact_demos):
            raise ConfigError.invalid("base.compact_hazard", self.base.compact_hazard,
                                      "the teacher emits COMPACT only in demonstrations under the 'policy' trigger "
                                      f"(harness.trigger={self.harness.trigger!r}, base.compact_demos="
                                      f"{self.base.compact_demos}); leave it 0 or set both")
        for key, name in (("base.teacher", self.base.teacher), ("harness.summariser", self.harness.summariser)):
            if (why := agent_fits(name, self.task)) is not None:
                raise ConfigError.invalid(key, name, why)
        if self.train.summariser_checkpoint is not None:
            from simlab.policy.checkpoint import check_policy_file  # torch: only when a checkpoint is given

            check_policy_file("train.summariser_checkpoint", self.train.summariser_checkpoint,
                              vocab_size=self.policy.vocab_size, holds=least)

    def to_nested(self) -> dict[str, Any]:
        """The resolved config as a nested mapping that :func:`resolve` accepts back unchanged."""
        out: dict[str, Any] = {"seed": self.seed, "device": self.device}
        out["task"] = {"preset": self.preset, **plain(self.task)}
        for name in ("harness", "base", "train", "eval"):
            out[name] = plain(getattr(self, name))
        out["policy"] = {k: v for k, v in plain(self.policy).items() if k != "vocab_size"}  # the task sets it
        return out

    def base_harness_settings(self) -> dict[str, Any]:
        """Harness settings of the base model's demonstrations (see ``trainer.base_harness``)."""
        geometry = ("window", "summary_tokens", "max_compactions", "max_steps", "v_sum")
        settings = {**get_preset(self.preset).harness, **{k: getattr(self.harness, k) for k in geometry}}
        settings.pop("summary_budget", None)  # the run's, not the preset's; absent when unset (older keys hold)
        if self.harness.summary_budget is not None:
            settings["summary_budget"] = self.harness.summary_budget
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
        base = {**{k: v for k, v in plain(self.base).items()
                   if k != "cache" and (k not in BASE_LATER_SETTINGS or BASE_LATER_SETTINGS[k] != v)},
                "seed": self.base_seed}
        task = hashed_fields(self.base_task(), BASE_LATER_FIELDS)
        payload = {"env": self.env_id, "task": task, "harness": self.base_harness_settings(),
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


def _train(preset: Any, recipe: Recipe, harness: HarnessConfig, user: dict[str, Any]) -> TrainConfig:
    data = {**preset.train, **recipe.train(plain(harness)), **user}
    estimator = data.get("estimator", TrainConfig.default("estimator"))
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
    across sections and the window check. Raises :class:`~simlab.errors.ConfigError`. Under
    ``$SIMLAB_SMOKE`` the sizes are capped last (:mod:`simlab.smoke`).
    """
    nested = copy.deepcopy(dict(nested or {}))
    for key in nested:
        if key not in SECTIONS and key not in TOP_LEVEL:
            raise ConfigError.unknown(key, [*TOP_LEVEL, *SECTIONS])
    user = {name: _section(nested, name) for name in SECTIONS}
    preset = get_preset(user["task"].pop("preset", DEFAULT_PRESET))
    type(preset.task).check_fields(user["task"])
    recipe = RECIPES.get(check_value("train.recipe", user["train"].get("recipe", TrainConfig.default("recipe")),
                                     TrainConfig.allows("recipe")))
    for cls in (HarnessConfig, TrainConfig, PolicyConfig, BaseConfig, EvalConfig):
        cls.check_fields(user[cls.SECTION])
    top = {key: nested[key] for key in TOP_LEVEL if key in nested}
    RunConfig.check_fields(top)
    if "vocab_size" in user["policy"]:
        raise ConfigError.invalid("policy.vocab_size", user["policy"]["vocab_size"],
                                  "it is set by the task (task.vocab_size); remove it")

    task_cfg = preset.task.replace(**user["task"])
    need = _env_need(preset.env_id, task_cfg)
    harness_cfg = layered_harness(preset, recipe, user["harness"], need)
    train_cfg = _train(preset, recipe, harness_cfg, user["train"])
    _check_draw(harness_cfg, train_cfg, need)
    policy = {"max_len": harness_cfg.window + POLICY_MARGIN, "value_head": train_cfg.critic == "head",
              **preset.policy, **user["policy"]}
    return smoke.shrink(RunConfig(
        preset=preset.name,
        env_id=preset.env_id,
        task=task_cfg,
        harness=harness_cfg,
        policy=PolicyConfig(vocab_size=task_cfg.vocab_size, **policy),
        base=BaseConfig(**{**preset.base, **user["base"]}),
        train=train_cfg,
        eval=EvalConfig(**user["eval"]),
        **top,
    ))


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
