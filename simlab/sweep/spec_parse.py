"""Reading a sweep spec: TOML in, a :class:`~simlab.sweep.spec.SweepSpec` out, every check in :func:`parse_spec`.

The file's grammar is one pydantic model (:class:`SpecFile`, over the tables of :mod:`simlab.sweep.spec`);
:func:`parse_spec` validates it and then checks what involves several parts (seeds listed once, the
sampler's trials, reserved names, registered names, the baseline). A bad spec raises
:class:`~simlab.errors.SpecError`, whose message names the key and what is allowed, before anything is
written to either store.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from simlab.errors import SpecError
from simlab.registry import Registry
from simlab.rules import COUNT_MAX, TABLE, Says, Seed, check_value
from simlab.schema import read_toml
from simlab.sweep import labels
from simlab.sweep.plan import PLANS, Plan
from simlab.sweep.predictions import Precondition, Prediction
from simlab.sweep.space import Axis, Cell, Distribution
from simlab.sweep.spec import (
    SHORT,
    Name,
    Objective,
    PrunerSpec,
    Setting,
    Settings,
    SweepSpec,
    Variant,
    key_paths,
)

_KEY_PATH = {short: path for path, short in SHORT.items()}
"""An old spelling -> the key path a spec writes now (``preset`` -> ``task.preset``)."""
RESERVED = ("seed", labels.VARIANT_KEY)
"""Optuna parameter names the runner uses itself."""
Grid = Annotated[
    list[Setting], Field(min_length=1),
    Says("give at least one value: finite numbers, strings, booleans or lists of them"),
]
"""A grid axis: the values to try."""


class SpecFile(BaseModel):
    """A spec file as written: its keys, in the order they are checked."""

    model_config = TABLE
    name: Name | None = None
    """Study and experiment name (default: the file's stem)."""
    description: str = ""
    sampler: Literal["grid", "tpe"] = "grid"
    seeds: Annotated[list[Seed], Field(min_length=1)]
    n_trials: Annotated[int, Field(ge=1, le=COUNT_MAX)] | None = None
    base: Settings = Field(default_factory=dict)
    """Key path -> value every trial starts from."""
    space: Annotated[dict[str, Any], BeforeValidator(functools.partial(key_paths, ranges=True))] = Field(
        default_factory=dict
    )
    """Swept key paths: a grid list, or a ``{type = ...}`` range, each."""
    variants: list[Variant] = Field(default_factory=list)
    objective: Objective
    pruner: PrunerSpec = PrunerSpec()
    baseline: str | None = None
    findings: list[dict[str, Any]] = Field(default_factory=list)
    """Pre-registered finding rows (``sweeps/findings/``), read by ``simlab findings``
    (:mod:`simlab.analysis.replication.spec` validates them); the runner ignores them."""
    predictions: list[Prediction] = Field(default_factory=list)
    """Pre-registered predictions (:mod:`simlab.sweep.predictions`), read by the ledger; the runner ignores them."""
    preconditions: list[Precondition] = Field(default_factory=list)


def load_spec(path: Path | str) -> SweepSpec:
    """Read and validate a TOML spec file."""
    path = Path(path)
    return parse_spec(read_toml(path, "sweep spec", SpecError), default_name=path.stem)


def _bad(key: str, value: Any, allowed: str) -> SpecError:
    return SpecError.invalid(key, value, allowed)


def parse_spec(raw: Mapping[str, Any], *, default_name: str = "sweep") -> SweepSpec:
    """Validate a decoded TOML spec. Raises :class:`SpecError` naming the key and what is allowed.

    The file's own grammar first (:class:`SpecFile`, whose first error a user sees), then what
    involves several parts, in file order.
    """
    file: SpecFile = check_value("", dict(raw), SpecFile, SpecError)
    plan = _check_header(file)
    _check_settings("base", file.base)
    axes = tuple(_parse_axis(key, value, plan) for key, value in file.space.items())
    _check_variants(file.variants, file.space)
    if not axes and not file.variants:
        raise SpecError("`space` is empty and there are no `[[variants]]`; sweep at least one key")
    spec = SweepSpec(
        name=file.name or default_name, description=file.description, base=file.base, axes=axes,
        variants=tuple(file.variants), seeds=tuple(file.seeds), objective=file.objective, plan=plan,
        pruner=file.pruner,
    )
    _check_claims(file, spec)
    return _with_baseline(spec, file.baseline)


def load_claims(path: Path | str) -> tuple[str, list[Prediction], list[Precondition]]:
    """A spec's name, predictions and preconditions, the whole spec checked first (:func:`parse_spec`)."""
    path = Path(path)
    raw = read_toml(path, "sweep spec", SpecError)
    spec = parse_spec(raw, default_name=path.stem)
    file: SpecFile = check_value("", dict(raw), SpecFile, SpecError)
    return spec.name, file.predictions, file.preconditions


def _check_claims(file: SpecFile, spec: SweepSpec) -> None:
    """Each claim's arms are arms of the spec: a variant's name, or (on a grid) a cell's label, as its runs
    carry it (``train.estimator=gae_segment_local,variant=k8``)."""
    names = [v.name for v in file.variants]
    cells = [labels.label(point) for point in spec.grid_points()] if spec.sampler == "grid" else []
    ways = ([f"one of the spec's variants {names}"] if names else []) + (
        [f"a grid cell's label, such as {cells[0]!r}"] if cells else [])
    allowed = "choose " + " or ".join(ways) if ways else "the spec has no variant or grid cell to name"
    for kind, claims in (("predictions", file.predictions), ("preconditions", file.preconditions)):
        for i, claim in enumerate(claims):
            for key, arm in (("arm", claim.arm), ("versus", claim.versus)):
                if arm is not None and arm not in names and arm not in cells:
                    raise _bad(f"{kind}[{i}].{key}", arm, allowed)


def _check_header(file: SpecFile) -> Plan:
    """Seeds listed once; the sampler's plan (``n_trials`` exactly when the sampler is ``tpe``)."""
    dupes = sorted(s for s, n in Counter(file.seeds).items() if n > 1)  # linear: 120,000 seeds took 60 s
    if dupes:
        raise _bad("seeds", file.seeds, f"list each seed once (repeated: {dupes})")
    return PLANS[file.sampler].parse(file.n_trials)


def _check_settings(where: str, settings: Mapping[str, Any]) -> None:
    """Settings of the base or a variant: config key paths (not the reserved names), registered if named."""
    for key, value in settings.items():
        if key in RESERVED:
            raise SpecError(f"`{where}.{key}` is reserved; seeds go under `seeds`")
        _check_spelling(f"{where}.{key}", key)
        _check_registered(f"{where}.{key}", key, [value])


def _check_spelling(shown: str, key: str) -> None:
    """A key a spec spelt otherwise before it used the run config's key paths gets the one to write."""
    new = _KEY_PATH.get(key)
    if new is not None:
        raise SpecError(f"`{shown}` is not a config key path; write `{new}` (a spec spells each setting as "
                        "--set does)")
    if key.startswith("overrides.") and shown.startswith("base."):
        raise SpecError(f"`{shown}` is not a config key path; `[base.overrides]` is now `[base]`: write "
                        f"`{key.removeprefix('overrides.')}` there")


def _check_registered(shown: str, key: str, values: list[Any]) -> None:
    """Values of a config leaf that names a registered component (an estimator, a normaliser, a lambda
    reading) are registered names."""
    from simlab.credit import ESTIMATORS, LAMBDA_READINGS, NORMALISERS

    registries: dict[str, Registry[Any]] = {"estimator": ESTIMATORS, "normaliser": NORMALISERS, "lam": LAMBDA_READINGS}
    leaf = key.rsplit(".", 1)[-1]
    registry = registries.get(leaf)
    if leaf == "lam":  # a number or the name of a lambda reading
        values = [v for v in values if isinstance(v, str)]
    if registry is None:
        return
    for v in values:
        if v not in registry:
            raise _bad(shown, values if len(values) > 1 else v, f"choose one of {registry.choices()}")


def _parse_axis(key: str, value: Any, plan: Plan) -> Axis:
    shown = f"space.{key}"
    if key in RESERVED:
        raise SpecError(f"`{shown}` is reserved; list seeds under `seeds` and bundles under `[[variants]]`")
    _check_spelling(shown, key)
    if isinstance(value, dict):
        dist: Distribution = check_value(shown, value, Distribution, SpecError)
        plan.check_axis(shown, value)
        if dist.kind == "categorical":
            _check_registered(f"{shown}.choices", key, dist.choices)
        return Axis(key, dist=dist)
    if not isinstance(value, list):
        raise _bad(shown, value, "give a list of values (grid) or a table {type = 'float'|'int'|'categorical', ...}")
    check_value(shown, value, Grid, SpecError)
    if len({json.dumps(v) for v in value}) != len(value):
        raise _bad(shown, value, "list each grid value once")
    _check_registered(shown, key, value)
    return Axis(key, grid=tuple(value))


def _check_variants(variants: list[Variant], space: Mapping[str, Any]) -> None:
    """Distinct names; a variant's settings neither reserved nor swept in ``space``. Linear in the variants."""
    named: set[str] = set()
    for i, variant in enumerate(variants):
        where = f"variants[{i}]"
        if variant.name in named:
            raise _bad(f"{where}.name", variant.name, "give each variant a distinct name")
        named.add(variant.name)
        for key in variant.settings:
            if key in space:
                raise SpecError(f"`{where}.set.{key}` is also swept in `space.{key}`; keep it in one place")
        _check_settings(f"{where}.set", variant.settings)


def _with_baseline(spec: SweepSpec, baseline: Any) -> SweepSpec:
    if baseline is None:
        return spec
    spec.plan.check_baseline(baseline)
    known = [Cell(point, spec.seeds[0]).variant for point in spec.grid_points()]
    if baseline not in known:
        respelt = labels.respelt(str(baseline), known)
        raise _bad("baseline", baseline, f"write {respelt!r} ({labels.LEAF_KEYS})" if respelt else
                   f"choose one of the grid's variants: {', '.join(map(repr, known))}")
    return replace(spec, baseline=baseline)
