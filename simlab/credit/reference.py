"""Plain-loop twins of the credit layer, written for reading, not speed.

Every estimator and normaliser in :mod:`simlab.credit` has a twin here that walks rollouts, segments
and tokens one at a time with Python scalars. The tests assert the fast versions equal these on random
batches; the benchmark uses them as the "plain Python loop" baseline. They read the batch's fields only
through plain lists, so they share no array code with the fast path.
"""

from __future__ import annotations

import math

import numpy as np

from simlab.arrays import FloatArray
from simlab.segments import SegmentBatch


def _rollouts(batch: SegmentBatch) -> list[list[int]]:
    """Row indices of each rollout, in order."""
    rows: list[list[int]] = [[] for _ in range(batch.num_rollouts)]
    for s, r in enumerate(batch.seg_rollout.tolist()):
        if r >= 0:
            rows[r].append(s)
    return rows


def _lambdas(
    batch: SegmentBatch, lam: float | str, alpha: float | None, response_cap: float | None
) -> list[float]:
    rows = _rollouts(batch)
    n = batch.seg_tokens.tolist()
    out = [1.0] * batch.num_segments
    for segs in rows:
        total = sum(n[s] for s in segs)
        for s in segs:
            if isinstance(lam, str):
                assert alpha is not None
                length = {"response_cap": response_cap, "segment_length": n[s], "trajectory_length": total}[
                    lam
                ]
                assert length is not None
                out[s] = 1.0 - 1.0 / (alpha * length)
            else:
                out[s] = float(lam)
    return out


def group_advantage(
    batch: SegmentBatch,
    *,
    per_segment: bool,
    std_normalize: bool = True,
    eps: float = 1e-6,
    unbiased_std: bool = False,
    baseline: str = "all",
) -> FloatArray:
    """rollout_group (per_segment=False) or trajectory_group (True), one rollout at a time; ``baseline``
    ``finished`` leaves unfinished rollouts out of the pool their group's mean and std come from."""
    rows = _rollouts(batch)
    rewards = batch.rewards.tolist()
    groups = batch.groups.tolist()
    finished = batch.finished.tolist()
    per_rollout = [0.0] * batch.num_rollouts
    for g in set(groups):
        members = [r for r in range(batch.num_rollouts) if groups[r] == g]
        in_pool = [r for r in members if baseline == "all" or finished[r]]
        if len(in_pool) < 2:
            continue
        pool: list[float] = []
        for r in in_pool:
            pool.extend([rewards[r]] * (len(rows[r]) if per_segment else 1))
        mean = sum(pool) / len(pool)
        dof = len(pool) - (1 if unbiased_std else 0)
        std = math.sqrt(sum((x - mean) ** 2 for x in pool) / dof)
        for r in members:
            per_rollout[r] = (rewards[r] - mean) / (std + eps) if std_normalize else rewards[r] - mean
    out = np.zeros(batch.shape)
    for r, segs in enumerate(rows):
        for s in segs:
            for t in range(int(batch.seg_tokens[s])):
                out[s, t] = per_rollout[r]
    return out


def gae(
    batch: SegmentBatch,
    *,
    mode: str,
    gamma: float = 1.0,
    lam: float | str = 0.95,
    alpha: float | None = None,
    response_cap: float | None = None,
) -> tuple[FloatArray, FloatArray]:
    """(advantages, value targets) for mode "concat", "segment_local" or "compaction"."""
    assert batch.values is not None
    rows = _rollouts(batch)
    n = batch.seg_tokens.tolist()
    lams = _lambdas(batch, lam, alpha, response_cap)
    adv = np.zeros(batch.shape)
    targets = np.zeros(batch.shape)
    for r, segs in enumerate(rows):
        reward = float(batch.rewards[r])
        if mode == "concat":
            # flatten the rollout: (row, token) pairs in generation order
            tokens = [(s, t) for s in segs for t in range(n[s])]
            running, v_next = 0.0, 0.0
            for i in range(len(tokens) - 1, -1, -1):
                s, t = tokens[i]
                v = float(batch.values[s, t])
                r_t = reward if i == len(tokens) - 1 else 0.0
                running = r_t + gamma * v_next - v + gamma * lams[s] * running
                adv[s, t] = running
                targets[s, t] = running + v
                v_next = v
            continue
        after = 0
        for s in reversed(segs):
            running, v_next = 0.0, 0.0
            for t in range(n[s] - 1, -1, -1):
                v = float(batch.values[s, t])
                r_t = reward if t == n[s] - 1 else 0.0
                running = r_t + gamma * v_next - v + gamma * lams[s] * running
                targets[s, t] = running + v
                scale = (gamma * lams[s]) ** after if mode == "compaction" else 1.0
                adv[s, t] = running * scale
                v_next = v
            after += n[s]
    return adv, targets


