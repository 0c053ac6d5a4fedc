"""Standard errors, significance ratios, like-for-like checks and tie-aware ranking.

Shared by ``simlab audit`` (published results) and ``simlab report`` (simlab's own sweeps), so that a
published difference and a simulated one are judged by the same arithmetic. Every function is pure.

Units: success rates go in as fractions in [0, 1]; means, differences and standard errors of rates
come out in percentage points (x 100), the unit the papers print. :func:`mean_se` is the exception:
it works on any objective and keeps the input's unit.

    binomial SE          se(p; n)        = 100 sqrt(p (1 - p) / n)
    SE of a difference   se(p1 - p2)     = 100 sqrt(p1 (1 - p1) / n1 + p2 (1 - p2) / n2)
    mean over k seeds    p_bar           = (1/k) sum_i p_i
      binomial part      V_bin           = (1/k^2) sum_i p_i (1 - p_i) / n_i
      seed spread        V_seed          = s^2 / k,   s^2 = 1/(k-1) sum_i (p_i - p_bar)^2
      combined           V               = V_bin + max(V_seed - V_bin, 0)  =  max(V_bin, V_seed)
    significance         sigma           = difference / se
    effective horizon    H               = L x (S + 1)               (SUPO's L_RL x (S + 1))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

POINTS = 100.0
"""Percentage points per unit of rate."""
NOISE_SIGMA = 1.0
"""Below this many standard errors a difference is called noise."""
TIE_SIGMA = 2.0
"""Below this many standard errors two variants are tied (ranking) and a difference is not significant."""

Dominant = Literal["binomial", "seeds"]


# ------------------------------------------------------------------------------------------ checks
def _rates(p: npt.ArrayLike, name: str) -> npt.NDArray[np.float64]:
    arr = np.asarray(p, dtype=np.float64)
    if not np.all((arr >= 0.0) & (arr <= 1.0)):  # also rejects NaN
        raise ValueError(f"`{name}={p!r}` is invalid; choose rates in [0, 1] (fractions, not points)")
    return arr


def _counts(n: npt.ArrayLike, name: str) -> npt.NDArray[np.float64]:
    arr = np.asarray(n, dtype=np.float64)
    if not np.all((arr >= 1.0) & (arr == np.floor(arr))):
        raise ValueError(f"`{name}={n!r}` is invalid; choose whole episode counts >= 1")
    return arr


# --------------------------------------------------------------------------------- binomial errors
def binomial_var(p: npt.ArrayLike, n: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Variance of a success rate p measured on n independent episodes, in points^2.

    V = 100^2 p (1 - p) / n. Broadcasts over arrays of rates and counts.
    """
    p_, n_ = _rates(p, "p"), _counts(n, "n")
    return np.asarray(POINTS**2 * p_ * (1.0 - p_) / n_)


def binomial_se(p: float, n: int) -> float:
    """Standard error of one success rate p on n episodes, in points: 100 sqrt(p (1 - p) / n)."""
    return math.sqrt(float(binomial_var(p, n)))


def se_diff(p1: float, n1: int, p2: float, n2: int) -> float:
    """Standard error of p1 - p2 for two independent binomial rates, in points.

    se = 100 sqrt(p1 (1 - p1) / n1 + p2 (1 - p2) / n2). Symmetric in its two (p, n) pairs.
    """
    return math.sqrt(float(binomial_var(p1, n1) + binomial_var(p2, n2)))


# ---------------------------------------------------------------------------- means over seeds
@dataclass(frozen=True)
class MeanSE:
    """A mean over seeds with its standard error split into its two sources."""

    mean: float
    """Mean over seeds (points for rates; the input's unit for :func:`mean_se`)."""
    se: float
    """Combined standard error: sqrt(max(V_bin, V_seed)); see the module docstring."""
    se_binomial: float
    """sqrt(V_bin): the error the finite evaluation episodes alone would give; 0 when not rates."""
    se_seeds: float
    """sqrt(V_seed) = s / sqrt(k): the observed spread across seeds; NaN with a single seed."""
    seeds: int
    """k, the number of seeds pooled."""
    episodes: int
    """Evaluation episodes in total over the seeds; 0 when not rates."""

    @property
    def dominant(self) -> Dominant:
        """Which source sets the combined SE: "seeds" when the seed spread exceeds the binomial floor."""
        return "seeds" if self.se_seeds > self.se_binomial else "binomial"


