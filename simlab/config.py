"""Run configuration: one section per part of a run, built from layered settings in one place.

A run is described by nested mappings (a TOML file, ``--set`` overrides, a sweep cell) with sections
``task``, ``harness``, ``policy``, ``base``, ``train`` and ``eval`` plus top-level ``seed`` and
``device``. Each is a user layer (:mod:`simlab.settings`) over the layers simlab adds:

    defaults < derived (policy.max_len) < task preset < recipe (harness, train) < the user's layers
    < smoke size

:func:`build` merges them once and validates each section and the run as a whole once (:mod:`simlab.schema`);
the values the user set are checked one by one first, before any preset or recipe arithmetic reads them.
Errors name the key path, the bad value and what is allowed, Optuna style: "`train.eps_low=0` is
invalid; choose a finite value > 0"; a refused value the user did not set names the layer that set it
and the user's setting it came from or clashes with (:meth:`simlab.settings.Settings.blame`).
:func:`flatten` gives the ``{"section.key": value}`` form that is logged as run params.

This module owns ``RunConfig``, the resolution and the public entry points (:func:`build`, :func:`resolve`,
:func:`load`, :func:`apply_overrides`, :func:`flatten`); the ``train``, ``base`` and ``eval`` sections
are declared in :mod:`simlab.run_sections` and exported from here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import InstanceOf

from simlab import smoke
from simlab.credit import ESTIMATORS, estimator_family
from simlab.errors import ConfigError
from simlab.harness.agents import agent_fits
from simlab.harness.config import HarnessConfig, window_need
from simlab.harness.triggers import TRIGGERS
from simlab.policy.config import PolicyConfig
from simlab.recipes import RECIPES
from simlab.rules import Names, Seed, check_value
from simlab.run_sections import (
    EVAL_SEED_STRIDE,
    RUN_EVAL_SEEDS,
    BaseConfig,
    EvalConfig,
    TrainConfig,
)
from simlab.schema import Section, loggable, parse_overrides, parse_value, read_toml, set_path
from simlab.schema import flatten as flatten_paths
from simlab.settings import USER, Layer, Settings
from simlab.tasks.config import TaskConfig
from simlab.tasks.presets import PRESET_NAMES, PRESETS, get_preset

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
        out["task"] = {"preset": self.preset, **self.task.model_dump(mode="json")}
        for name in ("harness", "base", "train", "eval"):
            out[name] = getattr(self, name).model_dump(mode="json")
        policy = self.policy.model_dump(mode="json", exclude={"vocab_size"})  # the task sets it
        out["policy"] = policy
        return out

    @property
    def eval_seed(self) -> int:
        """The first held-out instance seed: ``eval.seed``, or the run seed's own set when it is ``"run"``."""
        return RUN_EVAL_SEEDS + self.seed * EVAL_SEED_STRIDE if self.eval.seed == "run" else int(self.eval.seed)

    @property
    def train_seed_limit(self) -> int:
        """Training and behaviour-cloning instance seeds stay below this, so no held-out instance is trained on."""
        return RUN_EVAL_SEEDS if self.eval.seed == "run" else int(self.eval.seed)


# ------------------------------------------------------------------------------------- resolving
def user_layer(nested: Mapping[str, Any] | None, label: str = "your settings") -> Layer:
    """A user's nested settings (a TOML file's tables, a sweep cell) as one layer; a key that is no section
    or top-level setting, or a section that is no table, is refused here."""
    nested = dict(nested or {})
    for key, value in nested.items():
        if key not in SECTIONS and key not in TOP_LEVEL:
            raise ConfigError.unknown(key, [*TOP_LEVEL, *SECTIONS])
        if key in SECTIONS and not isinstance(value, dict):
            raise ConfigError.invalid(key, value, "it must be a table of settings")
    layer = Layer.of(USER, label, {k: v for k, v in nested.items() if k in SECTIONS})
    return Layer(USER, label, {**{k: nested[k] for k in TOP_LEVEL if k in nested}, **layer.values})


def _check_user(settings: Settings, preset: Any) -> None:
    """Each value a user layer set, against its own field, before any preset or recipe arithmetic reads it."""
    for cls in (type(preset.task), HarnessConfig, TrainConfig, PolicyConfig, BaseConfig, EvalConfig):
        name = "task" if cls is type(preset.task) else cls.SECTION
        for layer in settings.layers:
            cls.check_fields({k.split(".", 1)[1]: v for k, v in layer.values.items()
                              if k.split(".", 1)[0] == name and k != "task.preset"})
    for layer in settings.layers:
        RunConfig.check_fields({k: v for k, v in layer.values.items() if k in TOP_LEVEL})
        if "policy.vocab_size" in layer.values:
            raise ConfigError.invalid("policy.vocab_size", layer.values["policy.vocab_size"],
                                      "it is set by the task (task.vocab_size); remove it")


def _env_need(env_id: str, task_cfg: TaskConfig) -> tuple[int, int]:
    """(prompt tokens, tokens of one step) of the task: what the window check needs."""
    import gymnasium

    from simlab import tasks  # noqa: F401  (registers the envs)

    env = gymnasium.make_vec(env_id, num_envs=1, vectorization_mode="vector_entry_point", config=task_cfg)
    try:
        return window_need(env)
    finally:
        env.close()


