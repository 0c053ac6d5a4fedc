"""Sweep specifications: the frozen dataclasses a parsed spec is, and the probe settings it is checked with.

A spec names a base configuration, a search space (grid lists or distributions per config key path),
named variants (bundles of settings that move together, e.g. a recipe at a matched effective horizon),
the seeds, the objective, the sampler's plan (:mod:`simlab.sweep.plan`) and an optional pruner.
:mod:`simlab.sweep.spec_parse` reads the TOML (:func:`~simlab.sweep.spec_parse.load_spec`,
:func:`~simlab.sweep.spec_parse.parse_spec`) and is the one place a spec is checked; :func:`probe_settings`
gives the settings the runner resolves before anything is written.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import BaseModel, BeforeValidator, Field, model_validator

from simlab.names import ATTR_CELL, ATTR_SEED
from simlab.rules import COUNT_MAX, TABLE, Real, Says
from simlab.rules import refuse as _refuse
from simlab.schema import flatten

if TYPE_CHECKING:
    import optuna

    from simlab.sweep.plan import Plan

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
Name = Annotated[str, Field(pattern=NAME), Says("give letters, digits, '_', '.' or '-'")]
"""A study, experiment or variant name."""
Scalar = str | int | float | bool
"""A setting's value (strict: a bool is a bool, a number is finite)."""
Setting = Annotated[Scalar | list[Scalar], Says("give a finite number, a string, a boolean or a list of them")]
"""A setting: a scalar, or a list of them (a (min, max) pair)."""


def key_paths(table: Any, *, ranges: bool = False) -> Any:
    """A table of settings as key paths (TOML dotted keys nest; :func:`simlab.schema.flatten`); with
    ``ranges``, a ``{type = ...}`` table stays whole (a distribution). Anything else is left to the check."""
    if not isinstance(table, dict):
        return table
    return flatten(table, leaf=(lambda t: "type" in t) if ranges else None)


Settings = Annotated[dict[str, Setting], BeforeValidator(key_paths)]
"""Key path -> value."""


class Distribution(BaseModel):
    """A range Optuna samples from (sampler ``tpe``); what each kind takes is checked in :meth:`_kind`."""

    model_config = TABLE
    kind: Literal["float", "int", "categorical"] = Field(alias="type")
    """``float``, ``int`` or ``categorical``."""
    low: Real = 0.0
    """Lower bound (float and int)."""
    high: Real = 0.0
    """Upper bound, inclusive (float and int)."""
    log: bool = False
    """Sample on a log scale (float and int; needs ``low > 0``)."""
    step: Real | None = None
    """Optional discretisation step (float and int; not with ``log``)."""
    choices: list[Scalar] = Field(default_factory=list)
    """The values of a ``categorical``."""

    @model_validator(mode="after")
    def _kind(self) -> Self:
        """The keys each kind takes, and its range's order."""
        given = self.model_fields_set - {"kind"}
        if self.kind == "categorical":
            return self._categorical(given)
        return self._range(given)

    def _range(self, given: set[str]) -> Self:
        if "choices" in given:
            raise _refuse(f"a {self.kind} range takes low, high, log and step", suffix=".choices", value=self.choices)
        is_int = self.kind == "int"
        what = "an integer" if is_int else "a finite number"
        for key in ("low", "high", "step"):
            value = getattr(self, key) if key in given else None
            if (key != "step" and value is None) or (is_int and value is not None and not isinstance(value, int)):
                raise _refuse(f"give {what}", suffix=f".{key}", value=value)
        if self.high <= self.low:
            raise _refuse(f"give {what} greater than low={self.low!r}", suffix=".high", value=self.high)
        if self.log and self.low <= 0:
            raise _refuse("a log-scale range needs low > 0", suffix=".low", value=self.low)
        if self.step is not None and (self.step <= 0 or self.log):
            raise _refuse(f"give {what} > 0, and no step with log = true", suffix=".step", value=self.step)
        return self

    def _categorical(self, given: set[str]) -> Self:
        if given - {"choices"}:
            extra = sorted(given - {"choices"})[0]
            raise _refuse("a categorical takes only choices", suffix=f".{extra}", value=getattr(self, extra))
        if not self.choices:
            raise _refuse("give a non-empty list of numbers, strings or booleans", suffix=".choices",
                          value=self.choices)
        if len(set(map(repr, self.choices))) != len(self.choices):
            raise _refuse("list each choice once", suffix=".choices", value=self.choices)
        return self

    def suggest(self, trial: optuna.Trial, key: str) -> Any:
        """Ask ``trial`` for a value of this range (a queued trial returns its fixed value)."""
        if self.kind == "categorical":
            return trial.suggest_categorical(key, list(self.choices))
        if self.kind == "float":
            step = None if self.step is None else float(self.step)
            return trial.suggest_float(key, float(self.low), float(self.high), log=self.log, step=step)
        return trial.suggest_int(key, int(self.low), int(self.high), log=self.log,
                                 step=1 if self.step is None else int(self.step))


