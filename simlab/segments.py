"""The SegmentBatch: segmented rollouts laid out as rows, what the harness hands the credit layer.

A shared type, in a neutral module: the harness builds it, the credit layer reads it, and neither imports
the other.

Rows are segments in rollout-major order (every segment of rollout 0, then rollout 1, ...). Each row
holds the optimised tokens of one segment left-aligned in a ``(num_segments, max_tokens)`` grid; the
rest of the row is padding. Dummy rows (``pad_to``) have zero tokens and belong to no rollout.

Everything here is numpy; the batch knows nothing about tasks, models or trainers.
The checks of the per-rollout lists a batch is built from are in :mod:`simlab.segment_checks`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from simlab.arrays import BoolArray, FloatArray, IntArray
from simlab.rules import check_value, ints
from simlab.segment_checks import critic_grid, encode_groups, finished_flags, finite_vector, segment_counts

DUMMY = -1
"""``seg_rollout`` of a dummy padding row."""
SUCCESS_REWARD = 1.0
"""A rollout succeeded when its reward reaches this (every simlab task pays 1 for a right answer)."""


def succeeded(rewards: ArrayLike) -> BoolArray:
    """Which rewards count as success (:data:`SUCCESS_REWARD`): the one rule every success rate reads."""
    return np.asarray(rewards) >= SUCCESS_REWARD


@dataclass(frozen=True, eq=False)
class SegmentBatch:
    """A batch of segmented rollouts sharing terminal rewards.

    Build one with :meth:`from_rollouts`; the fields are the validated, array form.
    """

    seg_tokens: IntArray
    """(S,) optimised tokens in each row; 0 for dummy rows."""
    seg_rollout: IntArray
    """(S,) rollout index of each row; ``DUMMY`` (-1) for dummy rows."""
    seg_position: IntArray
    """(S,) index of the segment within its rollout (0 = first); -1 for dummy rows."""
    rewards: FloatArray
    """(R,) terminal reward of each rollout."""
    groups: IntArray
    """(R,) prompt-group code of each rollout, 0..num_groups-1 in order of first appearance."""
    group_labels: tuple[Hashable, ...]
    """The caller's group ids, indexed by code."""
    finished: BoolArray
    """(R,) True if the rollout produced a final answer (False: overlong)."""
    values: FloatArray | None = field(default=None)
    """(S, max_tokens) critic values, 0 on padding; None when no critic values were given."""

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_rollouts(
        cls,
        segment_tokens: Sequence[Sequence[int]],
        rewards: Sequence[float],
        groups: Sequence[Hashable] | None = None,
        values: Sequence[Sequence[Any]] | None = None,
        finished: Sequence[bool] | None = None,
    ) -> SegmentBatch:
        """Validate per-rollout lists and lay them out as segment rows.

        Args:
            segment_tokens: per rollout, the optimised-token count of each segment, in order (each >= 1).
            rewards: per rollout, the terminal reward (finite float).
            groups: per rollout, a prompt-group id; default: one group holding every rollout.
            values: per rollout, per segment, a 1-D array of critic values, one per optimised token.
            finished: per rollout, True if it produced a final answer; default: all True.

        Raises:
            ValueError: naming the argument, the position and what was wrong.
        """
        counts, per_rollout_k = segment_counts(segment_tokens)
        num_rollouts = len(per_rollout_k)
        reward_arr = finite_vector("rewards", rewards, num_rollouts)
        if groups is None:
            group_codes = np.zeros(num_rollouts, dtype=np.int64)
            labels: tuple[Hashable, ...] = (0,)
        else:
            group_codes, labels = encode_groups(groups, num_rollouts)
        finished_arr = finished_flags(finished, num_rollouts)

        k = np.asarray(per_rollout_k, dtype=np.int64)
        seg_tokens = np.asarray(counts, dtype=np.int64)
        seg_rollout = np.repeat(np.arange(num_rollouts, dtype=np.int64), k)
        starts = np.cumsum(k) - k
        seg_position = np.arange(seg_tokens.size, dtype=np.int64) - np.repeat(starts, k)
        width = int(seg_tokens.max())

        value_grid = None
        if values is not None:
            value_grid = critic_grid(values, segment_tokens, seg_tokens.size, width)

        return cls(
            seg_tokens=seg_tokens,
            seg_rollout=seg_rollout,
            seg_position=seg_position,
            rewards=reward_arr,
            groups=group_codes,
            group_labels=labels,
            finished=finished_arr,
            values=value_grid,
        )

    def with_values(self, values: FloatArray) -> SegmentBatch:
        """The batch with critic values given as an (S, max_tokens) grid (0 on padding).

        The trainer scores a whole rollout batch at once, so its values already come as a grid; this
        skips the per-segment lists of :meth:`from_rollouts` but checks the same things.
        """
        grid = np.asarray(values, dtype=np.float64)
        if grid.shape != self.shape:
            raise ValueError(f"values has shape {grid.shape}; expected the batch's shape {self.shape}")
        mask = self.token_mask
        if not np.all(np.isfinite(grid[mask])):
            s, t = np.argwhere(mask & ~np.isfinite(grid))[0]
            raise ValueError(f"values[{s}, {t}]={float(grid[s, t])!r} is invalid; values must be finite")
        if np.any(grid[~mask]):
            raise ValueError("values must be 0 on padding (positions past each row's token count)")
        return replace(self, values=grid)

    def pad_to(self, multiple: int) -> SegmentBatch:
        """A new batch whose row count is a multiple of ``multiple``, padded with dummy zero-token rows.

        Dummy rows are zero in every output and never change a real row's weight (SUPO's padding of
        the segment count to the mini-batch size).
        """
        check_value("multiple", multiple, ints(1))
        extra = (-self.num_segments) % int(multiple)
        if extra == 0:
            return self
        fill = np.full(extra, DUMMY, dtype=np.int64)
        values = None
        if self.values is not None:
            values = np.concatenate([self.values, np.zeros((extra, self.max_tokens))], axis=0)
        return SegmentBatch(
            seg_tokens=np.concatenate([self.seg_tokens, np.zeros(extra, dtype=np.int64)]),
            seg_rollout=np.concatenate([self.seg_rollout, fill]),
            seg_position=np.concatenate([self.seg_position, fill]),
            rewards=self.rewards,
            groups=self.groups,
            group_labels=self.group_labels,
            finished=self.finished,
            values=values,
        )

    # ------------------------------------------------------------------ shape
    @property
    def num_segments(self) -> int:
        """Rows, dummies included."""
        return int(self.seg_tokens.size)

    @property
    def num_rollouts(self) -> int:
        """Rollouts in the batch (R)."""
        return int(self.rewards.size)

    @property
    def num_groups(self) -> int:
        """Prompt groups in the batch."""
        return len(self.group_labels)

    @property
    def max_tokens(self) -> int:
        """Row width: the longest segment."""
        return int(self.seg_tokens.max())

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, row width) of the token grids."""
        return (self.num_segments, self.max_tokens)

    # ------------------------------------------------------------------ derived per row / rollout
    @cached_property
    def is_real(self) -> BoolArray:
        """(S,) False on dummy rows."""
        real: BoolArray = self.seg_rollout != DUMMY
        return real

    @cached_property
    def token_mask(self) -> BoolArray:
        """(S, max_tokens) True on real optimised tokens."""
        return np.arange(self.max_tokens)[None, :] < self.seg_tokens[:, None]

    @cached_property
    def segments_per_rollout(self) -> IntArray:
        """(R,) K_r, the number of segments of each rollout."""
        return np.bincount(self.seg_rollout[self.is_real], minlength=self.num_rollouts).astype(np.int64)

    @cached_property
    def rollout_tokens(self) -> IntArray:
        """(R,) T_r, optimised tokens of each rollout over all its segments."""
        real = self.is_real
        return np.bincount(
            self.seg_rollout[real], weights=self.seg_tokens[real], minlength=self.num_rollouts
        ).astype(np.int64)

    @cached_property
    def n_after(self) -> IntArray:
        """(S,) N_after(s): optimised tokens generated after row s in its rollout (0 on dummies)."""
        return tokens_after(self.seg_tokens, self.seg_rollout)

    @cached_property
    def row_reward(self) -> FloatArray:
        """(S,) the terminal reward of the row's rollout (0 on dummies)."""
        return self.per_row(self.rewards)

    @cached_property
    def row_finished(self) -> BoolArray:
        """(S,) whether the row's rollout finished (False on dummies)."""
        out = np.zeros(self.num_segments, dtype=np.bool_)
        out[self.is_real] = self.finished[self.seg_rollout[self.is_real]]
        return out

    @cached_property
    def is_last_segment(self) -> BoolArray:
        """(S,) True on the final segment of each rollout."""
        last = np.zeros(self.num_segments, dtype=np.bool_)
        real = self.is_real
        last[real] = self.seg_position[real] == self.segments_per_rollout[self.seg_rollout[real]] - 1
        return last

    def per_row(self, per_rollout: NDArray[Any]) -> FloatArray:
        """Broadcast an (R,) per-rollout array to (S,) rows; dummies get 0."""
        out = np.zeros(self.num_segments, dtype=np.float64)
        real = self.is_real
        out[real] = np.asarray(per_rollout, dtype=np.float64)[self.seg_rollout[real]]
        return out

    def broadcast(self, per_row: NDArray[Any]) -> FloatArray:
        """(S,) per-row scalars written onto each row's real tokens: an (S, max_tokens) array."""
        return broadcast_rows(
            np.ascontiguousarray(per_row, dtype=np.float64), self.seg_tokens, self.max_tokens
        )

    def require_values(self, who: str) -> FloatArray:
        """The critic values, or ``ValueError`` naming ``who`` needed them when the batch has none."""
        if self.values is None:
            raise ValueError(f"{who} needs critic values; build the batch with values=...")
        return self.values

    def __repr__(self) -> str:
        return (
            f"SegmentBatch(rollouts={self.num_rollouts}, segments={self.num_segments}, "
            f"groups={self.num_groups}, tokens={int(self.seg_tokens.sum())}, max_tokens={self.max_tokens}, "
            f"values={'yes' if self.values is not None else 'no'})"
        )