def _seed_spread_var(values: npt.NDArray[np.float64]) -> float:
    k = values.size
    return float(values.var(ddof=1) / k) if k >= 2 else math.nan  # s^2 / k


def rate_mean_se(rates: npt.ArrayLike, episodes: npt.ArrayLike) -> MeanSE:
    """Mean success rate over k seeds, with the SE combining binomial error and seed spread, in points.

    rates:    (k,) per-seed success rates in [0, 1].
    episodes: (k,) evaluation episodes behind each rate (or a scalar for all seeds).

        V_bin  = (1/k^2) sum_i 100^2 p_i (1 - p_i) / n_i
        V_seed = s^2 / k
        V      = V_bin + max(V_seed - V_bin, 0)

    Each seed's observed rate already carries its own binomial noise, so E[V_seed] = sigma_b^2 / k + V_bin
    with sigma_b^2 the true between-seed variance. Adding V_bin and V_seed in quadrature would count
    the binomial part twice; the excess of V_seed over V_bin is the method-of-moments estimate of the
    between-seed part (floored at 0), and V_bin is the floor no seed count removes. With one seed (or one
    pooled published figure) V = V_bin.
    """
    p = np.atleast_1d(_rates(rates, "rates"))
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"`rates={rates!r}` is invalid; choose a non-empty 1-D array of per-seed rates")
    n = np.atleast_1d(_counts(episodes, "episodes"))
    if n.shape != p.shape and n.size != 1:
        raise ValueError(f"`episodes` has shape {n.shape}; choose one count per rate, shape {p.shape}")
    n = np.broadcast_to(n, p.shape)
    k = p.size
    v_bin = float(binomial_var(p, n).sum()) / k**2
    v_seed = _seed_spread_var(POINTS * p)
    v = v_bin + max(v_seed - v_bin, 0.0) if k >= 2 else v_bin
    return MeanSE(
        mean=float(POINTS * p.mean()),
        se=math.sqrt(v),
        se_binomial=math.sqrt(v_bin),
        se_seeds=math.sqrt(v_seed) if k >= 2 else math.nan,
        seeds=k,
        episodes=int(n.sum()),
    )


def mean_se(values: npt.ArrayLike) -> MeanSE:
    """Mean of any per-seed objective with its SE over seeds, s / sqrt(k), in the input's unit.

    For objectives that are not success rates (mean return, segment count) there is no binomial part.
    A single seed has no measurable spread: se is NaN.
    """
    x = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"`values={values!r}` is invalid; choose a non-empty 1-D array of finite values")
    se_seeds = math.sqrt(_seed_spread_var(x)) if x.size >= 2 else math.nan
    return MeanSE(
        mean=float(x.mean()), se=se_seeds, se_binomial=0.0, se_seeds=se_seeds, seeds=x.size, episodes=0
    )


# --------------------------------------------------------------------------------- differences
@dataclass(frozen=True)
class Difference:
    """treatment - baseline with its standard error."""

    difference: float
    se: float
    """sqrt(se_t^2 + se_b^2): the two means are independent."""
    dominant: Dominant
    """The source with the larger variance summed over both sides."""

    @property
    def sigma(self) -> float:
        return significance(self.difference, self.se)


def difference(treatment: MeanSE, baseline: MeanSE) -> Difference:
    """treatment.mean - baseline.mean, se = sqrt(se_t^2 + se_b^2), and which error source dominates."""
    v_bin = treatment.se_binomial**2 + baseline.se_binomial**2
    v_seed = np.nansum([treatment.se_seeds**2, baseline.se_seeds**2])
    return Difference(
        difference=treatment.mean - baseline.mean,
        se=math.hypot(treatment.se, baseline.se),
        dominant="seeds" if v_seed > v_bin else "binomial",
    )


def significance(diff: float, se: float) -> float:
    """sigma = diff / se. A nonzero difference with se = 0 is +-inf; 0 / 0 and an unknown se are NaN."""
    if not se >= 0:  # negative or NaN
        if math.isnan(se):
            return math.nan
        raise ValueError(f"`se={se!r}` is invalid; choose a standard error >= 0")
    if se == 0:
        return math.copysign(math.inf, diff) if diff != 0 else math.nan
    return diff / se


