"""``simlab findings``: each published finding against simlab's controlled version of it.

The findings are pre-registered in the sweep specs under ``sweeps/findings/`` (the row format is
:mod:`.spec`): besides the sweep itself, each spec carries ``[[findings]]`` rows that name the
published delta, the outcome metric and its statistic (``final``, ``auc``, ``steps_to`` or ``slope``,
chosen before the run), and four arms as selectors over the sweep's variants (treatment, baseline, and the
control's two), with the mechanism metrics to report beside the outcome. This module reads the finished
sweeps (:mod:`.data`), one row per finding:

- the difference treatment - baseline and the control's difference, each paired by seed and held-out
  instance where the runs kept per-episode outcomes (each arm's values: :mod:`.arms`), with an SE over
  seeds and instances (:mod:`simlab.analysis.statistics.compare`);
- the mechanism metrics, treatment against baseline (mean over seeds);
- a verdict (:mod:`.verdicts`) at a stated alpha and power: *reproduced* (the published sign at >= 2 sigma,
  the control a tie decided by TOST), *opposite* (the other sign, same conditions), *tie* (decided by a 90%
  TOST within the margin, by default half the published delta), *control moved* (the control differs at
  >= 2 sigma), *differs* (no published sign to compare), or *undecided*, with the seeds that would decide it.

A row whose spec holds the base model or the held-out set fixed across seeds says so: its statistics are
conditional on them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl

from simlab import names
from simlab.analysis.replication.arms import arm, arm_runs, check_arms, scale
from simlab.analysis.replication.data import (
    EXPORT_DIR,
    SpecData,
    by_key_path,
    column,
    live_data,
    read_export,
    write_export,
)
from simlab.analysis.replication.spec import ARMS, FindingRow, design, label_keys, parse_rows
from simlab.analysis.replication.verdicts import Family, Levels, by_construction, verdict
from simlab.analysis.report.bases import bases_of
from simlab.analysis.statistics import compare, power, stats
from simlab.analysis.statistics.compare import Judgement
from simlab.errors import FindingsError
from simlab.sweep.shipped import shipped_dir

SPEC_DIR = shipped_dir() / "findings"
"""Where the findings specs live: ``findings/`` of the shipped specs (the checkout's ``sweeps/findings``)."""


# ------------------------------------------------------------------------------------------- specs
def load_rows(folder: Path = SPEC_DIR) -> list[FindingRow]:
    """Every findings row of every spec in ``folder``, sorted by id (the numbers in it by value)."""
    paths = sorted(folder.glob("*.toml"))
    if not paths:
        raise FindingsError(f"no findings specs in {folder}")
    rows = [row for path in paths for row in parse_rows(path)]
    for row in rows:
        check_arms(row)
    first: dict[str, FindingRow] = {}
    for row in rows:  # one pass: a dict, not a pairwise scan
        if (seen := first.setdefault(row.id, row)) is not row:
            taken = FindingsError.invalid("findings.id", row.id, f"it is already the id of a row in "
                                          f"{seen.spec_path.name}; give each row its own id")
            raise FindingsError(f"{row.spec_path.name}: {taken}")
    return sorted(rows, key=lambda r: _natural(r.id))


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that orders the numbers inside an id by value: 1a < 1d4 < 1d32 < 2c25 < 2c100."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.findall(r"\d+|\D+", text))



# ----------------------------------------------------------------------------------------- the rows
def mechanism_values(row: FindingRow, data: SpecData) -> list[dict[str, Any]]:
    """Per mechanism metric: the treatment's and the baseline's mean over seeds, with their SEs."""
    out = []
    for m in row.mechanism:
        entry: dict[str, Any] = {"label": m.label, "metric": m.metric}
        name = column(m.metric, m.reduce)
        for which in ("treatment", "baseline"):
            runs = arm_runs(data.runs, row.arms[which])
            values = runs.get_column(name).drop_nulls().to_numpy() if name in runs.columns else np.array([])
            values = values[np.isfinite(values)] if values.size else values
            est = stats.mean_se(values * scale(m.metric)) if values.size else None
            entry[which] = None if est is None else est.mean
            entry[f"{which}_se"] = None if est is None or est.seeds < 2 else est.se
        out.append(entry)
    return out


def finite(x: float | None) -> float | None:
    """``x``, or ``None`` for a missing, NaN or infinite value (JSON has no NaN)."""
    return None if x is None or not math.isfinite(x) else x


def _fields(prefix: str, j: Judgement | None) -> dict[str, Any]:
    """A judged difference as flat record fields (``control_`` for the control's)."""
    if j is None:
        return {f"{prefix}{k}": None for k in ("difference", "se", "sigma", "df", "ci_low", "ci_high", "se_from",
                                                "mde", "tost_p", "decided")} | {f"{prefix}seeds": 0}
    e = j.estimate
    low, high = j.interval()
    return {
        f"{prefix}difference": e.mean, f"{prefix}se": e.se, f"{prefix}sigma": finite(j.sigma),
        f"{prefix}df": finite(e.df), f"{prefix}seeds": e.seeds, f"{prefix}ci_low": finite(low),
        f"{prefix}ci_high": finite(high), f"{prefix}se_from": e.design, f"{prefix}mde": finite(j.mde),
        f"{prefix}tost_p": None if j.tost is None else j.tost.p, f"{prefix}decided": j.decided_tie,
    }


@dataclass(frozen=True)
class Measured:
    """A row's two judged differences (``None`` where an arm has too few seeds) and its mechanism metrics."""

    main: Judgement | None
    control: Judgement | None
    mechanism: list[dict[str, Any]]


def measure(row: FindingRow, data: SpecData | None, levels: Levels) -> Measured | None:
    """The row's difference and its control's, judged at ``levels``, and the mechanism metrics; ``None``
    without finished runs."""
    if data is None or data.runs.height == 0:
        return None
    spec = design(row)
    arms = {name: arm(row, data, name, spec) for name in ARMS}
    judged = []
    for t, b in (("treatment", "baseline"), ("control_treatment", "control_baseline")):
        d = compare.difference(arms[t], arms[b])
        judged.append(None if d is None else compare.judge(d, margin=row.equivalence_margin, alpha=levels.alpha,
                                                           power_=levels.power))
    return Measured(judged[0], judged[1], mechanism_values(row, data))


def _base(row: FindingRow, source: str, levels: Levels) -> dict[str, Any]:
    spec = design(row)
    return {"id": row.id, "kind": row.kind, "finding": row.finding, "spec": row.spec, "published": row.published,
            "source": row.source, "metric": row.metric, "statistic": row.statistic, "data": source, "note": row.note,
            "seeds_vary": spec.seeds_vary, "conditional": spec.conditional, "margin": row.equivalence_margin,
            "alpha": levels.alpha, "power": levels.power, "dose": row.dose, "dose_label": row.dose_label,
            "control_dose": row.control_dose, "superseded_by": row.superseded_by, "reruns": row.reruns,
            "family": row.family, "control_by_construction": row.control_by_construction,
            "unit": "steps" if row.statistic == "steps_to" else (
                "points" if scale(row.metric) == stats.POINTS else "metric units")}


def record(row: FindingRow, got: Measured | None, source: str, levels: Levels,
           family: Family | None = None) -> dict[str, Any]:
    """One row of the findings table, as a plain dict (what ``--json`` writes); *not run* without ``got``."""
    base = _base(row, source, levels)
    if got is None:
        return base | _fields("", None) | _fields("control_", None) | {
            "p": None, "p_holm": None, "family_size": 0, "verdict": "not run",
            "reason": f"no finished runs of {row.spec}", "undecided_by": "", "mechanism": []}
    said = verdict(row, got.main, got.control, family)
    base["control_by_construction"] = by_construction(row, got.control)
    p = None if got.main is None else finite(got.main.p)
    return base | _fields("", got.main) | _fields("control_", got.control) | {
        "p": p, "p_holm": family.p if family is not None else p, "family_size": family.size if family else int(
            p is not None), "verdict": said.verdict, "reason": said.reason, "undecided_by": said.by,
        "seeds_to_decide": said.seeds if said.by in ("main", "size") else None,
        "control_seeds_to_decide": said.seeds if said.by == "control" else None, "mechanism": got.mechanism}


def evaluate_row(row: FindingRow, data: SpecData | None, source: str, levels: Levels | None = None) -> dict[str, Any]:
    """One row on its own (a family of one: no adjustment)."""
    levels = levels or Levels()
    return record(row, measure(row, data, levels), source, levels)


def families(rows: list[FindingRow], measured: list[Measured | None]) -> list[Family | None]:
    """Each row's Holm family: every credit and serving row pre-registered in one campaign, adjusted together,
    a row not yet run (or without a difference) counted at p = 1, so that no row's adjusted p shrinks as
    the campaign proceeds; ``None`` for a check."""
    out: list[Family | None] = [None] * len(rows)
    members: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        if row.kind != "harness check":
            members.setdefault(row.family, []).append(i)
    for name, idx in members.items():
        adjusted = power.holm([_p_or_one(measured[i]) for i in idx])
        for i, p in zip(idx, adjusted, strict=True):
            out[i] = Family(p, len(idx), name)
    return out


def _p_or_one(got: Measured | None) -> float:
    """A row's p for its family: 1 until it has a measured difference."""
    if got is None or got.main is None or not math.isfinite(got.main.p):
        return 1.0
    return got.main.p


# ------------------------------------------------------------------------------------- the command
@dataclass(frozen=True)
class Findings:
    """The findings table: one evaluated row per finding, and where each sweep's runs came from."""

    rows: list[dict[str, Any]]
    sources: dict[str, str]
    """Spec name -> where its runs came from: ``store``, the export's path, or ``none``."""
    bases: dict[str, pl.DataFrame] = field(default_factory=dict)
    """Spec name -> its base models per seed (:func:`~simlab.analysis.report.bases.sweep_bases`), for the sweeps
    whose runs measured their base; runs logged before the measurement existed give none."""


def gather(rows: list[FindingRow], *, tracking_uri: str | None = None, exports: Path = EXPORT_DIR,
           source: Literal["auto", "store", "exports"] = "auto", levels: Levels | None = None) -> Findings:
    """Evaluate every row, reading each sweep from the live store (``auto``: when it holds finished runs)
    or else from its committed exports."""
    frames: dict[str, tuple[SpecData | None, str]] = {}
    for spec, path in {r.spec: r.spec_path for r in rows}.items():
        data, where = None, "none"
        if source != "exports":
            wanted = set().union(*(r.metrics() for r in rows if r.spec == spec))
            data, where = live_data(spec, _reads(wanted), tracking_uri), "store"
        if data is None and source != "store":
            data, where = read_export(spec, exports), "exports"
            data = None if data is None else by_key_path(data, label_keys(path.read_text(encoding="utf-8")))
        frames[spec] = (data, where if data is not None else "none")
    levels = levels or Levels()
    measured = [measure(r, frames[r.spec][0], levels) for r in rows]
    out = [record(r, got, frames[r.spec][1], levels, family)
           for r, got, family in zip(rows, measured, families(rows, measured), strict=True)]
    bases = {spec: table for spec, (data, _) in frames.items()
             if data is not None and (table := bases_of(data.runs, data.history)) is not None}
    return Findings(out, {spec: where for spec, (_, where) in frames.items()}, bases)


def _reads(metrics: set[str]) -> Callable[[str], bool]:
    """The histories a findings sweep reads from the store: its rows' metrics and its bases' measurement."""
    return lambda key: key in metrics or key.startswith(names.BASE_HELDOUT)


def dose_figures(found: Findings, folder: Path) -> list[Path]:
    """One dose-response figure per spec and outcome statistic whose rows carry a dose:
    ``<folder>/<spec>-<statistic>.png``."""
    from simlab.analysis.report.figures import dose_response_png

    written = []
    dosed = [r for r in found.rows if r["dose"] is not None]
    for spec, statistic in dict.fromkeys((r["spec"], r["statistic"]) for r in dosed):
        rows = sorted((r for r in dosed if (r["spec"], r["statistic"]) == (spec, statistic)), key=lambda r: r["dose"])
        title = f"{spec} ({statistic}): treatment - baseline against {rows[0]['dose_label'] or 'the dose'}"
        path = dose_response_png(rows, folder / f"{spec}-{statistic}.png", title=title)
        if path is not None:
            written.append(path)
    return written


def export(rows: list[FindingRow], *, tracking_uri: str | None = None, folder: Path = EXPORT_DIR) -> list[Path]:
    """Write each finished sweep's exports from the live store to ``folder``: the per-run table, every
    metric's whole history, and the per-episode outcomes."""
    written = []
    for spec in dict.fromkeys(r.spec for r in rows):
        data = live_data(spec, lambda _key: True, tracking_uri)
        if data is not None:
            written += write_export(spec, data, folder)
    return written
