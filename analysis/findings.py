"""``simlab findings``: each published credit-assignment finding against simlab's controlled version of it.

The findings are pre-registered in the sweep specs under ``sweeps/findings/``: besides the sweep itself,
each spec carries ``[[findings]]`` rows that name the published delta, the outcome metric, and four arms
as selectors over the sweep's variants (treatment, baseline, and the control's two), with the mechanism
metrics to report beside the outcome. This module reads the finished sweeps, one row per finding:

- the difference treatment - baseline, paired by seed (:func:`simlab.analysis.stats.paired_difference`) when
  the arms share at least three seeds, else from the two arms' own SEs;
- the control's difference computed the same way;
- the mechanism metrics, treatment against baseline (mean over seeds);
- a verdict: *reproduced* (the published sign at >= 2 sigma, control a tie), *opposite* (the other sign
  at >= 2 sigma, control a tie), *control moved* (the control differs at >= 2 sigma too), or *tie*
  with its minimum detectable effect, *decided* when that is at most half the published delta.

Runs come from the live MLflow store, or from the per-trial exports committed under
``analysis/findings/`` (``simlab findings --export`` writes them), so the table survives the loss of
``mlruns/``. Both give the same per-run table: one row per finished trial with its variant settings,
its seed and, per metric, its final, first and mean value over the logged steps.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl

from simlab import names
from simlab.analysis import stats
from simlab.analysis.tables import markdown_table
from simlab.errors import FindingsError


def _spec_dir() -> Path:
    from simlab.sweep.shipped import shipped_dir

    shipped = shipped_dir()
    return (shipped if shipped is not None else Path("sweeps")) / "findings"


SPEC_DIR = _spec_dir()
"""Where the findings specs live: the checkout's ``sweeps/findings``, or ``simlab/specs/findings`` when installed."""
EXPORT_DIR = Path(__file__).resolve().parent / "findings"
"""Where the per-trial exports are committed."""
REDUCES = ("final", "first", "mean")
STATISTICS = ("final", "slope")
ARMS = ("treatment", "baseline", "control_treatment", "control_baseline")
ROUND = 9
"""Decimals an outcome is compared at (far below any difference a finding reports)."""
CONTROL_EXPECTS = ("tie", "not-published-sign")
ROW_KEYS = (
    "id", "finding", "published", "source", "direction", "metric", "statistic", "x", "mechanism", "note",
    "control_expect", *ARMS,
)
Verdict = Literal["reproduced", "opposite", "differs", "tie", "control moved", "not run"]


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
    """``final``: the metric's final value per run. ``slope``: per seed, the log-log slope of the metric
    against ``x`` across the arm's runs (one per variant)."""
    x: str | None = None
    mechanism: tuple[Mechanism, ...] = field(default_factory=tuple)
    note: str = ""
    """What a reader must know beside the verdict (added after a run: say when and why)."""
    control_expect: str = "tie"
    """``tie``: the control must not differ at 2 sigma. ``not-published-sign``: it must not differ in the
    published direction at 2 sigma (for a finding whose control is expected to move the other way)."""

    @property
    def sign(self) -> float | None:
        """The sign the finding must reproduce: the published delta's, else ``direction``'s; ``None`` if neither."""
        ref = self.published if self.published is not None else self.direction
        return None if ref is None or ref == 0 else math.copysign(1.0, ref)

    def metrics(self) -> set[str]:
        """Every metric the row reads: the outcome, the mechanism metrics and the slope's ``x``."""
        return {self.metric, *(m.metric for m in self.mechanism), *([self.x] if self.x else [])}


def _bad(path: Path, key: str, value: Any, allowed: str) -> FindingsError:
    return FindingsError(f"{path.name}: `{key}={value!r}` is invalid; {allowed}")


