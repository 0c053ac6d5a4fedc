"""Every trigger, by its contract and by what distinguishes it."""

from __future__ import annotations

import numpy as np
import pytest

from simlab.harness import TRIGGERS, Generation, Phase, Request
from simlab.tasks import vocab

from .helpers import KR, PC, check_consistency, run, steps_of

LONG = {"chunked": 40, "every_step": 40}


@pytest.mark.parametrize("trigger", TRIGGERS.names())
@pytest.mark.parametrize("env_id", [KR, PC])
def test_every_trigger_runs_and_returns_a_consistent_batch(trigger: str, env_id: str) -> None:
    rb = run(
        env_id,
        "scripted",
        trigger=trigger,
        window=128,
        summary_tokens=6,
        max_compactions=LONG.get(trigger, 8),
        tail_steps=1,
    )
    check_consistency(rb)
    assert rb.batch.num_rollouts == 32


def test_threshold_fires_exactly_when_the_context_passes_L() -> None:
    rb = run(trigger="threshold", discard=False, tail_steps=0)
    L = rb.config.threshold
    for rec in rb.rollouts:
        over = int((rec.step_context > L).sum())
        assert rec.compactions == over  # one compaction per step that crossed L, none otherwise


def test_budget_fires_when_remaining_budget_drops_below_t_comp() -> None:
    rb = run(trigger="budget", t_comp=30, discard=False, tail_steps=0)
    for rec in rb.rollouts:
        assert rec.compactions == int((96 - rec.step_context < 30).sum())


def test_none_never_compacts_and_ends_overlong_when_history_no_longer_fits() -> None:
    small = run(trigger="none", window=64)
    assert all(r.compactions == 0 for r in small.rollouts)
    assert all(r.overlong == "window" for r in small.rollouts)
    big = run(trigger="none", window=512, task={"horizon": (16, 20)})
    assert all(r.finished and r.compactions == 0 for r in big.rollouts)
    assert len(big.segments) == 32


def test_sliding_drops_old_steps_without_a_summary() -> None:
    rb = run(trigger="sliding")
    assert all(r.compactions > 0 and r.finished for r in rb.rollouts)
    for s in rb.segments:
        assert not (s.tokens == vocab.SUMMARY).any() and not (s.tokens == vocab.VSUM).any()
        assert s.tokens.size <= 96


def test_chunked_summarises_every_chunk_steps() -> None:
    rb = run(trigger="chunked", chunk_steps=3, tail_steps=0, max_compactions=40, window=128)
    for rec in rb.rollouts:
        lo, hi = rec.segment_rows
        new_steps = [steps_of(s.tokens) for s in rb.segments[lo:hi]]
        assert all(k == 3 for k in new_steps[:-1])  # tail 0: every segment holds its own chunk only
        # steps counts the answer; no chunk boundary fires on the query step (the answer reads it)
        assert rec.compactions == (rec.steps - 2) // 3


def test_every_step_keeps_a_constant_size_state() -> None:
    rb = run(trigger="every_step", tail_steps=0, max_compactions=40)
    for rec in rb.rollouts:
        assert rec.finished
        lo, hi = rec.segment_rows
        assert all(steps_of(s.tokens) == 1 for s in rb.segments[lo:hi])
    ctx = np.concatenate([r.context_lengths for r in rb.rollouts])
    assert (
        ctx.max() <= 1 + 2 + 1 + 6 + 2 + 1 + 8 + 2 + 6 + 8
    )  # prompt, summary, one step, v_sum, summary, slack


class CompactEvery:
    """Emits COMPACT at every ``period``-th act call, else NEXT; summarises with PAD."""

    def __init__(self, period: int = 5) -> None:
        self.turns = 0
        self.period = period

    def generate(self, request: Request) -> Generation:
        n = len(request.contexts)
        out = np.full((n, request.num_tokens), vocab.PAD, dtype=np.int64)
        if request.phase == Phase.ACT:
            self.turns += 1
            out[:, 0] = (
                vocab.COMPACT
                if (self.turns % self.period == 0 and request.allowed[vocab.COMPACT])
                else vocab.NEXT
            )
        elif request.phase == Phase.ANSWER:
            out[:, 0] = np.flatnonzero(request.allowed)[0]
        return Generation(tokens=out)


def test_policy_trigger_compacts_when_the_agent_asks_and_falls_back_to_threshold() -> None:
    rb = run(
        agent=CompactEvery(), trigger="policy", window=512, max_compactions=20, task={"horizon": (20, 20)}
    )
    check_consistency(rb)
    for rec in rb.rollouts:
        assert rec.compactions >= 4  # about every fifth act turn
        lo, hi = rec.segment_rows
        for s in rb.segments[lo : hi - 1]:
            v = np.flatnonzero(s.tokens == vocab.VSUM)[0]
            assert s.tokens[v - 1] == vocab.COMPACT and s.optimised[v - 1]
    # an agent that never asks gets exactly the threshold trigger's compactions (the hard fallback)
    silent = run(agent=CompactEvery(period=10**9), trigger="policy", window=96, max_compactions=20)
    threshold = run(agent=CompactEvery(period=10**9), trigger="threshold", window=96, max_compactions=20)
    assert sum(r.compactions for r in silent.rollouts) > 0
    assert [r.compactions for r in silent.rollouts] == [r.compactions for r in threshold.rollouts]


def test_compact_is_not_offered_once_S_is_reached() -> None:
    rb = run(agent=CompactEvery(period=1), trigger="policy", window=512, max_compactions=2)
    check_consistency(rb)
    assert all(r.compactions == 2 and r.finished for r in rb.rollouts)
