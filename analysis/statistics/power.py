"""Power and equivalence as the field states them: t quantiles for the seed count, a stated power, TOST.

A difference that clears 2 SE is detected only half the time when the true effect is 2 SE; at 80% power
and 4 seeds the detectable effect is about 4.2 SE. Every table that says "tie" or "detectable" takes its
alpha and power from here, and prints them.

    t quantile         t(q; df)  = scipy.stats.t.ppf(q, df)            (df = inf: the normal quantile)
    detectable effect  MDE       = (t(1 - a/2; df) + t(power; df)) se    two-sided test at a, that power
    significance       p = 2 P(T_df > |d| / se); significant when p < a (not a flat 2 SE: at df = 7 the cut
                                   is 2.36 SE, and 2 SE is p = 0.086)
    Holm (1979)        over a family of m p-values sorted p_(1) <= ... <= p_(m):
                       p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)); rejecting p~ < a keeps the
                       family-wise error at a
    equivalence        TOST at a: both one-sided tests reject, i.e. the 1 - 2a interval
                                   d +- t(1 - a; df) se  lies inside  (-delta, +delta)
                       p_TOST    = max(P(T > (d + delta) / se), P(T < (d - delta) / se))
    seeds for effect E smallest n >= 2 with (t(1 - a/2; n-1) + t(power; n-1)) sqrt(s^2 / n + v0) <= E
    seeds for a tie    smallest n >= 2 with (t(1 - a; n-1) + t((1 + power) / 2; n-1)) sqrt(s^2 / n + v0) <= delta

``s`` is the per-seed SD of the paired difference (a pilot's spread, as Colas et al. size RL comparisons)
and ``v0`` the variance more seeds do not shrink (a held-out set every seed shares; 0 when each seed has
its own). ``None`` means no seed count up to :data:`MAX_SEEDS` suffices.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from scipy import stats as sps

from simlab.errors import ConfigError

ALPHA = 0.05
"""Two-sided significance level of a difference, and the one-sided level of each TOST test (a 90% TOST)."""
POWER = 0.8
"""The power at which a detectable effect and a seed count are stated."""
MAX_SEEDS = 10_000
"""Largest seed count :func:`seeds_for_effect` and :func:`seeds_for_tie` search."""


def check_levels(alpha: float, power: float) -> None:
    """Reject an alpha outside (0, 0.5] or a power outside [0.5, 1), naming the flag."""
    if not (isinstance(alpha, int | float) and 0 < alpha <= 0.5):
        raise ConfigError.invalid("--alpha", alpha, "choose a significance level in (0, 0.5], e.g. 0.05")
    if not (isinstance(power, int | float) and 0.5 <= power < 1):
        raise ConfigError.invalid("--power", power, "choose a power in [0.5, 1), e.g. 0.8")


SUCCESS_LEVEL = "choose a success level in [0, 100] points"
"""What a threshold on a rate allows: ``simlab report --threshold`` and a findings row's ``steps_to``."""


def success_level_ok(value: float) -> bool:
    """Whether ``value`` is a level a rate can reach, in points (the one rule :data:`SUCCESS_LEVEL` says)."""
    return isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 100


def t_quantile(q: float, df: float) -> float:
    """The q quantile of Student's t with ``df`` degrees of freedom (the normal one for df = inf)."""
    if not df > 0:
        return math.nan
    return float(sps.norm.ppf(q) if math.isinf(df) else sps.t.ppf(q, df))


