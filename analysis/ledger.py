"""The ledger: each pre-registered spec's predictions and preconditions, read from its committed exports.

A claim (:mod:`simlab.sweep.predictions`) is read per seed from the spec's histories, then decided one way:

- a precondition on the mean over seeds; where one fails, the design *does not test its mechanism*;
- a prediction per seed (``seeds`` of them must meet the comparison) or on the mean (and its paired t-test's
  p below ``p_below``, where given): **held** or **failed**; a tie on the mean (``within``) by TOST, and
  **undecided** where the mean is inside the band but its interval is not (:data:`TOST_ALPHA`); **not
  tested** where a precondition failed or the exports lack what it reads (an arm, a metric, a step).

Only the ledger's word counts: the docs cite a claim as ``prediction 1a of summaries-length: failed``, and
tests/analysis/test_ledger.py fails where a page says otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from simlab.analysis.replication.data import EXPORT_DIR, read_export
from simlab.analysis.statistics.outcomes import auc
from simlab.analysis.tables import markdown_table
from simlab.sweep import labels
from simlab.sweep.predictions import Comparison, Precondition, Prediction, Reading
from simlab.sweep.shipped import shipped_dir
from simlab.sweep.spec_parse import load_claims

SPEC_FOLDERS = ("findings", "summaries", "questions")
"""The shipped spec folders whose specs may carry claims (under ``sweeps/``)."""
HELD, FAILED, UNDECIDED, NOT_TESTED, MET, MISSED = "held", "failed", "undecided", "not tested", "met", "missed"
"""A prediction's statuses, and a precondition's."""
TOST_ALPHA = 0.05
"""A tie on the mean (``within`` without ``seeds``) holds only where both one-sided t tests against the band's
edges give p below this (TOST: the 90% interval inside the band); a mean outside the band fails it, and a
mean inside it with a wider interval is undecided."""


@dataclass(frozen=True)
class Verdict:
    """One claim of one spec, decided: its status and the numbers it was decided on."""

    spec: str
    kind: str
    """``prediction`` or ``precondition``."""
    id: str
    text: str
    reads: str
    rule: str
    """The rule in words: ``>= 6 of 8 seeds with |x| <= 1`` or ``mean >= 0.02``."""
    status: str
    values: tuple[float, ...] = ()
    """The per-seed values, in seed order."""
    met: int = 0
    mean: float = math.nan
    se: float = math.nan
    p: float = math.nan
    transcribed: str = ""


def meets(x: np.ndarray, comparison: Comparison, threshold: float) -> np.ndarray:
    """Where ``x`` meets ``comparison`` against ``threshold`` (elementwise)."""
    ops = {">=": x >= threshold, "<=": x <= threshold, ">": x > threshold, "<": x < threshold,
           "within": np.abs(x) <= threshold, "outside": np.abs(x) > threshold}
    return np.asarray(ops[comparison])


def per_seed(runs: pl.DataFrame, history: pl.DataFrame, reading: Reading) -> dict[int, float]:
    """Seed -> the value ``reading`` reads (seeds that lack any part of it are left out)."""

    def curves(arm: str, last: int) -> pl.DataFrame:
        cell = arm if "=" in arm else labels.label({labels.VARIANT_KEY: arm})  # a cell's label, or a variant's
        ids = runs.filter(pl.col("variant") == cell).select("run_id", "seed")
        rows = history.filter((pl.col("key") == reading.metric) & (pl.col("step") <= last)).join(ids, on="run_id")
        return rows.sort("seed", "step")

    def at(arm: str, step: int) -> dict[int, float]:
        rows = curves(arm, step).filter(pl.col("step") == step)
        return {int(s): float(v) for s, v in rows.select("seed", "value").iter_rows()}

    def area(arm: str) -> dict[int, float]:  # a seed whose curve stops short of ``step`` is left out
        out = {}
        for (seed,), g in curves(arm, reading.step).filter(pl.col("value").is_not_nan()).group_by("seed"):
            g = g.sort("step")
            t, y = g.get_column("step").to_numpy(), g.get_column("value").to_numpy()
            if t.size >= 2 and t[-1] == reading.step:
                out[int(seed)] = auc(t, y)
        return out

    def read(arm: str) -> dict[int, float]:
        if reading.statistic == "auc":
            return area(arm)
        value = at(arm, reading.step)
        ref = at(arm, reading.from_step) if reading.from_step is not None else dict.fromkeys(value, 0.0)
        return {s: value[s] - ref[s] for s in value if s in ref}

    mine = read(reading.arm)
    other = read(reading.versus) if reading.versus is not None else dict.fromkeys(mine, 0.0)
    return {s: mine[s] - other[s] for s in sorted(mine) if s in other}


def decide(spec: str, claim: Prediction | Precondition, values: dict[int, float], tested: bool = True) -> Verdict:
    """The verdict on one claim from its per-seed values (``tested`` False: a precondition failed)."""
    kind = "prediction" if isinstance(claim, Prediction) else "precondition"
    seeds = claim.seeds if isinstance(claim, Prediction) else None
    p_below = claim.p_below if isinstance(claim, Prediction) else None
    rule = _rule(claim.comparison, claim.threshold, seeds, len(values), p_below)
    base: dict[str, Any] = dict(spec=spec, kind=kind, id=getattr(claim, "id", ""), text=claim.text,
                                reads=claim.reads(), rule=rule, transcribed=claim.transcribed)
    if not values:
        return Verdict(**base, status=NOT_TESTED)
    x = np.array(list(values.values()))
    mean = float(x.mean())
    se = float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.nan
    p = _t_test(x, se)
    met = int(meets(x, claim.comparison, claim.threshold).sum())
    inside = bool(meets(np.array([mean]), claim.comparison, claim.threshold)[0])
    tie = seeds is None and claim.comparison == "within" and kind == "prediction"
    if tie:
        p = tost(mean, se, x.size, claim.threshold)
        ok = inside and p < TOST_ALPHA
    elif seeds is not None:
        ok = met >= seeds
    else:
        ok = inside and (p_below is None or (not math.isnan(p) and p < p_below))
    outcomes = {"precondition": (MET, MISSED), "prediction": (HELD, FAILED) if tested else (NOT_TESTED,) * 2}
    status = outcomes[kind][0 if ok else 1]
    if tie and tested and inside and not ok:
        status = UNDECIDED
    return Verdict(**base, status=status, values=tuple(values.values()), met=met, mean=mean, se=se, p=p)


def _t_test(x: np.ndarray, se: float) -> float:
    """The paired t-test's p-value of the per-seed values against 0; without spread (every seed the same
    value) its limit: 0 for a value other than 0, 1 for 0. NaN for one seed."""
    if x.size < 2:
        return math.nan
    if se == 0:
        return 0.0 if float(x[0]) != 0 else 1.0
    return float(stats.ttest_1samp(x, 0.0).pvalue)


def tost(mean: float, se: float, n: int, margin: float) -> float:
    """The TOST p-value of ``|mean| <= margin`` (the larger of the two one-sided t tests, ``n - 1`` df); without
    spread (``se`` 0) its limit: 0 strictly inside the band, 1 on or outside its edges. NaN for one seed."""
    if n < 2 or math.isnan(se):
        return math.nan
    if se == 0:
        return 0.0 if abs(mean) < margin else 1.0
    lower = stats.t.sf((mean + margin) / se, n - 1)
    upper = stats.t.sf((margin - mean) / se, n - 1)
    return float(max(lower, upper))


def _rule(comparison: Comparison, threshold: float, seeds: int | None, n: int, p_below: float | None) -> str:
    test = {"within": f"|x| <= {threshold:g}", "outside": f"|x| > {threshold:g}"}.get(
        comparison, f"x {comparison} {threshold:g}")
    if seeds is not None:
        return f"{test} on >= {seeds} of {n} seeds"
    tie = f", TOST p < {TOST_ALPHA:g}" if comparison == "within" else ""
    return f"mean {test.removeprefix('x ')}" + (f", p < {p_below:g}" if p_below is not None else tie)


def evaluate(path: Path, exports: Path = EXPORT_DIR) -> list[Verdict]:
    """The verdicts on every claim of the spec at ``path``, preconditions first."""
    return decide_all(*load_claims(path), exports)


def decide_all(name: str, predictions: list[Prediction], preconditions: list[Precondition],
               exports: Path = EXPORT_DIR) -> list[Verdict]:
    """The verdicts on spec ``name``'s claims from its exports: preconditions first, then the predictions,
    not tested where a precondition was missed."""
    data = read_export(name, exports)
    if data is None or data.history is None:
        claims: list[Prediction | Precondition] = [*preconditions, *predictions]
        return [decide(name, c, {}) for c in claims]
    read = [decide(name, c, per_seed(data.runs, data.history, c)) for c in preconditions]
    tested = all(v.status == MET for v in read)
    return read + [decide(name, c, per_seed(data.runs, data.history, c), tested) for c in predictions]


def ledger(root: Path | None = None, exports: Path = EXPORT_DIR, spec: str | None = None) -> list[Verdict]:
    """Every shipped spec's verdicts (the specs that carry claims), spec by spec in file order; with ``spec``,
    only the spec of that name (none where no shipped spec of that name carries claims)."""
    root = root or shipped_dir()
    paths = sorted(p for folder in SPEC_FOLDERS for p in (root / folder).glob("*.toml"))
    claimed = [load_claims(path) for path in paths if _has_claims(path)]
    return [v for name, predictions, preconditions in claimed if spec in (None, name)
            for v in decide_all(name, predictions, preconditions, exports)]


def _has_claims(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    return "[[predictions]]" in text or "[[preconditions]]" in text


def design_note(verdicts: list[Verdict]) -> str:
    """``does not test its mechanism`` where a precondition of the spec was missed, else ``""``."""
    return "does not test its mechanism" if any(v.status == MISSED for v in verdicts) else ""


def ledger_markdown(verdicts: list[Verdict], spec: str | None = None) -> str:
    """The verdicts as a Markdown table (one spec's, or all), each with its numbers."""
    rows = []
    for v in verdicts:
        if spec is not None and v.spec != spec:
            continue
        rows.append([v.spec, v.id or "pre", v.text, v.reads, v.rule, numbers(v), v.status])
    head = ["spec", "claim", "as written", "reads", "rule", "numbers", "status"]
    return markdown_table(head, rows)


def numbers(v: Verdict) -> str:
    """The numbers a verdict was decided on: seeds that meet the rule's comparison, the mean, its SE and p."""
    if not v.values:
        return "no data"
    p_name = "TOST p" if "TOST" in v.rule else "p"
    return (f"{v.met} of {len(v.values)} seeds meet it; mean {v.mean:.3g}"
            + (f" ± {v.se:.2g}" if not math.isnan(v.se) else "")
            + (f", {p_name} {v.p:.2g}" if not math.isnan(v.p) else ""))


def ledger_lines(verdicts: list[Verdict]) -> str:
    """One line per claim, spec by spec, with a spec whose precondition was missed marked as such."""
    lines = []
    for spec in dict.fromkeys(v.spec for v in verdicts):
        mine = [v for v in verdicts if v.spec == spec]
        note = design_note(mine)
        lines.append(f"{spec}" + (f" ({note})" if note else "") + ":")
        lines += [f"  {v.id or 'precondition'}: {v.status} ({v.rule}; {numbers(v)}) - {v.text}" for v in mine]
    return "\n".join(lines)
