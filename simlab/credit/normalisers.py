"""Loss normalisers and per-row loss weights: the token weights w in ``loss = (w * per_token_loss).sum()``.

Reduction is its own axis (verl's ``agg_loss`` idea): an estimator never normalises. A token's weight is
the product of two named choices, both functions of the batch and of ``n``, the tokens of each row that
count in the loss (0: the row is out):

    w_j = c_j * b_j        on every counted token of row j (0 elsewhere)

The aggregation mode b (``NORMALISERS``; verl's ``loss_agg_mode`` names are aliases), with N_tok the
counted tokens, N_seg the rows with a counted token, N_roll the rollouts with one, T_r a rollout's
counted tokens and H the per-row budget:

    token        b_j = 1 / N_tok                  token-mean (DAPO, CompactionRL)
    segment      b_j = 1 / (N_seg * n_j)          seq-mean-token-mean
    segment_sum  b_j = 1 / N_seg                  seq-mean-token-sum
    rollout      b_j = 1 / (N_roll * T_r(j))      mean over rollouts of token means
    rollout_rows b_j = 1 / (N_seg * T_r(j))       the same divided by rows (Agent Lightning #593)
    constant     b_j = 1 / (N_seg * H)            seq-mean-token-sum-norm (Dr. GRPO's constant)

The per-row weight c (``ROW_WEIGHTS``), verl PR #7580's ``loss_weight`` of a multi-row trajectory, with
K_r the counted rows of rollout r:

    none          c_j = 1                          every row as the mode weighs it (verl's default)
    inverse_k     c_j = 1 / K_r(j)                 "every rollout counts once" (PR #7580, uni-agent #185)
    length_ratio  c_j = n_j / mean_j' n_j'         PR #7580's partition-preserving weight

With ``overlong_mask=True`` (SUPO), rows of unfinished rollouts count no tokens and leave every
denominator; they still count in the advantage statistics. A ``token_mask`` leaves tokens out the same
way (the summary tokens, when their loss is masked). Dummy rows never count.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral
from typing import Any

import numpy as np

from simlab.arrays import BoolArray, FloatArray
from simlab.credit.estimators import check_options
from simlab.errors import ConfigError
from simlab.registry import Registry
from simlab.segments import SegmentBatch

Normaliser = Callable[..., FloatArray]
"""(batch, n: (S,) counted tokens per row, **options) -> (S,) the mode's weight b per row."""
RowWeight = Callable[[SegmentBatch, FloatArray], FloatArray]
"""(batch, n: (S,) counted tokens per row) -> (S,) the multiplier c per row."""

NORMALISERS: Registry[Normaliser] = Registry("normaliser")
ROW_WEIGHTS: Registry[RowWeight] = Registry("row_weight")


def _inverse(x: float | FloatArray) -> FloatArray:
    return np.asarray(1.0 / np.asarray(x, dtype=np.float64))


def _rows(n: FloatArray) -> int:
    """N_seg: rows with at least one counted token."""
    return int((n > 0).sum())


def _per_rollout(batch: SegmentBatch, per_row: FloatArray) -> FloatArray:
    """(R,) the sum of a per-row quantity over each rollout's rows (dummies left out)."""
    real = batch.is_real
    out = np.bincount(batch.seg_rollout[real], weights=per_row[real], minlength=batch.num_rollouts)
    return out.astype(np.float64, copy=False)


# ---------------------------------------------------------------------- aggregation modes
@NORMALISERS.register("token", aliases=("token-mean",))
def token(batch: SegmentBatch, n: FloatArray) -> FloatArray:
    """w = 1 / N_tok: every counted token of the batch weighs the same (DAPO, CompactionRL; verl token-mean)."""
    return np.where(n > 0, _inverse(max(float(n.sum()), 1.0)), 0.0)


@NORMALISERS.register("segment", aliases=("seq-mean-token-mean",))
def segment(batch: SegmentBatch, n: FloatArray) -> FloatArray:
    """w = 1 / (N_seg * n_s): each row weighs the same, so rollouts weigh by row count (verl seq-mean-token-mean)."""
    return np.where(n > 0, _inverse(max(_rows(n), 1) * np.maximum(n, 1.0)), 0.0)


