"""Compaction-health quantities of a batch: what the tracker logs every training step.

The seed's maintenance advice reads as a dashboard spec: watch the segment-count distribution (drift
toward more segments leads both the normaliser bias and a stalling summariser), the baseline shift
between trajectory- and rollout-group statistics, the share of loss weight that the longer rollouts
take against their share of tokens (Block 1: 80% against 65.8%), the realised N_after and the
effective lambda with the first segment's surviving weight (Block 2). How much K varies inside prompt
groups, and how it goes with reward there (:func:`within_group`), says whether the group estimators
can differ at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simlab import names
from simlab.arrays import BoolArray, FloatArray, IntArray
from simlab.credit.lambdas import check_gamma, segment_lambdas
from simlab.credit.normalisers import counted_tokens, row_weights
from simlab.segments import SegmentBatch, within_group_stats

QUANTILES = names.QUANTILES


def segment_count_distribution(batch: SegmentBatch) -> dict[int, int]:
    """{segments per rollout: number of rollouts}."""
    counts = np.bincount(batch.segments_per_rollout)
    return {k: int(c) for k, c in enumerate(counts) if c}


def baseline_shift(batch: SegmentBatch) -> FloatArray:
    """(num_groups,) trajectory-group mean minus rollout-group mean (Block 1: 0.8 - 0.5 = 0.3)."""
    g, ng, k = batch.groups, batch.num_groups, batch.segments_per_rollout.astype(np.float64)
    per_rollout = np.bincount(g, weights=batch.rewards, minlength=ng) / np.bincount(g, minlength=ng)
    per_segment = np.bincount(g, weights=k * batch.rewards, minlength=ng) / np.bincount(
        g, weights=k, minlength=ng
    )
    return per_segment - per_rollout


def longer_rollouts(batch: SegmentBatch) -> BoolArray:
    """(R,) rollouts with more segments than the median of their group.

    Groups of one rollout (PPO, G = 1) are compared with the median of the whole batch instead. A batch
    in which every rollout compacts still separates the longer ones, which is what the segment-count
    bias acts on; a group whose rollouts all have the same K has none.
    """
    k = batch.segments_per_rollout.astype(np.float64)
    size = np.bincount(batch.groups, minlength=batch.num_groups)[batch.groups]
    median = np.full(k.size, float(np.median(k)))
    for code in np.unique(batch.groups[size > 1]):
        rows = batch.groups == code
        median[rows] = np.median(k[rows])
    return k > median


def compacting_shares(batch: SegmentBatch, normaliser: str, **options: Any) -> tuple[float, float]:
    """(loss-weight share, token share) of the longer rollouts (:func:`longer_rollouts`).

    Shares are over the rows the normaliser keeps. Block 1 (where the longer rollouts are the ones that
    compacted): segment normaliser 0.80 of the weight on 0.658 of the tokens.
    """
    n = counted_tokens(batch, overlong_mask=options.get("overlong_mask", False), token_mask=options.get("token_mask"))
    w = row_weights(batch, normaliser, **options) * n  # total weight per row
    longer = batch.per_row(longer_rollouts(batch)) > 0
    kept = w > 0
    total_w = w.sum()
    tokens = n * kept
    total_t = tokens.sum()
    loss_share = float(w[longer].sum() / total_w) if total_w > 0 else float("nan")
    token_share = float(tokens[longer].sum() / total_t) if total_t > 0 else float("nan")
    return loss_share, token_share


def within_group(batch: SegmentBatch) -> dict[str, float]:
    """:func:`within_group_stats` of a batch's segment counts, rewards and prompt groups."""
    return within_group_stats(batch.segments_per_rollout, batch.rewards, batch.groups)


WITHIN_GROUP_KEYS = {"segments_sd": names.WITHIN_GROUP_SD, "corr": names.WITHIN_GROUP_CORR}
""":func:`within_group_stats`' keys as the health summary names them."""


def n_after_distribution(batch: SegmentBatch) -> IntArray:
    """(real segments,) N_after of every real segment."""
    return batch.n_after[batch.is_real]


def effective_lambda(batch: SegmentBatch, lam: float | str, **options: Any) -> FloatArray:
    """(real segments,) the lambda each real segment uses under ``lam`` (a float or a reading)."""
    return segment_lambdas(batch, lam, **options)[batch.is_real]


def first_segment_weight(
    batch: SegmentBatch, *, gamma: float, lam: float | str, **options: Any
) -> FloatArray:
    """(R,) (gamma * lam_1) ** N_after(1): what survives of the first segment's credit under eq. (14)."""
    gl = check_gamma(gamma) * segment_lambdas(batch, lam, **options)
    first = batch.is_real & (batch.seg_position == 0)
    out = np.empty(batch.num_rollouts)
    out[batch.seg_rollout[first]] = gl[first] ** batch.n_after[first]
    return out


def group_advantage_gap(batch: SegmentBatch, adv: FloatArray, **group_options: Any) -> dict[str, float]:
    """How far a group estimator's advantages ``adv`` are from ``rollout_group``'s on the same batch.

    ``{"adv_error/rollout_group/rel_l2": ||A - A_rg|| / ||A_rg||}`` over real tokens. 0 for rollout_group
    itself, and for trajectory_group whenever K is constant inside every group (the two coincide, Block 1);
    NaN when the reference is all zeros (every group's rewards tied).
    """
    from simlab.credit.estimators import advantages

    ref = advantages(batch, "rollout_group", **group_options)
    mask = batch.token_mask
    norm = float(np.linalg.norm(ref[mask]))
    gap = float(np.linalg.norm(adv[mask] - ref[mask])) / norm if norm > 0 else float("nan")
    return {names.ADV_ERROR_ROLLOUT_GROUP: gap}


