"""harness.summariser_loss: a separate frozen summariser that loses the asked fact with a set probability."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simlab import tasks  # noqa: F401  (registers the envs)
from simlab.errors import ConfigError
from simlab.harness.agents import LossySummariser, drop_pairs
from simlab.harness.config import HarnessConfig
from simlab.harness.loop import _writer, run_rollouts
from simlab.tasks import vocab
from simlab.tasks.presets import get_preset

PAD = vocab.PAD


def test_drop_pairs_by_hand() -> None:
    got = drop_pairs(np.array([20, 30, 21, 31, 20, 32]), 20)
    np.testing.assert_array_equal(got, [21, 31, PAD, PAD, PAD, PAD])
    np.testing.assert_array_equal(drop_pairs(np.array([21, 31, 22, 32]), 20), [21, 31, 22, 32])
    np.testing.assert_array_equal(drop_pairs(np.array([20, 30, 21]), 20), [PAD, PAD, PAD])  # an odd tail goes too


@given(st.lists(st.tuples(st.integers(13, 20), st.integers(13, 30)), max_size=5), st.integers(13, 20))
def test_drop_pairs_keeps_the_other_pairs_in_order(pairs: list[tuple[int, int]], key: int) -> None:
    summary = np.array([t for p in pairs for t in p], dtype=np.int64)
    got = drop_pairs(summary, key)
    kept = [p for p in pairs if p[0] != key]
    assert got.size == summary.size
    assert [tuple(int(t) for t in got[2 * i:2 * i + 2]) for i in range(len(kept))] == kept
    assert (got[2 * len(kept):] == PAD).all()


def _lossy_run(loss: float, n: int = 128) -> tuple[list[float], int, int]:
    p = get_preset("peekread-lossy")
    env = gymnasium.make_vec(p.env_id, num_envs=n, vectorization_mode="vector_entry_point", config=p.task)
    cfg = HarnessConfig(**{**p.harness, "summariser": "scripted", "summariser_loss": loss})
    rb = run_rollouts(env, "oracle", cfg, seed=3)
    written = sum(r.summaries for r in rb.rollouts)
    held = sum(r.summaries_holding("answer")[1] for r in rb.rollouts)
    return [r.reward for r in rb.rollouts], written, held


def test_the_share_of_summaries_that_hold_the_answer_follows_the_loss() -> None:
    for loss in (0.0, 0.5, 1.0):
        _, written, held = _lossy_run(loss)
        assert written > 200
        assert abs(held / written - (1 - loss)) < 0.08, (loss, held, written)


def test_a_lossy_summariser_costs_the_oracle_success_and_rereading_wins_some_back() -> None:
    kept, _, _ = _lossy_run(0.0)
    lost, _, _ = _lossy_run(1.0)
    assert np.mean(kept) > np.mean(lost) + 0.05
    assert np.mean(lost) > 0.5  # the oracle reads the fact again after each summary that lost it


def test_loss_zero_builds_no_wrapper_and_the_summariser_self_is_never_wrapped() -> None:
    p = get_preset("peekread-lossy")
    env = gymnasium.make_vec(p.env_id, num_envs=8, vectorization_mode="vector_entry_point", config=p.task)
    plain = _writer(HarnessConfig(summariser="scripted"), env, object(), None, seed=0, quality=0.7)  # type: ignore[arg-type]
    assert not isinstance(plain, LossySummariser)
    lossy = _writer(HarnessConfig(summariser="scripted", summariser_loss=0.5), env, object(), None, seed=0,  # type: ignore[arg-type]
                    quality=0.7)
    assert isinstance(lossy, LossySummariser) and lossy.loss == 0.5


@pytest.mark.parametrize("summariser", ["self", "none"])
def test_a_loss_needs_a_separate_summariser(summariser: str) -> None:
    with pytest.raises(ConfigError, match=r"^`harness.summariser_loss=0.5` is invalid; choose 0 unless "):
        HarnessConfig(summariser=summariser, summariser_loss=0.5)
