"""The field questions' credit knobs (issue 20): per-row weights with the aggregation modes, token masks,
group baselines and per-segment costs, by hand, against the plain-loop twins, and on bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simlab import SegmentBatch, advantages, loss_weights
from simlab.credit import NORMALISERS, ROW_WEIGHTS, reference, shaped_rewards, with_cost
from simlab.errors import ConfigError

from .strategies import batches

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def masked_batches(draw):
    """A random batch and a random token mask over its real tokens (or None)."""
    batch = draw(batches(with_values=False))
    if draw(st.booleans()):
        return batch, None
    keep = np.array(draw(st.lists(st.booleans(), min_size=batch.token_mask.size, max_size=batch.token_mask.size)))
    return batch, keep.reshape(batch.shape) & batch.token_mask


# ---------------------------------------------------------------- by hand
def test_seq_mean_token_sum_weighs_every_row_the_same():
    batch = SegmentBatch.from_rollouts([[2, 3], [4]], [1.0, 0.0])
    w = loss_weights(batch, "seq-mean-token-sum")
    np.testing.assert_allclose(w[batch.token_mask], 1 / 3)


def test_inverse_k_gives_each_rollout_one_rows_weight():
    # two rows of 2 tokens against one row of 4: seq-mean-token-mean gives the split rollout 2/3 of the
    # weight (uni-agent #185's 1:3 for three rows); 1/K brings it back to 1/2
    batch = SegmentBatch.from_rollouts([[2, 2], [4]], [1.0, 0.0])
    plain = loss_weights(batch, "segment")
    fixed = loss_weights(batch, "segment", row_weight="inverse_k")
    assert plain[:2].sum() == pytest.approx(2 / 3) and plain[2].sum() == pytest.approx(1 / 3)
    np.testing.assert_allclose(fixed[batch.token_mask], 1 / 12)  # c = 1/2, b = 1/(3 * 2); c = 1, b = 1/(3 * 4)


def test_agent_lightning_per_rollout_mean_divides_by_rows_as_issue_593_reports():
    # the report's Figure 5 batch: A = 50 + 100 tokens, B = 30 x 3, C = 40. Eq. 16 (rollout) gives each
    # rollout 1/3 of the weight; as shipped (rows) each rollout keeps 1/6 (3 rollouts over 6 rows): total 0.5
    batch = SegmentBatch.from_rollouts([[50, 100], [30, 30, 30], [40]], [1.0, 0.0, 1.0])
    right, shipped = loss_weights(batch, "rollout"), loss_weights(batch, "rollout_rows")
    per_rollout = [rows.sum() for rows in (right[:2], right[2:5], right[5:])]
    np.testing.assert_allclose(per_rollout, [1 / 3] * 3)
    np.testing.assert_allclose([rows.sum() for rows in (shipped[:2], shipped[2:5], shipped[5:])], [1 / 6] * 3)
    assert shipped.sum() == pytest.approx(0.5)
    np.testing.assert_allclose(shipped[batch.token_mask], (right * 3 / 6)[batch.token_mask])
    one_row_each = SegmentBatch.from_rollouts([[5], [7]], [1.0, 0.0])  # case A: the two agree
    np.testing.assert_allclose(loss_weights(one_row_each, "rollout_rows"), loss_weights(one_row_each, "rollout"))


def test_length_ratio_turns_seq_mean_token_mean_into_token_mean():
    # n = (3, 1, 4), mean 8/3: c = (9/8, 3/8, 12/8); b = 1/(3 n): every token weighs 1/8
    batch = SegmentBatch.from_rollouts([[3, 1], [4]], [1.0, 0.0])
    w = loss_weights(batch, "seq-mean-token-mean", row_weight="length_ratio")
    np.testing.assert_allclose(w[batch.token_mask], 1 / 8)


def test_a_masked_token_leaves_the_denominators():
    batch = SegmentBatch.from_rollouts([[2, 3], [4]], [1.0, 0.0])
    mask = batch.token_mask.copy()
    mask[1, :2] = False  # two of row 1's three tokens (a summary) do not count
    w = loss_weights(batch, "token", token_mask=mask)
    np.testing.assert_allclose(w[mask], 1 / 7)
    assert not w[~mask].any()
    w = loss_weights(batch, "segment", token_mask=mask)
    assert w[1, 2] == pytest.approx(1 / 3)  # row 1 keeps one counted token: 1 / (3 rows x 1 token)


def test_finished_baseline_by_hand():
    # a group of three: 1 and 0 finished, an overlong 0; the baseline is (1, 0): mean 0.5, std 0.5
    batch = SegmentBatch.from_rollouts([[1], [1], [2]], [1.0, 0.0, 0.0], finished=[True, True, False])
    np.testing.assert_allclose(advantages(batch, "rollout_group", baseline="finished", eps=0.0)[:, 0],
                               [1.0, -1.0, -1.0])
    everyone = advantages(batch, "rollout_group", eps=0.0)[:, 0]  # mean 1/3, std sqrt(2)/3
    np.testing.assert_allclose(everyone, [2 / 3 / (np.sqrt(2) / 3), -1 / np.sqrt(2), -1 / np.sqrt(2)])


def test_a_group_with_one_finished_rollout_has_no_baseline():
    batch = SegmentBatch.from_rollouts([[1], [1]], [1.0, 0.0], finished=[True, False])
    assert not advantages(batch, "trajectory_group", baseline="finished").any()


def test_costs_by_hand():
    batch = SegmentBatch.from_rollouts([[2, 3], [4]], [1.0, 0.0])
    np.testing.assert_allclose(shaped_rewards(batch, "tokens", coef=0.1), [0.5, -0.4])
    np.testing.assert_allclose(shaped_rewards(batch, "segments", coef=0.1), [0.8, -0.1])
    context = np.array([10.0, 20.0, 5.0])
    np.testing.assert_allclose(shaped_rewards(batch, "context", coef=0.1, row_context=context), [-2.0, -0.5])
    shaped = with_cost(batch, "segments", coef=0.1)
    np.testing.assert_allclose(shaped.rewards, [0.8, -0.1])
    np.testing.assert_array_equal(shaped.seg_tokens, batch.seg_tokens)


def test_a_cost_on_successes_only_by_hand():
    """FoldGRPO's rule (``on="success"``): the rollout that succeeded (reward 1) pays 0.1 x 5 tokens, the one
    that failed keeps its 0 whatever its length; with ``all`` both pay."""
    batch = SegmentBatch.from_rollouts([[2, 3], [4], [1]], [1.0, 0.0, 1.0])
    np.testing.assert_allclose(shaped_rewards(batch, "tokens", coef=0.1, on="success"), [0.5, 0.0, 0.9])
    np.testing.assert_allclose(shaped_rewards(batch, "tokens", coef=0.1, on="all"), [0.5, -0.4, 0.9])
    np.testing.assert_allclose(with_cost(batch, "segments", coef=0.1, on="success").rewards, [0.8, 0.0, 0.9])
    with pytest.raises(ValueError, match="on='failure': choose one of"):
        shaped_rewards(batch, "tokens", coef=0.1, on="failure")


@FAST
@given(st.integers(0, 2**31 - 1))
def test_a_cost_on_successes_never_moves_a_failure_and_charges_a_success_as_all_does(seed: int):
    rng = np.random.default_rng(seed)
    lengths = [list(rng.integers(1, 6, size=rng.integers(1, 4))) for _ in range(rng.integers(1, 8))]
    rewards = rng.choice([0.0, 1.0, 0.5], size=len(lengths))
    batch = SegmentBatch.from_rollouts(lengths, rewards)
    only, every = (shaped_rewards(batch, "tokens", coef=0.05, on=on) for on in ("success", "all"))
    won = rewards >= 1.0
    np.testing.assert_array_equal(only[~won], rewards[~won])
    np.testing.assert_allclose(only[won], every[won])
    reference = [r - 0.05 * sum(n) if r >= 1.0 else r for n, r in zip(lengths, rewards, strict=True)]  # a loop
    np.testing.assert_allclose(only, reference)


def test_dummy_rows_cost_nothing():
    batch = SegmentBatch.from_rollouts([[2, 3], [4]], [1.0, 0.0])
    padded = batch.pad_to(8)
    np.testing.assert_array_equal(shaped_rewards(padded, "segments", coef=0.1),
                                  shaped_rewards(batch, "segments", coef=0.1))


# ---------------------------------------------------------------- properties and twins
@FAST
@given(case=masked_batches(), overlong_mask=st.booleans())
def test_weights_match_plain_loop(case, overlong_mask):
    batch, mask = case
    for name in NORMALISERS:
        for row_weight in ROW_WEIGHTS:
            fast = loss_weights(batch, name, overlong_mask=overlong_mask, row_weight=row_weight, token_mask=mask)
            slow = reference.loss_weights(batch, name, overlong_mask=overlong_mask, row_weight=row_weight,
                                          token_mask=mask)
            np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-15)


@FAST
@given(case=masked_batches(), overlong_mask=st.booleans())
def test_per_rollout_mean_by_rows_is_the_rollout_mean_scaled_by_rollouts_over_rows(case, overlong_mask):
    batch, mask = case
    right = loss_weights(batch, "rollout", overlong_mask=overlong_mask, token_mask=mask)
    shipped = loss_weights(batch, "rollout_rows", overlong_mask=overlong_mask, token_mask=mask)
    counted = right.sum(axis=1) > 0
    rows, rollouts = int(counted.sum()), len(set(batch.seg_rollout[counted].tolist()))
    np.testing.assert_allclose(shipped, right * rollouts / max(rows, 1), rtol=1e-12, atol=1e-15)
    assert shipped.sum() == pytest.approx(rollouts / rows if rows else 0.0)


@FAST
@given(case=masked_batches(), overlong_mask=st.booleans())
def test_length_ratio_under_seq_mean_token_mean_is_token_mean(case, overlong_mask):
    batch, mask = case
    a = loss_weights(batch, "segment", overlong_mask=overlong_mask, row_weight="length_ratio", token_mask=mask)
    b = loss_weights(batch, "token", overlong_mask=overlong_mask, token_mask=mask)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


@FAST
@given(batch=batches(), std_normalize=st.booleans(), unbiased=st.booleans())
def test_finished_baseline_matches_plain_loop(batch, std_normalize, unbiased):
    for name, per_segment in (("rollout_group", False), ("trajectory_group", True)):
        fast = advantages(batch, name, std_normalize=std_normalize, unbiased_std=unbiased, baseline="finished")
        slow = reference.group_advantage(batch, per_segment=per_segment, std_normalize=std_normalize,
                                         unbiased_std=unbiased, baseline="finished")
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-12)


@FAST
@given(batch=batches(with_values=False))
def test_finished_baseline_is_all_when_every_rollout_finished(batch):
    done = SegmentBatch.from_rollouts([list(batch.seg_tokens[batch.seg_rollout == r]) for r in
                                       range(batch.num_rollouts)], batch.rewards.tolist(),
                                      groups=batch.groups.tolist())
    np.testing.assert_array_equal(advantages(done, "rollout_group", baseline="finished"),
                                  advantages(done, "rollout_group"))


# ---------------------------------------------------------------- bad input
BATCH = SegmentBatch.from_rollouts([[2, 1], [3]], [1.0, 0.0])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [  # a bad setting is the user's input (ConfigError); a malformed grid is the caller's (ValueError)
        ({"row_weight": "1/k"}, ConfigError, r"`row_weight='1/k'` is invalid; choose one of 'none', 'inverse_k'"),
        ({"token_mask": np.ones((2, 3), dtype=bool)}, ValueError, r"token_mask is bool of shape \(2, 3\)"),
        ({"token_mask": np.ones((3, 3))}, ValueError, r"token_mask is float64 of shape \(3, 3\); give a bool grid"),
        ({"token_mask": np.ones((3, 3), dtype=bool)}, ValueError, "token_mask must be False on padding"),
    ],
)
def test_weight_options_rejected(kwargs, error, match):
    with pytest.raises(error, match=match):
        loss_weights(BATCH, "token", **kwargs)


@pytest.mark.parametrize(
    ("cost", "kwargs", "error", "match"),
    [
        ("tokenz", {"coef": 0.1}, ConfigError, r"`cost='tokenz'` is invalid; choose one of 'none', 'tokens'"),
        ("tokens", {"coef": -0.1}, ConfigError, r"`coef=-0.1` is invalid; choose a finite value >= 0"),
        ("tokens", {"coef": float("nan")}, ConfigError, r"`coef=nan` is invalid"),
        ("context", {"coef": 0.1}, ValueError, "cost 'context' needs row_context"),
        ("context", {"coef": 0.1, "row_context": [1.0, 2.0]}, ValueError, "row_context must be 3 finite values >= 0"),
        ("context", {"coef": 0.1, "row_context": [1.0, -2.0, 0.0]}, ValueError, "row_context must be 3 finite values"),
    ],
)
def test_cost_options_rejected(cost, kwargs, error, match):
    with pytest.raises(error, match=match):
        shaped_rewards(BATCH, cost, **kwargs)


def test_unknown_baseline_lists_the_valid_ones():
    with pytest.raises(ConfigError, match=r"`baseline='valid'` is invalid; choose one of 'all', 'finished'"):
        advantages(BATCH, "rollout_group", baseline="valid")