@NORMALISERS.register("segment_sum", aliases=("seq-mean-token-sum",))
def segment_sum(batch: SegmentBatch, n: FloatArray) -> FloatArray:
    """w = 1 / N_seg: a row's token sum, averaged over rows (verl seq-mean-token-sum; Tinker's ``ppo`` loss)."""
    return np.where(n > 0, 1.0 / max(_rows(n), 1), 0.0)


@NORMALISERS.register("rollout")
def rollout(batch: SegmentBatch, n: FloatArray) -> FloatArray:
    """w = 1 / (N_roll * T_r): each rollout weighs the same, whatever its segments or tokens."""
    t_r = _per_rollout(batch, n)
    n_roll = int((t_r > 0).sum())
    return np.where(n > 0, _inverse(max(n_roll, 1) * np.maximum(batch.per_row(t_r), 1.0)), 0.0)


@NORMALISERS.register("rollout_rows")
def rollout_rows(batch: SegmentBatch, n: FloatArray) -> FloatArray:
    """w = 1 / (N_seg * T_r): Agent Lightning's ``per_rollout_mean`` as shipped (issue 593): each rollout's
    token mean, divided by the batch's rows instead of its rollouts, so the batch's total weight is
    N_roll / N_seg and falls as rollouts split into more rows."""
    t_r = _per_rollout(batch, n)
    return np.where(n > 0, _inverse(max(_rows(n), 1) * np.maximum(batch.per_row(t_r), 1.0)), 0.0)


@NORMALISERS.register("constant", aliases=("seq-mean-token-sum-norm",))
def constant(batch: SegmentBatch, n: FloatArray, *, max_tokens: int | None = None) -> FloatArray:
    """w = 1 / (N_seg * max_tokens): a constant divisor (Dr. GRPO; verl seq-mean-token-sum-norm, whose
    ``loss_scale_factor`` is max_tokens); max_tokens defaults to the row width, as verl's to the padded
    response length.

    ``max_tokens`` is the per-segment generation budget; it may not be below the longest segment.
    """
    if max_tokens is None:
        max_tokens = batch.max_tokens
    elif (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, Integral) or max_tokens < batch.max_tokens
    ):
        raise ConfigError(
            f"`max_tokens={max_tokens!r}` is invalid; use an integer >= the longest segment "
            f"({batch.max_tokens} tokens)"
        )
    return np.where(n > 0, 1.0 / (max(_rows(n), 1) * int(max_tokens)), 0.0)


# ---------------------------------------------------------------------- per-row weights
@ROW_WEIGHTS.register("none")
def no_row_weight(batch: SegmentBatch, n: FloatArray) -> FloatArray:
    """c_j = 1: each row weighs what its aggregation mode gives it (verl's default ``loss_weight``)."""
    return np.where(n > 0, 1.0, 0.0)


@ROW_WEIGHTS.register("inverse_k")
def inverse_k(batch: SegmentBatch, n: FloatArray) -> FloatArray:
    """c_j = 1 / K_r(j): a rollout's K_r counted rows share one row's weight (verl PR #7580's session-equal
    ``loss_weight = 1/N``, uni-agent #185). Exact for equal rows under seq-mean-token-mean, up to N_seg."""
    k_r = _per_rollout(batch, (n > 0).astype(np.float64))
    return np.where(n > 0, _inverse(np.maximum(batch.per_row(k_r), 1.0)), 0.0)


@ROW_WEIGHTS.register("length_ratio")
def length_ratio(batch: SegmentBatch, n: FloatArray) -> FloatArray:
    """c_j = n_j / mean_j' n_j' over the counted rows (verl PR #7580's partition-preserving weight).

    Under seq-mean-token-mean, c_j / (N_seg * n_j) = 1 / N_tok: token-mean, whatever the rows' split.
    """
    kept = n > 0
    mean_n = float(n[kept].mean()) if kept.any() else 1.0
    return np.where(kept, n / mean_n, 0.0)


