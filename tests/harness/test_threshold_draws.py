"""Thresholds drawn per group or per rollout (verifiers PR #1983): the draws, and the loop using them."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from simlab.errors import ConfigError
from simlab.harness import HarnessConfig, run_rollouts
from simlab.harness.config import draw_fracs, threshold

from .helpers import KR

CFG = HarnessConfig(window=96, summary_tokens=6, max_compactions=8, trigger="threshold", discard=False,
                    tail_steps=0, frac=0.7)


def rollouts(fracs=None, n=8, seed=3):
    env = gymnasium.make_vec(KR, num_envs=n)
    return run_rollouts(env, "oracle", CFG, seed=seed, group_size=4, fracs=fracs)


@pytest.mark.parametrize("draw", ["group", "rollout"])
def test_draws_lie_in_the_range_and_repeat_for_a_seed(draw):
    f = draw_fracs(0.6, draw=draw, spread=0.1, seed=11, num_envs=32, group_size=4)
    assert f.shape == (32,) and ((f >= 0.5) & (f <= 0.7)).all()
    np.testing.assert_array_equal(f, draw_fracs(0.6, draw=draw, spread=0.1, seed=11, num_envs=32, group_size=4))
    assert not np.array_equal(f, draw_fracs(0.6, draw=draw, spread=0.1, seed=12, num_envs=32, group_size=4))
    per_group = f.reshape(8, 4)
    shared = (per_group == per_group[:, :1]).all()
    assert shared == (draw == "group")  # a group shares its draw; rollouts draw their own
    assert np.unique(per_group[:, 0]).size == 8  # groups differ


def test_fixed_and_zero_spread_draw_nothing():
    np.testing.assert_array_equal(draw_fracs(0.6, draw="fixed", spread=0.0, seed=1, num_envs=8, group_size=4),
                                  np.full(8, 0.6))
    np.testing.assert_array_equal(draw_fracs(0.6, draw="rollout", spread=0.0, seed=1, num_envs=8, group_size=4),
                                  np.full(8, 0.6))
    with pytest.raises(ConfigError, match=r"`threshold_draw='grp'` is invalid"):
        draw_fracs(0.6, draw="grp", spread=0.1, seed=1, num_envs=8, group_size=4)


def test_each_rollout_compacts_exactly_when_its_own_context_passes_its_L():
    fracs = np.array([0.55, 0.55, 0.8, 0.8, 0.7, 0.6, 0.75, 0.65])
    rb = rollouts(fracs)
    for rec, f in zip(rb.rollouts, fracs, strict=True):
        assert rec.compactions == int((rec.step_context > threshold(96, f)).sum())
    k = rb.batch.segments_per_rollout
    assert k[0] > k[2]  # the same instance (group 0), a lower threshold: more segments


def test_one_frac_for_all_is_the_fixed_threshold():
    plain, same = rollouts(), rollouts(np.full(8, CFG.frac))
    np.testing.assert_array_equal(plain.batch.seg_tokens, same.batch.seg_tokens)
    np.testing.assert_array_equal(plain.batch.rewards, same.batch.rewards)


@pytest.mark.parametrize(
    ("fracs", "error", "match"),
    [
        (np.full(7, 0.7), ValueError, "fracs has 7 entries but the env has 8"),
        (np.array([0.7] * 7 + [1.5]), ConfigError, r"`harness.frac=1.5` is invalid; choose a value in \(0, 1\]"),
        (np.array([0.7] * 7 + [0.05]), ConfigError, r"`harness.frac=0.05` is invalid; the trigger limit"),
    ],
)
def test_bad_fracs_are_refused(fracs, error, match):
    with pytest.raises(error, match=match):
        rollouts(fracs)
