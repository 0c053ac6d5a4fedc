"""The pre-registered findings rows: one spec file's ``[[findings]]`` tables, validated, and what it varied.

Owns the row format (:class:`FindingRow`, its keys, statistics, kinds and arms), its validation with errors
that name the file, the key path and the bad value, and a spec's :class:`Design` (what its seeds varied,
the held-out set behind its rates). Measuring and judging the rows is :mod:`simlab.analysis.findings`.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simlab.analysis import outcomes
from simlab.analysis.findings_data import REDUCES
from simlab.errors import ConfigError, FindingsError

STATISTICS = (*outcomes.STATISTICS, "slope")
ARMS = ("treatment", "baseline", "control_treatment", "control_baseline")
KINDS = ("credit finding", "serving finding", "harness check")
"""What a row is: a credit-assignment finding, a finding about serving a compaction-trained policy, or a
check that holds by how the task or harness is built (counted as a check, never as a reproduced finding)."""
CONTROL_EXPECTS = ("tie", "not-published-sign")
ROW_KEYS = (
    "id", "finding", "published", "source", "direction", "metric", "statistic", "x", "threshold", "margin",
    "kind", "mechanism", "note", "control_expect", "control_vacuous", "dose", "dose_label", "control_dose",
    "superseded_by", *ARMS,
)


# ------------------------------------------------------------------------------------------- specs
@dataclass(frozen=True)
class Mechanism:
    """A mechanism metric reported beside a finding's outcome, reduced over each run's steps."""

    metric: str
    reduce: str
    """``final``, ``first`` or ``mean`` over the run's logged steps."""
    label: str


@dataclass(frozen=True)
class FindingRow:
    """One pre-registered finding: which arms of which sweep, what was published, what to measure."""

    id: str
    finding: str
    spec: str
    """The sweep (experiment) name."""
    spec_path: Path
    metric: str
    arms: dict[str, dict[str, tuple[str, ...]]]
    """Arm name -> {setting: allowed values}; a run belongs to an arm when every setting matches."""
    published: float | None = None
    source: str = ""
    direction: float | None = None
    """The sign to reproduce when no published delta is given (row 7's cost claim)."""
    statistic: str = "final"
    """``final``: the metric's last value per run; ``auc``: the normalised area under its curve; ``steps_to``:
    the first step it reaches ``threshold``; ``slope``: per seed, the log-log slope of the metric against
    ``x`` across the arm's runs (one per variant)."""
    x: str | None = None
    threshold: float | None = None
    """``steps_to``'s level, in the metric's reported unit (points for rates)."""
    margin: float | None = None
    """The TOST's equivalence margin; default half the published delta."""
    kind: str = "credit finding"
    mechanism: tuple[Mechanism, ...] = field(default_factory=tuple)
    note: str = ""
    """What a reader must know beside the verdict (added after a run: say when and why)."""
    control_expect: str = "tie"
    """``tie``: the control must be a tie. ``not-published-sign``: it must not differ in the published
    direction at 2 sigma (for a finding whose control is expected to move the other way)."""
    control_vacuous: str = ""
    """Why the control cannot show the mechanism absent (a control that learned nothing controls nothing);
    such a row is never reproduced."""
    dose: float | None = None
    """Where the row sits on its campaign's dose axis (the coupling, G, K, the overlong rate): the rows of
    one spec with a dose form a dose-response curve."""
    dose_label: str = ""
    """The dose axis, e.g. "coupling c"."""
    control_dose: float | None = None
    """The dose at which the mechanism is absent (the control's)."""
    superseded_by: str = ""
    """The rows of a later design that replace this one (the row stays, with its numbers)."""

    @property
    def sign(self) -> float | None:
        """The sign the finding must reproduce: the published delta's, else ``direction``'s; ``None`` if neither."""
        ref = self.published if self.published is not None else self.direction
        return None if ref is None or ref == 0 else math.copysign(1.0, ref)

    @property
    def equivalence_margin(self) -> float | None:
        """The margin a tie is decided within: ``margin``, else half the published delta."""
        if self.margin is not None:
            return self.margin
        return None if self.published is None else abs(self.published) / 2

    def metrics(self) -> set[str]:
        """Every metric the row reads: the outcome, the mechanism metrics and the slope's ``x``."""
        return {self.metric, *(m.metric for m in self.mechanism), *([self.x] if self.x else [])}


def _bad(path: Path, key: str, value: Any, allowed: str) -> FindingsError:
    return FindingsError(f"{path.name}: `{key}={value!r}` is invalid; {allowed}")


