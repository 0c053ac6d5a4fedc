"""The credit layer: segmented rollouts in, token advantages and token loss weights out.

Pure array code with no knowledge of tasks or models. See :mod:`.estimators` (advantages),
:mod:`.normalisers` (loss weights), :mod:`.lambdas` (lambda readings) and :mod:`.health`.
"""

from simlab.credit import health
from simlab.credit.estimators import (
    ESTIMATORS,
    Estimate,
    advantages,
    estimate,
    estimator_family,
    value_targets,
    whiten,
)
from simlab.credit.lambdas import LAMBDA_READINGS, segment_lambdas
from simlab.credit.normalisers import NORMALISERS, loss_weights, row_weights
from simlab.segments import SegmentBatch

__all__ = [
    "ESTIMATORS",
    "LAMBDA_READINGS",
    "NORMALISERS",
    "Estimate",
    "SegmentBatch",
    "advantages",
    "estimate",
    "estimator_family",
    "health",
    "loss_weights",
    "row_weights",
    "segment_lambdas",
    "value_targets",
    "whiten",
]