def encode(value: Any) -> Any:
    """A grid value as an Optuna categorical holds it: a list becomes its JSON text."""
    return json.dumps(value) if isinstance(value, list) else value


def decode(value: Any, grid: Sequence[Any] | None) -> Any:
    """The grid value back from :func:`encode` (JSON text is a list only where the grid holds lists)."""
    if isinstance(value, str) and grid is not None and any(isinstance(g, list) for g in grid):
        with contextlib.suppress(json.JSONDecodeError):
            return json.loads(value)
    return value


@dataclass(frozen=True)
class Axis:
    """One swept config key: either a grid of values or a distribution."""

    key: str
    """Config key path (``train.lr``) or ``preset`` / ``recipe``."""
    grid: tuple[Any, ...] | None = None
    """Every value to try (sampler ``grid``; a categorical for ``tpe``)."""
    dist: Distribution | None = None
    """The range to sample (sampler ``tpe`` only)."""

    def suggest(self, trial: optuna.Trial) -> Any:
        """The trial's value of this key: one of the grid's values, or one of the range's."""
        if self.grid is None:
            assert self.dist is not None
            return self.dist.suggest(trial, self.key)
        return decode(trial.suggest_categorical(self.key, [encode(v) for v in self.grid]), self.grid)


class Variant(BaseModel):
    """A named bundle of settings swept as one axis (``variant`` in Optuna and MLflow)."""

    model_config = TABLE
    name: Name
    """Label used in tables and run names."""
    settings: Settings = Field(default_factory=dict, alias="set")
    """Key path -> value, applied over the base overrides."""


class Objective(BaseModel):
    """The metric a trial returns and which way is better."""

    model_config = TABLE
    metric: Annotated[str, Field(min_length=1), Says("give the name of a metric the trial returns")]
    """A key of the dict the trial function returns, e.g. ``eval/compacted/success``
    (:data:`simlab.names.EVAL_COMPACTED_SUCCESS`)."""
    direction: Literal["maximize", "minimize"] = "maximize"
    """``maximize`` or ``minimize``."""


class PrunerSpec(BaseModel):
    """Early stopping of unpromising trials on the objective metric reported during training."""

    model_config = TABLE
    kind: Literal["median", "percentile", "nop"] = Field("nop", alias="type")
    """``median``, ``percentile`` or ``nop``."""
    n_startup_trials: Annotated[int, Field(ge=0, le=COUNT_MAX)] = 5
    """Trials that finish before any pruning."""
    n_warmup_steps: Annotated[int, Field(ge=0, le=COUNT_MAX)] = 0
    """Training steps of each trial before it can be pruned."""
    percentile: Annotated[Real, Field(gt=0, lt=100)] = 25.0
    """Percentile kept by ``percentile``."""


class Base(BaseModel):
    """The configuration every trial starts from."""

    model_config = TABLE
    preset: str | None = None
    """Task preset name (``None``: the config default)."""
    recipe: str | None = None
    """Recipe preset name (``None``: the config default)."""
    overrides: Settings = Field(default_factory=dict)
    """Key path -> value applied over the presets."""


BASE_VARIANT = "base"
"""The variant of a sweep without a search space (seeds only)."""


