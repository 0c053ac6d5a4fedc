"""What the harness records: segment tokens, masks, phases, N_after, summarisers, v_sum version."""

from __future__ import annotations

import numpy as np

from simlab.harness import Generation, Phase, Request
from simlab.tasks import vocab

from .helpers import KR, PC, check_consistency, run


def test_optimised_counts_and_n_after_match_the_segment_batch() -> None:
    rb = run(PC, "scripted", trigger="threshold")
    b = rb.batch
    for r, rec in enumerate(rb.rollouts):
        lo, hi = rec.segment_rows
        counts = [rb.segments[i].num_optimised for i in range(lo, hi)]
        assert tuple(counts) == rec.segment_optimised
        expected_after = [sum(counts[j + 1 :]) for j in range(len(counts))]
        np.testing.assert_array_equal(b.n_after[lo:hi], expected_after)
        assert rec.n_after == tuple(expected_after)
        assert b.rewards[r] == rec.reward
        assert len(counts) == rec.compactions + 1


def test_phases_label_actions_summaries_and_answers() -> None:
    rb = run(KR, "oracle", trigger="threshold")
    for rec in rb.rollouts:
        lo, hi = rec.segment_rows
        segs = rb.segments[lo:hi]
        for s in segs[:-1]:
            v = int(np.flatnonzero(s.tokens == vocab.VSUM)[0])
            assert (s.phase[v + 2 :] == Phase.SUMMARY).all() and s.optimised[v + 2 :].all()
            assert s.tokens.size - v - 2 == rb.config.summary_tokens
        last = segs[-1]
        assert last.tokens[-2] == vocab.ANSWER and last.phase[-1] == Phase.ANSWER
        acts = np.flatnonzero(np.concatenate([s.tokens for s in segs]) == vocab.ACT)
        assert acts.size >= 1
        for s in segs:
            a = np.flatnonzero(s.tokens == vocab.ACT) + 1
            newly = a[s.optimised[a]]
            assert (s.phase[newly] == Phase.ACT).all()


def test_frozen_summariser_tokens_are_context_not_optimised() -> None:
    rb = run(KR, "random", trigger="threshold", summariser="oracle")
    for rec in rb.rollouts:
        lo, hi = rec.segment_rows
        for s in rb.segments[lo : hi - 1]:
            v = int(np.flatnonzero(s.tokens == vocab.VSUM)[0])
            assert not s.optimised[v:].any() and (s.phase[v:] == Phase.CONTEXT).all()
            assert (s.tokens[v + 2 :] != vocab.PAD).any()  # the oracle wrote facts
    check_consistency(rb)


def test_summariser_none_drops_history_without_a_summary() -> None:
    rb = run(KR, "oracle", trigger="threshold", summariser="none")
    assert any(r.compactions for r in rb.rollouts)
    for s in rb.segments:
        assert not (s.tokens == vocab.VSUM).any() and not (s.tokens == vocab.SUMMARY).any()
    assert np.mean([r.reward for r in rb.rollouts]) < 0.3  # facts leave the window with nothing to carry them


def test_v_sum_version_is_recorded_and_written() -> None:
    rb = run(KR, "oracle", trigger="threshold", v_sum="v2")
    assert rb.v_sum_version == "v2"
    seg = next(s for s in rb.segments if (s.tokens == vocab.VSUM).any())
    v = int(np.flatnonzero(seg.tokens == vocab.VSUM)[0])
    assert tuple(seg.tokens[v : v + 2]) == vocab.v_sum("v2")


class LogProbAgent:
    """NEXT / first allowed token, with a made-up log-prob and value per token."""

    def generate(self, request: Request) -> Generation:
        n = len(request.contexts)
        tok = np.flatnonzero(request.allowed)[0]
        tokens = np.full((n, request.num_tokens), tok, dtype=np.int64)
        return Generation(
            tokens=tokens, logprobs=np.full(tokens.shape, -0.5), values=np.full(tokens.shape, 0.25)
        )