def within_group_stats(segments: IntArray, rewards: FloatArray, groups: IntArray) -> dict[str, float]:
    """How much the segment count K varies inside prompt groups, and how it goes with reward there.

    Args:
        segments: (R,) K of each rollout.
        rewards: (R,) its terminal reward.
        groups: (R,) its prompt group, as codes 0..num_groups-1.

    ``segments_sd``: the mean over groups of the (population) standard deviation of K. ``corr``: the
    pooled within-group Pearson correlation of K with reward, computed on K and R centred on their
    group means (NaN when either has no within-group variation). Group-relative statistics see only
    this variation: between-group differences in K cancel in them. A singleton group has SD 0 and
    adds nothing to the correlation.
    """
    k = np.asarray(segments, dtype=np.float64)
    r = np.asarray(rewards, dtype=np.float64)
    g = np.asarray(groups)
    size = np.bincount(g)
    used = size > 0

    def centred(x: FloatArray) -> FloatArray:
        means: FloatArray = np.bincount(g, weights=x, minlength=size.size)[used] / size[used]
        out: FloatArray = x - means[np.cumsum(used)[g] - 1]
        return out

    dk, dr = centred(k), centred(r)
    sd = np.sqrt(np.bincount(g, weights=dk * dk, minlength=size.size)[used] / size[used])
    den = math.sqrt(float(dk @ dk) * float(dr @ dr))
    return {"segments_sd": float(sd.mean()), "corr": float(dk @ dr) / den if den > 0 else math.nan}


