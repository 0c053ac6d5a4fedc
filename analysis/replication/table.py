"""``simlab findings``: each published finding against simlab's controlled version of it.

The findings are pre-registered in the sweep specs under ``sweeps/findings/`` (the row format is
:mod:`.spec`): besides the sweep itself, each spec carries ``[[findings]]`` rows that name the
published delta, the outcome metric and its statistic (``final``, ``auc``, ``steps_to`` or ``slope``,
chosen before the run), and four arms as selectors over the sweep's variants (treatment, baseline, and the
control's two), with the mechanism metrics to report beside the outcome. This module reads the finished
sweeps (:mod:`.data`), one row per finding:

- the difference treatment - baseline and the control's difference, each paired by seed and held-out
  instance where the runs kept per-episode outcomes, with an SE over seeds and instances
  (:mod:`simlab.analysis.statistics.compare`);
- the mechanism metrics, treatment against baseline (mean over seeds);
- a verdict at a stated alpha and power: *reproduced* (the published sign at >= 2 sigma, the control a tie
  decided by TOST), *opposite* (the other sign, same conditions), *tie* (decided by a 90% TOST within the
  margin, by default half the published delta), *control moved* (the control differs at >= 2 sigma),
  *differs* (no published sign to compare), or *undecided*, with the seeds that would decide it.

A row whose spec holds the base model or the held-out set fixed across seeds says so: its statistics are
conditional on them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl

from simlab import names
from simlab.analysis.replication.data import EXPORT_DIR, SpecData, column, live_data, read_export, write_export
from simlab.analysis.replication.spec import ARMS, Design, FindingRow, design, grid_variants, parse_rows
from simlab.analysis.statistics import compare, outcomes, power, stats
from simlab.analysis.statistics.compare import Arm, Judgement
from simlab.errors import ConfigError, FindingsError


def _spec_dir() -> Path:
    from simlab.sweep.shipped import shipped_dir

    return shipped_dir() / "findings"


SPEC_DIR = _spec_dir()
"""Where the findings specs live: ``findings/`` of the shipped specs (the checkout's ``sweeps/findings``)."""
ROUND = 9
"""Decimals a per-seed outcome is kept at (far below any difference a finding reports)."""
Verdict = Literal["reproduced", "sign only", "opposite", "holds", "fails", "differs", "tie", "undecided",
                  "control moved", "not run"]
"""``holds`` and ``fails`` are a harness check's ``reproduced`` and ``opposite``: a check is never counted as a
reproduced finding."""


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


# ----------------------------------------------------------------------------------------- the arms
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


def selects(variant: str, selector: Mapping[str, tuple[str, ...]]) -> bool:
    """Whether a variant label's settings match every key of ``selector``."""
    got = settings(variant)
    return all(got.get(k) in allowed for k, allowed in selector.items())


def arm_runs(frame: pl.DataFrame, selector: Mapping[str, tuple[str, ...]]) -> pl.DataFrame:
    """The runs whose variant settings match every key of ``selector``."""
    keep = [selects(v, selector) for v in frame.get_column("variant").to_list()]
    return frame.filter(pl.Series(keep, dtype=pl.Boolean))


def check_arms(row: FindingRow) -> None:
    """Each arm of ``row`` selects at least one variant its spec runs (a grid spec's; a sampled space's
    variants are not known before it runs). A misspelt value would otherwise read "not run" beside runs."""
    labels = grid_variants(row.spec_path.read_text(encoding="utf-8"))
    for arm, selector in row.arms.items():
        if labels and not any(selects(v, selector) for v in labels):
            given = ", ".join(f"{k} = {'|'.join(vs)}" for k, vs in selector.items())
            raise FindingsError(f"{row.spec_path.name}: " + FindingsError.invalid(
                f"findings.{arm}", given, f"select a variant of the spec (row {row.id}); it runs "
                + "; ".join(sorted(labels)[:4]) + (" ..." if len(labels) > 4 else "")).args[0])


def scale(metric: str) -> float:
    """Rates are reported in points, like the papers; any other metric in its own unit."""
    return stats.POINTS if names.is_rate(metric) else 1.0


def evaluation_of(metric: str) -> str | None:
    """The evaluation (``compacted``, ``single_window``) whose per-episode outcomes give ``metric``."""
    return next((name for name, prefix in names.EVALUATIONS.items()
                 if metric == names.metric(prefix, names.SUCCESS)), None)


def per_seed(row: FindingRow, data: SpecData, arm: str) -> dict[int, float]:
    """seed -> the arm's outcome for that seed: the row's statistic of its metric (mean over the seed's runs),
    or the slope across its runs."""
    runs = arm_runs(data.runs, row.arms[arm])
    if row.statistic == "slope":
        return _slopes(row, runs)
    if row.statistic == "final":
        values = runs.select("run_id", "seed",
                             (scale(row.metric) * pl.col(column(row.metric, "final"))).alias("value"))
    else:
        if data.history is None:
            return {}
        try:
            got = outcomes.run_outcomes(data.history, row.metric, row.statistic,  # type: ignore[arg-type]
                                        threshold=row.threshold, scale=scale(row.metric))
        except ConfigError as exc:  # an area asked of a run with one evaluation: the row's choice is named
            raise FindingsError(f"{row.spec_path.name}: {exc.under(f'findings.{row.id}')}") from None
        values = runs.select("run_id", "seed").join(got, on="run_id").select("run_id", "seed", "value")
    ordered = values.drop_nulls("value").sort("seed", "run_id")  # one order: the same sums on every run
    means = ordered.group_by("seed", maintain_order=True).agg(pl.col("value").mean())
    # a CSV round trip perturbs the last bits; arms that computed the same thing must stay identical
    return {int(s): round(float(v), ROUND) for s, v in means.iter_rows()}


def _slopes(row: FindingRow, runs: pl.DataFrame) -> dict[int, float]:
    assert row.x is not None
    y, x = column(row.metric, "final"), column(row.x, "final")
    out: dict[int, float] = {}
    for (seed,), g in runs.drop_nulls([y, x]).group_by("seed", maintain_order=True):
        xs, ys = g.get_column(x).to_numpy(), g.get_column(y).to_numpy()
        if g.height >= 2 and np.all(xs > 0) and np.all(ys > 0) and np.ptp(xs) > 0:
            out[int(seed)] = round(float(np.polyfit(np.log(xs), np.log(ys), 1)[0]), ROUND)
    return out


def arm(row: FindingRow, data: SpecData, name: str, spec: Design) -> Arm:
    """One arm's :class:`~simlab.analysis.statistics.compare.Arm`: per-seed values, per-episode ones where kept."""
    seeds = per_seed(row, data, name)
    evaluation = evaluation_of(row.metric)
    episodes = None
    if data.episodes is not None and evaluation is not None and row.statistic in ("final", "auc", "gain"):
        runs = arm_runs(data.runs, row.arms[name]).select("run_id", "seed")
        got = outcomes.episode_outcomes(data.episodes, evaluation, row.statistic)  # type: ignore[arg-type]
        if got is not None:
            episodes = got.join(runs, on="run_id").select("seed", "instance", "value")
            episodes = episodes if episodes.height else None
    rate = row.statistic == "final" and scale(row.metric) == stats.POINTS
    return Arm(seeds, episodes, spec.episodes if rate else None, shared=spec.eval_fixed)


# ----------------------------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Levels:
    """The alpha and power every row is judged at."""

    alpha: float = power.ALPHA
    power: float = power.POWER


@dataclass(frozen=True)
class Family:
    """Where a row's p-value stands in its Holm family."""

    p: float
    """The Holm-adjusted p of the row's difference."""
    size: int
    """The rows in the family (its credit and serving rows with a measured difference)."""
    name: str

    def text(self) -> str:
        """``Holm p 0.120 over 15 rows of credit-dose`` (empty for a family of one)."""
        return "" if self.size <= 1 else f"Holm p {self.p:.3f} over {self.size} rows of {self.name}"


@dataclass(frozen=True)
class Decision:
    """A row's verdict, its reason, and for an undecided row what is missing (``by``) and the seeds that
    would supply it."""

    verdict: Verdict
    reason: str
    by: Literal["", "main", "control", "vacuous", "adjustment", "size"] = ""
    """``main``: the difference is neither significant nor a decided tie; ``control``: the control is not
    settled; ``vacuous``: the control cannot show the mechanism absent; ``adjustment``: significant alone,
    not after its family's Holm adjustment; ``size``: the published sign, its interval across the margin."""
    seeds: int | None = None
    """Seeds that would decide an undecided row (``main``, ``size``; ``control``: the control's tie)."""


def verdict(row: FindingRow, main: Judgement | None, control: Judgement | None,
            family: Family | None = None) -> Decision:
    """The row's verdict, read in this order.

    *tie*: not significant (p >= alpha, t at the design's df) and the TOST decides it within the margin.
    *control moved*: the control differs (p < alpha). *sign only*: significant in the published direction,
    but the 90% interval lies inside the margin: practically zero at the published scale. *reproduced*:
    the published direction at Holm-adjusted p < alpha, the 90% interval wholly beyond the margin, and the
    control settled (a check reads *holds*). *opposite*: the other direction at Holm-adjusted p < alpha.
    *undecided* otherwise, saying what would decide it.
    """
    if main is None:
        return Decision("not run", "fewer than 2 seeds in an arm")
    if not main.significant:
        if main.decided_tie:
            assert main.tost is not None
            return Decision("tie", f"TOST p = {main.tost.p:.3f} within ±{main.margin:g}")
        return Decision("undecided", _to_decide(main, "a tie"), "main", main.seeds_to_decide())
    if _control_moved(row, control):
        assert control is not None
        return Decision("control moved", f"control {control.estimate.mean:+.1f} at {control.sigma:+.1f} sigma")
    strength = _strength(main, family)
    adjusted = family is None or family.p < main.alpha
    if row.sign is None:
        if not adjusted:
            return Decision("undecided", f"{strength}: not significant after adjustment", "adjustment")
        return Decision("differs", f"{strength}; no published sign to compare")
    if row.control_vacuous:
        return Decision("undecided", f"{strength}, but the control is vacuous: {row.control_vacuous}", "vacuous")
    if not _control_settled(row, control):
        return Decision("undecided", f"{strength}, but the control is " + (
            "not measured" if control is None else _to_decide(control, "its tie")), "control",
            None if control is None else control.seeds_to_decide())
    if row.kind == "harness check":
        return Decision("holds" if _same(row, main) else "fails", strength)
    return _effect_verdict(row, main, adjusted, strength)


def _effect_verdict(row: FindingRow, main: Judgement, adjusted: bool, strength: str) -> Decision:
    """A significant difference with a settled control: its size against the margin, its direction, and
    whether it survives its family's Holm adjustment."""
    assert row.sign is not None
    if main.negligible:
        assert main.tost is not None
        inside = f"its 90% interval [{main.tost.low:+.2f}, {main.tost.high:+.2f}] lies inside ±{main.margin:g}"
        if _same(row, main):
            return Decision("sign only", f"{strength} in the published direction, but {inside}: practically 0 "
                            "at the published scale")
        return Decision("tie", f"{inside} (TOST p = {main.tost.p:.3f}); the other sign at {strength}")
    if not adjusted:
        return Decision("undecided", f"{strength}: not significant after adjustment", "adjustment")
    if not _same(row, main):
        return Decision("opposite", strength)
    if main.margin is None:
        return Decision("reproduced", f"{strength}; no published size to compare")
    if main.exceeds_margin(row.sign):
        return Decision("reproduced", strength)
    low, high = main.interval(1 - 2 * main.alpha)
    excess = abs(main.estimate.mean) - main.margin
    need = power.seeds_for_effect(main.estimate.seed_sd, excess, fixed_var=main.estimate.fixed_var,
                                  alpha=main.alpha, power=main.power) if excess > 0 else None
    return Decision("undecided", f"{strength} in the published direction, but its 90% interval [{low:+.2f}, "
                    f"{high:+.2f}] reaches inside ±{main.margin:g}: " + (
                        f"{need} seeds would tell its size" if need else "its size is not above the margin"),
                    "size", need)


def _same(row: FindingRow, main: Judgement) -> bool:
    return row.sign is not None and math.copysign(1.0, main.estimate.mean) == row.sign


def _strength(main: Judgement, family: Family | None) -> str:
    """``3.6 sigma, p 0.009 (Holm p 0.120 over 15 rows of credit-dose)``."""
    if not math.isfinite(main.sigma):
        return "the same in every seed, SE 0"
    holm = family.text() if family is not None else ""
    return f"{abs(main.sigma):.1f} sigma, p {main.p:.3f}" + (f" ({holm})" if holm else "")


def _to_decide(j: Judgement, what: str) -> str:
    if j.margin is None:
        return f"no margin to decide {what} (no published delta); MDE {j.mde:.1f}"
    need = j.seeds_to_decide()
    if need:
        return f"{need} seeds would decide {what}"
    fixed = math.sqrt(j.estimate.fixed_var)
    return (f"more seeds would not decide {what}: the held-out set every seed shares leaves ±{fixed:.1f} "
            f"(margin ±{j.margin:g})")


def _identical(j: Judgement) -> bool:
    return j.estimate.se == 0 and j.estimate.mean == 0


def _control_moved(row: FindingRow, control: Judgement | None) -> bool:
    if control is None or not control.significant:
        return False
    if row.control_expect == "not-published-sign" and row.sign is not None:
        return math.copysign(1.0, control.estimate.mean) == row.sign
    return True


def _control_settled(row: FindingRow, control: Judgement | None) -> bool:
    """The control is a decided tie (or, when it may move the other way, did not move the finding's way)."""
    if control is None:
        return False
    if row.control_expect == "not-published-sign":
        return not _control_moved(row, control)
    return control.decided_tie or _identical(control)


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


def measure(row: FindingRow, data: SpecData, levels: Levels) -> Measured:
    """The row's difference and its control's, judged at ``levels``, and the mechanism metrics."""
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
            "family": row.family, "unit": "steps" if row.statistic == "steps_to" else (
                "points" if scale(row.metric) == stats.POINTS else "metric units")}


