"""Standard errors of published figures, significance ratios, like-for-like checks and tie-aware ranking.

Shared by ``simlab audit`` (published results) and ``simlab report`` (simlab's own sweeps), so that a
published difference and a simulated one are judged by the same arithmetic. Every function is pure. The
two-level SEs of simlab's own runs (seeds and held-out instances) are :mod:`simlab.analysis.statistics.levels`; power
and equivalence are :mod:`simlab.analysis.statistics.power`.

Units: success rates go in as fractions in [0, 1]; means, differences and standard errors of rates
come out in percentage points (x 100), the unit the papers print. :func:`mean_se` is the exception:
it works on any objective and keeps the input's unit.

    binomial SE          se(p; n)        = 100 sqrt(p (1 - p) / n)
    SE of a difference   se(p1 - p2)     = 100 sqrt(p1 (1 - p1) / n1 + p2 (1 - p2) / n2)
    mean over k seeds    p_bar           = (1/k) sum_i p_i
      binomial part      V_bin           = (1/k^2) sum_i p_i (1 - p_i) / n_i      (each seed its own episodes)
      seed spread        V_seed          = s^2 / k,   s^2 = 1/(k-1) sum_i (p_i - p_bar)^2
      own held-out sets  V               = max(V_bin, V_seed)
      one shared set     V               = V_seed + p_bar (1 - p_bar) / n         (the instance term's bound)
    significance         sigma           = difference / se
    interquartile mean   IQM             = mean of the middle 50% of the per-seed values (rliable)
    bootstrap CI         percentile interval of a statistic over seeds resampled within each stratum
    effective horizon    H               = L x (S + 1)               (SUPO's L_RL x (S + 1))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from simlab.analysis.statistics import power
from simlab.analysis.statistics.power import ALPHA

POINTS = 100.0
"""Percentage points per unit of rate."""
NOISE_SIGMA = 1.0
"""Below this many standard errors a difference is called noise."""
TIE_SIGMA = 2.0
"""Below this many standard errors two variants are tied (ranking) and a difference is not significant."""

BOOTSTRAP_SAMPLES = 2000
"""Bootstrap resamples per interval (rliable uses 2000 for its stratified-bootstrap intervals)."""
CI_LEVEL = 0.95

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


def rate_mean_se(rates: npt.ArrayLike, episodes: npt.ArrayLike, *, shared: bool = False) -> MeanSE:
    """Mean success rate over k seeds with its SE, in points.

    rates:    (k,) per-seed success rates in [0, 1].
    episodes: (k,) evaluation episodes behind each rate (or a scalar for all seeds).
    shared:   every seed played one held-out set of ``episodes`` instances.

    Each seed on its own episodes: V = V_bin + max(V_seed - V_bin, 0) = max(V_bin, V_seed). Each observed
    rate already carries its binomial noise, so E[V_seed] = sigma_b^2 / k + V_bin; the excess of V_seed over
    V_bin is the method-of-moments estimate of the between-seed part, and V_bin is the floor no seed count
    removes. One shared set: the k seeds' evaluations are not k n independent episodes (the instance effects
    are common to all of them), so the seed spread is joined by the bound p (1 - p) / n on the instance
    term, n the shared set's size; ``episodes`` then counts that set once.
    """
    p = np.atleast_1d(_rates(rates, "rates"))
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"`rates={rates!r}` is invalid; choose a non-empty 1-D array of per-seed rates")
    n = np.atleast_1d(_counts(episodes, "episodes"))
    if n.shape != p.shape and n.size != 1:
        raise ValueError(f"`episodes` has shape {n.shape}; choose one count per rate, shape {p.shape}")
    n = np.broadcast_to(n, p.shape)
    k = p.size
    v_seed = _seed_spread_var(POINTS * p)  # NaN for one seed
    if shared:  # the instance term's bound: the binomial variance of the mean rate on the one set
        v_bin = float(binomial_var(p.mean(), n.min()))
        v = (v_seed if k >= 2 else 0.0) + v_bin
    else:
        v_bin = float(binomial_var(p, n).sum()) / k**2
        v = max(v_bin, v_seed) if k >= 2 else v_bin
    episodes = int(n.min() if shared else n.sum())
    return MeanSE(float(POINTS * p.mean()), math.sqrt(v), math.sqrt(v_bin), math.sqrt(v_seed), k, episodes)


def mean_se(values: npt.ArrayLike) -> MeanSE:
    """Mean of any per-seed objective with its SE over seeds, s / sqrt(k), in the input's unit.

    For objectives that are not success rates (mean return, segment count) there is no binomial part.
    A single seed has no measurable spread: se is NaN.
    """
    x = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"`values={values!r}` is invalid; choose a non-empty 1-D array of finite values")
    se_seeds = math.sqrt(_seed_spread_var(x)) if x.size >= 2 else math.nan
    return MeanSE(mean=float(x.mean()), se=se_seeds, se_binomial=0.0, se_seeds=se_seeds, seeds=x.size, episodes=0)


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
        """difference / se (NaN when the SE is 0 or unknown)."""
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


def iqm(values: npt.ArrayLike) -> float:
    """Interquartile mean: the mean of the values left after trimming 25% from each end (as rliable,
    ``scipy.stats.trim_mean(x, 0.25)``). Robust to one diverged or lucky seed, and equal to the mean for
    up to three values."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"`values={values!r}` is invalid; choose a non-empty 1-D array")
    return float(_trimmed_means(x[None, :])[0])