def describe_sigma(sigma: float) -> str:
    """Short reading of a significance ratio: noise below 1 sigma, significant from 2 sigma on."""
    if math.isnan(sigma):
        return "no SE"
    size = abs(sigma)
    if size < NOISE_SIGMA:
        return f"within noise (<{NOISE_SIGMA:g} sigma)"
    if size < TIE_SIGMA:
        return f"not significant (<{TIE_SIGMA:g} sigma)"
    return f"significant (>={TIE_SIGMA:g} sigma)"


# ------------------------------------------------------------------------------ like for like
def effective_horizon(working_context: float, max_compactions: int) -> float:
    """H = L x (S + 1): the most context a rollout can use with S compactions of an L-token window."""
    if isinstance(working_context, bool) or not isinstance(working_context, Real) or not working_context > 0:
        raise ValueError(f"`working_context={working_context!r}` is invalid; choose a length > 0")
    if isinstance(max_compactions, bool) or not isinstance(max_compactions, int) or max_compactions < 0:
        raise ValueError(f"`max_compactions={max_compactions!r}` is invalid; choose an integer >= 0")
    return float(working_context) * (max_compactions + 1)


@dataclass(frozen=True)
class LikeForLike:
    """Whether two variants were compared at the same effective horizon."""

    ratio: float
    """H_treatment / H_baseline."""

    @property
    def matched(self) -> bool:
        return math.isclose(self.ratio, 1.0, rel_tol=1e-9)


def like_for_like(treatment_horizon: float, baseline_horizon: float) -> LikeForLike:
    """Compare effective horizons H = L x (S + 1); a ratio other than 1 is not like-for-like."""
    for name, h in (("treatment_horizon", treatment_horizon), ("baseline_horizon", baseline_horizon)):
        if not h > 0:
            raise ValueError(f"`{name}={h!r}` is invalid; choose an effective horizon > 0")
    return LikeForLike(ratio=treatment_horizon / baseline_horizon)