def record(row: FindingRow, got: Measured | None, source: str, levels: Levels, family: Family | None = None,
           why_not: str = "") -> dict[str, Any]:
    """One row of the findings table, as a plain dict (what ``--json`` writes)."""
    base = _base(row, source, levels)
    if got is None:
        return base | _fields("", None) | _fields("control_", None) | {
            "p": None, "p_holm": None, "family_size": 0, "verdict": "not run", "reason": why_not,
            "undecided_by": "", "mechanism": []}
    said = verdict(row, got.main, got.control, family)
    p = None if got.main is None else finite(got.main.p)
    return base | _fields("", got.main) | _fields("control_", got.control) | {
        "p": p, "p_holm": family.p if family is not None else p, "family_size": family.size if family else int(
            p is not None), "verdict": said.verdict, "reason": said.reason, "undecided_by": said.by,
        "seeds_to_decide": said.seeds if said.by in ("main", "size") else None,
        "control_seeds_to_decide": said.seeds if said.by == "control" else None, "mechanism": got.mechanism}


def evaluate_row(row: FindingRow, data: SpecData | None, source: str, levels: Levels | None = None) -> dict[str, Any]:
    """One row on its own (a family of one: no adjustment)."""
    levels = levels or Levels()
    if data is None or data.runs.height == 0:
        return record(row, None, source, levels, why_not=f"no finished runs of {row.spec}")
    return record(row, measure(row, data, levels), source, levels)


