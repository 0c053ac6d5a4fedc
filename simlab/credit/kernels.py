"""Compiled loops over the real tokens of a SegmentBatch.

The credit layer runs on every training step of every trial, on batches of about a million tokens.
The usual way to compute GAE (verl, TorchRL) is a reverse loop over time that is vectorised across
rows; on segment grids that loop walks every padding column and pays Python overhead per column.
These kernels instead walk each row's real tokens once, in compiled code, and never touch padding
(outputs are allocated here with ``np.zeros``, whose untouched pages cost nothing; numba's own
``np.zeros`` would memset the whole padded grid, which costs more than the arithmetic). Each kernel
has a plain-Python twin in :mod:`simlab.credit.reference` that the tests compare against.

Layout: rows are segments in rollout-major order; row ``s`` holds ``seg_tokens[s]`` tokens
left-aligned in a ``(S, W)`` grid; ``seg_rollout[s] == -1`` marks a dummy row with no tokens.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simlab.lazy import jit


def gae(
    values: NDArray[np.float64],
    seg_tokens: NDArray[np.int64],
    seg_rollout: NDArray[np.int64],
    rewards: NDArray[np.float64],
    gamma: float,
    gl: NDArray[np.float64],
    concat: bool,
) -> NDArray[np.float64]:
    """GAE over segment rows, either per segment or over the rollout's concatenated tokens.

    delta_t = r_t + gamma * V_{t+1} - V_t;   A_t = delta_t + (gamma * lam_t) * A_{t+1}     (GAE eq. 16)

    ``concat=False`` (segment-local): each row is its own trajectory; the rollout's terminal reward
    sits on the row's last token and V = 0 after it.  ``concat=True``: a rollout's rows form one
    trajectory; V_{t+1} and A_{t+1} cross the row boundary, and the reward sits on the rollout's
    final token only.  ``gl[s]`` is gamma * lam for the tokens of row s.

    Shapes: values (S, W), seg_tokens (S,), seg_rollout (S,), rewards (R,), gl (S,) -> (S, W).
    """
    out = np.zeros(values.shape)
    _gae(out, values, seg_tokens, seg_rollout, rewards, gamma, gl, concat)
    return out


@jit
def _gae(
    out: NDArray[np.float64],
    values: NDArray[np.float64],
    seg_tokens: NDArray[np.int64],
    seg_rollout: NDArray[np.int64],
    rewards: NDArray[np.float64],
    gamma: float,
    gl: NDArray[np.float64],
    concat: bool,
) -> None:
    current = -2  # rollout whose tail we are inside (concat mode)
    a_next = 0.0
    v_next = 0.0
    for s in range(seg_tokens.size - 1, -1, -1):
        r = seg_rollout[s]
        if r < 0:
            continue
        n = seg_tokens[s]
        carry = concat and r == current
        if not carry:
            a_next = 0.0
            v_next = 0.0
        c = gl[s]
        for t in range(n - 1, -1, -1):
            v = values[s, t]
            delta = gamma * v_next - v
            if t == n - 1 and not carry:
                delta += rewards[r]
            a_next = delta + c * a_next
            out[s, t] = a_next
            v_next = v
        current = r


@jit
def scale_rows(
    grid: NDArray[np.float64], seg_tokens: NDArray[np.int64], per_row: NDArray[np.float64]
) -> None:
    """In place: grid[s, :n_s] *= per_row[s].  (S, W), (S,), (S,)."""
    for s in range(seg_tokens.size):
        f = per_row[s]
        for t in range(seg_tokens[s]):
            grid[s, t] *= f


def add_rows(
    grid: NDArray[np.float64], other: NDArray[np.float64], seg_tokens: NDArray[np.int64]
) -> NDArray[np.float64]:
    """grid + other on real tokens only; 0 on padding.  (S, W), (S, W), (S,) -> (S, W)."""
    out = np.zeros(grid.shape)
    _add_rows(out, grid, other, seg_tokens)
    return out


@jit
def _add_rows(
    out: NDArray[np.float64],
    grid: NDArray[np.float64],
    other: NDArray[np.float64],
    seg_tokens: NDArray[np.int64],
) -> None:
    for s in range(seg_tokens.size):
        for t in range(seg_tokens[s]):
            out[s, t] = grid[s, t] + other[s, t]
