"""The seed's Block 1 and Block 2 numbers, recomputed through simlab's estimators and normalisers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from simlab import SegmentBatch, advantages, loss_weights
from simlab.credit import health

R = [0.0, 0.0, 1.0, 1.0]
SEG_TOKENS = [[900], [700, 200, 650, 150], [850], [600, 180, 720, 160]]


def per_rollout(batch: SegmentBatch, grid: np.ndarray, reduce: str = "first") -> np.ndarray:
    if reduce == "sum":
        return np.bincount(batch.seg_rollout, weights=grid.sum(axis=1), minlength=batch.num_rollouts)
    return np.array([grid[batch.seg_rollout == r][0, 0] for r in range(batch.num_rollouts)])


def uniform_batch(k: list[int]) -> SegmentBatch:
    return SegmentBatch.from_rollouts([[3] * n for n in k], R)


# ---------------------------------------------------------------- Block 1 (a)/(b): the baseline moves
def test_symmetric_split_gives_plus_minus_one():
    batch = uniform_batch([1, 4, 1, 4])
    for name in ("rollout_group", "trajectory_group"):
        adv = per_rollout(batch, advantages(batch, name, eps=0.0))
        np.testing.assert_allclose(adv, [-1.0, -1.0, 1.0, 1.0])


def test_asymmetric_split_gives_minus_two_and_half():
    batch = uniform_batch([1, 1, 4, 4])
    traj = per_rollout(batch, advantages(batch, "trajectory_group", eps=0.0))
    np.testing.assert_allclose(traj, [-2.0, -2.0, 0.5, 0.5])
    roll = per_rollout(batch, advantages(batch, "rollout_group", eps=0.0))
    np.testing.assert_allclose(roll, [-1.0, -1.0, 1.0, 1.0])
    # with the default eps the seed's printed values survive rounding to 4 places
    np.testing.assert_array_equal(
        np.round(per_rollout(batch, advantages(batch, "trajectory_group")), 4), [-2.0, -2.0, 0.5, 0.5]
    )
    np.testing.assert_allclose(health.baseline_shift(batch), [0.3])


# ---------------------------------------------------------------- Block 1, part 2: loss weight shares
def test_segment_normaliser_shares():
    batch = SegmentBatch.from_rollouts(SEG_TOKENS, R)
    shares = per_rollout(batch, loss_weights(batch, "segment"), reduce="sum")
    np.testing.assert_allclose(shares, [0.1, 0.4, 0.1, 0.4])
    assert shares[1] / shares[0] == pytest.approx(4.0)


def test_token_normaliser_shares():
    batch = SegmentBatch.from_rollouts(SEG_TOKENS, R)
    shares = per_rollout(batch, loss_weights(batch, "token"), reduce="sum")
    np.testing.assert_array_equal(np.round(shares, 4), [0.1761, 0.3327, 0.1663, 0.3249])
    assert round(shares[1] / shares[0], 3) == 1.889


def test_compacting_share_eighty_percent_against_658_tokens():
    batch = SegmentBatch.from_rollouts(SEG_TOKENS, R)
    loss_share, token_share = health.compacting_shares(batch, "segment")
    assert loss_share == pytest.approx(0.8)
    assert round(token_share, 3) == 0.658
    loss_share, token_share = health.compacting_shares(batch, "token")
    assert loss_share == pytest.approx(token_share)


# ---------------------------------------------------------------- Block 2: the boundary discount
GAMMA, LAM = 1.0, 0.97
GL = GAMMA * LAM
BOUNDS = [0, 6, 11, 18]
T = BOUNDS[-1]


def block2_batch(reward: float) -> SegmentBatch:
    values = np.random.default_rng(7).normal(0.4, 0.15, size=T)
    segs = [b - a for a, b in itertools.pairwise(BOUNDS)]
    per_seg = [values[a:b] for a, b in itertools.pairwise(BOUNDS)]
    return SegmentBatch.from_rollouts([segs], [reward], values=[per_seg])


def flat(batch: SegmentBatch, grid: np.ndarray) -> np.ndarray:
    return grid[batch.token_mask]


def coefficient(name: str) -> np.ndarray:
    """GAE is affine in the terminal reward: differencing isolates its coefficient."""
    one, zero = block2_batch(1.0), block2_batch(0.0)
    return flat(one, advantages(one, name, gamma=GAMMA, lam=LAM)) - flat(
        zero, advantages(zero, name, gamma=GAMMA, lam=LAM)
    )


def test_reward_coefficient_of_reference_is_distance_discount():
    np.testing.assert_allclose(coefficient("gae_concat"), GL ** (T - 1 - np.arange(T)), rtol=1e-14)


def test_segment_local_over_credits_first_token_by_1441():
    local, true = coefficient("gae_segment_local"), coefficient("gae_concat")
    assert local[0] == pytest.approx(GL ** (BOUNDS[1] - 1))
    assert round(float(local[0] / true[0]), 3) == 1.441


def test_correction_makes_reward_coefficient_exact_to_float_precision():
    err = np.abs(coefficient("gae_compaction") - coefficient("gae_concat")).max()
    assert err < 1e-15


def test_value_residual_is_0447_and_335_percent_on_pre_final_segments():
    zero = block2_batch(0.0)
    fixed = flat(zero, advantages(zero, "gae_compaction", gamma=GAMMA, lam=LAM))
    true = flat(zero, advantages(zero, "gae_concat", gamma=GAMMA, lam=LAM))
    last = BOUNDS[-2]
    np.testing.assert_allclose(fixed[last:], true[last:], rtol=1e-14)  # final segment exact
    gap = np.abs(fixed[:last] - true[:last])
    assert round(float(gap.max()), 4) == 0.0447
    assert round(float((gap / np.abs(true[:last])).max()), 3) == 0.335


@pytest.mark.parametrize(
    ("lam", "l", "expected"),
    [
        ("response_cap", 10_240, 0.0534),
        ("response_cap", 32_000, 0.3916),
        ("trajectory_length", 64_000, 0.6258),
    ],
)
def test_first_segment_weight_under_length_adaptive_lambda(lam, l, expected):
    # a 4-segment, 64k-token rollout with 45,000 tokens after its first segment
    batch = SegmentBatch.from_rollouts([[19_000, 15_000, 15_000, 15_000]], [1.0])
    assert batch.n_after[0] == 45_000
    opts = {"response_cap": l} if lam == "response_cap" else {}
    w = health.first_segment_weight(batch, gamma=1.0, lam=lam, alpha=1.5, **opts)
    assert round(float(w[0]), 4) == expected
