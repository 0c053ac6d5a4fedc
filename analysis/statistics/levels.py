"""Uncertainty from both levels a claim generalises over: seeds (base model, RL sampling) and instances.

A run's success rate is a mean over held-out episodes; a variant's, a mean over seeds. Which variance that
mean has depends on whether the seeds played their own held-out sets (*nested*: instances inside seeds)
or one set they all share (*crossed*: every seed plays every instance). In the nested design the seeds'
spread already holds the instance sampling, and s / sqrt(k) is the SE. In the crossed design it does
not: the instance effects are common to every seed and never average out, so they are added from the
per-episode outcomes (the two-way random-effects decomposition, no replication):

    y_ij = mu + a_i + b_j + e_ij          seed i = 1..k, instance j = 1..m
    MS_s = m sum_i (ybar_i. - ybar)^2 / (k - 1)
    MS_i = k sum_j (ybar_.j - ybar)^2 / (m - 1)
    MS_e = sum_ij (y_ij - ybar_i. - ybar_.j + ybar)^2 / ((k - 1)(m - 1))
    Var(ybar) = s_a^2 / k + s_b^2 / m + s_e^2 / (k m) = (MS_s + MS_i - MS_e) / (k m)
              >= max(MS_s, MS_i) / (k m)                    (the floor used when the estimate falls below)
    df       = Satterthwaite: (MS_s + MS_i - MS_e)^2 / (MS_s^2/(k-1) + MS_i^2/(m-1) + MS_e^2/((k-1)(m-1)))
    nested:  Var(ybar) = s^2 / k with s^2 the variance of the seed means, floored at the within-seed
             sampling variance (1/k^2) sum_i s_i^2 / m_i; df = k - 1

A paired difference applies the same decomposition to the per-episode differences y^t_ij - y^b_ij of two
arms that played the same instances in the same seed. Without per-episode outcomes (runs logged before
they were kept) a crossed design gets an upper bound on its instance term from the rates alone:
p (1 - p) / m for a mean, (q - D^2) / m for a paired difference (q = min(p_t + p_b, 2 - p_t - p_b)).

Values are in the caller's unit (points for rates: pass 100 x the outcome).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import polars as pl

Design = Literal["nested", "crossed", "seeds", "rates", "rates-bound"]
"""Where an estimate's SE comes from:

