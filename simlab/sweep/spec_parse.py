"""Reading a sweep spec: TOML in, a :class:`~simlab.sweep.spec.SweepSpec` out, every check in :func:`parse_spec`.

The spec's grammar (its keys, samplers, distribution types, pruners, reserved names) is declared here.
A bad spec raises :class:`~simlab.errors.SpecError`, whose message names the key and what is allowed,
before anything is written to either store.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from simlab.errors import SpecError
from simlab.registry import Registry
from simlab.rules import COUNT_MAX, SEED_MAX
from simlab.schema import flatten, read_toml
from simlab.sweep.spec import Axis, Base, Cell, Distribution, Objective, PrunerSpec, SweepSpec, Variant

TOP_KEYS = (
    "name",
    "description",
    "seeds",
    "sampler",
    "n_trials",
    "base",
    "space",
    "variants",
    "objective",
    "pruner",
    "baseline",
    "findings",
)
"""Top-level keys of a spec. ``findings`` (pre-registered finding rows, ``sweeps/findings/``) is read by
``simlab findings`` (:mod:`simlab.analysis.findings`, which validates it); the runner ignores it."""
BASE_KEYS = ("preset", "recipe", "overrides")
SAMPLERS = ("grid", "tpe")
DIRECTIONS = ("maximize", "minimize")
DIST_TYPES = ("float", "int", "categorical")
PRUNERS = ("median", "percentile", "nop")
TOP_LEVEL_SETTINGS = ("preset", "recipe")
"""Space keys that are not config key paths: the task preset and the recipe preset."""
RESERVED = ("seed", "variant")
"""Optuna parameter names the runner uses itself."""
SCALAR = (str, int, float, bool)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _name_registries() -> dict[str, Registry[Any]]:
    """Config leaf names whose values must be registered component names."""
    from simlab.credit import ESTIMATORS, NORMALISERS

    return {"estimator": ESTIMATORS, "normaliser": NORMALISERS}


def load_spec(path: Path | str) -> SweepSpec:
    """Read and validate a TOML spec file."""
    path = Path(path)
    return parse_spec(read_toml(path, "sweep spec", SpecError), default_name=path.stem)


def _bad(key: str, value: Any, allowed: str) -> SpecError:
    return SpecError.invalid(key, value, allowed)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


def _check_keys(where: str, table: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    for key in table:
        if key not in allowed:
            raise SpecError(
                f"`{where}{key}` is not a spec key; choose one of {', '.join(map(repr, allowed))}"
            )


def _key_paths(where: str, table: Any, *, dist_ok: bool) -> dict[str, Any]:
    """The table under ``where`` as key paths (TOML dotted keys nest; :func:`simlab.schema.flatten`),
    stopping at lists and, where distributions are allowed, at ``{type = ...}`` tables."""
    if not isinstance(table, dict):
        raise _bad(where, table, "give a table of key path = value")
    return flatten(table, leaf=(lambda t: "type" in t) if dist_ok else None)


def _check_value(where: str, key: str, value: Any) -> None:
    """A setting's value: a scalar (or a list of scalars, e.g. a (min, max) pair), registered if named."""
    ok = isinstance(value, SCALAR) or (isinstance(value, list) and all(isinstance(v, SCALAR) for v in value))
    if not ok or (isinstance(value, float) and not math.isfinite(value)):
        raise _bad(f"{where}.{key}", value, "give a finite number, a string, a boolean or a list of them")
    _check_registered(f"{where}.{key}", key, [value])


def _check_registered(shown: str, key: str, values: list[Any]) -> None:
    leaf = key.rsplit(".", 1)[-1]
    registry = _name_registries().get(leaf)
    if leaf == "lam":  # a number or the name of a lambda reading
        from simlab.credit import LAMBDA_READINGS

        registry = LAMBDA_READINGS
        values = [v for v in values if isinstance(v, str)]
    if registry is None:
        return
    for v in values:
        if v not in registry:
            raise _bad(shown, values if len(values) > 1 else v, f"choose one of {registry.choices()}")


