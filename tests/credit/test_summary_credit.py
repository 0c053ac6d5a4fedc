"""Credit choices that act on summaries (issue 42): FoldAct's separated loss and the stall signal.

Hand-computed cases, a property over random batches and masks, and a plain-loop reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simlab import SegmentBatch, loss_weights
from simlab.credit import NORMALISERS, separated_loss_weights
from simlab.credit.health import stall

from .strategies import batches

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------- separated loss, by hand
def test_token_mean_over_each_part_by_hand():
    # rollout 0: a segment of 3 tokens whose last 2 are its summary, then a final segment of 4; rollout 1: 5
    batch = SegmentBatch.from_rollouts([[3, 4], [5]], [1.0, 0.0])
    summary = np.zeros(batch.shape, dtype=bool)
    summary[0, 1:3] = True
    w = separated_loss_weights(batch, "token", summary=summary, summary_weight=0.5)
    action = batch.token_mask & ~summary
    np.testing.assert_allclose(w[action], 1 / 10)  # 10 action tokens share L_act
    np.testing.assert_allclose(w[summary], 0.5 / 2)  # 2 summary tokens share L_sum, times w_sum
    unified = loss_weights(batch, "token")
    assert unified[summary].sum() == pytest.approx(2 / 12)  # the one loss gives them 1/6 of the weight


def test_a_summary_weight_of_zero_is_the_mask():
    batch = SegmentBatch.from_rollouts([[3, 4], [5]], [1.0, 0.0])
    summary = np.zeros(batch.shape, dtype=bool)
    summary[0, 1:3] = True
    np.testing.assert_array_equal(separated_loss_weights(batch, "segment", summary=summary, summary_weight=0.0),
                                  loss_weights(batch, "segment", token_mask=batch.token_mask & ~summary))


def test_a_batch_without_summaries_is_the_action_loss_alone():
    batch = SegmentBatch.from_rollouts([[3], [5]], [1.0, 0.0])
    none = np.zeros(batch.shape, dtype=bool)
    with np.errstate(all="raise"):  # no division by an empty summary part
        w = separated_loss_weights(batch, "token", summary=none, summary_weight=2.0)
    np.testing.assert_array_equal(w, loss_weights(batch, "token"))


# ---------------------------------------------------------------- the reference: a plain loop
def _reference(batch: SegmentBatch, name: str, summary: np.ndarray, w_sum: float, overlong_mask: bool) -> np.ndarray:
    """L_act + w_sum L_sum token by token: each part's weights from a normaliser over that part alone."""
    out = np.zeros(batch.shape)
    for part, scale in ((batch.token_mask & ~summary, 1.0), (summary, w_sum)):
        kept = batch.is_real & batch.row_finished if overlong_mask else batch.is_real
        if scale == 0 or not (part & kept[:, None]).any():
            continue
        grid = loss_weights(batch, name, token_mask=part, overlong_mask=overlong_mask)
        for s in range(batch.num_segments):
            for t in range(batch.shape[1]):
                if part[s, t]:
                    out[s, t] += scale * grid[s, t]
    return out


@st.composite
def with_summaries(draw):
    batch = draw(batches(with_values=False))
    bits = draw(st.lists(st.booleans(), min_size=batch.token_mask.size, max_size=batch.token_mask.size))
    return batch, np.array(bits).reshape(batch.shape) & batch.token_mask


@FAST
@given(case=with_summaries(), name=st.sampled_from(sorted(NORMALISERS.names())),
       w_sum=st.sampled_from([0.0, 0.3, 1.0, 4.0]), overlong_mask=st.booleans())
def test_matches_the_plain_loop(case, name, w_sum, overlong_mask):
    batch, summary = case
    got = separated_loss_weights(batch, name, summary=summary, summary_weight=w_sum, overlong_mask=overlong_mask)
    np.testing.assert_allclose(got, _reference(batch, name, summary, w_sum, overlong_mask), atol=1e-12)


@FAST
@given(case=with_summaries(), w_sum=st.floats(0.0, 8.0))
def test_each_part_carries_its_own_unit_of_weight(case, w_sum):
    batch, summary = case
    w = separated_loss_weights(batch, "token", summary=summary, summary_weight=w_sum)
    action = batch.token_mask & ~summary
    assert w[~batch.token_mask].sum() == 0
    assert w[action].sum() == pytest.approx(1.0 if action.any() else 0.0)
    assert w[summary].sum() == pytest.approx(w_sum if summary.any() else 0.0)


# ---------------------------------------------------------------- the stall signal
def test_stall_fires_when_segments_rise_and_compacted_success_falls():
    steps = np.arange(8.0)
    assert stall(1.0 + 0.1 * steps, 0.8 - 0.02 * steps) == 1.0  # +0.7 segments, -0.14 success over the window
    assert stall(1.0 + 0.1 * steps, 0.8 + 0.02 * steps) == 0.0  # compacting more and doing better: no stall
    assert stall(np.full(8, 2.0), 0.8 - 0.02 * steps) == 0.0  # success falls at a fixed K: not a stall


def test_stall_ignores_noise_below_its_thresholds_and_waits_for_its_window():
    steps = np.arange(8.0)
    assert stall(2.0 + 0.01 * steps, 0.8 - 0.02 * steps) == 0.0  # +0.07 segments: under the rise it needs
    assert math.isnan(stall(np.ones(7), np.ones(7)))
    assert math.isnan(stall(np.ones(8), np.r_[np.ones(7), np.nan]))  # a step where nothing compacted
    assert stall(np.r_[np.full(4, 9.0), 1.0 + 0.1 * steps], np.r_[np.zeros(4), 0.8 - 0.02 * steps]) == 1.0
