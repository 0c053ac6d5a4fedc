"""The credit layer: segmented rollouts in, token advantages and token loss weights out.

Pure array code with no knowledge of tasks or models. See :mod:`.estimators` (advantages and group
baselines), :mod:`.normalisers` (loss weights: aggregation modes and per-row weights), :mod:`.lambdas`
(lambda readings), :mod:`.shaping` (per-segment costs subtracted from the reward) and :mod:`.health`.
"""

from simlab.credit import health
from simlab.credit.estimators import (
    BASELINES,
    ESTIMATORS,
    Estimate,
    advantages,
    estimate,
    estimator_family,
    estimators_of,
    value_targets,
    whiten,
)
from simlab.credit.lambdas import LAMBDA_READINGS, segment_lambdas
from simlab.credit.normalisers import (
    NORMALISERS,
    ROW_WEIGHTS,
    counted_tokens,
    loss_weights,
    row_weights,
    separated_loss_weights,
)
from simlab.credit.shaping import COSTS, shaped_rewards, with_cost
from simlab.segments import SegmentBatch

__all__ = [
    "BASELINES",
    "COSTS",
    "ESTIMATORS",
    "LAMBDA_READINGS",
    "NORMALISERS",
    "ROW_WEIGHTS",
    "Estimate",
    "SegmentBatch",
    "advantages",
    "counted_tokens",
    "estimate",
    "estimator_family",
    "estimators_of",
    "health",
    "loss_weights",
    "row_weights",
    "segment_lambdas",
    "separated_loss_weights",
    "shaped_rewards",
    "value_targets",
    "whiten",
    "with_cost",
]