def mde_factor(df: float, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """MDE / SE: t(1 - alpha/2; df) + t(power; df); 2.80 at df = inf, 4.16 at 3, 3.26 at 7."""
    return t_quantile(1 - alpha / 2, df) + t_quantile(power, df)


def min_detectable_effect(se: float, df: float, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true difference a two-sided test at ``alpha`` detects with probability ``power``."""
    return mde_factor(df, alpha=alpha, power=power) * se if se >= 0 else math.nan


def two_sided_p(difference: float, se: float, df: float) -> float:
    """p of ``difference`` against 0 with ``se`` on ``df`` degrees of freedom (the normal for df = inf);
    with SE 0 a non-zero difference has p = 0 and a zero one p = 1; NaN when the SE or df is unknown."""
    if se == 0:
        return 0.0 if difference != 0 else 1.0
    if not (se > 0 and df > 0):
        return math.nan
    dist = sps.norm if math.isinf(df) else sps.t(df)
    return float(2 * dist.sf(abs(difference) / se))


def holm(ps: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given; a NaN p stays NaN and is left out of the
    family's size m."""
    known = sorted((p, i) for i, p in enumerate(ps) if not math.isnan(p))
    out = [math.nan] * len(ps)
    running = 0.0
    for rank, (p, i) in enumerate(known):
        running = max(running, min(1.0, (len(known) - rank) * p))
        out[i] = running
    return out


@dataclass(frozen=True)
class Tost:
    """Two one-sided tests of |difference| < margin."""

    p_lower: float
    """P-value of H0: difference <= -margin."""
    p_upper: float
    """P-value of H0: difference >= +margin."""
    low: float
    high: float
    """The 1 - 2 alpha interval of the difference."""
    alpha: float

    @property
    def p(self) -> float:
        """The TOST p-value: the larger of the two."""
        return max(self.p_lower, self.p_upper)

    @property
    def equivalent(self) -> bool:
        """Both one-sided tests reject at ``alpha``: the difference lies within the margin."""
        return self.p < self.alpha


def tost(difference: float, se: float, df: float, margin: float, *, alpha: float = ALPHA) -> Tost:
    """Equivalence of ``difference`` (with ``se`` on ``df`` degrees of freedom) to 0 within +-``margin``."""
    if not margin > 0:
        raise ValueError(f"`margin={margin!r}` is invalid; choose an equivalence margin > 0")
    if not (se > 0 and df > 0):  # no spread at all: equivalent exactly when the difference is inside
        inside = abs(difference) < margin
        return Tost(0.0 if inside else 1.0, 0.0 if inside else 1.0, difference, difference, alpha)
    dist = sps.norm if math.isinf(df) else sps.t(df)
    half = t_quantile(1 - alpha, df) * se
    return Tost(
        p_lower=float(dist.sf((difference + margin) / se)),
        p_upper=float(dist.cdf((difference - margin) / se)),
        low=difference - half,
        high=difference + half,
        alpha=alpha,
    )


def _smallest_n(spread: float, fixed_var: float, target: float, q1: float, q2: float) -> int | None:
    """Smallest n >= 2 with (t(q1; n-1) + t(q2; n-1)) sqrt(s^2/n + v0) <= target."""
    if not (target > 0 and spread >= 0 and fixed_var >= 0):
        return None

    def ok(n: int) -> bool:
        factor = t_quantile(q1, n - 1) + t_quantile(q2, n - 1)
        return factor * math.sqrt(spread**2 / n + fixed_var) <= target

    if not ok(MAX_SEEDS):
        return None
    # ok() is monotone in n (both the factor and the SE fall with it): bisect for the first n it holds at
    return 2 + bisect.bisect_left(range(2, MAX_SEEDS), True, key=ok)


def seeds_for_effect(spread: float, effect: float, *, fixed_var: float = 0.0, alpha: float = ALPHA,
                     power: float = POWER) -> int | None:
    """Seeds at which a true difference of ``effect`` is detected with ``power`` (two-sided, ``alpha``)."""
    return _smallest_n(spread, fixed_var, abs(effect), 1 - alpha / 2, power)


def seeds_for_tie(spread: float, margin: float, *, fixed_var: float = 0.0, alpha: float = ALPHA,
                  power: float = POWER) -> int | None:
    """Seeds at which a TOST within +-``margin`` decides a true difference of 0 with ``power``."""
    return _smallest_n(spread, fixed_var, margin, 1 - alpha, (1 + power) / 2)