def _trimmed_means(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The interquartile mean of each row of ``rows`` (each row sorted ascending)."""
    cut = int(0.25 * rows.shape[1])
    means: npt.NDArray[np.float64] = rows[:, cut : rows.shape[1] - cut].mean(axis=1)
    return means


def bootstrap_ci(
    values: npt.ArrayLike,
    statistic: Literal["mean", "iqm"] = "mean",
    *,
    strata: npt.ArrayLike | None = None,
    level: float = CI_LEVEL,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of ``statistic`` over the values resampled with replacement within each stratum.

    ``strata`` (one label per value) keeps each stratum's count fixed, as rliable's stratified bootstrap
    does across tasks; without it every value is one stratum. Deterministic for a given ``seed``. With a
    single value the interval is that value.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"`values={values!r}` is invalid; choose a non-empty 1-D array of finite values")
    if not 0 < level < 1:
        raise ValueError(f"`level={level!r}` is invalid; choose a value in (0, 1)")
    if strata is None:
        labels = np.zeros(x.size, dtype=np.int64)
    else:
        labels = np.unique(np.asarray(strata), return_inverse=True)[1]
    if labels.shape != x.shape:
        raise ValueError(f"`strata` has {labels.size} labels; give one per value ({x.size})")
    rng = np.random.default_rng(seed)
    picks = np.empty((samples, x.size), dtype=np.int64)
    for label in np.unique(labels):
        rows = np.flatnonzero(labels == label)
        picks[:, rows] = rows[rng.integers(0, rows.size, size=(samples, rows.size))]
    resampled = np.sort(x[picks], axis=1)
    if statistic == "mean":
        stats_ = resampled.mean(axis=1)
    elif statistic == "iqm":
        stats_ = _trimmed_means(resampled)
    else:
        raise ValueError(f"`statistic={statistic!r}` is invalid; choose 'mean' or 'iqm'")
    tail = (1 - level) / 2
    low, high = np.quantile(stats_, [tail, 1 - tail])
    return float(low), float(high)


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
    """H = L x (S + 1) for a published setting given as its working context L and S: the harness's own
    formula (:func:`simlab.harness.config.horizon`), with the inputs checked."""
    from simlab.harness.config import horizon
    from simlab.rules import Positive, check_value, ints

    check_value("working_context", working_context, Positive)
    check_value("max_compactions", max_compactions, ints(0))
    return float(horizon(float(working_context), max_compactions))


@dataclass(frozen=True)
class LikeForLike:
    """Whether two variants were compared at the same effective horizon."""

    ratio: float
    """H_treatment / H_baseline."""

    @property
    def matched(self) -> bool:
        """Whether the horizons match (ratio 1 up to rounding)."""
        return math.isclose(self.ratio, 1.0, rel_tol=1e-9)


def like_for_like(treatment_horizon: float, baseline_horizon: float) -> LikeForLike:
    """Compare effective horizons H = L x (S + 1); a ratio other than 1 is not like-for-like."""
    for name, h in (("treatment_horizon", treatment_horizon), ("baseline_horizon", baseline_horizon)):
        if not h > 0:
            raise ValueError(f"`{name}={h!r}` is invalid; choose an effective horizon > 0")
    return LikeForLike(ratio=treatment_horizon / baseline_horizon)


def horizon_match(treatment_horizon: float | None, baseline_horizon: float | None) -> dict[str, Any]:
    """``horizon_ratio`` and ``like_for_like`` of two effective horizons, both ``None`` when one is unknown."""
    if treatment_horizon is None or baseline_horizon is None:
        return {"horizon_ratio": None, "like_for_like": None}
    match = like_for_like(float(treatment_horizon), float(baseline_horizon))
    return {"horizon_ratio": match.ratio, "like_for_like": match.matched}


# ------------------------------------------------------------------------------------- ranking
def rank_with_ties(
    means: npt.ArrayLike,
    ses: npt.ArrayLike,
    dfs: npt.ArrayLike,
    *,
    alpha: float = ALPHA,
    higher_is_better: bool = True,
    pair_se: npt.ArrayLike | None = None,
    pair_df: npt.ArrayLike | None = None,
) -> npt.NDArray[np.int64]:
    """(V,) ranks, 1 = best, by the findings' machinery: each of the V (V - 1) / 2 pairs is a two-sided t
    test, and the pairs' p-values are Holm-adjusted together; j beats i when j leads and its adjusted
    p < ``alpha``.

        rank_i = 1 + #{ j : m_j beats m_i at Holm p < alpha },  t_ij = (m_j - m_i) / se_ij

    se_ij = sqrt(se_i^2 + se_j^2) at df min(df_i, df_j), or where ``pair_se`` (V, V) is finite, the paired SE
    of j - i over shared seeds at ``pair_df`` (shared seeds - 1). A variant's rank counts only the variants
    that beat it, so ties need not be transitive, yet whenever j beats i, rank_i > rank_j. An unknown (NaN)
    SE or df makes every comparison with that variant a tie (and leaves it out of the family's size).
    """
    m, s, d = (np.asarray(x, dtype=np.float64) for x in (means, ses, dfs))
    if m.ndim != 1 or s.shape != m.shape or d.shape != m.shape:
        raise ValueError(f"`means` {m.shape}, `ses` {s.shape} and `dfs` {d.shape} are invalid; choose three "
                         "1-D arrays of one length")
    if not np.all(np.isfinite(m)) or np.any(s < 0):
        raise ValueError("`means` must be finite and `ses` >= 0 (NaN for unknown)")
    se = np.sqrt(s[:, None] ** 2 + s[None, :] ** 2)
    df = np.minimum(d[:, None], d[None, :])
    if pair_se is not None:
        paired, paired_df = np.asarray(pair_se, dtype=np.float64), np.asarray(pair_df, dtype=np.float64)
        if paired.shape != se.shape or paired_df.shape != se.shape:
            raise ValueError(f"`pair_se` and `pair_df` have shapes {paired.shape}, {paired_df.shape}; choose "
                             f"({m.size}, {m.size})")
        use = np.isfinite(paired)
        se, df = np.where(use, paired, se), np.where(use, paired_df, df)
    gap = m[None, :] - m[:, None] if higher_is_better else m[:, None] - m[None, :]  # (V, V): j over i
    pairs = [(i, j) for i in range(m.size) for j in range(i + 1, m.size)]
    ps = power.holm([power.two_sided_p(float(gap[i, j]), float(se[i, j]), float(df[i, j])) for i, j in pairs])
    beats = np.zeros((m.size, m.size), dtype=bool)  # [i, j]: j beats i
    for (i, j), p in zip(pairs, ps, strict=True):
        if p < alpha and gap[i, j] != 0:
            beats[(i, j) if gap[i, j] > 0 else (j, i)] = True
    return np.asarray(1 + beats.sum(axis=1), dtype=np.int64)