def _selector(path: Path, key: str, raw: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(raw, Mapping) or not raw:
        raise _bad(path, key, raw, "give a table of variant settings, e.g. { preset = \"peekread-neg\" }")
    return {str(name): tuple(_text(v) for v in (value if isinstance(value, list) else [value]))
            for name, value in raw.items()}


def _text(value: Any) -> str:
    """A setting as the variant label prints it, lower-cased for booleans (labels print Python's True)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _mechanism(path: Path, where: str, raw: Any) -> tuple[Mechanism, ...]:
    if not isinstance(raw, list):
        raise _bad(path, where, raw, "give a list of { metric, reduce, label } tables")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("metric"), str):
            raise _bad(path, f"{where}[{i}]", item, "give a table with a metric name")
        reduce = item.get("reduce", "mean")
        if reduce not in REDUCES:
            raise _bad(path, f"{where}[{i}].reduce", reduce, f"choose one of {REDUCES}")
        out.append(Mechanism(item["metric"], reduce, str(item.get("label", item["metric"]))))
    return tuple(out)


def _choice(path: Path, key: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise _bad(path, key, value, f"choose one of {allowed}")
    return str(value)


def _number(path: Path, key: str, value: Any, positive: bool = False) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or (positive and not value > 0):
        raise _bad(path, key, value, "give a number > 0" if positive else "give a number")
    return float(value)


def parse_rows(path: Path) -> list[FindingRow]:
    """The ``[[findings]]`` rows of one spec file, validated."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FindingsError(f"{path}: cannot read the spec ({exc})") from None
    rows = raw.get("findings", [])
    if not isinstance(rows, list):
        raise _bad(path, "findings", rows, "give an array of tables [[findings]]")
    return [_parse_row(path, str(raw.get("name", path.stem)), f"findings[{i}]", row) for i, row in enumerate(rows)]


def _parse_row(path: Path, spec: str, where: str, row: Mapping[str, Any]) -> FindingRow:
    unknown = sorted(set(row) - set(ROW_KEYS))
    if unknown:
        raise _bad(path, f"{where}.{unknown[0]}", row[unknown[0]], f"choose keys among {ROW_KEYS}")
    for key in ("id", "finding", "metric"):
        if not isinstance(row.get(key), str):
            raise _bad(path, f"{where}.{key}", row.get(key), "give a string")
    statistic = _choice(path, f"{where}.statistic", row.get("statistic", "final"), STATISTICS)
    if statistic == "slope" and not isinstance(row.get("x"), str):
        raise _bad(path, f"{where}.x", row.get("x"), "a slope needs the metric it is taken against")
    threshold = _number(path, f"{where}.threshold", row.get("threshold"))
    if statistic == "steps_to" and threshold is None:
        raise _bad(path, f"{where}.threshold", None, "steps_to needs the level to reach, in points")
    return FindingRow(
        id=row["id"], finding=row["finding"], spec=spec, spec_path=path, metric=row["metric"],
        arms={arm: _selector(path, f"{where}.{arm}", row.get(arm)) for arm in ARMS},
        published=_number(path, f"{where}.published", row.get("published")), source=str(row.get("source", "")),
        direction=_number(path, f"{where}.direction", row.get("direction")), statistic=statistic, x=row.get("x"),
        threshold=threshold, margin=_number(path, f"{where}.margin", row.get("margin"), positive=True),
        kind=_choice(path, f"{where}.kind", row.get("kind", "credit finding"), KINDS), note=str(row.get("note", "")),
        control_expect=_choice(path, f"{where}.control_expect", row.get("control_expect", "tie"), CONTROL_EXPECTS),
        control_vacuous=str(row.get("control_vacuous", "")),
        dose=_number(path, f"{where}.dose", row.get("dose")), dose_label=str(row.get("dose_label", "")),
        control_dose=_number(path, f"{where}.control_dose", row.get("control_dose")),
        superseded_by=str(row.get("superseded_by", "")),
        mechanism=_mechanism(path, f"{where}.mechanism", row.get("mechanism", [])),
    )


# ----------------------------------------------------------------------------- what a spec varied
@dataclass(frozen=True)
class Design:
    """What a findings sweep's seeds varied, and the held-out set behind each run's rates."""

    episodes: int | None
    """The fewest ``eval.episodes`` over the spec's grid points; ``None`` when the spec does not resolve."""
    base_fixed: bool
    """Every seed started from one base model (``base.seed`` an integer)."""
    eval_fixed: bool
    """Every seed played one held-out set (``eval.seed`` an integer)."""

    @property
    def conditional(self) -> str:
        """"" when seeds vary both, else what the row's statistics are conditional on."""
        fixed = [w for w, f in (("one base model", self.base_fixed), ("one held-out set", self.eval_fixed)) if f]
        return f"conditional on {' and '.join(fixed)}" if fixed else ""

    @property
    def seeds_vary(self) -> str:
        """What differs between seeds, e.g. "base model, held-out set, RL sampling"."""
        vary = [w for w, f in (("base model", self.base_fixed), ("held-out set", self.eval_fixed)) if not f]
        return ", ".join([*vary, "RL sampling"])


def design(row: FindingRow) -> Design:
    """The row's spec resolved (:func:`_spec_design`); a spec that does not resolve is taken as holding both
    fixed, the conservative reading."""
    try:
        return _spec_design(row.spec_path.read_text(encoding="utf-8"))
    except OSError:
        return Design(None, True, True)


@functools.cache
def _spec_design(text: str) -> Design:
    """The design of a spec, keyed by its text (rows of one spec share it)."""
    from simlab.sweep.backend import DEFAULT_BACKEND, load_backend
    from simlab.sweep.spec_parse import parse_spec

    try:
        spec, backend = parse_spec(tomllib.loads(text)), load_backend(DEFAULT_BACKEND)
        cfgs = [backend.build(spec.settings(p), 0) for p in spec.grid_points()]
    except (ConfigError, tomllib.TOMLDecodeError):  # a TOML, config or spec error (TrialBackend.build's contract)
        return Design(None, True, True)
    return Design(min(int(c.eval.episodes) for c in cfgs), any(c.base.seed != "run" for c in cfgs),
                  any(c.eval.seed != "run" for c in cfgs))
