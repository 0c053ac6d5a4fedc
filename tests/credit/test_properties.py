"""Properties of the estimators and normalisers on random batches, and fast-vs-plain-loop twins."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simlab import SegmentBatch, advantages, loss_weights, value_targets
from simlab.credit import ESTIMATORS, NORMALISERS, estimator_family, reference

from .strategies import batches, rollouts

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LAMS = st.sampled_from([0.9, 0.97, 1.0, "segment_length", "trajectory_length", "response_cap"])


def lam_options(lam):
    if lam == "response_cap":
        return {"lam": lam, "alpha": 1.5, "response_cap": 8}
    if isinstance(lam, str):
        return {"lam": lam, "alpha": 1.5}
    return {"lam": lam}


def options(name: str, lam=0.95) -> dict:
    return {"gamma": 0.99, **lam_options(lam)} if estimator_family(name) == "gae" else {}


# ---------------------------------------------------------------- twins: vectorised == plain loop
@FAST
@given(batch=batches(), std_normalize=st.booleans(), unbiased=st.booleans())
def test_group_estimators_match_plain_loop(batch, std_normalize, unbiased):
    for name, per_segment in (("rollout_group", False), ("trajectory_group", True)):
        fast = advantages(batch, name, std_normalize=std_normalize, unbiased_std=unbiased)
        slow = reference.group_advantage(
            batch, per_segment=per_segment, std_normalize=std_normalize, unbiased_std=unbiased
        )
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-12)


@FAST
@given(batch=batches(), gamma=st.sampled_from([0.9, 1.0]), lam=LAMS)
def test_gae_estimators_match_plain_loop(batch, gamma, lam):
    opts = {"gamma": gamma, **lam_options(lam)}
    for mode in ("concat", "segment_local", "compaction"):
        adv, targets = reference.gae(batch, mode=mode, **opts)
        np.testing.assert_allclose(advantages(batch, f"gae_{mode}", **opts), adv, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(
            value_targets(batch, f"gae_{mode}", **opts), targets, rtol=1e-12, atol=1e-12
        )


@FAST
@given(batch=batches(with_values=False), overlong_mask=st.booleans())
def test_normalisers_match_plain_loop(batch, overlong_mask):
    for name in NORMALISERS:
        fast = loss_weights(batch, name, overlong_mask=overlong_mask)
        slow = reference.loss_weights(batch, name, overlong_mask=overlong_mask)
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=0)


def test_padded_time_loop_baseline_matches_segment_local():
    batch = SegmentBatch.from_rollouts(
        [[3, 5], [4]], [1.0, 0.0], values=[[np.linspace(0, 1, 3), np.linspace(1, 0, 5)], [np.ones(4)]]
    )
    rewards = np.zeros(batch.shape)
    rewards[np.arange(batch.num_segments), batch.seg_tokens - 1] = batch.row_reward
    base = reference.padded_time_loop_gae(batch.values, rewards, batch.token_mask.astype(float), 0.99, 0.9)
    np.testing.assert_allclose(base, advantages(batch, "gae_segment_local", gamma=0.99, lam=0.9), atol=1e-12)


# ---------------------------------------------------------------- padding invariance
@FAST
@given(batch=batches(), multiple=st.integers(1, 9), lam=LAMS, overlong_mask=st.booleans())
def test_padding_changes_no_real_output(batch, multiple, lam, overlong_mask):
    padded = batch.pad_to(multiple)
    assert padded.num_segments % multiple == 0
    n = batch.num_segments
    assert not padded.token_mask[n:].any()
    for name in ESTIMATORS:
        a, b = advantages(batch, name, **options(name, lam)), advantages(padded, name, **options(name, lam))
        np.testing.assert_array_equal(b[:n], a)
        assert not b[n:].any()
    for name in NORMALISERS:
        a = loss_weights(batch, name, overlong_mask=overlong_mask)
        b = loss_weights(padded, name, overlong_mask=overlong_mask)
        np.testing.assert_array_equal(b[:n], a)
        assert not b[n:].any()


# ---------------------------------------------------------------- estimator properties
def test_the_group_estimators_agree_on_equal_rewards_up_to_rounding():
    """The case hypothesis found: equal rewards give rollout_group exactly 0 and trajectory_group a few
    ulps over std + eps."""
    batch = SegmentBatch.from_rollouts([[1, 1, 1], [1, 1, 1]], [0.9519041863651487] * 2, groups=[0, 0],
                                       finished=[False, False])
    rollout, trajectory = advantages(batch, "rollout_group"), advantages(batch, "trajectory_group")
    assert not rollout.any() and 0 < np.abs(trajectory).max() < 1e-9


@FAST
@given(data=st.data())
def test_rollout_and_trajectory_group_agree_when_segment_counts_are_equal(data):
    kw = data.draw(rollouts(with_values=False))
    k = data.draw(st.integers(1, 4))
    kw["segment_tokens"] = [[data.draw(st.integers(1, 5)) for _ in range(k)] for _ in kw["segment_tokens"]]
    batch = SegmentBatch.from_rollouts(**kw)
    np.testing.assert_allclose(
        # atol: with equal rewards in a group the two means differ by a few ulps (one repeats each reward K
        # times), and dividing by std + eps (eps = 1e-6) scales that to about 1e-10 (found by hypothesis in CI)
        advantages(batch, "rollout_group"), advantages(batch, "trajectory_group"), rtol=1e-12, atol=1e-9
    )


@FAST
@given(kw=rollouts(), gamma=st.sampled_from([0.95, 1.0]), lam=st.sampled_from([0.8, 0.97, 1.0]))
def test_compaction_reward_coefficient_equals_reference(kw, gamma, lam):
    def coef(name):
        hi = SegmentBatch.from_rollouts(**{**kw, "rewards": [1.0] * len(kw["rewards"])})
        lo = SegmentBatch.from_rollouts(**{**kw, "rewards": [0.0] * len(kw["rewards"])})
        return advantages(hi, name, gamma=gamma, lam=lam) - advantages(lo, name, gamma=gamma, lam=lam)

    np.testing.assert_allclose(coef("gae_compaction"), coef("gae_concat"), rtol=1e-12, atol=1e-14)


@FAST
@given(batch=batches(), lam=LAMS)
def test_final_segment_is_exact(batch, lam):
    last = batch.is_last_segment
    opts = {"gamma": 0.97, **lam_options(lam)}
    fixed = advantages(batch, "gae_compaction", **opts)
    true = advantages(batch, "gae_concat", **opts)
    np.testing.assert_allclose(fixed[last], true[last], rtol=1e-12, atol=1e-12)


@FAST
@given(kw=rollouts(), reward=st.sampled_from([0.0, 1.0, -0.5]), unbiased=st.booleans(), norm=st.booleans())
def test_equal_rewards_give_zero_advantage_without_nan(kw, reward, unbiased, norm):
    batch = SegmentBatch.from_rollouts(**{**kw, "rewards": [reward] * len(kw["rewards"])})
    for name in ("rollout_group", "trajectory_group"):
        adv = advantages(batch, name, unbiased_std=unbiased, std_normalize=norm)
        assert np.isfinite(adv).all()
        assert not adv.any()


def test_single_rollout_group_gets_zero():
    batch = SegmentBatch.from_rollouts([[2], [3], [1, 1]], [1.0, 0.0, 1.0], groups=["a", "b", "b"])
    for name in ("rollout_group", "trajectory_group"):
        adv = advantages(batch, name, unbiased_std=True)
        assert not adv[0].any()
        assert adv[1, 0] < 0 < adv[2, 0]


def test_unbiased_std_matches_torch_std():
    torch = pytest.importorskip("torch")
    r = [0.0, 1.0, 1.0, 0.0, 1.0]
    batch = SegmentBatch.from_rollouts([[1]] * 5, r)
    t = torch.tensor(r, dtype=torch.float64)
    expected = ((t - t.mean()) / (t.std() + 1e-6)).numpy()
    np.testing.assert_allclose(advantages(batch, "rollout_group", unbiased_std=True)[:, 0], expected)


# ---------------------------------------------------------------- normaliser properties
@FAST
@given(batch=batches(with_values=False), overlong_mask=st.booleans())
def test_weights_sum_to_one_over_kept_tokens(batch, overlong_mask):
    kept_any = batch.finished.any() or not overlong_mask
    for name in ("token", "segment", "rollout"):
        total = loss_weights(batch, name, overlong_mask=overlong_mask).sum()
        assert total == pytest.approx(1.0 if kept_any else 0.0)


@FAST
@given(kw=rollouts(with_values=False))
def test_overlong_mask_zeroes_unfinished_but_keeps_their_advantage_statistics(kw):
    batch = SegmentBatch.from_rollouts(**kw)
    w = loss_weights(batch, "token", overlong_mask=True)
    unfinished_rows = ~batch.row_finished
    assert not w[unfinished_rows].any()
    # advantages do not depend on the mask at all
    adv = advantages(batch, "rollout_group")
    flipped = SegmentBatch.from_rollouts(**{**kw, "finished": [True] * len(kw["finished"])})
    np.testing.assert_array_equal(adv, advantages(flipped, "rollout_group"))


def test_verl_aliases_resolve():
    batch = SegmentBatch.from_rollouts([[2, 3], [4]], [1.0, 0.0])
    for alias, name in {
        "token-mean": "token",
        "seq-mean-token-mean": "segment",
        "seq-mean-token-sum-norm": "constant",
    }.items():
        np.testing.assert_array_equal(loss_weights(batch, alias), loss_weights(batch, name))


def test_constant_normaliser_uses_max_tokens():
    batch = SegmentBatch.from_rollouts([[2, 3], [4]], [1.0, 0.0])
    w = loss_weights(batch, "constant", max_tokens=10)
    assert w[0, 0] == pytest.approx(1 / (3 * 10))
    assert loss_weights(batch, "constant")[0, 0] == pytest.approx(1 / (3 * 4))