def _train_settings(settings: Settings) -> dict[str, Any]:
    """The train section's settings with ``auto`` read: the algorithm by the estimator's family, the critic
    by the algorithm."""
    data = settings.section("train")
    estimator = data.get("estimator", TrainConfig.default("estimator"))
    if estimator in ESTIMATORS and data.get("algorithm", "auto") == "auto":
        data["algorithm"] = "grpo" if estimator_family(estimator) == "group" else "ppo"
    if data.get("critic", "auto") == "auto":
        data["critic"] = "none" if data.get("algorithm") == "grpo" else "separate"
    return data


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


def _default(path: str) -> Any:
    """The default of a key path of the run's own sections (what no layer set)."""
    section, _, name = path.partition(".")
    sections: dict[str, type[Section]] = {"base": BaseConfig, "train": TrainConfig, "eval": EvalConfig}
    return sections[section].default(name)


def _assemble(settings: Settings) -> RunConfig:
    """The layers below the user's added (preset, recipe, derived, smoke), each section built from its merged
    settings, the run config validated once."""
    preset = get_preset(settings.section("task").get("preset", DEFAULT_PRESET))
    _check_user(settings, preset)
    settings.add(Layer.of("preset", f"preset {preset.name!r}", {
        "harness": preset.harness, "policy": preset.policy, "base": preset.base, "train": preset.train}))
    recipe = RECIPES.get(check_value("train.recipe", settings.section("train").get("recipe", TrainConfig.default(
        "recipe")), TrainConfig.allows("recipe")))
    label = f"train.recipe={recipe.name!r}"
    task_cfg = preset.task.replace(**{k: v for k, v in settings.section("task").items() if k != "preset"})
    need = _env_need(preset.env_id, task_cfg)
    settings.add(Layer.of("recipe", label, {"harness": recipe.harness(settings.section("harness"))},
                          reads=recipe.reads))
    harness = HarnessConfig(**settings.section("harness"))
    harness.check_fits(*need)
    train_defaults = recipe.train(harness.model_dump(mode="json"))
    settings.add(Layer.of("recipe", label, {"train": train_defaults}, reads=recipe.reads))
    settings.add(Layer("smoke", f"${smoke.ENV}", smoke.caps(lambda path: settings.get(path, _default(path)))))
    train = TrainConfig(**_train_settings(settings))
    _check_draw(harness, train, need)
    settings.add(Layer.of("derived", "the window and the critic", {"policy": {
        "max_len": harness.window + POLICY_MARGIN, "value_head": train.critic == "head"}}, reads=("harness.window",)))
    top = {key: settings.get(key) for key in TOP_LEVEL if settings.origin(key) is not None}
    return RunConfig(
        preset=preset.name, env_id=preset.env_id, task=task_cfg, harness=harness, train=train,
        policy=PolicyConfig(vocab_size=task_cfg.vocab_size, **settings.section("policy")),
        base=BaseConfig(**settings.section("base")), eval=EvalConfig(**settings.section("eval")), **top,
    )


def build(layers: list[Layer]) -> RunConfig:
    """The run config of the user's ``layers`` (lowest first) over the preset, the recipe and the defaults.

    Every value a user layer set is checked against its field first; then the layers are merged once,
    each section built from its settings and the run config validated once. A refusal names the layer
    that set the value and, where the user set none of it, the user's setting it came from or clashes
    with (:meth:`simlab.settings.Settings.blame`). Under ``$SIMLAB_SMOKE`` the sizes are capped by the
    top layer (:mod:`simlab.smoke`).
    """
    settings = Settings(layers)
    try:
        return _assemble(settings)
    except ConfigError as exc:
        raise settings.blame(exc) from None


def resolve(nested: Mapping[str, Any] | None = None, label: str = "your settings") -> RunConfig:
    """The run config of one nested mapping of settings (a file's tables, a sweep cell); ``label`` names
    it in a refusal. Raises :class:`~simlab.errors.ConfigError`."""
    return build([user_layer(copy.deepcopy(dict(nested or {})), label)])


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


def paths_layer(paths: Mapping[str, Any], label: str) -> Layer:
    """Settings by key path (``--set``'s, a sweep spec's layer) as one user layer named ``label``."""
    return user_layer(apply_overrides({}, paths), label)


def load(path: Path | str | None, overrides: list[str] | None = None) -> RunConfig:
    """The run config of a TOML file (if any) with ``--set`` overrides above it: two user layers."""
    layers = [user_layer(read_toml(path), str(path))] if path is not None else []
    return build([*layers, paths_layer(parse_overrides(overrides or []), "--set")])


def flatten(cfg: RunConfig) -> dict[str, Any]:
    """``{"section.key": value}`` of every resolved setting (tuples and None as strings), for logging."""
    return {key: loggable(value) for key, value in flatten_paths(cfg.to_nested()).items()}


__all__ = [
    "PRESETS",
    "BaseConfig",
    "ConfigError",
    "EvalConfig",
    "RunConfig",
    "TrainConfig",
    "apply_overrides",
    "build",
    "flatten",
    "load",
    "parse_overrides",
    "parse_value",
    "paths_layer",
    "read_toml",
    "resolve",
    "user_layer",
]