def _selector(path: Path, key: str, raw: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(raw, Mapping) or not raw:
        raise _bad(path, key, raw, "give a table of variant settings, e.g. { preset = \"peekread-neg\" }")
    out = {}
    for name, value in raw.items():
        values = value if isinstance(value, list) else [value]
        out[str(name)] = tuple(_text(v) for v in values)
    return out


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


def _control_expect(path: Path, key: str, value: Any) -> str:
    if value not in CONTROL_EXPECTS:
        raise _bad(path, key, value, f"choose one of {CONTROL_EXPECTS}")
    return str(value)


def parse_rows(path: Path) -> list[FindingRow]:
    """The ``[[findings]]`` rows of one spec file, validated."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FindingsError(f"{path}: cannot read the spec ({exc})") from None
    spec = str(raw.get("name", path.stem))
    rows = raw.get("findings", [])
    if not isinstance(rows, list):
        raise _bad(path, "findings", rows, "give an array of tables [[findings]]")
    out = []
    for i, row in enumerate(rows):
        where = f"findings[{i}]"
        unknown = sorted(set(row) - set(ROW_KEYS))
        if unknown:
            raise _bad(path, f"{where}.{unknown[0]}", row[unknown[0]], f"choose keys among {ROW_KEYS}")
        for key in ("id", "finding", "metric"):
            if not isinstance(row.get(key), str):
                raise _bad(path, f"{where}.{key}", row.get(key), "give a string")
        statistic = row.get("statistic", "final")
        if statistic not in STATISTICS:
            raise _bad(path, f"{where}.statistic", statistic, f"choose one of {STATISTICS}")
        if statistic == "slope" and not isinstance(row.get("x"), str):
            raise _bad(path, f"{where}.x", row.get("x"), "a slope needs the metric it is taken against")
        for key in ("published", "direction"):
            if key in row and not (isinstance(row[key], int | float) and not isinstance(row[key], bool)):
                raise _bad(path, f"{where}.{key}", row[key], "give a number")
        out.append(FindingRow(
            id=row["id"], finding=row["finding"], spec=spec, spec_path=path, metric=row["metric"],
            arms={arm: _selector(path, f"{where}.{arm}", row.get(arm)) for arm in ARMS},
            published=row.get("published"), source=str(row.get("source", "")), direction=row.get("direction"),
            statistic=statistic, x=row.get("x"), note=str(row.get("note", "")),
            control_expect=_control_expect(path, f"{where}.control_expect", row.get("control_expect", "tie")),
            mechanism=_mechanism(path, f"{where}.mechanism", row.get("mechanism", [])),
        ))
    return out


def load_rows(folder: Path = SPEC_DIR) -> list[FindingRow]:
    """Every findings row of every spec in ``folder``, in file order."""
    paths = sorted(folder.glob("*.toml"))
    if not paths:
        raise FindingsError(f"no findings specs in {folder}")
    rows = [row for path in paths for row in parse_rows(path)]
    return sorted(rows, key=lambda r: (int("".join(c for c in r.id if c.isdigit()) or 0), r.id))


# ------------------------------------------------------------------------------------ per-run tables
def column(metric: str, reduce: str) -> str:
    """The per-run table's column for ``metric`` reduced over steps by ``reduce``."""
    return f"{reduce}:{metric}"


def runs_from_histories(runs: Sequence[Mapping[str, Any]], histories: Mapping[str, Mapping[str, list[float]]],
                        metrics: set[str]) -> pl.DataFrame:
    """One row per finished trial: run_id, variant, seed, and final / first / mean of every metric.

    ``runs``: dicts with run_id, status, variant, seed; ``histories``: run_id -> metric -> values in step
    order (NaN steps dropped). Unfinished runs and runs without a variant are left out.
    """
    rows = []
    for run in runs:
        if run.get("status") != "FINISHED" or not run.get("variant"):
            continue
        row: dict[str, Any] = {"run_id": run["run_id"], "variant": run["variant"], "seed": int(run["seed"])}
        for metric in sorted(metrics):
            values = [v for v in histories.get(run["run_id"], {}).get(metric, []) if not math.isnan(v)]
            row[column(metric, "final")] = values[-1] if values else None
            row[column(metric, "first")] = values[0] if values else None
            row[column(metric, "mean")] = float(np.mean(values)) if values else None
        rows.append(row)
    schema: dict[str, Any] = {"run_id": pl.String, "variant": pl.String, "seed": pl.Int64}
    schema |= {column(m, r): pl.Float64 for m in sorted(metrics) for r in REDUCES}
    return pl.DataFrame(rows, schema=schema)


def live_runs(experiment: str, metrics: set[str], tracking_uri: str | None = None) -> pl.DataFrame | None:
    """The per-run table of a sweep from the MLflow store; ``None`` when the store has no such experiment."""
    from simlab import tracking

    store = tracking.resolve_store(tracking_uri)
    db = tracking.sqlite_path(store.tracking_uri)
    if db is not None and not db.is_file():  # reading must not create an empty store
        return None
    fetched = tracking.fetch_runs(store, experiment)
    if fetched is None:
        return None
    _, records = fetched
    trials = [r for r in records if r["tags"].get(names.ROLE_TAG) == "trial"]
    runs = [
        {"run_id": r["run_id"], "status": r["status"], "variant": r["tags"].get(names.VARIANT_TAG),
         "seed": r["tags"].get(names.SEED_TAG)}
        for r in trials
    ]
    table = tracking.history_table(store, [r for r in trials if r["status"] == "FINISHED"], metrics.__contains__)
    histories: dict[str, dict[str, list[float]]] = {}
    for (run_id, key), g in table.sort("run_id", "key", "step").group_by("run_id", "key", maintain_order=True):
        histories.setdefault(str(run_id), {})[str(key)] = g.get_column("value").to_list()
    return runs_from_histories(runs, histories, metrics)


def export_path(experiment: str, folder: Path = EXPORT_DIR) -> Path:
    """The committed per-run export of ``experiment``: ``<folder>/<experiment>.csv``."""
    return folder / f"{experiment}.csv"


def read_export(path: Path) -> pl.DataFrame:
    """A committed per-run export; :class:`FindingsError` when it lacks the per-run columns."""
    try:
        frame = pl.read_csv(path, infer_schema_length=None)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise FindingsError(f"{path}: cannot read the export ({exc})") from None
    missing = [c for c in ("run_id", "variant", "seed") if c not in frame.columns]
    if missing:
        raise FindingsError(f"{path}: the export lacks the columns {missing}; rewrite it with --export")
    return frame


# ----------------------------------------------------------------------------------------- the rows
def settings(variant: str) -> dict[str, str]:
    """A variant label (``preset=peekread-neg,estimator=trajectory_group``) as its settings, lower-cased
    booleans. Values that contain commas (``horizon=[8, 8]``) are kept whole."""
    out: dict[str, str] = {}
    key = None
    for part in variant.split(","):
        if "=" in part and not part.startswith(" "):
            key, value = part.split("=", 1)
            out[key] = value
        elif key is not None:
            out[key] += "," + part
    return {k: v.lower() if v in ("True", "False") else v for k, v in out.items()}


def arm_runs(frame: pl.DataFrame, selector: Mapping[str, tuple[str, ...]]) -> pl.DataFrame:
    """The runs whose variant settings match every key of ``selector``."""
    keep = [all(settings(v).get(k) in allowed for k, allowed in selector.items())
            for v in frame.get_column("variant").to_list()]
    return frame.filter(pl.Series(keep, dtype=pl.Boolean))


def scale(metric: str) -> float:
    """Rates are reported in points, like the papers; any other metric in its own unit."""
    return stats.POINTS if metric.endswith(("success", "_rate", "holds_answer")) else 1.0


def per_seed(row: FindingRow, frame: pl.DataFrame, arm: str) -> dict[int, float]:
    """seed -> the arm's outcome for that seed: the scaled final metric, or the slope across its runs."""
    runs = arm_runs(frame, row.arms[arm])
    y = column(row.metric, "final")
    out: dict[int, float] = {}
    for (seed,), g in runs.group_by("seed", maintain_order=True):
        g = g.drop_nulls(y)
        if row.statistic == "final":
            if g.height:
                out[int(seed)] = scale(row.metric) * float(g.get_column(y).mean())  # type: ignore[arg-type]
            continue
        assert row.x is not None
        g = g.drop_nulls(column(row.x, "final"))
        if g.height >= 2:
            xs, ys = g.get_column(column(row.x, "final")).to_numpy(), g.get_column(y).to_numpy()
            if np.all(xs > 0) and np.all(ys > 0) and np.ptp(xs) > 0:
                out[int(seed)] = float(np.polyfit(np.log(xs), np.log(ys), 1)[0])
    return out


@dataclass(frozen=True)
class Comparison:
    """A difference between two arms: treatment - baseline with its SE, sigma and how it was paired."""

    difference: float
    se: float
    sigma: float
    seeds: int
    paired: bool
    identical: bool
    """Every shared seed gave the same outcome in both arms (the arms computed the same thing)."""
    held_out: bool = False
    """Every shared seed gave the same nonzero difference, so the SE is the held-out set's bound."""

    @property
    def mde(self) -> float:
        """The minimum detectable effect at 2 sigma with this SE."""
        return stats.min_detectable_effect(self.se)


def compare(treatment: dict[int, float], baseline: dict[int, float], episodes: int | None = None) -> Comparison | None:
    """treatment - baseline, paired over shared seeds when there are enough, else two independent means.
    ``episodes``: the held-out episodes behind each run's rate, for a difference the same in every seed
    (:func:`simlab.analysis.stats.paired_difference`)."""
    shared = sorted(set(treatment) & set(baseline))
    if len(shared) >= stats.PAIRED_MIN_SEEDS:
        t, b = np.array([treatment[s] for s in shared]), np.array([baseline[s] for s in shared])
        # a CSV round trip perturbs the last bits; identical differences must keep an SE of exactly 0
        d = stats.paired_difference(np.round(t, ROUND), np.round(b, ROUND), episodes=episodes)
        return Comparison(d.difference, d.se, d.sigma, len(shared), True, bool(np.all(t == b)),
                          d.dominant == "held-out")
    if len(treatment) < 2 or len(baseline) < 2:
        return None
    m_t, m_b = stats.mean_se(list(treatment.values())), stats.mean_se(list(baseline.values()))
    d = stats.difference(m_t, m_b)
    return Comparison(d.difference, d.se, d.sigma, min(len(treatment), len(baseline)), False, False)


def verdict(row: FindingRow, main: Comparison | None, control: Comparison | None) -> tuple[Verdict, str]:
    """The row's verdict and a short reason (the MDE of a tie, what moved)."""
    if main is None:
        return "not run", "fewer than 2 seeds in an arm"
    sig = abs(main.sigma) >= stats.TIE_SIGMA if not math.isnan(main.sigma) else False
    control_tie = control is None or control.identical or math.isnan(control.sigma) or (
        abs(control.sigma) < stats.TIE_SIGMA)
    if not control_tie and row.control_expect == "not-published-sign" and row.sign is not None:
        assert control is not None
        control_tie = math.copysign(1.0, control.difference) != row.sign  # moved, but not the finding's way
    if not sig:
        half = None if row.published is None else abs(row.published) / 2
        if main.identical:
            return "tie", "the arms were identical in every seed"
        if half is None:
            return "tie", f"MDE {main.mde:.1f}; no published delta to hold it against"
        decided = main.mde <= half
        word, sign = ("decided", "<=") if decided else ("undecided", ">")
        return "tie", f"{word}: MDE {main.mde:.1f} {sign} {half:.1f}"
    if not control_tie:
        assert control is not None
        return "control moved", f"control {control.difference:+.1f} at {control.sigma:+.1f} sigma"
    if row.sign is None:
        return "differs", f"{abs(main.sigma):.1f} sigma; no published sign to compare"
    same = math.copysign(1.0, main.difference) == row.sign
    strength = f"{abs(main.sigma):.1f} sigma" if math.isfinite(main.sigma) else "the same in every seed, SE 0"
    return ("reproduced" if same else "opposite"), strength


def mechanism_values(row: FindingRow, frame: pl.DataFrame) -> list[dict[str, Any]]:
    """Per mechanism metric: the treatment's and the baseline's mean over seeds, with their SEs."""
    out = []
    for m in row.mechanism:
        entry: dict[str, Any] = {"label": m.label, "metric": m.metric}
        name = column(m.metric, m.reduce)
        for arm in ("treatment", "baseline"):
            runs = arm_runs(frame, row.arms[arm])
            values = runs.get_column(name).drop_nulls().to_numpy() if name in runs.columns else np.array([])
            values = values[np.isfinite(values)] if values.size else values
            est = stats.mean_se(values * scale(m.metric)) if values.size else None
            entry[arm] = None if est is None else est.mean
            entry[f"{arm}_se"] = None if est is None or est.seeds < 2 else est.se
        out.append(entry)
    return out


def held_out_episodes(row: FindingRow) -> int | None:
    """The fewest held-out episodes behind a run's rate in the row's sweep (``eval.episodes`` of each
    grid point); ``None`` for a metric that is not a final rate, or a spec that does not resolve."""
    if row.statistic != "final" or scale(row.metric) != stats.POINTS:
        return None
    try:
        return _spec_episodes(row.spec_path.read_text(encoding="utf-8"))
    except OSError:
        return None


@functools.cache
def _spec_episodes(text: str) -> int | None:
    """The fewest ``eval.episodes`` over a spec's grid points, keyed by the spec's text (rows of one
    spec share it)."""
    from simlab.sweep.backend import DEFAULT_BACKEND, load_backend
    from simlab.sweep.spec import parse_spec

    try:
        spec, backend = parse_spec(tomllib.loads(text)), load_backend(DEFAULT_BACKEND)
        return min(int(backend.build(spec.settings(p), 0).eval.episodes) for p in spec.grid_points())
    except ValueError:  # a TOML, config, spec or backend error: no bound, the seed SE stands
        return None


def _se_from(c: Comparison) -> str:
    """Where a comparison's SE comes from: the spread of paired seeds, the held-out set, or two means."""
    return "held-out" if c.held_out else ("paired" if c.paired else "unpaired")


def evaluate_row(row: FindingRow, frame: pl.DataFrame | None, source: str) -> dict[str, Any]:
    """One row of the findings table, as a plain dict (what ``--json`` writes)."""
    base = {"id": row.id, "finding": row.finding, "spec": row.spec, "published": row.published,
            "source": row.source, "metric": row.metric, "statistic": row.statistic, "data": source,
            "note": row.note}
    if frame is None or frame.height == 0:
        return base | {"verdict": "not run", "reason": f"no finished runs of {row.spec}", "mechanism": []}
    seeds = {arm: per_seed(row, frame, arm) for arm in ARMS}
    episodes = held_out_episodes(row)
    main = compare(seeds["treatment"], seeds["baseline"], episodes)
    control = compare(seeds["control_treatment"], seeds["control_baseline"], episodes)
    kind, reason = verdict(row, main, control)

    def fields(prefix: str, c: Comparison | None) -> dict[str, Any]:
        if c is None:
            return {f"{prefix}difference": None, f"{prefix}se": None, f"{prefix}sigma": None,
                    f"{prefix}seeds": 0, f"{prefix}paired": False, f"{prefix}se_from": None}
        sigma = None if math.isnan(c.sigma) else c.sigma
        return {f"{prefix}difference": c.difference, f"{prefix}se": c.se, f"{prefix}sigma": sigma,
                f"{prefix}seeds": c.seeds, f"{prefix}paired": c.paired, f"{prefix}se_from": _se_from(c)}

    mde = None if main is None or not math.isfinite(main.mde) else main.mde
    return base | fields("", main) | {"mde": mde} | fields("control_", control) | {
        "verdict": kind, "reason": reason, "mechanism": mechanism_values(row, frame)}


# ------------------------------------------------------------------------------------- the command
@dataclass(frozen=True)
class Findings:
    """The findings table: one evaluated row per finding, and where each sweep's runs came from."""

    rows: list[dict[str, Any]]
    sources: dict[str, str]
    """Spec name -> where its runs came from: ``store``, the export's path, or ``none``."""


def gather(rows: list[FindingRow], *, tracking_uri: str | None = None, exports: Path = EXPORT_DIR,
           source: Literal["auto", "store", "exports"] = "auto") -> Findings:
    """Evaluate every row, reading each sweep from the live store (``auto``: when it holds finished runs)
    or else from its committed export."""
    frames: dict[str, tuple[pl.DataFrame | None, str]] = {}
    for spec in dict.fromkeys(r.spec for r in rows):
        metrics = set().union(*(r.metrics() for r in rows if r.spec == spec))
        frame, where = None, "none"
        if source != "exports":
            frame = live_runs(spec, metrics, tracking_uri)
            where = "store" if frame is not None and frame.height else "none"
        if (frame is None or frame.height == 0) and source != "store" and export_path(spec, exports).is_file():
            frame, where = read_export(export_path(spec, exports)), f"export {export_path(spec, exports).name}"
        frames[spec] = (frame, where)
    out = [evaluate_row(r, *frames[r.spec]) for r in rows]
    return Findings(out, {spec: where for spec, (_, where) in frames.items()})


def export(rows: list[FindingRow], *, tracking_uri: str | None = None, folder: Path = EXPORT_DIR) -> list[Path]:
    """Write each sweep's per-run table from the live store to ``folder`` (CSV, all-or-nothing per file)."""
    written = []
    for spec in dict.fromkeys(r.spec for r in rows):
        metrics = set().union(*(r.metrics() for r in rows if r.spec == spec))
        frame = live_runs(spec, metrics, tracking_uri)
        if frame is None or frame.height == 0:
            continue
        path = export_path(spec, folder)
        tmp = path.with_suffix(".csv.tmp")
        frame.sort("variant", "seed").write_csv(tmp)
        tmp.replace(path)
        written.append(path)
    return written


def _num(x: float | None, fmt: str) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _diff(r: dict[str, Any], prefix: str = "") -> str:
    d = r.get(f"{prefix}difference")
    if d is None:
        return "n/a"
    how = {"held-out": "paired, same in every seed: SE of the held-out set"}.get(r[f"{prefix}se_from"],
                                                                              r[f"{prefix}se_from"])
    return (f"{d:+.2f} ± {r[f'{prefix}se']:.2f} ({_num(r[f'{prefix}sigma'], '+.1f')}σ; "
            f"n={r[f'{prefix}seeds']} {how})")


def _mech(r: dict[str, Any]) -> str:
    parts = [f"{m['label']}: {_num(m['treatment'], '.3g')} vs {_num(m['baseline'], '.3g')}" for m in r["mechanism"]]
    return "; ".join(parts) or "-"


def to_markdown(found: Findings) -> str:
    """The findings table as Markdown, with where each sweep's runs came from."""
    headers = ["#", "Finding", "Published", "simlab: treatment - baseline", "Control",
               "Mechanism (treatment vs baseline)", "Verdict"]
    rows = [
        [r["id"], r["finding"], _num(r["published"], "+.1f"), _diff(r), _diff(r, "control_"), _mech(r),
         f"{r['verdict']} ({r['reason']})" + (f"; note: {r['note']}" if r["note"] else "")]
        for r in found.rows
    ]
    where = ", ".join(f"{spec}: {src}" for spec, src in found.sources.items())
    return ("Differences in points (rates) or in the metric's unit (slopes), ± their SE; σ = difference / SE. "
            "Paired by seed, the SE holds the shared held-out set fixed; a rate difference the same in every "
            "seed gets the held-out set's own SE instead of 0. "
            f"Runs from: {where}.\n\n" + markdown_table(headers, rows))


def as_frame(found: Findings) -> pl.DataFrame:
    """The findings table as a frame (mechanism values as one text column), for CSV and parquet."""
    flat = [{k: v for k, v in r.items() if k != "mechanism"} | {"mechanism": _mech(r)} for r in found.rows]
    return pl.DataFrame(flat, infer_schema_length=None)
