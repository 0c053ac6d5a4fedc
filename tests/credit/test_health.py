"""Health quantities that say whether a mechanism can act: within-group K statistics, longer rollouts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from simlab import SegmentBatch
from simlab.credit import health

from .strategies import batches

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def grouped(k: list[int], r: list[float], groups: list[int]) -> SegmentBatch:
    return SegmentBatch.from_rollouts([[3] * n for n in k], r, groups=groups)


def test_within_group_by_hand():
    # group a: K = 1 1 4 4, R = 0 0 1 1 -> dK = -1.5 -1.5 1.5 1.5, dR = -.5 -.5 .5 .5, SD 1.5
    # group b: K = 2 2 2 3, R = 1 0 1 0 -> dK = -.25 -.25 -.25 .75, dR = .5 -.5 .5 -.5, SD sqrt(.75/4)
    # sum dK dR = 3 - 0.5 = 2.5; sum dK^2 = 9 + 0.75; sum dR^2 = 1 + 1 -> corr 2.5 / sqrt(19.5)
    b = grouped([1, 1, 4, 4, 2, 2, 2, 3], [0, 0, 1, 1, 1, 0, 1, 0], ["a"] * 4 + ["b"] * 4)
    got = health.within_group(b)
    assert got["segments_sd"] == pytest.approx((1.5 + math.sqrt(0.75 / 4)) / 2)
    assert got["corr"] == pytest.approx(2.5 / math.sqrt(19.5))


def test_within_group_ignores_differences_between_groups():
    # the overall correlation is strong (long prompts fail), but inside each group K does not vary
    b = grouped([1, 1, 5, 5], [1, 0, 0, 0], [0, 0, 1, 1])
    assert health.within_group(b)["segments_sd"] == 0.0
    assert math.isnan(health.within_group(b)["corr"])
    shifted = grouped([1, 4, 7, 10], [0, 1, 0, 1], [0, 0, 1, 1])  # same within-group pattern, + 6 in group 1
    same = grouped([1, 4, 1, 4], [0, 1, 0, 1], [0, 0, 1, 1])
    assert health.within_group(shifted) == pytest.approx(health.within_group(same))
    assert health.within_group(same)["corr"] == pytest.approx(1.0)


@FAST
@given(batch=batches())
def test_within_group_matches_a_per_group_loop(batch):
    k = batch.segments_per_rollout.astype(float)
    r = batch.rewards
    dk, dr, sds = [], [], []
    for code in range(batch.num_groups):
        rows = batch.groups == code
        dk += list(k[rows] - k[rows].mean())
        dr += list(r[rows] - r[rows].mean())
        sds.append(k[rows].std())
    got = health.within_group(batch)
    assert got["segments_sd"] == pytest.approx(np.mean(sds), abs=1e-12)
    den = math.sqrt(np.dot(dk, dk) * np.dot(dr, dr))
    if den > 1e-12:
        assert got["corr"] == pytest.approx(np.dot(dk, dr) / den, abs=1e-9)
        assert -1 - 1e-12 <= got["corr"] <= 1 + 1e-12


def test_longer_rollouts_are_above_their_group_median():
    b = grouped([1, 2, 3, 3, 4, 4, 4, 4], [0] * 8, [0, 0, 0, 0, 1, 1, 1, 1])
    # group 0: median 2.5 -> K = 3, 3 are longer; group 1: all equal -> none
    assert health.longer_rollouts(b).tolist() == [False, False, True, True, False, False, False, False]
    # singleton groups (PPO, G = 1) fall back to the median of the batch (2)
    single = grouped([1, 2, 3], [0, 0, 0], [0, 1, 2])
    assert health.longer_rollouts(single).tolist() == [False, False, True]


def test_every_rollout_compacting_still_separates_the_longer_ones():
    # K = 2 and 4 in one group: every rollout compacted, the segment normaliser still over-weights K = 4
    b = SegmentBatch.from_rollouts([[10, 10], [10, 10, 10, 10]], [0.0, 1.0])
    loss_share, token_share = health.compacting_shares(b, "segment")
    assert (loss_share, token_share) == (pytest.approx(4 / 6), pytest.approx(40 / 60))
    loss_share, token_share = health.compacting_shares(
        SegmentBatch.from_rollouts([[10, 10], [5, 5, 5, 5]], [0.0, 1.0]), "segment")
    assert loss_share == pytest.approx(4 / 6) and token_share == pytest.approx(20 / 40)


def test_group_advantage_gap_is_zero_when_the_estimators_coincide():
    from simlab import advantages

    equal_k = grouped([2, 2, 2, 2], [0, 0, 1, 1], [0, 0, 0, 0])
    adv = advantages(equal_k, "trajectory_group")
    assert health.group_advantage_gap(equal_k, adv)["adv_error/rollout_group/rel_l2"] == pytest.approx(0.0)
    # Block 1's asymmetric case: rollout-group +-1, trajectory-group -2 / +0.5 on every token
    b = grouped([1, 1, 4, 4], [0, 0, 1, 1], [0, 0, 0, 0])
    gap = health.group_advantage_gap(b, advantages(b, "trajectory_group"))["adv_error/rollout_group/rel_l2"]
    # per token: rollouts 0, 1 have 3 tokens at -2 (ref -1), rollouts 2, 3 have 12 at 0.5 (ref 1)
    num = math.sqrt(6 * 1.0**2 + 24 * 0.5**2)
    den = math.sqrt(6 * 1.0 + 24 * 1.0)
    assert gap == pytest.approx(num / den)
