"""The pre-registered findings rows: one spec file's ``[[findings]]`` tables, validated, and what it varied.

Owns the row format (:class:`FindingRow`, its keys, statistics, kinds and arms), its validation with errors
that name the file, the key path and the bad value, and a spec's :class:`Design` (what its seeds varied,
the held-out set behind its rates). Measuring and judging the rows is :mod:`simlab.analysis.replication.table`.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, Strict, model_validator

from simlab import names
from simlab.analysis.replication.data import REDUCES
from simlab.analysis.statistics import outcomes
from simlab.analysis.statistics.power import SUCCESS_LEVEL, success_level_ok
from simlab.errors import ConfigError, FindingsError
from simlab.refusals import choices_text
from simlab.rules import TABLE, Names, Real, Says, check_value, refuse
from simlab.schema import flatten, read_toml

if TYPE_CHECKING:
    from simlab.config import RunConfig
    from simlab.sweep.spec import SweepSpec

STATISTICS = (*outcomes.STATISTICS, "slope")
ARMS = ("treatment", "baseline", "control_treatment", "control_baseline")
KINDS = ("credit finding", "serving finding", "harness check")
"""What a row is: a credit-assignment finding, a finding about serving a compaction-trained policy, or a
check that holds by how the task or harness is built (counted as a check, never as a reproduced finding)."""
CONTROL_EXPECTS = ("tie", "not-published-sign")


# ------------------------------------------------------------------------------------------- specs
def _text(value: Any) -> str:
    """A setting as the variant label prints it, lower-cased for booleans (labels print Python's True)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _selector(raw: Any) -> Any:
    """An arm's table by key path (TOML's dotted keys nest: ``{ task.preset = ... }`` is flattened), each
    setting's allowed values as label text (one value or a list of them)."""
    if not isinstance(raw, Mapping):
        return raw
    flat = flatten(raw)
    return {str(k): tuple(_text(v) for v in (vs if isinstance(vs, list) else [vs])) for k, vs in flat.items()}


Arm = Annotated[
    dict[str, tuple[str, ...]], BeforeValidator(_selector), Field(min_length=1),
    Says('give a table of variant settings by key path, e.g. { task.preset = "peekread-neg" }'),
]
"""Setting -> allowed values; a run belongs to the arm when every setting matches."""
Number = Annotated[Real, AfterValidator(float)]
"""A finite number, read as a float."""


def _logged(value: str, suffix: str) -> None:
    """Refuse a metric name simlab's trainer never logs (a typo or ""), as ``names.check_metric`` says."""
    try:
        names.check_metric("metric", value)
    except ConfigError as exc:
        raise refuse(exc.allowed or "choose a metric the trainer logs", suffix=suffix, value=value) from None


class Mechanism(BaseModel):
    """A mechanism metric reported beside a finding's outcome, reduced over each run's steps."""

    model_config = TABLE
    metric: str
    reduce: Annotated[str, Names(lambda: REDUCES)] = "mean"
    """``final``, ``first`` or ``mean`` over the run's logged steps."""
    label: str
    """How the table names it (default: the metric)."""

    @model_validator(mode="after")
    def _metric_logged(self) -> Self:
        _logged(self.metric, ".metric")
        return self

    @model_validator(mode="before")
    @classmethod
    def _label(cls, data: Any) -> Any:
        """The label defaults to the metric's name."""
        if isinstance(data, Mapping) and "label" not in data and "metric" in data:
            return {**data, "label": data["metric"]}
        return data


class FindingRow(BaseModel):
    """One pre-registered finding: which arms of which sweep, what was published, what to measure.

    Its keys are the ``[[findings]]`` table's; ``spec`` and ``spec_path`` are filled in by :func:`parse_rows`.
    """

    model_config = TABLE
    id: str
    finding: str
    spec: str
    """The sweep (experiment) name."""
    spec_path: Path
    metric: str
    treatment: Arm
    baseline: Arm
    control_treatment: Arm
    control_baseline: Arm
    published: Number | None = None
    source: str = ""
    direction: Number | None = None
    """The sign to reproduce when no published delta is given (row 7's cost claim)."""
    statistic: Annotated[str, Names(lambda: STATISTICS)] = "final"
    """``final``: the metric's last value per run; ``auc``: the normalised area under its curve; ``steps_to``:
    the first step it reaches ``threshold``; ``slope``: per seed, the log-log slope of the metric against
    ``x`` across the arm's runs (one per variant)."""
    x: str | None = None
    threshold: Number | None = None
    """``steps_to``'s level, in the metric's reported unit (points for rates)."""
    margin: Annotated[Real, Field(gt=0), AfterValidator(float)] | None = None
    """The TOST's equivalence margin; default half the published delta."""
    kind: Annotated[str, Names(lambda: KINDS)] = "credit finding"
    mechanism: Annotated[tuple[Mechanism, ...], Strict(False)] = ()
    """Read from a list of tables."""
    note: str = ""
    """What a reader must know beside the verdict (added after a run: say when and why)."""
    control_expect: Annotated[str, Names(lambda: CONTROL_EXPECTS)] = "tie"
    """``tie``: the control must be a tie. ``not-published-sign``: it must not differ in the published
    direction at 2 sigma (for a finding whose control is expected to move the other way)."""
    control_vacuous: str = ""
    """Why the control cannot show the mechanism absent (a control that learned nothing controls nothing);
    such a row is never reproduced."""
    control_by_construction: str = ""
    """Why the control's two arms are identical however the runs go (K = 1, no overlong rollout): such a
    control cannot show the mechanism absent, so it never decides a finding's direction on its own
    (a control measured identical on every seed counts as one too)."""
    dose: Number | None = None
    """Where the row sits on its campaign's dose axis (the coupling, G, K, the overlong rate): the rows of
    one spec with a dose form a dose-response curve."""
    dose_label: str = ""
    """The dose axis, e.g. "coupling c"."""
    control_dose: Number | None = None
    """The dose at which the mechanism is absent (the control's)."""
    superseded_by: str = ""
    """The rows of a later design that replace this one (the row stays, with its numbers)."""
    campaign: str = ""
    """The family of rows whose p-values are Holm-adjusted together (one campaign's credit and serving
    rows; checks are never in a family); default: the row's spec."""
    reruns: str = ""
    """The row whose runs this one shares or repeats (``2c100``): it is not independent evidence."""

    @model_validator(mode="after")
    def _statistic_needs(self) -> Self:
        """Metrics the trainer logs; a slope needs its ``x``; ``steps_to`` its threshold."""
        _logged(self.metric, ".metric")
        if self.x is not None:
            _logged(self.x, ".x")
        if self.statistic == "slope" and self.x is None:
            raise refuse("a slope needs the metric it is taken against", suffix=".x", value=None)
        if self.statistic == "steps_to" and self.threshold is None:
            raise refuse("steps_to needs the level to reach, in points", suffix=".threshold", value=None)
        if self.statistic == "steps_to" and self.threshold is not None and names.is_rate(self.metric) \
                and not success_level_ok(self.threshold):
            raise refuse(SUCCESS_LEVEL, suffix=".threshold", value=self.threshold)  # as report --threshold
        return self

    @property
    def arms(self) -> dict[str, dict[str, tuple[str, ...]]]:
        """Arm name -> {setting: allowed values}."""
        return {arm: getattr(self, arm) for arm in ARMS}

    @property
    def family(self) -> str:
        """The Holm family: ``campaign``, else the spec."""
        return self.campaign or self.spec

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


ROW_KEYS = tuple(key for key in FindingRow.model_fields if key not in ("spec", "spec_path"))
"""The keys a ``[[findings]]`` table takes: FindingRow's fields but the two :func:`parse_rows` fills in."""


def parse_rows(path: Path) -> list[FindingRow]:
    """The ``[[findings]]`` rows of one spec file, validated."""
    raw = read_toml(path, "findings spec", FindingsError)
    rows = raw.get("findings", [])
    if not isinstance(rows, list):
        raise FindingsError(f"{path.name}: {ConfigError.invalid('findings', rows, 'give an array of tables')}")
    spec = str(raw.get("name", path.stem))
    parsed = [_parse_row(path, spec, f"findings[{i}]", row) for i, row in enumerate(rows)]
    for row in parsed:
        check_curve(row)
    return parsed


def _parse_row(path: Path, spec: str, where: str, row: Any) -> FindingRow:
    try:
        if not isinstance(row, Mapping):
            raise FindingsError.invalid(where, row, f"give a table with keys {choices_text(ROW_KEYS)}")
        unknown = [key for key in row if key not in ROW_KEYS]
        if unknown:
            raise FindingsError.unknown(f"{where}.{unknown[0]}", ROW_KEYS)
        found: FindingRow = check_value(where, {**row, "spec": spec, "spec_path": path}, FindingRow, FindingsError)
        return found
    except FindingsError as err:
        raise FindingsError(f"{path.name}: {err}") from None


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
    evaluations: Mapping[str, int] = field(default_factory=dict)
    """The fewest evaluations any grid point logs, per evaluation prefix (``eval/compacted``,
    ``eval/single_window``); empty when the spec does not resolve."""

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
def _parsed(text: str) -> SweepSpec | None:
    """The sweep spec in ``text`` (cached: every row of a spec, and both readers below, share one parse);
    ``None`` for a spec that does not parse (its own check says why)."""
    from simlab.sweep.spec_parse import parse_spec

    try:
        return parse_spec(tomllib.loads(text))
    except (ConfigError, tomllib.TOMLDecodeError):
        return None


@functools.cache
def grid_variants(text: str) -> tuple[str, ...]:
    """The variant labels a grid spec runs (keyed by its text); empty for a sampled space or a spec that
    does not parse."""
    from simlab.sweep.space import Cell

    spec = _parsed(text)
    if spec is None or spec.sampler != "grid":
        return ()
    return tuple(Cell(p, 0).variant for p in spec.grid_points())


@functools.cache
def label_keys(text: str) -> tuple[str, ...]:
    """The keys a spec's (keyed by its text) variant labels carry: the key paths it sweeps, and ``variant``
    when it has ``[[variants]]``; empty for a spec that does not parse."""
    from simlab.sweep.labels import VARIANT_KEY

    spec = _parsed(text)
    if spec is None:
        return ()
    return tuple(axis.key for axis in spec.axes) + ((VARIANT_KEY,) if spec.variants else ())


@functools.cache
def _spec_design(text: str) -> Design:
    """The design of a spec, keyed by its text (rows of one spec share it)."""
    from simlab.sweep.backend import DEFAULT_BACKEND, load_backend
    from simlab.sweep.space import Cell

    spec = _parsed(text)
    if spec is None:
        return Design(None, True, True)
    try:
        backend = load_backend(DEFAULT_BACKEND)
        cfgs = [backend.config(spec, Cell(p, 0)) for p in spec.grid_points()]
    except ConfigError:  # a config or spec error (TrialBackend.build's contract)
        return Design(None, True, True)
    counts = [evaluations(c) for c in cfgs]
    return Design(min(int(c.eval.episodes) for c in cfgs), any(c.base.seed != "run" for c in cfgs),
                  any(c.eval.seed != "run" for c in cfgs), {k: min(n[k] for n in counts) for k in counts[0]})


def evaluations(cfg: RunConfig) -> dict[str, int]:
    """How many evaluations a run of ``cfg`` logs, per evaluation prefix: one at every ``eval.every``-th
    step and one after the last (the trainer's schedule); single-window ones only at the last unless
    ``eval.curve_single_window``."""
    steps = int(cfg.train.steps)
    points = len({*range(0, steps + 1, int(cfg.eval.every)), steps})
    single = (points if cfg.eval.curve_single_window else 1) if cfg.eval.single_window else 0
    return {names.EVAL_COMPACTED: points, names.EVAL_SINGLE_WINDOW: single}


CURVE_STATISTICS = ("auc", "steps_to")
"""Statistics read off a run's learning curve: they need at least two evaluations of the row's metric."""


def check_curve(row: FindingRow) -> None:
    """Refuse a row whose statistic reads a curve its design never logs (fewer than two evaluations)."""
    prefix = row.metric.rsplit("/", 1)[0]
    have = design(row).evaluations.get(prefix)
    if row.statistic in CURVE_STATISTICS and have is not None and have < 2:
        err = FindingsError.invalid(
            f"findings.{row.id}.statistic", row.statistic,
            f"its spec {row.spec!r} evaluates {row.metric} {have} time(s) per run, and a curve needs 2 or more; "
            "choose 'final' or give the spec more evaluations (eval.every, eval.curve_single_window)")
        raise FindingsError(f"{row.spec_path.name}: {err}")
