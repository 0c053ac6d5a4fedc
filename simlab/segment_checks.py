"""Checks of the per-rollout lists :meth:`SegmentBatch.from_rollouts` takes, and their array form.

Each function reads one argument (segment token counts, rewards, groups, finished flags, critic values),
raises a ``ValueError`` naming the argument, the position and what was wrong, and returns it as the
numpy arrays :class:`~simlab.segments.SegmentBatch` stores. A neutral module, like :mod:`simlab.segments`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np

from simlab.arrays import BoolArray, FloatArray, IntArray


def _check_length(name: str, seq: Any, expected: int) -> None:
    try:
        n = len(seq)
    except TypeError:
        raise ValueError(f"{name} must be a sequence with one entry per rollout, got {seq!r}") from None
    if n != expected:
        raise ValueError(f"{name} has {n} entries but segment_tokens has {expected} rollouts")


def segment_counts(segment_tokens: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """(every segment's token count in rollout-major order, each rollout's segment count), checked."""
    if isinstance(segment_tokens, (str, bytes)) or not isinstance(segment_tokens, Sequence):
        raise ValueError(
            f"segment_tokens must be a sequence of per-rollout lists, got {type(segment_tokens).__name__}"
        )
    if len(segment_tokens) == 0:
        raise ValueError("segment_tokens is empty; a batch needs at least one rollout")
    counts: list[int] = []
    per_rollout_k: list[int] = []
    for r, segs in enumerate(segment_tokens):
        if isinstance(segs, (str, bytes)) or not isinstance(segs, (Sequence, np.ndarray)):
            raise ValueError(f"segment_tokens[{r}] must be a list of segment token counts, got {segs!r}")
        if len(segs) == 0:
            raise ValueError(f"segment_tokens[{r}] is empty; every rollout has at least one segment")
        for s, n in enumerate(segs):
            if isinstance(n, (bool, np.bool_)) or not isinstance(n, Integral):
                raise ValueError(f"segment_tokens[{r}][{s}]={n!r} is invalid; counts must be integers")
            if n < 1:
                raise ValueError(
                    f"segment_tokens[{r}][{s}]={int(n)} is invalid; every segment needs at least 1 "
                    "optimised token"
                )
            counts.append(int(n))
        per_rollout_k.append(len(segs))
    return counts, per_rollout_k


def finished_flags(finished: Sequence[bool] | None, num_rollouts: int) -> BoolArray:
    """(R,) the finished flags (default: all True), each a bool."""
    if finished is None:
        return np.ones(num_rollouts, dtype=np.bool_)
    _check_length("finished", finished, num_rollouts)
    for r, f in enumerate(finished):
        if not isinstance(f, (bool, np.bool_)):
            raise ValueError(f"finished[{r}]={f!r} is invalid; use True or False")
    return np.asarray(finished, dtype=np.bool_)


def finite_vector(name: str, seq: Sequence[float], expected: int) -> FloatArray:
    """(R,) the finite floats of ``seq`` (not bools), one per rollout."""
    _check_length(name, seq, expected)
    out = np.empty(expected, dtype=np.float64)
    for i, x in enumerate(seq):
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, Real):
            raise ValueError(f"{name}[{i}]={x!r} is invalid; use a finite float")
        if not math.isfinite(float(x)):
            raise ValueError(f"{name}[{i}]={float(x)!r} is invalid; rewards must be finite")
        out[i] = float(x)
    return out


def encode_groups(groups: Sequence[Hashable], expected: int) -> tuple[IntArray, tuple[Hashable, ...]]:
    """(R,) group codes 0..G-1 in order of first appearance, and the caller's ids by code."""
    _check_length("groups", groups, expected)
    code_of: dict[Hashable, int] = {}
    codes = np.empty(expected, dtype=np.int64)
    for r, g in enumerate(groups):
        key = g.item() if isinstance(g, np.generic) else g
        try:
            codes[r] = code_of.setdefault(key, len(code_of))
        except TypeError:
            raise ValueError(f"groups[{r}]={g!r} is invalid; group ids must be hashable") from None
    return codes, tuple(code_of)


def critic_grid(
    values: Sequence[Sequence[Any]], segment_tokens: Sequence[Sequence[int]], num_segments: int, width: int
) -> FloatArray:
    """(S, width) critic values laid out as segment rows (0 on padding), one finite value per optimised token."""
    _check_length("values", values, len(segment_tokens))
    grid = np.zeros((num_segments, width), dtype=np.float64)
    row = 0
    for r, (per_seg, counts) in enumerate(zip(values, segment_tokens, strict=True)):
        try:
            k = len(per_seg)
        except TypeError:
            raise ValueError(f"values[{r}] must be a list of per-segment arrays, got {per_seg!r}") from None
        if k != len(counts):
            raise ValueError(f"values[{r}] has {k} segments but segment_tokens[{r}] has {len(counts)}")
        for s, (v, n) in enumerate(zip(per_seg, counts, strict=True)):
            arr = np.asarray(v, dtype=np.float64)
            if arr.ndim != 1 or arr.size != n:
                raise ValueError(
                    f"values[{r}][{s}] has shape {arr.shape} but segment_tokens[{r}][{s}]={n}; "
                    "give one value per optimised token"
                )
            if not np.all(np.isfinite(arr)):
                bad = int(np.flatnonzero(~np.isfinite(arr))[0])
                raise ValueError(
                    f"values[{r}][{s}][{bad}]={float(arr[bad])!r} is invalid; values must be finite"
                )
            grid[row, :n] = arr
            row += 1
    return grid
