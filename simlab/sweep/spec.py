"""Sweep specifications: the frozen dataclasses a parsed spec is, and the probe settings it is checked with.

A spec names a base configuration, a search space (grid lists or distributions per config key path:
:mod:`simlab.sweep.space`),
named variants (bundles of settings that move together, e.g. a recipe at a matched effective horizon),
the seeds, the objective, the sampler's plan (:mod:`simlab.sweep.plan`) and an optional pruner.
:mod:`simlab.sweep.spec_parse` reads the TOML (:func:`~simlab.sweep.spec_parse.load_spec`,
:func:`~simlab.sweep.spec_parse.parse_spec`) and is the one place a spec is checked; :func:`probe_settings`
gives the settings the runner resolves before anything is written.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from simlab import smoke
from simlab.rules import COUNT_MAX, TABLE, Real, Says
from simlab.schema import flatten
from simlab.sweep.labels import VARIANT_KEY
from simlab.sweep.space import Axis, Cell, Scalar

if TYPE_CHECKING:
    from simlab.sweep.plan import Plan

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
Name = Annotated[str, Field(pattern=NAME), Says("give letters, digits, '_', '.' or '-'")]
"""A study, experiment or variant name."""
Setting = Annotated[Scalar | list[Scalar], Says("give a finite number, a string, a boolean or a list of them")]
"""A setting: a scalar, or a list of them (a (min, max) pair)."""


def key_paths(table: Any, *, ranges: bool = False) -> Any:
    """A table of settings as key paths (TOML dotted keys nest; :func:`simlab.schema.flatten`); with
    ``ranges``, a ``{type = ...}`` table stays whole (a distribution). Anything else is left to the check."""
    if not isinstance(table, dict):
        return table
    return flatten(table, leaf=(lambda t: "type" in t) if ranges else None)


Settings = Annotated[dict[str, Setting], BeforeValidator(key_paths)]
"""Key path -> value: the run config's key paths, as ``--set`` takes them (``task.preset``, ``train.lr``)."""
SpecLayer = tuple[str, dict[str, Any]]
"""One layer of a trial's settings: how a refusal names it, and its values by key path."""


def merged(layers: Sequence[SpecLayer]) -> dict[str, Any]:
    """The values of ``layers`` by key path, a later layer winning."""
    return {key: value for _, values in layers for key, value in values.items()}


SHORT = {"task.preset": "preset", "train.recipe": "recipe"}
"""The names the base and the variants gave the task and recipe presets before a spec spelt every key as
the run config does; :meth:`SweepSpec.fingerprint` hashes those settings under them, so a study made then
still opens under the rewritten spec."""


class Variant(BaseModel):
    """A named bundle of settings swept as one axis (``variant`` in Optuna and MLflow)."""

    model_config = TABLE
    name: Name
    """Label used in tables and run names."""
    settings: Settings = Field(default_factory=dict, alias="set")
    """Key path -> value, applied over the base."""


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


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep."""

    name: str
    """Study and experiment name (default: the file's stem)."""
    description: str
    """Free text shown in the parent run's description tag."""
    base: Mapping[str, Any]
    """Key path -> value every trial starts from (``task.preset``, ``train.recipe``, ...)."""
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

    def layers(self, params: Mapping[str, Any]) -> list[SpecLayer]:
        """The trial's settings as layers, lowest first, each ``(label, {key path: value})``: the spec's
        ``[base]``, the variant's ``set``, the axes' point. A refusal names the layer that set the value."""
        out: list[SpecLayer] = [("the sweep spec's [base]", dict(self.base))]
        if VARIANT_KEY in params:
            name = params[VARIANT_KEY]
            out.append((f"the sweep spec's variant {name!r}", dict(self.variant_settings[name])))
        point = {k: v for k, v in params.items() if k != VARIANT_KEY}
        return [*out, ("the sweep spec's point", point)] if point else out

    def settings(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The trial's settings by key path: its :meth:`layers` merged, later layers winning."""
        return merged(self.layers(params))

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
            names.append(VARIANT_KEY)
            values.append(tuple(v.name for v in self.variants))
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]

    def cells(self) -> list[Cell]:
        """Grid points x seeds (sampler ``grid``)."""
        return [Cell(point, seed) for point in self.grid_points() for seed in self.seeds]

    def at_smoke_size(self) -> SweepSpec:
        """The spec at smoke size when ``$SIMLAB_SMOKE`` turns it on (:mod:`simlab.smoke`): its first
        :data:`~simlab.smoke.SEEDS` seed(s) and at most :data:`~simlab.smoke.TRIALS` sampled trials (a grid
        keeps every cell); itself otherwise."""
        if not smoke.on():
            return self
        return replace(self, seeds=tuple(self.seeds[:smoke.SEEDS]), plan=self.plan.at_most(smoke.TRIALS))

    def fingerprint(self) -> str:
        """Hash of everything that defines what a cell means (not ``seeds``, ``n_trials`` or ``pruner``).

        Seeds are left out on purpose: a finished sweep rerun with more seeds runs just the new cells,
        and every existing cell keeps its meaning. The base's and the variants' presets hash under their
        :data:`SHORT` names; an axis's key is the Optuna parameter's name, and hashes as it is.
        """
        base = {SHORT.get(k, k): v for k, v in self.base.items()}
        blob = json.dumps(
            {
                "base": [base.pop("preset", None), base.pop("recipe", None), base],
                "axes": [[a.key, a.grid, a.dist and vars(a.dist)] for a in self.axes],
                "variants": [[v.name, {SHORT.get(k, k): x for k, x in v.settings.items()}] for v in self.variants],
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
