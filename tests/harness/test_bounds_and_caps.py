"""SUPO Prop. 3.1 context bounds, the caps S and H, and the overlong flags."""

from __future__ import annotations

import numpy as np
import pytest

from simlab.tasks import vocab

from .helpers import KR, PC, check_consistency, run

HEAVY = {"tail_prob": 0.2, "tail_tokens": 30, "horizon": (16, 24)}


@pytest.mark.parametrize("env_id", [KR, PC])
@pytest.mark.parametrize("trigger", ["threshold", "budget"])
def test_context_bounds_with_and_without_the_discard_rule(env_id: str, trigger: str) -> None:
    common = dict(
        trigger=trigger,
        window=128,
        frac=0.6,
        t_comp=52,
        summary_tokens=6,
        tail_steps=1,
        max_compactions=20,
        task=HEAVY,
    )
    with_rule = run(env_id, **common, discard=True)
    without = run(env_id, **common, discard=False)
    cfg = with_rule.config
    limit = cfg.threshold if trigger == "threshold" else cfg.window - cfg.t_comp
    v_sum = len(vocab.v_sum(cfg.v_sum))
    l_a = max(2, cfg.summary_tokens)  # longest generated turn: marker + action, or the m-token summary
    l_o = 1 + HEAVY["tail_tokens"]  # OBS marker + the longest observation
    ctx_with = np.concatenate([r.context_lengths for r in with_rule.rollouts])
    ctx_without = np.concatenate([r.context_lengths for r in without.rollouts])
    assert ctx_with.max() <= limit + v_sum + l_a
    assert ctx_without.max() <= limit + 2 * l_a + l_o + v_sum
    # the rule is what keeps the tighter bound: without it a heavy step is summarised with the rest
    assert ctx_without.max() > limit + v_sum + l_a
    assert all(r.finished for r in with_rule.rollouts)
    check_consistency(with_rule)
    check_consistency(without)


def _last_summarised_and_tail(rb):  # type: ignore[no-untyped-def]
    """Per compaction: (last step before v_sum, first step of the next segment)."""
    pairs = []
    for rec in rb.rollouts:
        lo, hi = rec.segment_rows
        for seg, nxt in zip(rb.segments[lo : hi - 1], rb.segments[lo + 1 : hi], strict=True):
            v = int(np.flatnonzero(seg.tokens == vocab.VSUM)[0])
            last = seg.tokens[int(np.flatnonzero(seg.tokens[:v] == vocab.ACT)[-1]) : v]
            acts = np.flatnonzero(nxt.tokens == vocab.ACT)
            ends = np.flatnonzero(
                (nxt.tokens == vocab.ACT) | (nxt.tokens == vocab.ANSWER) | (nxt.tokens == vocab.VSUM)
            )
            stop = ends[ends > acts[0]]
            first = nxt.tokens[acts[0] : (stop[0] if stop.size else nxt.tokens.size)]
            pairs.append((v, last, first, nxt))
    return pairs


@pytest.mark.parametrize("discard", [True, False])
def test_discarded_step_is_not_summarised_but_replayed_in_the_tail(discard: bool) -> None:
    rb = run(trigger="threshold", discard=discard, tail_steps=1)
    pairs = _last_summarised_and_tail(rb)
    assert pairs
    for v, last, first, nxt in pairs:
        # the tail step replays a step verbatim and is never optimised again
        assert not nxt.optimised[: int(np.flatnonzero(nxt.tokens == vocab.ACT)[0]) + first.size].any()
        if discard:
            assert v <= rb.config.threshold  # what was summarised fit within L
            assert not np.array_equal(last, first)  # the step that crossed L was held back ...
        else:
            assert np.array_equal(
                last, first
            )  # ... without the rule the tail repeats the last summarised step


def test_step_cap_H_ends_rollouts_as_overlong() -> None:
    rb = run(max_steps=10, task={"horizon": (16, 20)})
    assert all(r.overlong == "steps" and r.steps == 10 and r.reward == 0 for r in rb.rollouts)
    assert not rb.batch.finished.any()
    check_consistency(rb)


def test_compaction_cap_S_is_respected_and_flags_exactly_the_rollouts_that_needed_more() -> None:
    free = run(trigger="threshold", max_compactions=30)
    capped = run(trigger="threshold", max_compactions=2)
    for a, b in zip(free.rollouts, capped.rollouts, strict=True):
        assert b.compactions <= 2
        assert (b.overlong == "compactions") == (a.compactions > 2)
        if a.compactions <= 2:
            assert b.finished and b.reward == a.reward
    assert any(b.overlong == "compactions" for b in capped.rollouts)
    assert any(b.finished for b in capped.rollouts)
    check_consistency(capped)


def test_answer_at_the_cap_is_not_overlong() -> None:
    rb = run(max_steps=64, task={"horizon": (16, 16)})
    assert all(r.finished and r.steps == 17 for r in rb.rollouts)
    exact = run(max_steps=17, task={"horizon": (16, 16)})
    assert all(r.finished for r in exact.rollouts)
    short = run(max_steps=16, task={"horizon": (16, 16)})
    assert all(r.overlong == "steps" for r in short.rollouts)