- ``nested``: per-episode outcomes, each seed its own held-out set;
- ``crossed``: per-episode outcomes, one held-out set every seed shares (both levels from the decomposition);
- ``seeds``: one value per seed and nothing below it (a slope, steps to a threshold, a mechanism metric);
- ``rates``: per-seed rates on each seed's own held-out set (binomial floor, as ``nested``);
- ``rates-bound``: per-seed rates on one shared held-out set, the instance term an upper bound.
"""


@dataclass(frozen=True)
class Estimate:
    """A mean (or a mean paired difference) over seeds with an SE that covers seeds and instances."""

    mean: float
    se: float
    df: float
    """Degrees of freedom for t quantiles (NaN when unknown)."""
    seeds: int
    instances: int
    """Held-out instances per seed (the fewest), 0 when the values are per seed only."""
    design: Design
    fixed_var: float = 0.0
    """The part of se^2 that more seeds do not shrink (a shared held-out set's instance term)."""

    @property
    def seed_sd(self) -> float:
        """The per-seed SD behind the shrinking part of the variance: sqrt(k (se^2 - fixed_var))."""
        return math.sqrt(max(self.se**2 - self.fixed_var, 0.0) * self.seeds)

    @property
    def sigma(self) -> float:
        """mean / se (a difference's significance); NaN when the SE is 0 or unknown."""
        return self.mean / self.se if self.se > 0 else math.nan

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The t interval mean +- t((1 + level) / 2; df) se."""
        from simlab.analysis.statistics.power import t_quantile

        half = t_quantile((1 + level) / 2, self.df) * self.se if self.se > 0 else 0.0
        return self.mean - half, self.mean + half


EPISODE_COLUMNS = ("seed", "instance", "value")
IDENTICAL_SEEDS = 3
"""Seeds in which two arms' rates must all agree before :func:`paired_from_rates` calls them identical."""


def from_episodes(frame: pl.DataFrame) -> Estimate:
    """The mean of ``value`` over seeds and instances with its two-level SE.

    ``frame``: one row per (seed, instance) with columns seed, instance, value. The design is read off
    the instances: crossed when every seed has the same instance set (k >= 2), else nested.
    """
    missing = [c for c in EPISODE_COLUMNS if c not in frame.columns]
    if missing or frame.height == 0:
        raise ValueError(f"per-episode values need rows with columns {EPISODE_COLUMNS}; got {frame.columns}")
    frame = frame.sort("seed", "instance")  # one order of seeds and instances: the same sums every run
    sets = frame.group_by("seed", maintain_order=True).agg(pl.col("instance")).get_column("instance").to_list()
    if len(sets) >= 2 and all(s == sets[0] for s in sets) and len(sets[0]) >= 2:
        wide = frame.pivot(on="instance", index="seed", values="value").drop("seed")
        return crossed(wide.to_numpy().astype(np.float64))
    groups = frame.group_by("seed", maintain_order=True)
    seeds = [g.get_column("value").to_numpy().astype(np.float64) for _, g in groups]
    return nested(seeds)


def nested(seeds: list[npt.NDArray[np.float64]]) -> Estimate:
    """k seeds, each with its own held-out values: SE from the seed means, floored at the sampling variance."""
    means = np.array([v.mean() for v in seeds])
    k = means.size
    within = sum(float(v.var(ddof=1)) / v.size if v.size > 1 else 0.0 for v in seeds) / k**2
    if k == 1:
        m = seeds[0].size
        return Estimate(float(means[0]), math.sqrt(within), float(m - 1) if m > 1 else math.nan, 1, m, "nested")
    var = max(float(means.var(ddof=1)) / k, within)
    return Estimate(float(means.mean()), math.sqrt(var), float(k - 1), k, min(v.size for v in seeds), "nested")


def crossed(y: npt.NDArray[np.float64]) -> Estimate:
    """A (k seeds, m instances) table of values every seed played: the two-way decomposition."""
    k, m = y.shape
    grand = float(y.mean())
    row, col = y.mean(axis=1), y.mean(axis=0)
    ms_s = m * float(((row - grand) ** 2).sum()) / (k - 1)
    ms_i = k * float(((col - grand) ** 2).sum()) / (m - 1)
    resid = y - row[:, None] - col[None, :] + grand
    ms_e = float((resid**2).sum()) / ((k - 1) * (m - 1))
    combo = ms_s + ms_i - ms_e
    var = max(combo, ms_s, ms_i) / (k * m)
    denominator = ms_s**2 / (k - 1) + ms_i**2 / (m - 1) + ms_e**2 / ((k - 1) * (m - 1))
    df = max(combo, ms_s, ms_i) ** 2 / denominator if denominator > 0 else math.nan
    fixed = max(ms_i - ms_e, 0.0) / (k * m)  # s_b^2 / m: the instance term no seed count removes
    return Estimate(grand, math.sqrt(var), df, k, m, "crossed", fixed_var=min(fixed, var))


def from_seeds(values: npt.ArrayLike) -> Estimate:
    """One value per seed, nothing known below it: s / sqrt(k) on k - 1 degrees of freedom."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"`values={values!r}` is invalid; choose a non-empty 1-D array of finite values")
    se = float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.nan
    return Estimate(float(x.mean()), se, float(x.size - 1) if x.size > 1 else math.nan, x.size, 0, "seeds")


def from_rates(rates: npt.ArrayLike, episodes: npt.ArrayLike, *, shared: bool, scale: float = 100.0) -> Estimate:
    """Per-seed success rates (fractions) without their episodes: what runs that kept no outcomes allow.

    Own held-out sets: the seed spread, floored at the binomial variance (``rates``). One shared set of
    m episodes: the seed spread plus the bound p (1 - p) / m on the instance term (``rates-bound``).
    """
    p = np.asarray(rates, dtype=np.float64)
    n = np.broadcast_to(np.asarray(episodes, dtype=np.float64), p.shape)
    k = p.size
    binomial = float((p * (1 - p) / n).sum()) / k**2
    spread = float(p.var(ddof=1)) / k if k > 1 else 0.0
    df = float(k - 1) if k > 1 else math.inf
    if not shared:
        var = max(spread, binomial)
        return Estimate(scale * float(p.mean()), scale * math.sqrt(var), df, k, int(n.min()), "rates")
    bound = float(p.mean() * (1 - p.mean())) / float(n.min())
    return Estimate(scale * float(p.mean()), scale * math.sqrt(spread + bound), df, k, int(n.min()), "rates-bound",
                    fixed_var=scale**2 * bound)


def paired_from_rates(treatment: npt.ArrayLike, baseline: npt.ArrayLike, episodes: int, *, shared: bool,
                      scale: float = 100.0) -> Estimate:
    """A paired difference of per-seed rates (fractions) without per-episode outcomes.

    Own held-out sets: the per-seed differences' spread (which holds the instance sampling), floored at the
    variance the smallest possible disagreement between the arms gives. One shared
    set: that spread plus the bound (q - D^2) / m on the instance term, q = min(p_t + p_b, 2 - p_t - p_b);
    two arms with the same rate in each of at least :data:`IDENTICAL_SEEDS` seeds are taken as the same
    computation (an arm against itself, a setting that changed nothing), SE 0: a heuristic the rates alone
    allow, which per-episode outcomes make unnecessary.
    """
    t, b = np.asarray(treatment, dtype=np.float64), np.asarray(baseline, dtype=np.float64)
    d = from_seeds(scale * (t - b))
    spread = 0.0 if math.isnan(d.se) else d.se**2
    if not shared:  # floored at the fewest disagreements the rates allow: |D| of the episodes, (|D| - D^2) / m
        dd = abs(float((t - b).mean()))
        floor = scale**2 * (dd - dd**2) / (episodes * t.size)
        return Estimate(d.mean, math.sqrt(max(spread, floor)), d.df, d.seeds, episodes, "rates")
    if t.size >= IDENTICAL_SEEDS and np.array_equal(t, b):  # the same rate in every seed: an arm against itself
        return Estimate(0.0, 0.0, d.df, d.seeds, episodes, "rates-bound")
    pt, pb = float(t.mean()), float(b.mean())
    q = min(pt + pb, 2 - pt - pb)
    bound = scale**2 * max(q - (pt - pb) ** 2, 0.0) / episodes
    return Estimate(d.mean, math.sqrt(spread + bound), d.df, d.seeds, episodes, "rates-bound", fixed_var=bound)


def paired_episodes(treatment: pl.DataFrame, baseline: pl.DataFrame) -> pl.DataFrame | None:
    """Per-episode differences of two arms (seed, instance, value) on the (seed, instance) pairs both
    played; ``None`` when they share none."""
    joined = treatment.join(baseline, on=["seed", "instance"], how="inner", suffix="_b")
    if joined.height == 0:
        return None
    return joined.select("seed", "instance", (pl.col("value") - pl.col("value_b")).alias("value"))
