"""Reading a trainer's rows as rollouts (simlab.integrations.rows): the map between the grids, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from simlab.credit import advantages
from simlab.errors import RowsError
from simlab.integrations.rows import credit, read_rows

KEYS = ["a_0_1", "a_0_0", "a_1_0", "b_0_0", "b_1_0", "b_1_1"]
MASK = np.array([[1, 0, 1, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0], [0, 1, 1, 1], [1, 1, 0, 0]])
REWARDS = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 1.0])


def test_sessions_are_rollouts_and_rows_segments_in_index_order() -> None:
    rows = read_rows(KEYS, MASK, REWARDS)
    batch = rows.batch
    assert batch.segments_per_rollout.tolist() == [2, 1, 1, 2]
    assert rows.source.tolist() == [1, 0, 2, 3, 4, 5]  # a_0_0 before a_0_1
    assert batch.seg_tokens.tolist() == [2, 2, 3, 1, 3, 2]
    assert batch.rewards.tolist() == [1.0, 0.0, 0.0, 1.0]  # the final row's reward
    assert batch.group_labels == ("a", "b")


def test_the_grids_map_onto_the_masked_positions_and_back() -> None:
    rows = read_rows(KEYS, MASK, REWARDS)
    grid = np.arange(1.0, 1.0 + MASK.size).reshape(MASK.shape) * MASK
    assert np.array_equal(rows.to_trainer(rows.from_trainer(grid)), grid)
    adv, ret = credit(rows, "rollout_group")
    assert np.array_equal(adv, rows.to_trainer(advantages(rows.batch, "rollout_group")))
    assert np.array_equal(adv, ret) and np.all(adv[MASK == 0] == 0)


def test_values_feed_the_gae_family() -> None:
    values = np.random.default_rng(0).normal(size=MASK.shape) * MASK
    rows = read_rows(KEYS, MASK, REWARDS, values=values)
    adv, targets = credit(rows, "gae_compaction", lam=0.9)
    assert np.all(adv[MASK == 0] == 0) and not np.array_equal(adv, targets)


def test_a_session_with_no_generated_token_is_left_out() -> None:
    mask = MASK.copy()
    mask[2] = 0
    rows = read_rows(KEYS, mask, REWARDS)
    assert rows.batch.num_rollouts == 3 and rows.session.tolist() == [0, 0, -1, 1, 2, 2]


def test_the_finished_flag_is_the_final_rows() -> None:
    finished = np.array([False, True, True, True, True, True])
    assert read_rows(KEYS, MASK, REWARDS, finished=finished).batch.finished.tolist() == [False, True, True, True]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"keys": ["a_0", *KEYS[1:]]}, r"^`keys\[0\]='a_0'` is invalid; use verl's row key \{uid\}_\{session_id\}"),
        ({"keys": [KEYS[0], *KEYS[:-1]]}, r"^`keys\[1\]='a_0_1'` is invalid; each row key must appear once$"),
        ({"keys": KEYS[:-1]}, r"^`len\(keys\)=5` is invalid; give one key per row \(6 rows\)$"),
        ({"response_mask": MASK * 2}, r"^`response_mask\[0, 0\]=2.0` is invalid; use 0 or 1$"),
        ({"response_mask": MASK * 0}, r"^`response_mask='all 0'` is invalid; a batch needs at least one generated"),
        ({"rewards": np.array([np.nan, 0, 0, 0, 0, 1])}, r"^`rewards\[0\]=nan` is invalid; every entry must be"),
        ({"rewards": np.zeros(5)}, r"^`rewards.shape=\(5,\)` is invalid; give \(6,\) per row or \(6, 4\) per token$"),
        ({"finished": [True] * 6}, r"^`finished='object of shape \(6,\)'|^`finished='bool of shape"),
    ],
)
def test_bad_rows_are_one_line_naming_the_key(change: dict, message: str) -> None:
    args = {"keys": KEYS, "response_mask": MASK, "rewards": REWARDS, **change}
    finished = args.pop("finished", None)
    if finished is not None and isinstance(finished, list):
        finished = np.asarray(finished, dtype=object)
    with pytest.raises(RowsError, match=message) as info:
        read_rows(args["keys"], args["response_mask"], args["rewards"], finished=finished)
    assert "\n" not in str(info.value)