# --- whole-array loops over a batch's real tokens (the credit layer's compiled kernels are in
# simlab.credit.kernels; these two are plain numpy, so a run whose estimator needs no kernel never
# loads numba, about 1.3 s of a short run's start)


def broadcast_rows(
    per_row: NDArray[np.float64], seg_tokens: NDArray[np.int64], width: int
) -> NDArray[np.float64]:
    """out[s, :n_s] = per_row[s]; 0 elsewhere.  Shapes: (S,), (S,) -> (S, W)."""
    real = np.arange(width)[None, :] < seg_tokens[:, None]  # (S, W)
    out: NDArray[np.float64] = np.where(real, per_row[:, None], 0.0)
    return out


def tokens_after(seg_tokens: NDArray[np.int64], seg_rollout: NDArray[np.int64]) -> NDArray[np.int64]:
    """N_after(s): optimised tokens of the later rows of the same run of a rollout's rows (dummies skipped),
    0 on dummies.  (S,), (S,) -> (S,)."""
    out = np.zeros(seg_tokens.size, dtype=np.int64)
    real = np.flatnonzero(seg_rollout >= 0)
    if real.size == 0:
        return out
    tokens, rollout = seg_tokens[real].astype(np.int64), seg_rollout[real]
    ends = np.append(rollout[1:] != rollout[:-1], True)  # (n,) the last row of each run of one rollout
    through = np.cumsum(tokens)  # tokens up to and including each row
    run_end = np.minimum.accumulate(np.where(ends, np.arange(real.size), real.size)[::-1])[::-1]
    out[real] = through[run_end] - through
    return out