def families(rows: list[FindingRow], measured: list[Measured | None]) -> list[Family | None]:
    """Each row's Holm family: the credit and serving rows of one campaign with a measured difference,
    adjusted together; ``None`` for a check or a row without one."""
    out: list[Family | None] = [None] * len(rows)
    members: dict[str, list[int]] = {}
    for i, (row, got) in enumerate(zip(rows, measured, strict=True)):
        if row.kind != "harness check" and got is not None and got.main is not None and math.isfinite(got.main.p):
            members.setdefault(row.family, []).append(i)
    for name, idx in members.items():
        adjusted = power.holm([measured[i].main.p for i in idx])  # type: ignore[union-attr]
        for i, p in zip(idx, adjusted, strict=True):
            out[i] = Family(p, len(idx), name)
    return out


# ------------------------------------------------------------------------------------- the command
@dataclass(frozen=True)
class Findings:
    """The findings table: one evaluated row per finding, and where each sweep's runs came from."""

    rows: list[dict[str, Any]]
    sources: dict[str, str]
    """Spec name -> where its runs came from: ``store``, the export's path, or ``none``."""


def _wanted(rows: list[FindingRow], spec: str) -> set[str]:
    return set().union(*(r.metrics() for r in rows if r.spec == spec))


def gather(rows: list[FindingRow], *, tracking_uri: str | None = None, exports: Path = EXPORT_DIR,
           source: Literal["auto", "store", "exports"] = "auto", levels: Levels | None = None) -> Findings:
    """Evaluate every row, reading each sweep from the live store (``auto``: when it holds finished runs)
    or else from its committed exports."""
    frames: dict[str, tuple[SpecData | None, str]] = {}
    for spec in dict.fromkeys(r.spec for r in rows):
        data, where = None, "none"
        if source != "exports":
            data = live_data(spec, _wanted(rows, spec).__contains__, tracking_uri)
            where = "store" if data is not None else "none"
        if data is None and source != "store":
            data = read_export(spec, exports)
            where = "exports" if data is not None else "none"
        frames[spec] = (data, where)
    levels = levels or Levels()
    measured = [measure(r, data, levels) if data is not None and data.runs.height else None
                for r in rows for data in (frames[r.spec][0],)]
    out = [record(r, got, frames[r.spec][1], levels, family, why_not=f"no finished runs of {r.spec}")
           for r, got, family in zip(rows, measured, families(rows, measured), strict=True)]
    return Findings(out, {spec: where for spec, (_, where) in frames.items()})


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
