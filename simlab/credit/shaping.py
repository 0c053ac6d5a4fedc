"""Reward shaping by a per-segment cost: a cost summed over a rollout's segments, subtracted from its reward.

    R'_r = R_r - coef * sum_{s in r} c_s

before any advantage is estimated, so every estimator sees the shaped reward (with ``on="success"``, only on
the rollouts that succeeded: FoldGRPO's rule). The cost c_s of one
segment is a name in ``COSTS``; what it counts decides whether compacting pays (prime-rl issue #3083:
a cost summed over segments can reward compacting):

    none      c_s = 0                                   no shaping
    tokens    c_s = n_s, the segment's optimised tokens  a length penalty; a summary's tokens cost too
    segments  c_s = 1                                   a cost per model call; compacting adds calls
    context   c_s = sum_{t in s} ctx_t, the context each generated token attended to (keys read): a
              compute cost; a compaction shortens every later context, so it pays

``context`` needs ``row_context``, (S,) the keys each row's generated tokens attended to, which only
the caller holding the token rows can count; the others read the batch alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from simlab.arrays import FloatArray
from simlab.registry import Registry
from simlab.rules import NonNegative, check_value
from simlab.segments import SegmentBatch, succeeded

Cost = Callable[[SegmentBatch, FloatArray | None], FloatArray]
"""(batch, row_context: (S,) keys attended per row or None) -> (S,) cost c_s of each row."""
COSTS: Registry[Cost] = Registry("cost")


@COSTS.register("none")
def no_cost(batch: SegmentBatch, row_context: FloatArray | None) -> FloatArray:
    """c_s = 0: the reward as the task gives it."""
    return np.zeros(batch.num_segments)


@COSTS.register("tokens")
def token_cost(batch: SegmentBatch, row_context: FloatArray | None) -> FloatArray:
    """c_s = n_s: the segment's optimised tokens; the sum over segments is the rollout's T_r."""
    return np.where(batch.is_real, batch.seg_tokens, 0).astype(np.float64)


@COSTS.register("segments")
def segment_cost(batch: SegmentBatch, row_context: FloatArray | None) -> FloatArray:
    """c_s = 1: one unit per segment (model call); the sum over segments is the rollout's K_r."""
    return batch.is_real.astype(np.float64)


@COSTS.register("context")
def context_cost(batch: SegmentBatch, row_context: FloatArray | None) -> FloatArray:
    """c_s = sum_{t in s} ctx_t: the context (keys) each of the segment's generated tokens attended to."""
    if row_context is None:
        raise ValueError("cost 'context' needs row_context=<(S,) keys attended per row>")
    ctx = np.asarray(row_context, dtype=np.float64)
    if ctx.shape != (batch.num_segments,) or not np.all(np.isfinite(ctx)) or np.any(ctx < 0):
        raise ValueError(f"row_context must be {batch.num_segments} finite values >= 0, one per row")
    return np.where(batch.is_real, ctx, 0.0)


def rollout_cost(batch: SegmentBatch, cost: str, *, row_context: FloatArray | None = None) -> FloatArray:
    """(R,) sum_{s in r} c_s under cost ``cost``."""
    c = COSTS.get(cost, "cost")(batch, row_context)
    real = batch.is_real
    out = np.bincount(batch.seg_rollout[real], weights=c[real], minlength=batch.num_rollouts)
    return out.astype(np.float64, copy=False)


CHARGED = ("all", "success")
"""``train.cost_on``: which rollouts pay the cost: every one, or only those that succeeded (FoldGRPO's rule, as
in mastery-gated compression and LazImpa): a failure then keeps its reward of 0 whatever its length, so a
length cost cannot make a short failure pay better than a long one."""


def shaped_rewards(
    batch: SegmentBatch, cost: str, *, coef: float, row_context: FloatArray | None = None, on: str = "all"
) -> FloatArray:
    """(R,) R'_r = R_r - coef * sum_{s in r} c_s for the rollouts ``on`` charges (:data:`CHARGED`), R_r for the
    others; ``coef`` >= 0, in reward units per unit of cost."""
    coef = float(check_value("coef", coef, NonNegative))
    if on not in CHARGED:
        raise ValueError(f"on={on!r}: choose one of {CHARGED}")
    charged = rollout_cost(batch, cost, row_context=row_context)
    if on == "success":
        charged = np.where(succeeded(batch.rewards), charged, 0.0)
    return batch.rewards - coef * charged


def with_cost(
    batch: SegmentBatch, cost: str, *, coef: float, row_context: FloatArray | None = None, on: str = "all"
) -> SegmentBatch:
    """The batch with its rewards shaped (:func:`shaped_rewards`); everything else as it was."""
    return replace(batch, rewards=shaped_rewards(batch, cost, coef=coef, row_context=row_context, on=on))


__all__ = ["CHARGED", "COSTS", "rollout_cost", "shaped_rewards", "with_cost"]