def _parse_distribution(where: str, key: str, raw: dict[str, Any]) -> Distribution:
    shown = f"{where}.{key}"
    kind = raw.get("type")
    if kind not in DIST_TYPES:
        raise _bad(f"{shown}.type", kind, f"choose one of {', '.join(map(repr, DIST_TYPES))}")
    if kind == "categorical":
        _check_keys(f"{shown}.", raw, ("type", "choices"))
        choices = raw.get("choices")
        if not isinstance(choices, list) or not choices or not all(isinstance(c, SCALAR) for c in choices):
            raise _bad(f"{shown}.choices", choices, "give a non-empty list of numbers, strings or booleans")
        if len(set(map(repr, choices))) != len(choices):
            raise _bad(f"{shown}.choices", choices, "list each choice once")
        _check_registered(f"{shown}.choices", key, choices)
        return Distribution(kind, choices=tuple(choices))
    _check_keys(f"{shown}.", raw, ("type", "low", "high", "log", "step"))
    check = _is_int if kind == "int" else _is_num
    what = "an integer" if kind == "int" else "a finite number"
    low: Any = raw.get("low")
    high: Any = raw.get("high")
    if not check(low):
        raise _bad(f"{shown}.low", low, f"give {what}")
    if not check(high) or high <= low:
        raise _bad(f"{shown}.high", high, f"give {what} greater than low={low!r}")
    log = raw.get("log", False)
    if not isinstance(log, bool):
        raise _bad(f"{shown}.log", log, "choose true or false")
    if log and low <= 0:
        raise _bad(f"{shown}.low", low, "a log-scale range needs low > 0")
    step = raw.get("step")
    if step is not None and (not check(step) or step <= 0 or log):
        raise _bad(f"{shown}.step", step, f"give {what} > 0, and no step with log = true")
    return Distribution(kind, low=low, high=high, log=log, step=step)


def _parse_axis(key: str, value: Any, sampler: str) -> Axis:
    shown = f"space.{key}"
    if key in RESERVED:
        raise SpecError(f"`{shown}` is reserved; list seeds under `seeds` and bundles under `[[variants]]`")
    if isinstance(value, list):
        if not value:
            raise _bad(shown, value, "a grid needs at least one value")
        for item in value:
            ok = isinstance(item, SCALAR) or (
                isinstance(item, list) and all(isinstance(v, SCALAR) for v in item)
            )
            if not ok or (isinstance(item, float) and not math.isfinite(item)):
                raise _bad(shown, value, "grid values are finite numbers, strings, booleans or lists of them")
        if len({json.dumps(v) for v in value}) != len(value):
            raise _bad(shown, value, "list each grid value once")
        _check_registered(shown, key, value)
        return Axis(key, grid=tuple(value))
    if isinstance(value, dict):
        dist = _parse_distribution("space", key, value)
        if sampler == "grid":
            raise _bad(
                shown, value, "sampler 'grid' needs a list of values; use sampler = 'tpe' for distributions"
            )
        return Axis(key, dist=dist)
    raise _bad(
        shown, value, "give a list of values (grid) or a table {type = 'float'|'int'|'categorical', ...}"
    )


def parse_spec(raw: Mapping[str, Any], *, default_name: str = "sweep") -> SweepSpec:
    """Validate a decoded TOML spec. Raises :class:`SpecError` naming the key and what is allowed.

    The parts are checked in file order (name, sampler, seeds, base, space, variants, objective,
    pruner, baseline), so the first error a user sees is the first bad entry.
    """
    _check_keys("", raw, TOP_KEYS)
    name, description, sampler, seeds, n_trials = _parse_header(raw, default_name)
    base = _parse_base(raw.get("base", {}))
    space_flat = _key_paths("space", raw.get("space", {}), dist_ok=True)
    axes = tuple(_parse_axis(key, value, sampler) for key, value in space_flat.items())
    variants = _parse_variants(raw.get("variants", []), space_flat)
    if not axes and not variants:
        raise SpecError("`space` is empty and there are no `[[variants]]`; sweep at least one key")
    spec = SweepSpec(
        name=name,
        description=description,
        base=base,
        axes=axes,
        variants=variants,
        seeds=seeds,
        objective=_parse_objective(raw.get("objective")),
        sampler=sampler,
        pruner=_parse_pruner(raw.get("pruner", {"type": "nop"})),
        n_trials=n_trials,
    )
    return _with_baseline(spec, raw.get("baseline"))


def _parse_header(raw: Mapping[str, Any], default_name: str) -> tuple[str, str, str, tuple[int, ...], int | None]:
    """(name, description, sampler, seeds, n_trials)."""
    name = raw.get("name", default_name)
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise _bad("name", name, "give letters, digits, '_', '.' or '-'")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise _bad("description", description, "give a string")
    sampler = raw.get("sampler", "grid")
    if not isinstance(sampler, str) or sampler not in SAMPLERS:
        raise _bad("sampler", sampler, f"choose one of {', '.join(map(repr, SAMPLERS))}")
    seeds = raw.get("seeds")
    if not isinstance(seeds, list) or not seeds or not all(_is_int(s) and 0 <= s <= SEED_MAX for s in seeds):
        raise _bad("seeds", seeds, f"give a non-empty list of integers in [0, {SEED_MAX}]")
    dupes = sorted({s for s in seeds if seeds.count(s) > 1})
    if dupes:
        raise _bad("seeds", seeds, f"list each seed once (repeated: {dupes})")
    n_trials: Any = raw.get("n_trials")
    if sampler == "tpe":
        if not _is_int(n_trials) or not 1 <= n_trials <= COUNT_MAX:
            raise _bad("n_trials", n_trials, f"sampler 'tpe' needs an integer in [1, {COUNT_MAX}]")
    elif n_trials is not None:
        raise _bad("n_trials", n_trials, "sampler 'grid' runs every cell x seed; remove n_trials")
    return name, description, sampler, tuple(seeds), n_trials


