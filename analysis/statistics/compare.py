"""Arms and their differences, judged the one way ``simlab report`` and ``simlab findings`` both use.

An :class:`Arm` is one variant's outcome: a value per seed, and per held-out episode where the runs kept
their outcomes. :func:`estimate` gives its mean with an SE over seeds and instances
(:mod:`simlab.analysis.statistics.levels`); :func:`difference` pairs two arms by seed and instance when they share
them (arms of one seed share the base model, the prompt stream and the held-out instances), by seed when
only per-seed values exist, and otherwise takes the two means as independent (Welch). :func:`judge`
states what a difference can claim: its sigma, its 95% interval, the effect it could detect at a stated
power, a TOST within a margin, and the seeds that would decide it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from simlab.analysis.statistics import levels, power
from simlab.analysis.statistics.levels import Estimate
from simlab.analysis.statistics.power import Tost

PAIRED_MIN_SEEDS = 3
"""Fewest shared seeds for a paired difference: with two, its spread rests on one degree of freedom."""


@dataclass(frozen=True)
class Arm:
    """One arm's outcome in the caller's unit (points for rates)."""

    seeds: dict[int, float]
    """seed -> the arm's outcome in that seed."""
    episodes: pl.DataFrame | None = None
    """seed, instance, value: the per-episode outcome, where the runs kept them."""
    rate_episodes: int | None = None
    """For a success rate without per-episode outcomes: the held-out episodes behind each seed's rate."""
    shared: bool = False
    """Without per-episode outcomes: whether every seed played one held-out set (the design is read off
    the instances when they are known)."""


def estimate(arm: Arm) -> Estimate | None:
    """The arm's mean with an SE over seeds and instances; ``None`` without a measured seed."""
    if arm.episodes is not None and arm.episodes.height:
        return levels.from_episodes(arm.episodes)
    if not arm.seeds:
        return None
    values = np.array(list(arm.seeds.values()))
    if arm.rate_episodes:
        return levels.from_rates(values / 100.0, arm.rate_episodes, shared=arm.shared)
    return levels.from_seeds(values)


def difference(treatment: Arm, baseline: Arm) -> Estimate | None:
    """treatment - baseline: per episode, paired by seed and instance, when both kept outcomes on
    instances they share; else per seed, paired by seed; else two independent means."""
    shared = sorted(set(treatment.seeds) & set(baseline.seeds))
    if treatment.episodes is not None and baseline.episodes is not None:
        paired = levels.paired_episodes(treatment.episodes, baseline.episodes)
        if paired is not None and paired.get_column("seed").n_unique() >= PAIRED_MIN_SEEDS:
            return levels.from_episodes(paired)
    if len(shared) >= PAIRED_MIN_SEEDS:
        t = np.array([treatment.seeds[s] for s in shared])
        b = np.array([baseline.seeds[s] for s in shared])
        if treatment.rate_episodes and baseline.rate_episodes:
            episodes = min(treatment.rate_episodes, baseline.rate_episodes)
            return levels.paired_from_rates(t / 100.0, b / 100.0, episodes, shared=treatment.shared)
        return levels.from_seeds(t - b)
    return independent(estimate(treatment), estimate(baseline))


def independent(t: Estimate | None, b: Estimate | None) -> Estimate | None:
    """t - b for two independent means: se = sqrt(se_t^2 + se_b^2), Welch-Satterthwaite df."""
    if t is None or b is None or t.seeds < 2 or b.seeds < 2 or math.isnan(t.se) or math.isnan(b.se):
        return None
    var = t.se**2 + b.se**2
    parts = (t.se**4 / t.df if t.df > 0 else 0.0) + (b.se**4 / b.df if b.df > 0 else 0.0)
    df = var**2 / parts if parts > 0 else math.nan
    return Estimate(t.mean - b.mean, math.sqrt(var), df, min(t.seeds, b.seeds), min(t.instances, b.instances),
                    "seeds", fixed_var=t.fixed_var + b.fixed_var)


@dataclass(frozen=True)
class Judgement:
    """What a difference can claim, at a stated alpha and power."""

    estimate: Estimate
    alpha: float
    power: float
    margin: float | None
    """The equivalence margin of the TOST (half the published delta, or the report's ``--effect``)."""
    tost: Tost | None

    @property
    def sigma(self) -> float:
        """difference / SE."""
        return self.estimate.sigma

    @property
    def p(self) -> float:
        """Two-sided p of the difference against 0, t at the estimate's df (:func:`power.two_sided_p`)."""
        return power.two_sided_p(self.estimate.mean, self.estimate.se, self.estimate.df)

    @property
    def significant(self) -> bool:
        """p < alpha, with t quantiles at the design's degrees of freedom (a difference with SE 0 counts
        when it is not 0)."""
        return self.p < self.alpha

    @property
    def negligible(self) -> bool:
        """The 1 - 2 alpha interval lies inside the margin (the TOST's equivalence), whether or not the
        difference is also significant: practically 0 at the margin's scale."""
        return self.tost is not None and self.tost.equivalent

    def exceeds_margin(self, sign: float) -> bool:
        """The 1 - 2 alpha interval lies wholly beyond the margin on ``sign``'s side: the difference is larger
        than the margin by a one-sided test at alpha (False without a margin)."""
        if self.tost is None or self.margin is None:
            return False
        return self.tost.low > self.margin if sign > 0 else self.tost.high < -self.margin

    @property
    def decided_tie(self) -> bool:
        """Not significant, and equivalent to 0 within the margin by the TOST."""
        return not self.significant and self.negligible

    @property
    def mde(self) -> float:
        """The effect a two-sided test at ``alpha`` detects with ``power`` (t quantiles for the df)."""
        return power.min_detectable_effect(self.estimate.se, self.estimate.df, alpha=self.alpha, power=self.power)

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The t interval of the difference."""
        return self.estimate.interval(level)

    def seeds_to_decide(self) -> int | None:
        """Seeds at which this row would be decided, from its per-seed spread (a pilot): for a difference
        that is not significant, the seeds a TOST within the margin needs (``None`` without a margin)."""
        e = self.estimate
        if self.margin is None or math.isnan(e.se):
            return None
        return power.seeds_for_tie(e.seed_sd, self.margin, fixed_var=e.fixed_var, alpha=self.alpha, power=self.power)


def judge(d: Estimate, *, margin: float | None, alpha: float = power.ALPHA, power_: float = power.POWER) -> Judgement:
    """Judge a difference: a TOST within +-``margin`` when one is given."""
    test = None
    if margin is not None and margin > 0 and not math.isnan(d.se):
        test = power.tost(d.mean, d.se, d.df if d.df > 0 else math.inf, margin, alpha=alpha)
    return Judgement(d, alpha, power_, margin, test)