def test_logprobs_and_values_are_kept_on_optimised_tokens_only() -> None:
    rb = run(KR, LogProbAgent(), trigger="threshold")
    for s in rb.segments:
        assert np.all(s.logprobs[s.optimised] == -0.5) and np.isnan(s.logprobs[~s.optimised]).all()
    assert rb.batch.values is not None
    np.testing.assert_array_equal(rb.batch.values[rb.batch.token_mask], 0.25)
    arrays = rb.padded()
    assert (
        arrays["tokens"].shape
        == arrays["optimised_mask"].shape
        == (len(rb.segments), arrays["tokens"].shape[1])
    )
    np.testing.assert_array_equal(arrays["optimised_mask"].sum(axis=1), rb.batch.seg_tokens)
    np.testing.assert_array_equal(arrays["attention_mask"].sum(axis=1), [s.tokens.size for s in rb.segments])


def test_groups_share_an_instance() -> None:
    import gymnasium

    from simlab.harness import HarnessConfig, run_rollouts

    env = gymnasium.make_vec(KR, num_envs=12)
    rb = run_rollouts(env, "scripted", HarnessConfig(window=96, summary_tokens=6), seed=5, group_size=4)
    assert rb.batch.num_groups == 3
    prompts = [rb.segments[r.segment_rows[0]].tokens[:20] for r in rb.rollouts]
    assert all(np.array_equal(prompts[0 + g * 4], prompts[g * 4 + j]) for g in range(3) for j in range(4))


class Recorder:
    """Wraps an agent and checks the segment ids a KV-cached policy would rely on."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.last: dict[int, tuple[int, np.ndarray]] = {}
        self.new_segments = 0

    def generate(self, request: Request) -> Generation:
        assert request.segment_ids is not None
        for e, sid, ctx in zip(request.env_ids, request.segment_ids, request.contexts, strict=True):
            prev = self.last.get(int(e))
            if prev is not None and prev[0] == sid:
                # same segment: the context extends the previous one (no discard in this run)
                assert ctx.size > prev[1].size and np.array_equal(ctx[: prev[1].size], prev[1])
            elif prev is not None:
                assert sid == prev[0] + 1
                self.new_segments += 1
                assert ctx[0] == vocab.BOS and vocab.SUMMARY in ctx
            self.last[int(e)] = (int(sid), ctx)
        return self.inner.generate(request)  # type: ignore[attr-defined]


def test_segment_ids_mark_where_a_cache_must_be_rebuilt() -> None:
    import gymnasium

    from simlab.harness import HarnessConfig, make_agent, run_rollouts

    env = gymnasium.make_vec(PC, num_envs=16)
    rec = Recorder(make_agent("oracle", env))
    rb = run_rollouts(env, rec, HarnessConfig(window=96, summary_tokens=4, discard=False, max_compactions=8))
    assert rec.new_segments == sum(r.compactions for r in rb.rollouts) > 0


def test_summaries_are_checked_against_the_answer():
    import gymnasium

    from simlab.harness import HarnessConfig, run_rollouts

    env = gymnasium.make_vec("simlab/PeekRead-v0", num_envs=32, read_payoff=0.0, hard_frac=0.0)
    cfg = HarnessConfig(window=56, summary_tokens=2, max_compactions=4, max_steps=16)
    oracle = run_rollouts(env, "oracle", cfg, seed=0, group_size=1)
    assert all(r.summaries == r.compactions for r in oracle.rollouts)  # every compaction writes one
    written = sum(r.summaries for r in oracle.rollouts)
    assert written > 0 and sum(r.summaries_holding("answer")[1] for r in oracle.rollouts) == written
    rand = run_rollouts(env, "random", cfg, seed=0, group_size=1)
    held = sum(r.summaries_holding("answer")[1] for r in rand.rollouts)
    held /= max(sum(r.summaries for r in rand.rollouts), 1)
    assert held < 0.9  # random summaries seldom hold the value
