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
    paired difference    d_i = t_i - b_i over seeds both arms share,  se = s_d / sqrt(n)
      held-out bound     when every d_i is the same (s_d = 0): se = 100 sqrt((q - D^2) / m),
                         q = min(p_t + p_b, 2 - p_t - p_b), D = p_t - p_b, m held-out episodes
    detectable effect    MDE             = 2 se                      (at 2 sigma with the seeds at hand)
    seeds for effect E   n_E             = ceil((2 s / E)^2),  s = se sqrt(n)  (per-seed SD of the difference)
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
import polars as pl

POINTS = 100.0
"""Percentage points per unit of rate."""
NOISE_SIGMA = 1.0
"""Below this many standard errors a difference is called noise."""
TIE_SIGMA = 2.0
"""Below this many standard errors two variants are tied (ranking) and a difference is not significant."""

PAIRED_MIN_SEEDS = 3
"""Fewest shared seeds for a paired SE: with two, the SD of the differences rests on one degree of freedom."""
BOOTSTRAP_SAMPLES = 2000
"""Bootstrap resamples per interval (rliable uses 2000 for its stratified-bootstrap intervals)."""
CI_LEVEL = 0.95

Dominant = Literal["binomial", "seeds", "paired", "held-out"]


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


def paired_difference(treatment: npt.ArrayLike, baseline: npt.ArrayLike, *, episodes: int | None = None) -> Difference:
    """mean(t_i - b_i) over seeds the two arms share, with se = s_d / sqrt(n), in the input's unit.

    Arms that share a seed share the base model, the training prompts and the evaluation instances, so
    most of the evaluation noise is common to both and cancels in t_i - b_i; what remains, seed to
    seed, is what the difference is uncertain by. Needs at least :data:`PAIRED_MIN_SEEDS` pairs. That SE
    holds a shared held-out set fixed: it is how far another training run would move the difference on
    those instances. With ``episodes`` (the arms are success rates in points, each measured on that many
    held-out episodes) a difference that is the same in every seed gets :func:`held_out_se`'s bound
    instead of an SE of 0 (``dominant`` = ``held-out``).
    """
    t = np.asarray(treatment, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    if t.ndim != 1 or t.shape != b.shape or not np.all(np.isfinite(t) & np.isfinite(b)):
        raise ValueError(
            f"`treatment` {t.shape} and `baseline` {b.shape} are invalid; choose two 1-D arrays of finite "
            "per-seed values, aligned by seed"
        )
    if t.size < PAIRED_MIN_SEEDS:
        raise ValueError(f"{t.size} shared seed(s) is too few for a paired SE; choose >= {PAIRED_MIN_SEEDS}")
    d = t - b
    paired = Difference(difference=float(d.mean()), se=float(d.std(ddof=1) / math.sqrt(d.size)), dominant="paired")
    if episodes is None or paired.se > 0 or paired.difference == 0:
        return paired
    se = held_out_se(float(t.mean()) / POINTS, float(b.mean()) / POINTS, episodes)
    return Difference(difference=paired.difference, se=se, dominant="held-out")


def held_out_se(p_t: float, p_b: float, episodes: int) -> float:
    """Upper bound, in points, on the SE that one held-out set of ``episodes`` gives a paired difference
    of two success rates measured on the same episodes.

    Per episode the difference y_t - y_b is -1, 0 or 1, so its variance is P(the arms disagree) - D^2 with
    D = p_t - p_b, and the arms disagree on at most min(p_t + p_b, 2 - p_t - p_b) of the episodes. The
    bound is exact when one arm fails (or succeeds) on every episode. It stands in for the SE of a paired
    difference that every seed gives alike: the seeds' spread is then 0, and what is left uncertain is
    the sample of held-out episodes they all shared.
    """
    p = _rates([p_t, p_b], "p_t, p_b")
    m = float(_counts(episodes, "episodes"))
    disagree = min(p[0] + p[1], 2.0 - p[0] - p[1])
    return POINTS * math.sqrt(max(disagree - (p[0] - p[1]) ** 2, 0.0) / m)


def min_detectable_effect(se: float, sigma: float = TIE_SIGMA) -> float:
    """The smallest difference that would clear ``sigma`` standard errors: sigma x se."""
    return sigma * se if se >= 0 else math.nan


def seeds_needed(se: float, seeds: int, effect: float, sigma: float = TIE_SIGMA) -> int | None:
    """Seeds at which an effect of size ``effect`` reaches ``sigma`` standard errors.

    The per-seed SD of the difference is s = se sqrt(seeds); an effect E clears sigma SEs with
    n = ceil((sigma s / E)^2) seeds (at least 2). ``None`` when se is unknown.
    """
    if not effect > 0:
        raise ValueError(f"`effect={effect!r}` is invalid; choose an effect size > 0 (points)")
    if not (se >= 0 and seeds >= 1):
        return None
    s = se * math.sqrt(seeds)
    return max(2, math.ceil((sigma * s / effect) ** 2 - 1e-9))


def iqm(values: npt.ArrayLike) -> float:
    """Interquartile mean: the mean of the values left after trimming 25% from each end (as rliable,
    ``scipy.stats.trim_mean(x, 0.25)``). Robust to one diverged or lucky seed, and equal to the mean for
    up to three values."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"`values={values!r}` is invalid; choose a non-empty 1-D array")
    cut = int(0.25 * x.size)
    return float(x[cut : x.size - cut].mean())


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
        cut = int(0.25 * x.size)
        stats_ = resampled[:, cut : x.size - cut].mean(axis=1)
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
    from simlab.schema import POSITIVE, IntIn, check_value

    check_value("working_context", working_context, POSITIVE)
    check_value("max_compactions", max_compactions, IntIn(0))
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
    *,
    threshold: float = TIE_SIGMA,
    higher_is_better: bool = True,
    pair_se: npt.ArrayLike | None = None,
) -> npt.NDArray[np.int64]:
    """(V,) ranks, 1 = best, where a difference under ``threshold`` sigma is a tie.

        rank_i = 1 + #{ j : (m_j - m_i) / se_ij >= threshold },  se_ij = sqrt(se_i^2 + se_j^2)

    ``pair_se`` (V, V) overrides se_ij where it is finite: the paired SE of j - i over shared seeds.
    A variant's rank counts only the variants that beat it significantly, so ties need not be
    transitive (A ties B, B ties C, A beats C gives ranks 1, 1, 2), yet whenever j significantly beats
    i, rank_i > rank_j. Unknown (NaN) SEs make every comparison with that variant a tie.
    """
    m = np.asarray(means, dtype=np.float64)
    s = np.asarray(ses, dtype=np.float64)
    if m.ndim != 1 or s.shape != m.shape:
        raise ValueError(f"`means` {m.shape} and `ses` {s.shape} are invalid; choose two 1-D arrays of one length")
    if not np.all(np.isfinite(m)) or np.any(s < 0):
        raise ValueError("`means` must be finite and `ses` >= 0 (NaN for unknown)")
    if not threshold > 0:
        raise ValueError(f"`threshold={threshold!r}` is invalid; choose a number of sigmas > 0")
    gap = m[None, :] - m[:, None] if higher_is_better else m[:, None] - m[None, :]  # (V, V): j over i
    se = np.sqrt(s[:, None] ** 2 + s[None, :] ** 2)
    if pair_se is not None:
        paired = np.asarray(pair_se, dtype=np.float64)
        if paired.shape != se.shape:
            raise ValueError(f"`pair_se` has shape {paired.shape}; choose ({m.size}, {m.size})")
        se = np.where(np.isfinite(paired), paired, se)
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
    "iqm": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
}


def variant_summary(
    runs: pl.DataFrame, *, variant: str, rate: str, episodes: str, horizon: str | None = None
) -> pl.DataFrame:
    """One row per variant from one row per seed: :func:`rate_mean_se` over the variant's seeds.

    runs: a frame with the columns named by ``variant`` (the grid cell), ``rate`` (success rate in
    [0, 1]) and ``episodes`` (evaluation episodes behind it), and optionally ``horizon`` (the effective
    horizon L x (S + 1), one value per variant). A seed whose rate is null or NaN is counted in
    ``missing``, never silently dropped; a variant with no measured seed has null statistics.

    Columns: variant, [horizon], seeds, missing, episodes, mean, se, se_binomial, se_seeds, dominant,
    iqm, ci_low, ci_high (the interquartile mean over seeds and a bootstrap 95% interval of the mean, in
    points).
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
            rates = measured[rate].cast(pl.Float64).to_numpy()
            m = rate_mean_se(rates, measured[episodes].to_numpy())
            low, high = bootstrap_ci(POINTS * rates)
            record |= {"iqm": iqm(POINTS * rates), "ci_low": low, "ci_high": high}
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


def _per_seed(frame: pl.DataFrame, variant: str, seed: str, rate: str) -> dict[Any, dict[Any, float]]:
    """{variant: {seed: rate in points}} over the measured seeds."""
    out: dict[Any, dict[Any, float]] = {}
    for row in frame.select(variant, seed, rate).iter_rows():
        name, s, r = row
        if s is not None and r is not None and not math.isnan(r):
            out.setdefault(name, {})[s] = POINTS * float(r)
    return out


def _paired(
    a: dict[Any, float], b: dict[Any, float], episodes: int | None = None
) -> tuple[Difference, npt.NDArray[np.float64]] | None:
    """a - b paired over shared seeds, with the per-seed differences; None below PAIRED_MIN_SEEDS pairs.
    ``episodes``: held-out episodes per run (:func:`paired_difference`)."""
    shared = sorted(set(a) & set(b))
    if len(shared) < PAIRED_MIN_SEEDS:
        return None
    t, base = np.array([a[k] for k in shared]), np.array([b[k] for k in shared])
    return paired_difference(t, base, episodes=episodes), t - base


def _run_episodes(*rows: dict[str, Any]) -> int | None:
    """Held-out episodes per run of the fewest-episode summary row; ``None`` when a row measured none."""
    per_run = [r["episodes"] // r["seeds"] for r in rows if r["seeds"] and r["episodes"]]
    return min(per_run) if len(per_run) == len(rows) else None


def against_baseline(
    summary: pl.DataFrame,
    baseline: str,
    *,
    variant: str,
    horizon: str | None = None,
    higher_is_better: bool = True,
    per_seed: pl.DataFrame | None = None,
    seed: str = "seed",
    rate: str = "rate",
    effect: float = 5.0,
) -> pl.DataFrame:
    """Each variant's difference from ``baseline``, its SE and sigma, power, like-for-like, tie-aware rank.

    summary: the output of :func:`variant_summary`. With ``per_seed`` (one row per run: ``variant``,
    ``seed``, ``rate`` as a fraction) a variant that shares at least :data:`PAIRED_MIN_SEEDS` seeds with
    the baseline is compared seed by seed (:func:`paired_difference`, ``dominant_difference`` =
    ``paired``, with a bootstrap 95% interval of the mean paired difference); otherwise the two means are
    taken as independent. ``mde`` is the difference that would clear 2 sigma with the seeds at hand and
    ``seeds_needed`` the seeds at which ``effect`` points would. Ranks use paired SEs where they exist.
    Adds difference, se_difference, sigma, dominant_difference, pairs, diff_ci_low, diff_ci_high, mde,
    seeds_needed, [horizon_ratio, like_for_like], rank.
    """
    names = summary[variant].to_list()
    if baseline not in names:
        raise ValueError(f"`baseline={baseline!r}` is invalid; choose one of {names}")
    seeds_of = _per_seed(per_seed, variant, seed, rate) if per_seed is not None else {}
    rows = summary.to_dicts()
    base_row = rows[names.index(baseline)]
    rank_of = _tie_aware_ranks(rows, names, seeds_of, higher_is_better)
    extra = []
    for i, row in enumerate(rows):
        paired = (
            _paired(seeds_of.get(names[i], {}), seeds_of.get(baseline, {}), _run_episodes(row, base_row))
            if names[i] != baseline
            else None
        )
        extra.append(_comparison(row, base_row, paired, horizon, effect) | {"rank": rank_of.get(i)})
    schema = {
        "difference": pl.Float64,
        "se_difference": pl.Float64,
        "sigma": pl.Float64,
        "dominant_difference": pl.String,
        "pairs": pl.Int64,
        "diff_ci_low": pl.Float64,
        "diff_ci_high": pl.Float64,
        "mde": pl.Float64,
        "seeds_needed": pl.Int64,
        **({"horizon_ratio": pl.Float64, "like_for_like": pl.Boolean} if horizon else {}),
        "rank": pl.Int64,
    }
    return pl.concat([summary, pl.DataFrame(extra, schema=schema)], how="horizontal")


def _estimate(row: dict[str, Any]) -> MeanSE | None:
    """A summary row's mean and SE, ``None`` for a variant with no measured seed."""
    if row["mean"] is None:
        return None
    return MeanSE(**{k: row[k] for k in ("mean", "se", "se_binomial", "se_seeds", "seeds", "episodes")})


def _tie_aware_ranks(
    rows: list[dict[str, Any]], names: list[Any], seeds_of: dict[Any, dict[Any, float]], higher_is_better: bool
) -> dict[int, int]:
    """Row index -> rank among the measured variants, with paired SEs between arms where they exist."""
    measured = [i for i, r in enumerate(rows) if r["mean"] is not None]
    pair_se = np.full((len(measured), len(measured)), np.nan)
    for a, i in enumerate(measured):
        for b, j in enumerate(measured):
            if a == b:
                continue
            got = _paired(seeds_of.get(names[j], {}), seeds_of.get(names[i], {}), _run_episodes(rows[i], rows[j]))
            if got is not None:
                pair_se[a, b] = got[0].se
    ranks = rank_with_ties(
        [rows[i]["mean"] for i in measured],
        [rows[i]["se"] for i in measured],
        higher_is_better=higher_is_better,
        pair_se=pair_se,
    )
    return dict(zip(measured, ranks.tolist(), strict=True))


def _comparison(
    row: dict[str, Any],
    base_row: dict[str, Any],
    paired: tuple[Difference, npt.NDArray[np.float64]] | None,
    horizon: str | None,
    effect: float,
) -> dict[str, Any]:
    """One variant against the baseline: the difference (paired by seed when ``paired``), its interval,
    power, and whether the horizons match."""
    est, base = _estimate(row), _estimate(base_row)
    d = paired[0] if paired else (difference(est, base) if est is not None and base is not None else None)
    ci = bootstrap_ci(paired[1]) if paired else (None, None)
    n = len(paired[1]) if paired else min(row["seeds"] or 0, base_row["seeds"] or 0)
    horizons = horizon_match(row[horizon], base_row[horizon]) if horizon else {}
    se_ok = d is not None and math.isfinite(d.se)
    return {
        "difference": None if d is None else d.difference,
        "se_difference": None if d is None else d.se,
        "sigma": None if d is None else d.sigma,
        "dominant_difference": None if d is None else d.dominant,
        "pairs": len(paired[1]) if paired else 0,
        "diff_ci_low": ci[0],
        "diff_ci_high": ci[1],
        "mde": min_detectable_effect(d.se) if se_ok and d is not None else None,
        # seeds do not shrink a held-out bound (every seed plays the same held-out set)
        "seeds_needed": seeds_needed(d.se, n, effect)
        if se_ok and d is not None and n and d.dominant != "held-out"
        else None,
        **horizons,
    }