# ---------------------------------------------------------------------- entry points
def kept_rows(batch: SegmentBatch, *, overlong_mask: bool) -> BoolArray:
    """(S,) rows that enter the loss: real rows, minus unfinished rollouts' rows under the overlong mask."""
    if not isinstance(overlong_mask, (bool, np.bool_)):
        raise ConfigError(f"`overlong_mask={overlong_mask!r}` is invalid; use True or False")
    return batch.is_real & batch.row_finished if overlong_mask else batch.is_real


def check_token_mask(batch: SegmentBatch, token_mask: Any) -> BoolArray:
    """``token_mask`` as a boolean (S, max_tokens) grid that is False on padding, or ``ValueError``."""
    mask = np.asarray(token_mask)
    if mask.shape != batch.shape or mask.dtype != np.bool_:
        raise ValueError(
            f"token_mask is {mask.dtype} of shape {mask.shape}; give a bool grid of the batch's shape {batch.shape}"
        )
    if np.any(mask & ~batch.token_mask):
        raise ValueError("token_mask must be False on padding (positions past each row's token count)")
    return mask


def counted_tokens(
    batch: SegmentBatch, *, overlong_mask: bool = False, token_mask: BoolArray | None = None
) -> FloatArray:
    """(S,) n: tokens of each row that count in the loss; 0 on rows left out and on dummies."""
    n = batch.seg_tokens if token_mask is None else check_token_mask(batch, token_mask).sum(axis=1)
    return np.where(kept_rows(batch, overlong_mask=overlong_mask), n, 0).astype(np.float64)


def row_weights(
    batch: SegmentBatch,
    name: str,
    *,
    overlong_mask: bool = False,
    row_weight: str = "none",
    token_mask: BoolArray | None = None,
    **options: Any,
) -> FloatArray:
    """(S,) w_j = c_j * b_j: the weight of each counted token of row j under normaliser ``name`` and
    per-row weight ``row_weight``."""
    fn = NORMALISERS.get(name)
    check_options("normaliser", name, fn, options)
    c = ROW_WEIGHTS.get(row_weight, "row_weight")
    n = counted_tokens(batch, overlong_mask=overlong_mask, token_mask=token_mask)
    return np.asarray(c(batch, n) * fn(batch, n, **options))


def loss_weights(batch: SegmentBatch, name: str, *, token_mask: BoolArray | None = None, **options: Any) -> FloatArray:
    """(num_segments, max_tokens) token loss weights; the loss is ``(w * per_token_loss).sum()``.

    ``options`` as :func:`row_weights` (``overlong_mask``, ``row_weight`` and the normaliser's own). 0 on
    padding, on dummy rows, (with ``overlong_mask``) on unfinished rollouts and where ``token_mask`` (an
    (S, max_tokens) bool grid, True where a token's loss counts) is False.
    """
    grid = batch.broadcast(row_weights(batch, name, token_mask=token_mask, **options))
    return grid if token_mask is None else np.where(token_mask, grid, 0.0)


def separated_loss_weights(
    batch: SegmentBatch, name: str, *, summary: BoolArray, summary_weight: float, **options: Any
) -> FloatArray:
    """(S, max_tokens) FoldAct's separated loss (Shao et al. 2025, arXiv 2512.22733, "separated loss
    computation"): the action tokens and the summary tokens each normalised over their own tokens, the
    summary part scaled by w_sum, so summaries keep a gradient of their own however few their tokens:

        L = L_act + w_sum * L_sum,   L_x = sum_{t in x} w^x_t * loss_t   (w^x: :func:`loss_weights` on x alone)

    ``summary``: (S, max_tokens) True on summary tokens. A batch with no counted summary token has L_sum = 0.
    """
    summary = check_token_mask(batch, summary)
    actions = loss_weights(batch, name, token_mask=batch.token_mask & ~summary, **options)
    return actions + summary_weight * loss_weights(batch, name, token_mask=summary, **options)