# ------------------------------------------------------------------------------------- ranking
def rank_with_ties(
    means: npt.ArrayLike, ses: npt.ArrayLike, *, threshold: float = TIE_SIGMA, higher_is_better: bool = True
) -> npt.NDArray[np.int64]:
    """(V,) ranks, 1 = best, where a difference under ``threshold`` sigma is a tie.

        rank_i = 1 + #{ j : (m_j - m_i) / sqrt(se_i^2 + se_j^2) >= threshold }

    A variant's rank counts only the variants that beat it significantly, so ties need not be
    transitive (A ties B, B ties C, A beats C gives ranks 1, 1, 2), yet whenever j significantly beats
    i, rank_i > rank_j. Unknown (NaN) SEs make every comparison with that variant a tie.
    """
    m = np.asarray(means, dtype=np.float64)
    s = np.asarray(ses, dtype=np.float64)
    if m.ndim != 1 or s.shape != m.shape:
        raise ValueError(
            f"`means` {m.shape} and `ses` {s.shape} are invalid; choose two 1-D arrays of one length"
        )
    if not np.all(np.isfinite(m)) or np.any(s < 0):
        raise ValueError("`means` must be finite and `ses` >= 0 (NaN for unknown)")
    if not threshold > 0:
        raise ValueError(f"`threshold={threshold!r}` is invalid; choose a number of sigmas > 0")
    gap = m[None, :] - m[:, None] if higher_is_better else m[:, None] - m[None, :]  # (V, V): j over i
    se = np.sqrt(s[:, None] ** 2 + s[None, :] ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = gap / se  # se = 0: +-inf for a gap, NaN for none; unknown se: NaN
    beats = np.where(np.isnan(z), 0.0, z) >= threshold
    return np.asarray(1 + beats.sum(axis=1), dtype=np.int64)


# ------------------------------------------------------------------------- per-variant tables
_SUMMARY_SCHEMA = {
    "seeds": pl.Int64,
    "missing": pl.Int64,
    "episodes": pl.Int64,
    "mean": pl.Float64,
    "se": pl.Float64,
    "se_binomial": pl.Float64,
    "se_seeds": pl.Float64,
    "dominant": pl.String,
}


def variant_summary(
    runs: pl.DataFrame, *, variant: str, rate: str, episodes: str, horizon: str | None = None
) -> pl.DataFrame:
    """One row per variant from one row per seed: :func:`rate_mean_se` over the variant's seeds.

    runs: a frame with the columns named by ``variant`` (the grid cell), ``rate`` (success rate in
    [0, 1]) and ``episodes`` (evaluation episodes behind it), and optionally ``horizon`` (the effective
    horizon L x (S + 1), one value per variant). A seed whose rate is null or NaN is counted in
    ``missing``, never silently dropped; a variant with no measured seed has null statistics.

    Columns: variant, [horizon], seeds, missing, episodes, mean, se, se_binomial, se_seeds, dominant.
    """
    needed = [variant, rate, episodes, *([horizon] if horizon else [])]
    absent = [c for c in needed if c not in runs.columns]
    if absent:
        raise ValueError(f"columns {absent} are missing; the frame has {runs.columns}")
    records = []
    for (name,), group in runs.group_by(variant, maintain_order=True):
        measured = group.filter(pl.col(rate).cast(pl.Float64).is_not_nan().fill_null(False))
        record: dict[str, object] = {variant: name, "missing": group.height - measured.height}
        if horizon:
            values = group[horizon].unique().to_list()
            if len(values) != 1:
                raise ValueError(f"variant {name!r} has horizons {values}; choose one per variant")
            record[horizon] = values[0]
        if measured.height:
            m = rate_mean_se(measured[rate].to_numpy(), measured[episodes].to_numpy())
            record |= {
                "seeds": m.seeds,
                "episodes": m.episodes,
                "mean": m.mean,
                "se": m.se,
                "se_binomial": m.se_binomial,
                "se_seeds": m.se_seeds,
                "dominant": m.dominant,
            }
        records.append(record)
    schema: dict[str, Any] = {
        variant: runs.schema[variant],
        **({horizon: pl.Float64} if horizon else {}),
        **_SUMMARY_SCHEMA,
    }
    return pl.DataFrame(records, schema=schema).with_columns(pl.col("seeds").fill_null(0))


def against_baseline(
    summary: pl.DataFrame,
    baseline: str,
    *,
    variant: str,
    horizon: str | None = None,
    higher_is_better: bool = True,
) -> pl.DataFrame:
    """Each variant's difference from ``baseline``, its SE and sigma, like-for-like, and tie-aware rank.

    summary: the output of :func:`variant_summary`. Adds difference (variant - baseline), se_difference,
    sigma, dominant_difference, and with ``horizon`` also horizon_ratio and like_for_like; rank comes from
    :func:`rank_with_ties` over all measured variants (null where a variant has no measured seed).
    """
    names = summary[variant].to_list()
    if baseline not in names:
        raise ValueError(f"`baseline={baseline!r}` is invalid; choose one of {names}")

    def estimate(row: dict[str, Any]) -> MeanSE | None:
        if row["mean"] is None:
            return None
        return MeanSE(**{k: row[k] for k in ("mean", "se", "se_binomial", "se_seeds", "seeds", "episodes")})

    rows = summary.to_dicts()
    base_row = rows[names.index(baseline)]
    base = estimate(base_row)
    measured = [i for i, r in enumerate(rows) if r["mean"] is not None]
    ranks = rank_with_ties(
        [rows[i]["mean"] for i in measured],
        [rows[i]["se"] for i in measured],
        higher_is_better=higher_is_better,
    )
    rank_of = dict(zip(measured, ranks.tolist(), strict=True))
    extra = []
    for i, row in enumerate(rows):
        est = estimate(row)
        d = difference(est, base) if est is not None and base is not None else None
        horizons: dict[str, object] = {}
        if horizon:
            known = row[horizon] is not None and base_row[horizon] is not None
            ratio = like_for_like(float(row[horizon]), float(base_row[horizon])).ratio if known else None
            horizons = {
                "horizon_ratio": ratio,
                "like_for_like": None if ratio is None else LikeForLike(ratio).matched,
            }
        extra.append(
            {
                "difference": None if d is None else d.difference,
                "se_difference": None if d is None else d.se,
                "sigma": None if d is None else d.sigma,
                "dominant_difference": None if d is None else d.dominant,
                **horizons,
                "rank": rank_of.get(i),
            }
        )
    schema = {
        "difference": pl.Float64,
        "se_difference": pl.Float64,
        "sigma": pl.Float64,
        "dominant_difference": pl.String,
        **({"horizon_ratio": pl.Float64, "like_for_like": pl.Boolean} if horizon else {}),
        "rank": pl.Int64,
    }
    return pl.concat([summary, pl.DataFrame(extra, schema=schema)], how="horizontal")
