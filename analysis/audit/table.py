"""The published-results audit: load the papers' figures, recompute every claim, judge it.

Owns the audit table; the data, ``published.toml`` with its sources, is read by
:mod:`simlab.analysis.audit.data`. Every difference, standard error, significance ratio, like-for-like
flag and verdict is computed here from the data file with :mod:`simlab.analysis.statistics.stats`, the same code
``simlab report`` applies to simlab's own sweeps.

A published figure p (points) measured on ``eval_size`` x ``runs`` episodes is treated as one pooled
binomial rate, so its SE is 100 sqrt(p (1 - p) / n) with p as a fraction; two figures are independent,
so a claim's SE is the SE of a difference of two binomial rates.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from decimal import Decimal

import polars as pl

from simlab.analysis.audit.data import Claim, Published, load_published
from simlab.analysis.statistics import stats
from simlab.analysis.tables import markdown_table


# ------------------------------------------------------------------------------------ the audit
@dataclass(frozen=True)
class _Row:
    section: str
    id: str
    claim: str
    source: str
    compared: str
    difference: float
    decimals: int
    se: float | None = None
    sigma: float | None = None
    horizon_ratio: float | None = None
    published: float | None = None

    @property
    def like_for_like(self) -> bool | None:
        return None if self.horizon_ratio is None else stats.LikeForLike(self.horizon_ratio).matched


def _decimals(x: float) -> int:
    exponent = Decimal(repr(x)).normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def _reproduces(value: float, published: float) -> bool:
    """A figure printed to d decimals is reproduced when the recomputed value rounds to it."""
    return abs(value - published) <= 0.5 * 10.0 ** -_decimals(published) + 1e-9


def _compare(section: str, rid: str, title: str, treatment_ref: str, baseline_ref: str, data: Published) -> _Row:
    treatment, baseline = data.score(treatment_ref), data.score(baseline_ref)
    est_t, est_b = treatment.estimate(), baseline.estimate()
    diff = treatment.value - baseline.value
    se = sigma = None
    if est_t is not None and est_b is not None:
        d = stats.difference(est_t, est_b)
        se, sigma = d.se, d.sigma
    return _Row(
        section=section,
        id=rid,
        claim=title,
        source=data.source(treatment.paper, treatment.table),
        compared=f"{baseline.value:.1f} -> {treatment.value:.1f}",
        difference=diff,
        decimals=1,
        se=se,
        sigma=sigma,
        horizon_ratio=stats.horizon_match(treatment.horizon_k, baseline.horizon_k)["horizon_ratio"],
    )


def _mean_compare(claim: Claim, data: Published) -> _Row:
    t, b = data.grids[claim.treatment], data.grids[claim.baseline]
    return _Row(
        section="claim",
        id=claim.id,
        claim=claim.title,
        source=data.source(t.paper, t.table),
        compared=f"mean of {t.array.size} cells",
        difference=float((t.array - b.array).mean()),
        decimals=2,
        published=claim.published,
    )


def _sigma_verdict(row: _Row) -> str:
    if row.sigma is None:
        return "no SE: evaluation size not published"
    reading = stats.describe_sigma(row.sigma)
    if row.like_for_like is False:
        joiner = "but" if abs(row.sigma) >= stats.TIE_SIGMA else "and"
        return (
            f"{reading.split(' (')[0]} {joiner} not like-for-like ({row.horizon_ratio:g}x effective horizon)"
        )
    return reading


def _verdict(row: _Row, claim: Claim | None, reproduced: dict[str, bool], data: Published) -> str:
    if claim is not None and claim.published is not None:
        stated = f"{claim.published_label} {claim.published:g}"
        if _reproduces(row.difference, claim.published):
            return f"reproduces the {stated}"
        if claim.published_group is not None and not reproduced[claim.published_group]:
            return f"{stated} matches no baseline"
        return f"does not reproduce the {stated}"
    if claim is not None and claim.question == "lead":
        if row.difference >= 0:
            return "leads" if row.difference > 0 else "tied"
        return f"does not lead: {data.score(claim.baseline).method} is ahead"
    return _sigma_verdict(row)


def audit(data: Published | None = None) -> pl.DataFrame:
    """Recompute every claim and ablation; one row each, in file order, claims first.

    Columns: section, id, claim, source, compared, difference, decimals (printed precision), se, sigma,
    horizon_ratio, like_for_like, published, verdict. Unknown quantities are null.
    """
    data = load_published() if data is None else data
    rows: list[tuple[_Row, Claim | None]] = []
    claim: Claim | None
    for claim in data.claims:
        if claim.kind == "mean_difference":
            row = _mean_compare(claim, data)
        else:
            row = _compare("claim", claim.id, claim.title, claim.treatment, claim.baseline, data)
        rows.append((row, claim))
    for ab in data.ablations:
        rows.append((_compare("ablation", ab.id, ab.title, ab.ablated, ab.full, data), None))
    reproduced: dict[str, bool] = {}
    for row, claim in rows:
        if claim is not None and claim.published_group is not None and claim.published is not None:
            hit = _reproduces(row.difference, claim.published)
            reproduced[claim.published_group] = reproduced.get(claim.published_group, False) or hit
    records = [
        {**asdict(row), "like_for_like": row.like_for_like, "verdict": _verdict(row, claim, reproduced, data)}
        for row, claim in rows
    ]
    schema = {
        "section": pl.String,
        "id": pl.String,
        "claim": pl.String,
        "source": pl.String,
        "compared": pl.String,
        "difference": pl.Float64,
        "decimals": pl.Int64,
        "se": pl.Float64,
        "sigma": pl.Float64,
        "horizon_ratio": pl.Float64,
        "like_for_like": pl.Boolean,
        "published": pl.Float64,
        "verdict": pl.String,
    }
    return pl.DataFrame(records, schema=schema)


def ablation_table(data: Published | None = None) -> pl.DataFrame:
    """The published ablations keyed by the simlab setting they test, for ``--against-published``.

    One row per ablation, in file order. Columns: id, axis, full_setting, ablated_setting (registry
    names where the axis is a registry), claim, source, difference (ablated - full, points), se, sigma.
    """
    data = load_published() if data is None else data
    keys = pl.DataFrame(
        [a.model_dump(include={"id", "axis", "full_setting", "ablated_setting"}) for a in data.ablations],
        schema={"id": pl.String, "axis": pl.String, "full_setting": pl.String, "ablated_setting": pl.String},
    )
    measured = audit(data).filter(pl.col("section") == "ablation")
    columns = ["id", "claim", "source", "difference", "se", "sigma"]
    return keys.join(measured.select(columns), on="id", how="left", maintain_order="left")


# ------------------------------------------------------------------------------------ rendering
def like_for_like_text(like: bool | None, ratio: float | None) -> str:
    """"yes", "no (3x)" (the horizon ratio) or "unknown"; shared with ``simlab report``."""
    if like is None or ratio is None:
        return "unknown"
    return "yes" if like else f"no ({ratio:g}x)"


def to_markdown(frame: pl.DataFrame) -> str:
    """The audit table as Markdown: claims, then the published ablations."""
    headers = ["Claim", "Source", "Compared", "Difference", "SE", "Sigma", "Like-for-like", "Verdict"]
    parts = []
    for section, heading in (
        ("claim", "Published claims"),
        ("ablation", "Published ablations (ablated - full)"),
    ):
        rows = [
            [
                r["claim"],
                r["source"],
                r["compared"],
                f"{r['difference']:+.{r['decimals']}f}",
                "n/a" if r["se"] is None else f"{r['se']:.1f}",
                "n/a" if r["sigma"] is None or math.isnan(r["sigma"]) else f"{r['sigma']:+.2f}",
                like_for_like_text(r["like_for_like"], r["horizon_ratio"]),
                r["verdict"],
            ]
            for r in frame.filter(pl.col("section") == section).iter_rows(named=True)
        ]
        if rows:
            parts.append(f"### {heading}\n\n{markdown_table(headers, rows)}")
    return "\n".join(parts)
