"""``simlab demo``: what a compaction boundary does to credit, computed by simlab's own estimators.

The numbers are the seed's Blocks 1 and 2, recomputed through the public credit API, so the demo doubles
as a smoke test of an installation.
"""

from __future__ import annotations

import itertools

import numpy as np

from simlab.credit import NORMALISERS, SegmentBatch, advantages, estimators_of, health, loss_weights

REWARDS = [0.0, 0.0, 1.0, 1.0]
SEG_TOKENS = [[900], [700, 200, 650, 150], [850], [600, 180, 720, 160]]


def _first_token(batch: SegmentBatch, grid: np.ndarray) -> list[float]:
    rows = [int(np.flatnonzero(batch.seg_rollout == r)[0]) for r in range(batch.num_rollouts)]
    return [round(float(grid[s, 0]), 4) for s in rows]


def _mass(batch: SegmentBatch, grid: np.ndarray) -> list[float]:
    per = np.bincount(batch.seg_rollout, weights=grid.sum(axis=1), minlength=batch.num_rollouts)
    return [round(float(x), 4) for x in per]


def block1() -> None:
    """Block 1: the trajectory-group baseline and the segment normaliser on the seed's two rollouts."""
    print("== 1. the baseline: 4 rollouts, rewards", REWARDS)
    for k in ([1, 4, 1, 4], [1, 1, 4, 4]):
        batch = SegmentBatch.from_rollouts([[5] * n for n in k], REWARDS)
        print(f"  segments per rollout {k}: baseline shift {health.baseline_shift(batch)[0]:+.2f}")
        for name in ("rollout_group", "trajectory_group"):
            print(f"    {name:<17} advantages {_first_token(batch, advantages(batch, name))}")
    print("\n== 2. the loss normaliser: segment tokens", SEG_TOKENS)
    batch = SegmentBatch.from_rollouts(SEG_TOKENS, REWARDS)
    for name in NORMALISERS:
        loss_share, token_share = health.compacting_shares(batch, name)
        print(
            f"  {name:<9} weight per rollout {_mass(batch, loss_weights(batch, name))}  "
            f"longer rollouts: {loss_share:.1%} of the weight, {token_share:.1%} of the tokens"
        )


def block2() -> None:
    """Block 2: GAE's first-segment weight across compaction boundaries, against the concatenated reference."""
    bounds = [0, 6, 11, 18]
    values = np.random.default_rng(7).normal(0.4, 0.15, size=bounds[-1])
    segs = [b - a for a, b in itertools.pairwise(bounds)]
    per_seg = [values[a:b] for a, b in itertools.pairwise(bounds)]

    def flat(name: str, reward: float) -> np.ndarray:
        batch = SegmentBatch.from_rollouts([segs], [reward], values=[per_seg])
        return advantages(batch, name, gamma=1.0, lam=0.97)[batch.token_mask]

    print("\n== 3. the boundary discount: one rollout, segments", segs, "gamma=1, lam=0.97")
    true_coef = flat("gae_concat", 1.0) - flat("gae_concat", 0.0)
    for name in estimators_of("gae"):
        coef = flat(name, 1.0) - flat(name, 0.0)
        resid = np.abs(flat(name, 0.0)[: bounds[-2]] - flat("gae_concat", 0.0)[: bounds[-2]]).max()
        print(
            f"  {name:<18} first-token reward credit x{coef[0] / true_coef[0]:.3f} of the reference, "
            f"max reward-coefficient error {np.abs(coef - true_coef).max():.1e}, "
            f"value residual on pre-final segments {resid:.4f}"
        )
    print("\n== 4. length-adaptive lambda (alpha=1.5): first segment of a 4-segment 64k-token rollout")
    batch = SegmentBatch.from_rollouts([[19_000, 15_000, 15_000, 15_000]], [1.0])
    for lam, opts in (
        ("response_cap", {"response_cap": 10_240}),
        ("segment_length", {}),
        ("trajectory_length", {}),
    ):
        w = health.first_segment_weight(batch, gamma=1.0, lam=lam, alpha=1.5, **opts)[0]
        print(f"  lam reading {lam:<17} first-segment weight {w:.4f}")


def run_demo() -> None:
    """Print both blocks (what ``simlab demo`` shows)."""
    block1()
    block2()
