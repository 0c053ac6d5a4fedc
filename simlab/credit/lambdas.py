"""Lambda readings: how GAE's lambda is chosen for each segment.

CompactionRL uses length-adaptive GAE, lam = 1 - 1/(alpha * l) (after VAPO), with alpha = 1.5, but does
not pin down what ``l`` is. Each reading below is one answer; the seed (Block 2) shows the first segment
of a 4-segment rollout keeping 5.3% of its weight under one reading and 62.6% under another, so the
reading is a sweep axis, not a detail.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import numpy as np

from simlab.arrays import FloatArray
from simlab.errors import ConfigError
from simlab.registry import Registry
from simlab.rules import Names, Positive, UnitOpen, check_value
from simlab.segments import SegmentBatch

LambdaReading = Callable[..., FloatArray]
"""(batch, *, alpha, response_cap) -> (S,) length l per row used in lam = 1 - 1/(alpha*l)."""

LAMBDA_READINGS: Registry[LambdaReading] = Registry("lam")
LAM = UnitOpen | Annotated[str, Names(lambda: LAMBDA_READINGS)]
"""What ``lam`` allows: a float in (0, 1], or the name of a length-adaptive reading."""


@LAMBDA_READINGS.register("response_cap")
def response_cap_length(batch: SegmentBatch, *, response_cap: float | None = None) -> FloatArray:
    """l = the per-response token cap (one constant for the whole batch; CompactionRL: 10,240)."""
    if response_cap is None:
        raise ConfigError("lam='response_cap' needs response_cap=<tokens per response>")
    return np.full(batch.num_segments, float(check_value("response_cap", response_cap, Positive)))


@LAMBDA_READINGS.register("segment_length")
def segment_length(batch: SegmentBatch, **_: object) -> FloatArray:
    """l = the optimised tokens of the segment itself (n_s)."""
    return batch.seg_tokens.astype(np.float64)


@LAMBDA_READINGS.register("trajectory_length")
def trajectory_length(batch: SegmentBatch, **_: object) -> FloatArray:
    """l = the optimised tokens of the whole rollout (T_r), the same for each of its segments."""
    return batch.per_row(batch.rollout_tokens)


def check_gamma(gamma: object) -> float:
    """``gamma`` as a float, or ``ValueError`` unless it is a number in (0, 1]."""
    return float(check_value("gamma", gamma, UnitOpen))


def segment_lambdas(
    batch: SegmentBatch,
    lam: float | str,
    *,
    alpha: float | None = None,
    response_cap: float | None = None,
) -> FloatArray:
    """(S,) the lambda each row uses: a float for every row, or a length-adaptive reading.

    lam_s = 1 - 1 / (alpha * l_s)      (VAPO length-adaptive GAE; CompactionRL Sec. 3)

    Dummy rows get lambda 1 (they have no tokens, so it never matters).
    """
    if isinstance(lam, str):
        reading = LAMBDA_READINGS.get(lam)
        if alpha is None:
            raise ConfigError(f"lam={lam!r} needs alpha=<positive float> (CompactionRL uses 1.5)")
        check_value("alpha", alpha, Positive)
        length = reading(batch, response_cap=response_cap)
        out = np.ones(batch.num_segments)
        real = batch.is_real
        out[real] = 1.0 - 1.0 / (float(alpha) * length[real])
        if np.any(out[real] <= 0.0):
            s = int(np.flatnonzero(real & (out <= 0.0))[0])
            raise ConfigError(
                f"lam={lam!r} with alpha={alpha!r} gives lam={out[s]!r} for row {s} (l={length[s]:g}); "
                "lambda must lie in (0, 1], so alpha * l must exceed 1"
            )
        return out
    if alpha is not None or response_cap is not None:
        raise ConfigError(
            f"alpha/response_cap only apply to a length-adaptive lam; lam={lam!r} is a float. "
            f"Choose lam from {LAMBDA_READINGS.choices()} or drop them"
        )
    return np.full(batch.num_segments, float(check_value("lam", lam, LAM)))
