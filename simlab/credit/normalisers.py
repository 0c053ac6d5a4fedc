"""Loss normalisers: the token weights w in ``loss = (w * per_token_loss).sum()``.

Reduction is its own axis (verl's ``agg_loss`` idea): an estimator never normalises. Each normaliser
maps a batch and the rows it keeps to one weight per row, written onto that row's real tokens.

    token     w = 1 / N_tok                     mean over every kept token (DAPO, CompactionRL)
    segment   w = 1 / (N_seg * n_s)             mean over segments of token means (seq-mean-token-mean)
    rollout   w = 1 / (N_roll * T_r)            mean over rollouts of token means
    constant  w = 1 / (N_seg * max_tokens)      Dr. GRPO's constant (seq-mean-token-sum-norm)

With ``overlong_mask=True`` (SUPO), rows of unfinished rollouts get weight 0 and leave every
denominator; they still count in the advantage statistics. Dummy rows never count.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral
from typing import Any

import numpy as np

from simlab.credit.estimators import check_options
from simlab.registry import Registry
from simlab.segments import BoolArray, FloatArray, SegmentBatch

Normaliser = Callable[..., FloatArray]
"""(batch, kept: (S,) bool, **options) -> (S,) weight per row."""

NORMALISERS: Registry[Normaliser] = Registry("normaliser")


def _inverse(x: float | FloatArray) -> FloatArray:
    return np.asarray(1.0 / np.asarray(x, dtype=np.float64))


@NORMALISERS.register("token", aliases=("token-mean",))
def token(batch: SegmentBatch, kept: BoolArray) -> FloatArray:
    """w = 1 / N_tok: every kept optimised token of the batch weighs the same (DAPO, CompactionRL)."""
    n_tok = int(batch.seg_tokens[kept].sum())
    return np.where(kept, _inverse(max(n_tok, 1)), 0.0)


@NORMALISERS.register("segment", aliases=("seq-mean-token-mean",))
def segment(batch: SegmentBatch, kept: BoolArray) -> FloatArray:
    """w = 1 / (N_seg * n_s): each kept segment weighs the same, so rollouts weigh by segment count."""
    n_seg = int(kept.sum())
    return np.where(kept, _inverse(max(n_seg, 1) * np.maximum(batch.seg_tokens, 1)), 0.0)


@NORMALISERS.register("rollout")
def rollout(batch: SegmentBatch, kept: BoolArray) -> FloatArray:
    """w = 1 / (N_roll * T_r): each kept rollout weighs the same, whatever its segments or tokens."""
    kept_rollouts = np.unique(batch.seg_rollout[kept])
    n_roll = kept_rollouts.size
    t_r = batch.per_row(batch.rollout_tokens)
    return np.where(kept, _inverse(max(n_roll, 1) * np.maximum(t_r, 1.0)), 0.0)


@NORMALISERS.register("constant", aliases=("seq-mean-token-sum-norm",))
def constant(batch: SegmentBatch, kept: BoolArray, *, max_tokens: int | None = None) -> FloatArray:
    """w = 1 / (N_seg * max_tokens): a constant divisor (Dr. GRPO); max_tokens defaults to the row width.

    ``max_tokens`` is the per-segment generation budget; it may not be below the longest segment.
    """
    if max_tokens is None:
        max_tokens = batch.max_tokens
    elif (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, Integral) or max_tokens < batch.max_tokens
    ):
        raise ValueError(
            f"`max_tokens={max_tokens!r}` is invalid; use an integer >= the longest segment "
            f"({batch.max_tokens} tokens)"
        )
    n_seg = int(kept.sum())
    return np.where(kept, 1.0 / (max(n_seg, 1) * int(max_tokens)), 0.0)


def kept_rows(batch: SegmentBatch, *, overlong_mask: bool) -> BoolArray:
    """(S,) rows that enter the loss: real rows, minus unfinished rollouts' rows under the overlong mask."""
    if not isinstance(overlong_mask, (bool, np.bool_)):
        raise ValueError(f"`overlong_mask={overlong_mask!r}` is invalid; use True or False")
    return batch.is_real & batch.row_finished if overlong_mask else batch.is_real


def row_weights(batch: SegmentBatch, name: str, *, overlong_mask: bool = False, **options: Any) -> FloatArray:
    """(S,) the weight of each row's tokens under normaliser ``name``."""
    fn = NORMALISERS.get(name)
    check_options("normaliser", name, fn, options)
    return fn(batch, kept_rows(batch, overlong_mask=overlong_mask), **options)


def loss_weights(
    batch: SegmentBatch, name: str, *, overlong_mask: bool = False, **options: Any
) -> FloatArray:
    """(num_segments, max_tokens) token loss weights; the loss is ``(w * per_token_loss).sum()``.

    0 on padding, on dummy rows and (with ``overlong_mask``) on unfinished rollouts.
    """
    return batch.broadcast(row_weights(batch, name, overlong_mask=overlong_mask, **options))