def _parse_base(base_raw: Any) -> Base:
    if not isinstance(base_raw, dict):
        raise _bad("base", base_raw, "give a table with preset, recipe and overrides")
    _check_keys("base.", base_raw, BASE_KEYS)
    for key in ("preset", "recipe"):
        if key in base_raw and not isinstance(base_raw[key], str):
            raise _bad(f"base.{key}", base_raw[key], "give a preset name (string)")
    overrides = _key_paths("base.overrides", base_raw.get("overrides", {}), dist_ok=False)
    for key, value in overrides.items():
        if key in RESERVED or key in TOP_LEVEL_SETTINGS:
            raise SpecError(
                f"`base.overrides.{key}` is not a config key path; set it as `base.{key}` or `seeds`"
            )
        _check_value("base.overrides", key, value)
    return Base(preset=base_raw.get("preset"), recipe=base_raw.get("recipe"), overrides=overrides)


def _parse_variants(variants_raw: Any, space_flat: Mapping[str, Any]) -> tuple[Variant, ...]:
    if not isinstance(variants_raw, list):
        raise _bad("variants", variants_raw, "give an array of tables [[variants]] with name and set")
    variants: list[Variant] = []
    for i, item in enumerate(variants_raw):
        where = f"variants[{i}]"
        if not isinstance(item, dict):
            raise _bad(where, item, "give a table with name and set")
        _check_keys(f"{where}.", item, ("name", "set"))
        vname = item.get("name")
        if not isinstance(vname, str) or not NAME_RE.match(vname):
            raise _bad(f"{where}.name", vname, "give letters, digits, '_', '.' or '-'")
        if any(v.name == vname for v in variants):
            raise _bad(f"{where}.name", vname, "give each variant a distinct name")
        settings = _key_paths(f"{where}.set", item.get("set", {}), dist_ok=False)
        for key, value in settings.items():
            if key in RESERVED:
                raise SpecError(f"`{where}.set.{key}` is reserved; seeds go under `seeds`")
            if key in space_flat:
                raise SpecError(f"`{where}.set.{key}` is also swept in `space.{key}`; keep it in one place")
            _check_value(f"{where}.set", key, value)
        variants.append(Variant(vname, settings))
    return tuple(variants)


def _parse_objective(obj_raw: Any) -> Objective:
    if not isinstance(obj_raw, dict):
        raise _bad("objective", obj_raw, "give a table {metric = '...', direction = 'maximize'|'minimize'}")
    _check_keys("objective.", obj_raw, ("metric", "direction"))
    metric = obj_raw.get("metric")
    if not isinstance(metric, str) or not metric:
        raise _bad("objective.metric", metric, "give the name of a metric the trial returns")
    direction = obj_raw.get("direction", "maximize")
    if not isinstance(direction, str) or direction not in DIRECTIONS:
        raise _bad("objective.direction", direction, f"choose one of {', '.join(map(repr, DIRECTIONS))}")
    return Objective(metric, direction)


def _parse_pruner(pr_raw: Any) -> PrunerSpec:
    if not isinstance(pr_raw, dict):
        raise _bad("pruner", pr_raw, "give a table {type = 'median'|'percentile'|'nop', ...}")
    _check_keys("pruner.", pr_raw, ("type", "n_startup_trials", "n_warmup_steps", "percentile"))
    kind = pr_raw.get("type", "nop")
    if not isinstance(kind, str) or kind not in PRUNERS:
        raise _bad("pruner.type", kind, f"choose one of {', '.join(map(repr, PRUNERS))}")
    for key in ("n_startup_trials", "n_warmup_steps"):
        if key in pr_raw and not (_is_int(pr_raw[key]) and 0 <= pr_raw[key] <= COUNT_MAX):
            raise _bad(f"pruner.{key}", pr_raw[key], f"give an integer in [0, {COUNT_MAX}]")
    pct = pr_raw.get("percentile", 25.0)
    if not _is_num(pct) or not 0 < pct < 100:
        raise _bad("pruner.percentile", pct, "give a number in (0, 100)")
    return PrunerSpec(kind, pr_raw.get("n_startup_trials", 5), pr_raw.get("n_warmup_steps", 0), float(pct))


def _with_baseline(spec: SweepSpec, baseline: Any) -> SweepSpec:
    if baseline is None:
        return spec
    if spec.sampler != "grid":
        raise _bad("baseline", baseline, "a baseline needs `sampler = 'grid'` (a tpe sweep has no fixed cells)")
    known = [Cell(point, spec.seeds[0]).variant for point in spec.grid_points()]
    if baseline not in known:
        raise _bad("baseline", baseline, f"choose one of the grid's variants: {', '.join(map(repr, known))}")
    return replace(spec, baseline=baseline)