def loss_weights(
    batch: SegmentBatch,
    name: str,
    *,
    overlong_mask: bool = False,
    row_weight: str = "none",
    token_mask: np.ndarray | None = None,
    max_tokens: int | None = None,
) -> FloatArray:
    """Token weights under normaliser ``name`` and per-row weight ``row_weight``, one row at a time."""
    rows = _rollouts(batch)
    width = batch.max_tokens if max_tokens is None else max_tokens
    finished = batch.finished.tolist()
    counts = [0] * batch.num_segments  # tokens of each row that count
    for r, segs in enumerate(rows):
        for s in segs:
            if finished[r] or not overlong_mask:
                n_s = int(batch.seg_tokens[s])
                counts[s] = n_s if token_mask is None else sum(bool(token_mask[s, t]) for t in range(n_s))
    kept_segments = [s for segs in rows for s in segs if counts[s] > 0]
    kept_rollouts = [r for r, segs in enumerate(rows) if any(counts[s] > 0 for s in segs)]
    n_tok = sum(counts)
    out = np.zeros(batch.shape)
    for r in kept_rollouts:
        t_r = sum(counts[s] for s in rows[r])
        k_r = sum(1 for s in rows[r] if counts[s] > 0)
        for s in rows[r]:
            if counts[s] == 0:
                continue
            b = {
                "token": 1.0 / n_tok,
                "segment": 1.0 / (len(kept_segments) * counts[s]),
                "segment_sum": 1.0 / len(kept_segments),
                "rollout": 1.0 / (len(kept_rollouts) * t_r),
                "rollout_rows": 1.0 / (len(kept_segments) * t_r),
                "constant": 1.0 / (len(kept_segments) * width),
            }[name]
            c = {
                "none": 1.0,
                "inverse_k": 1.0 / k_r,
                "length_ratio": counts[s] * len(kept_segments) / n_tok,
            }[row_weight]
            for t in range(int(batch.seg_tokens[s])):
                if token_mask is None or token_mask[s, t]:
                    out[s, t] = c * b
    return out


def padded_time_loop_gae(
    values: FloatArray, rewards: FloatArray, mask: FloatArray, gamma: float, lam: float
) -> FloatArray:
    """verl's ``compute_gae_advantage_return`` in numpy: a reverse loop over time, vectorised over rows.

    ``rewards`` holds each row's reward on its last real token; ``mask`` is 1 on real tokens. Padding
    is skipped by carrying the running values through masked columns, as verl does. This is the
    benchmark's baseline for segment-local GAE on the same padded grid.
    """
    num_rows, width = values.shape
    last_gae = np.zeros(num_rows)
    next_values = np.zeros(num_rows)
    adv = np.zeros((num_rows, width))
    for t in range(width - 1, -1, -1):
        delta = rewards[:, t] + gamma * next_values - values[:, t]
        new_gae = delta + gamma * lam * last_gae
        m = mask[:, t]
        next_values = values[:, t] * m + (1 - m) * next_values
        last_gae = new_gae * m + (1 - m) * last_gae
        adv[:, t] = last_gae
    return adv * mask