def advantage_error(batch: SegmentBatch, adv: FloatArray, **gae_options: Any) -> dict[str, float]:
    """How far advantages ``adv`` are from the ``gae_concat`` reference with the same critic.

    Relative L2 error ||A - A_ref|| / ||A_ref|| and Pearson correlation over tokens, split by segment
    position: the final segment of each rollout and every pre-final one. Only a simulator, which holds
    the whole rollout, can compute the reference (seed Block 2: the residual sits on pre-final segments).
    ``adv`` is a GAE estimator's output on ``batch`` (which needs critic values); ``gae_options``
    (gamma, lam, ...) are the ones it was computed with.
    """
    from simlab.credit.estimators import advantages

    if batch.values is None:
        return {}
    ref = advantages(batch, "gae_concat", **gae_options)
    out: dict[str, float] = {}
    parts = (
        (names.ADV_ERROR_FINAL_REL_L2, names.ADV_ERROR_FINAL_CORR, batch.is_last_segment),
        (names.ADV_ERROR_PRE_FINAL_REL_L2, names.ADV_ERROR_PRE_FINAL_CORR, batch.is_real & ~batch.is_last_segment),
    )
    for rel_l2, corr, rows in parts:
        mask = batch.token_mask & rows[:, None]
        a, r = adv[mask], ref[mask]
        norm = float(np.linalg.norm(r))
        out[rel_l2] = float(np.linalg.norm(a - r)) / norm if norm > 0 else float("nan")
        ok = a.size > 1 and a.std() > 0 and r.std() > 0
        out[corr] = float(np.corrcoef(a, r)[0, 1]) if ok else float("nan")
    return out


def stall(segments: FloatArray, success: FloatArray, *, window: int = names.STALL_WINDOW) -> float:
    """The stall signal over the last ``window`` training steps (seed, "Failure modes": a summariser that
    learns to stall): 1.0 when, on the least-squares lines through the window, segments per rollout rose
    by at least :data:`~simlab.names.STALL_RISE` while the compacted rollouts' success fell by at least
    :data:`~simlab.names.STALL_FALL`, else 0.0 (a fixed segment count's noise never fires it); NaN with
    fewer than ``window`` steps or a NaN success (no rollout compacted) in the window.

    Args:
        segments: (steps,) mean segments per rollout of each training step, in order.
        success: (steps,) success of the compacted rollouts of each step, in order.
        window: the trailing steps the slopes are fitted over.
    """
    k, s = np.asarray(segments, dtype=np.float64)[-window:], np.asarray(success, dtype=np.float64)[-window:]
    if k.size < window or not np.isfinite(s).all():
        return float("nan")
    x = np.arange(window, dtype=np.float64)
    span = window - 1  # the lines' change from the window's first step to its last
    rise, fall = np.polyfit(x, k, 1)[0] * span, -np.polyfit(x, s, 1)[0] * span
    return float(rise >= names.STALL_RISE and fall >= names.STALL_FALL)


@dataclass(frozen=True)
class HealthOptions:
    """What the summary needs to know about the training recipe."""

    normaliser: str = "token"
    overlong_mask: bool = False
    row_weight: str = "none"
    gamma: float = 1.0
    lam: float | str = 0.95
    alpha: float | None = None
    response_cap: float | None = None


def summary(batch: SegmentBatch, opts: HealthOptions | None = None) -> dict[str, float]:
    """Flat ``{metric: float}`` of every health quantity, ready for batched logging (names in
    :mod:`simlab.names`: :data:`~simlab.names.HEALTH_KEYS` and one ``segments/count_<k>`` per count)."""
    opts = opts or HealthOptions()
    k = batch.segments_per_rollout
    out: dict[str, float] = {
        names.SEG_MEAN: float(k.mean()),
        names.SEG_MAX: float(k.max()),
        names.HEALTH_COMPACTION_RATE: float(np.mean(k > 1)),
        names.BASELINE_SHIFT_MEAN: float(baseline_shift(batch).mean()),
    }
    for q in QUANTILES:
        out[names.SEG_QUANTILE.format(q=int(q * 100))] = float(np.quantile(k, q))
    for count, n in segment_count_distribution(batch).items():
        out[names.seg_count(count)] = float(n)
    loss_share, token_share = compacting_shares(batch, opts.normaliser, overlong_mask=opts.overlong_mask,
                                                row_weight=opts.row_weight)
    out[names.LONGER_LOSS_SHARE] = loss_share
    out[names.LONGER_TOKEN_SHARE] = token_share
    out[names.LONGER_RATE] = float(longer_rollouts(batch).mean())
    for key, value in within_group(batch).items():
        out[WITHIN_GROUP_KEYS[key]] = value
    n_after = n_after_distribution(batch)
    for q in QUANTILES:
        out[names.N_AFTER_QUANTILE.format(q=int(q * 100))] = float(np.quantile(n_after, q))
    lam_opts = {"alpha": opts.alpha, "response_cap": opts.response_cap} if isinstance(opts.lam, str) else {}
    lam = effective_lambda(batch, opts.lam, **lam_opts)
    out[names.LAMBDA_MEAN] = float(lam.mean())
    out[names.LAMBDA_MIN] = float(lam.min())
    fsw = first_segment_weight(batch, gamma=opts.gamma, lam=opts.lam, **lam_opts)
    multi = k > 1
    out[names.FIRST_SEGMENT_WEIGHT_MEAN] = float(fsw[multi].mean()) if multi.any() else 1.0
    out[names.FIRST_SEGMENT_WEIGHT_MIN] = float(fsw.min())
    return out
