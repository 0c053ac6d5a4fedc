"""The arithmetic every table is judged by: standard errors, differences, power and equivalence, outcomes.

``stats``: SEs of rates and published figures, significance ratios, like-for-like checks, tie-aware ranks;
``levels``: the two-level SE (seeds and held-out instances); ``power``: t quantiles, MDEs, Holm, TOST;
``compare``: arms, their paired differences and the one way they are judged; ``outcomes``: a run's final
success, learning speed and learning gain. Pure functions over arrays and polars frames: nothing here
reads a store or writes a file.

Names load on first use (PEP 562, :mod:`simlab.lazy`): importing one module of the package loads
none of the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simlab import lazy

if TYPE_CHECKING:
    from simlab.analysis.statistics.compare import Arm, Judgement, judge
    from simlab.analysis.statistics.levels import Estimate
    from simlab.analysis.statistics.outcomes import episode_outcomes, run_gains, run_outcomes
    from simlab.analysis.statistics.power import (
        ALPHA,
        POWER,
        Tost,
        check_levels,
        holm,
        min_detectable_effect,
        t_quantile,
        tost,
    )
    from simlab.analysis.statistics.stats import (
        MeanSE,
        binomial_se,
        like_for_like,
        mean_se,
        rank_with_ties,
        rate_mean_se,
    )

_HOME = {
    "compare": ("Arm", "Judgement", "judge"),
    "levels": ("Estimate",),
    "outcomes": ("episode_outcomes", "run_gains", "run_outcomes"),
    "power": ("ALPHA", "POWER", "Tost", "check_levels", "holm", "min_detectable_effect", "t_quantile", "tost"),
    "stats": ("MeanSE", "binomial_se", "like_for_like", "mean_se", "rank_with_ties", "rate_mean_se"),
}
__all__ = [  # the names in _HOME (tests/policy/test_lazy_exports.py holds the two equal)
    "ALPHA", "POWER", "Arm", "Estimate", "Judgement", "MeanSE", "Tost", "binomial_se", "check_levels",
    "episode_outcomes", "holm", "judge", "like_for_like", "mean_se", "min_detectable_effect", "rank_with_ties",
    "rate_mean_se", "run_gains", "run_outcomes", "t_quantile", "tost",
]
__getattr__ = lazy.exports(__name__, _HOME)