@dataclass(frozen=True)
class Cell:
    """One run to make: a point of the space and a seed."""

    params: dict[str, Any]
    """Optuna parameters: swept key paths, ``variant`` when there are variants."""
    seed: int
    """The trial's seed."""

    @property
    def key(self) -> str:
        """Canonical identity of the cell (stored on the trial; equal cells have equal keys)."""
        return json.dumps({"params": self.params, "seed": self.seed}, sort_keys=True)

    @property
    def variant(self) -> str:
        """The label without the seed: what ``simlab report`` pools seeds over (``base`` for an empty space)."""
        parts = [f"{k.rsplit('.', 1)[-1]}={v}" for k, v in sorted(self.params.items())]
        return ",".join(parts) or BASE_VARIANT

    @property
    def label(self) -> str:
        """Short human label for run names and tables."""
        prefix = "" if not self.params else self.variant + ","
        return f"{prefix}seed={self.seed}"

    @property
    def optuna_params(self) -> dict[str, Any]:
        """The point as Optuna parameters, list values JSON-encoded (categoricals hold scalars only). The
        seed is no parameter: it goes in the trial's user attributes (:attr:`attrs`), so that Optuna's
        parameter importance ranks the searched axes only."""
        return {k: encode(v) for k, v in self.params.items()}

    @property
    def attrs(self) -> dict[str, Any]:
        """The user attributes of the cell's trial: its identity and its seed."""
        return {ATTR_CELL: self.key, ATTR_SEED: self.seed}


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep."""

    name: str
    """Study and experiment name (default: the file's stem)."""
    description: str
    """Free text shown in the parent run's description tag."""
    base: Base
    """The starting configuration."""
    axes: tuple[Axis, ...]
    """Swept keys, in file order."""
    variants: tuple[Variant, ...]
    """Bundles swept as one extra axis."""
    seeds: tuple[int, ...]
    """Seeds; every grid point runs once per seed."""
    objective: Objective
    """What a trial returns for Optuna."""
    plan: Plan
    """The sampler's plan: :class:`~simlab.sweep.plan.GridPlan` (every cell x seed, enqueued) or
    :class:`~simlab.sweep.plan.TpePlan` (``n_trials`` samples)."""
    pruner: PrunerSpec
    """Early stopping (``nop`` by default)."""
    baseline: str | None = None
    """The variant (a cell label without the seed) ``simlab report`` differences against by default."""

    @property
    def sampler(self) -> str:
        """``grid`` or ``tpe``: the plan's name."""
        return self.plan.name

    @property
    def n_trials(self) -> int | None:
        """Trials for ``tpe``; ``None`` for ``grid`` (the cell count decides)."""
        return self.plan.n_trials

    def settings(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The trial's settings: preset, recipe and every key path, later layers winning."""
        out: dict[str, Any] = {}
        if self.base.preset is not None:
            out["preset"] = self.base.preset
        if self.base.recipe is not None:
            out["recipe"] = self.base.recipe
        out.update(self.base.overrides)
        if "variant" in params:
            out.update(self.variant_settings[params["variant"]])
        out.update({k: v for k, v in params.items() if k != "variant"})
        return out

    @functools.cached_property
    def variant_settings(self) -> dict[str, Mapping[str, Any]]:
        """Variant name -> its settings: one look-up per point, not a scan of the variants (the probes
        and the grid's cells ask for every point's)."""
        return {v.name: v.settings for v in self.variants}

    def grid_points(self) -> list[dict[str, Any]]:
        """Every point of a grid space (without seeds), in a stable order."""
        names = [a.key for a in self.axes]
        values = [a.grid or () for a in self.axes]
        if self.variants:
            names.append("variant")
            values.append(tuple(v.name for v in self.variants))
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]

    def cells(self) -> list[Cell]:
        """Grid points x seeds (sampler ``grid``)."""
        return [Cell(point, seed) for point in self.grid_points() for seed in self.seeds]

    def fingerprint(self) -> str:
        """Hash of everything that defines what a cell means (not ``seeds``, ``n_trials`` or ``pruner``).

        Seeds are left out on purpose: a finished sweep rerun with more seeds runs just the new cells,
        and every existing cell keeps its meaning.
        """
        blob = json.dumps(
            {
                "base": [self.base.preset, self.base.recipe, self.base.overrides],
                "axes": [[a.key, a.grid, a.dist and vars(a.dist)] for a in self.axes],
                "variants": [[v.name, v.settings] for v in self.variants],
                "objective": vars(self.objective),
                "sampler": self.sampler,
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def probe_settings(spec: SweepSpec) -> list[dict[str, Any]]:
    """Settings that exercise the spec before anything runs: each grid point, or for ``tpe`` the
    combinations of its ranges' probe values under each variant (:meth:`~simlab.sweep.plan.TpePlan.probes`).

    The runner resolves each through the trial backend before anything is written, so an unknown key
    path, an out-of-range value or values that clash fail the whole sweep up front instead of failing
    trials one by one.
    """
    return [spec.settings(point) for point in spec.plan.probes(spec)]
