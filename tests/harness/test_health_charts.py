"""The training-health charts (issue 50): tied prompt groups, the reward per rollout beside per row, summary
length by compaction index, and the context before and after a compaction, worked by hand on tiny batches."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simlab import names
from simlab.harness import HarnessConfig, RolloutBatch
from simlab.harness.records import RolloutRecord, SegmentTokens
from simlab.harness.stats import compaction_by_index, tied_groups
from simlab.segments import SegmentBatch
from simlab.train.rollouts import group_metrics, rollout_metrics
from tests.harness.helpers import run


def _record(reward: float, rows: int, lengths: tuple[int, ...] = (), before: tuple[int, ...] = (),
            after: tuple[int, ...] = ()) -> RolloutRecord:
    """A rollout of ``rows`` segments (``rows - 1`` compactions) with one optimised token each."""
    return RolloutRecord(reward=reward, finished=True, overlong="", steps=rows, compactions=rows - 1, tokens=rows,
                         segment_rows=(0, rows), segment_optimised=(1,) * rows, n_after=(0,) * rows,
                         context_lengths=np.zeros(1, dtype=np.int64), step_context=np.zeros(1, dtype=np.int64),
                         summaries=len(lengths), summary_lengths=lengths, context_before=before, context_after=after)


def _batch(records: list[RolloutRecord], group_size: int) -> RolloutBatch:
    """The records as the harness would hand them over: one row per segment, prompts in groups of ``group_size``."""
    rows = [[1] * len(r.segment_optimised) for r in records]
    batch = SegmentBatch.from_rollouts(rows, [r.reward for r in records],
                                       groups=[i // group_size for i in range(len(records))])
    one = SegmentTokens(tokens=np.ones(1, dtype=np.int64), optimised=np.ones(1, dtype=np.bool_),
                        phase=np.ones(1, dtype=np.int8), logprobs=np.zeros(1), values=np.zeros(1))
    return RolloutBatch(batch=batch, segments=[one] * sum(map(len, rows)), rollouts=records, config=HarnessConfig(),
                        v_sum_version="v1", env_seconds=0.0, agent_seconds=0.0, total_seconds=1.0)


# --------------------------------------------------------------------------------- tied prompt groups
def test_tied_groups_by_hand() -> None:
    # groups 0: (0, 0) all fail; 1: (1, 1) all succeed; 2: (0, 1) carries a gradient; 3: one rollout, left out
    shares = tied_groups(np.array([0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]), np.array([0, 0, 1, 1, 2, 2, 3]))
    assert shares == {names.GROUP_ALL_FAIL: 1 / 3, names.GROUP_ALL_SUCCESS: 1 / 3, names.GROUP_NO_GRADIENT: 2 / 3}


def test_a_tie_at_another_reward_carries_no_gradient_but_is_neither_all_fail_nor_all_success() -> None:
    shares = tied_groups(np.array([0.5, 0.5, 0.0, 0.0]), np.array([0, 0, 1, 1]))
    assert shares == {names.GROUP_ALL_FAIL: 0.5, names.GROUP_ALL_SUCCESS: 0.0, names.GROUP_NO_GRADIENT: 1.0}


def test_groups_of_one_rollout_give_no_share() -> None:
    assert all(math.isnan(v) for v in tied_groups(np.array([0.0, 1.0]), np.array([0, 1])).values())


def test_group_metrics_read_a_training_batch_under_its_prefix() -> None:
    # 2 prompts x G = 3: rewards (1, 1, 1) and (0, 1, 0)
    rb = _batch([_record(r, 1) for r in (1.0, 1.0, 1.0, 0.0, 1.0, 0.0)], group_size=3)
    assert group_metrics(rb, names.TRAIN) == {"train/group_all_fail_rate": 0.0, "train/group_all_success_rate": 0.5,
                                              "train/group_no_gradient_rate": 0.5}


# ------------------------------------------------------------------------- reward per rollout and per row
def test_reward_per_rollout_beside_per_row_by_hand() -> None:
    # rewards 1, 0, 0 with 3, 1, 2 rows: per rollout 1/3; per row (3 x 1 + 0 + 0) / 6 = 1/2
    rb = _batch([_record(1.0, 3), _record(0.0, 1), _record(0.0, 2)], group_size=1)
    m = rollout_metrics(rb, names.EVAL_COMPACTED)
    assert m["eval/compacted/return"] == pytest.approx(1 / 3)
    assert m["eval/compacted/return_per_row"] == pytest.approx(1 / 2)


def test_without_compaction_both_rewards_agree() -> None:
    rb = _batch([_record(1.0, 1), _record(0.0, 1), _record(1.0, 1), _record(1.0, 1)], group_size=1)
    m = rollout_metrics(rb, names.EVAL_SINGLE_WINDOW)
    assert m["eval/single_window/return"] == m["eval/single_window/return_per_row"] == 0.75


# --------------------------------------------------------------------------- compaction by index
def test_summary_length_by_compaction_index_by_hand() -> None:
    records = [_record(1.0, 4, (6, 4, 2), (40, 41, 42), (20, 21, 22)),
               _record(0.0, 2, (5,), (50,), (10,)),
               _record(1.0, 8, (1, 2, 3, 4, 5, 6, 7), (30,) * 7, (15,) * 7),
               _record(0.0, 1)]  # never compacted: counts nowhere
    got = compaction_by_index(records)
    assert list(got) == list(names.COMPACTION_BY_INDEX)
    assert [got[k] for k in names.SUMMARY_LENGTH_BY_INDEX] == [
        (6 + 5 + 1) / 3,  # the first summaries
        (4 + 2) / 2,
        (2 + 3) / 2,
        4.0,  # only the third rollout wrote a fourth
        (5 + 6 + 7) / 3,  # 5plus pools its fifth, sixth and seventh
    ]
    # 11 compactions: (40 + 41 + 42 + 50 + 7 x 30) / 11 before, (20 + 21 + 22 + 10 + 7 x 15) / 11 after
    assert got[names.CONTEXT_BEFORE_COMPACTION] == pytest.approx(383 / 11)
    assert got[names.CONTEXT_AFTER_COMPACTION] == pytest.approx(178 / 11)


def test_no_compaction_gives_no_length_and_no_context() -> None:
    got = compaction_by_index([_record(1.0, 1), _record(0.0, 1)])
    assert all(math.isnan(v) for v in got.values())


def test_rollout_metrics_carry_the_index_buckets_under_their_prefix() -> None:
    rb = _batch([_record(1.0, 3, (4, 2), (30, 31), (12, 13))], group_size=1)
    m = rollout_metrics(rb, names.TRAIN)
    assert (m["train/summary_length_at1"], m["train/summary_length_at2"]) == (4.0, 2.0)
    assert math.isnan(m["train/summary_length_at5plus"])
    assert (m["train/context_before_compaction"], m["train/context_after_compaction"]) == (30.5, 12.5)
    assert set(m) == {names.metric(names.TRAIN, k) for k in names.ROLLOUT}


def test_the_harness_records_the_context_before_and_after_each_compaction() -> None:
    # no verbatim tail: a next segment opens with the prompt, the SUMMARY marker and the 6 summary tokens
    rb = run(n=16, tail_steps=0)
    compacted = [r for r in rb.rollouts if r.compactions]
    assert compacted
    for r in rb.rollouts:
        first = rb.segments[r.segment_rows[0]]
        prompt = int(np.flatnonzero(first.optimised)[0]) - 1  # the first turn's marker follows the prompt
        assert len(r.context_before) == len(r.context_after) == r.compactions
        assert all(after == prompt + 1 + 6 for after in r.context_after)
        # the trigger read each context at an env step, over the threshold
        assert all(b in r.step_context and b > rb.config.threshold for b in r.context_before)
