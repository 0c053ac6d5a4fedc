"""``simlab report --against-published``: the sweep's variant pairs beside the published ablations.

Owns pairing the variants that differ only in an ablation's setting (ablated - full, like the papers print
it) and judging the pair's difference against the published direction. The published ablations come from
:func:`simlab.analysis.audit.table.ablation_table`, the variant rows from
:func:`simlab.analysis.report.build.variant_table`.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from simlab.analysis.audit.table import ablation_table
from simlab.analysis.statistics import compare, power, stats
from simlab.analysis.statistics.levels import Estimate
from simlab.sweep import labels


def _same(a: str | None, b: str) -> bool:
    # cell labels print Python values (True), the published data writes TOML ones (true)
    return a is not None and a.lower() == b.lower()


PUBLISHED_SCHEMA = {
    "ablation": pl.String, "claim": pl.String, "axis": pl.String, "full_setting": pl.String,
    "ablated_setting": pl.String, "published_difference": pl.Float64, "published_sigma": pl.Float64,
    "full_variant": pl.String, "ablated_variant": pl.String, "difference": pl.Float64, "se": pl.Float64,
    "sigma": pl.Float64, "df": pl.Float64, "p": pl.Float64, "horizon_ratio": pl.Float64, "like_for_like": pl.Boolean,
    "same_direction": pl.Boolean, "reproduces_direction": pl.Boolean, "verdict": pl.String,
}
"""The columns of :func:`against_published`."""


def against_published(table: pl.DataFrame, evaluation: str = "compacted") -> pl.DataFrame:
    """Each published ablation beside every pair of this sweep's variants that differ only in its
    setting (ablated - full, like the papers print it), and whether the direction is reproduced."""
    rows = table.filter((pl.col("evaluation") == evaluation) & (pl.col("statistic") == "final")).to_dicts()
    measured = {r["variant"]: r for r in rows if r["mean"] is not None}
    settings = {r["variant"]: labels.parse_label(r["variant"]) for r in rows}
    out: list[dict[str, Any]] = []
    for ab in ablation_table().iter_rows(named=True):
        axis = ab["axis"]
        published = {
            "ablation": ab["id"], "claim": ab["claim"], "axis": axis, "full_setting": ab["full_setting"],
            "ablated_setting": ab["ablated_setting"], "published_difference": ab["difference"],
            "published_sigma": ab["sigma"],
        }
        pairs = _ablation_pairs(settings, axis, ab["full_setting"], ab["ablated_setting"])
        if not pairs:
            values = sorted({s[axis] for s in settings.values() if axis in s})
            why = f"takes only {', '.join(values)}" if values else "is not varied"
            out.append(published | {"verdict": f"not tested: this sweep's `{axis}` {why}"})
        for f, a in pairs:
            row = published | {"full_variant": f, "ablated_variant": a}
            if f in measured and a in measured:
                row |= _pair_difference(measured[f], measured[a], ab["difference"])
            else:
                row |= {"verdict": "not measured: a variant of the pair has no finished run with the metric"}
            out.append(row)
    return pl.DataFrame(out, schema=PUBLISHED_SCHEMA)


def _ablation_pairs(settings: dict[str, dict[str, str]], axis: str, full: str, ablated: str) -> list[tuple[str, str]]:
    """(full variant, ablated variant) pairs that differ only in ``axis``, set to ``full`` and ``ablated``."""
    return [
        (f, a)
        for f, sf in settings.items()
        for a, sa in settings.items()
        if _same(sf.get(axis), full)
        and _same(sa.get(axis), ablated)
        and {k: v for k, v in sf.items() if k != axis} == {k: v for k, v in sa.items() if k != axis}
    ]


def _estimate(row: dict[str, Any]) -> Estimate:
    return Estimate(row["mean"], row["se"], row["df"] if row.get("df") is not None else math.nan,
                    row.get("seeds") or 0, row.get("instances") or 0, "seeds")


def _pair_difference(full: dict[str, Any], ablated: dict[str, Any], published: float) -> dict[str, Any]:
    """ablated - full (two independent means, Welch's df), the horizon ratio, and the verdict against
    ``published``."""
    d = compare.independent(_estimate(ablated), _estimate(full))
    diff = ablated["mean"] - full["mean"]
    se = math.hypot(ablated["se"], full["se"])
    df = math.nan if d is None else d.df
    p = power.two_sided_p(diff, se, df)
    sigma = stats.significance(diff, se)
    return {"difference": diff, "se": se, "sigma": sigma, "df": df, "p": p,
            **stats.horizon_match(ablated["horizon"], full["horizon"]), **_direction(diff, sigma, p, published)}


def _direction(diff: float, sigma: float, p: float, published: float) -> dict[str, Any]:
    """Same sign as the published delta, and reproduced only when also significant (two-sided t test,
    p < :data:`power.ALPHA`)."""
    size = "n/a" if math.isnan(sigma) else f"{abs(sigma):.2f} sigma"
    if not math.isnan(p):
        size += f", p {p:.2g}"
    if diff == 0:  # no sign to compare: neither reproduces nor contradicts the published direction
        return {"same_direction": False, "reproduces_direction": False, "verdict": f"no difference ({size})"}
    same = math.copysign(1.0, diff) == math.copysign(1.0, published)
    significant = p < power.ALPHA
    if significant:
        verdict = f"{'reproduces the' if same else 'opposite'} direction at {size}"
    else:
        verdict = f"{'same' if same else 'opposite'} direction, {_reading(sigma, p)} ({size})"
    return {"same_direction": same, "reproduces_direction": same and significant, "verdict": verdict}


def _reading(sigma: float, p: float) -> str:
    if math.isnan(p):
        return "no SE"
    return "within noise" if abs(sigma) < stats.NOISE_SIGMA else "not significant"
