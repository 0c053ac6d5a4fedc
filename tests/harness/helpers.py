"""Small builders shared by the harness tests."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from simlab import tasks  # noqa: F401
from simlab.harness import HarnessConfig, RolloutBatch, run_rollouts
from simlab.tasks import vocab

KR = "simlab/KeyRecall-v0"
PC = "simlab/PointerChase-v0"


def run(
    env_id: str = KR,
    agent: Any = "oracle",
    n: int = 32,
    seed: int = 0,
    task: dict[str, Any] | None = None,
    **harness: Any,
) -> RolloutBatch:
    env = gymnasium.make_vec(env_id, num_envs=n, **(task or {}))
    cfg = HarnessConfig(**{"window": 96, "summary_tokens": 6, "max_compactions": 8, **harness})
    return run_rollouts(env, agent, cfg, seed=seed)


def steps_of(tokens: np.ndarray) -> int:
    return int((tokens == vocab.ACT).sum())


def check_consistency(rb: RolloutBatch) -> None:
    """Invariants every batch must satisfy, whatever the trigger."""
    b = rb.batch
    assert b.num_segments == len(rb.segments)
    np.testing.assert_array_equal(b.seg_tokens, [s.num_optimised for s in rb.segments])
    for r, rec in enumerate(rb.rollouts):
        lo, hi = rec.segment_rows
        assert (b.seg_rollout[lo:hi] == r).all()
        assert rec.finished == (rec.overlong == "")
        assert b.finished[r] == rec.finished
        if not rec.finished:
            assert rec.reward == 0.0
        assert rec.steps <= rb.config.max_steps
    for s in rb.segments:
        assert s.tokens[0] == vocab.BOS and s.tokens.size == s.optimised.size == s.phase.size
        assert (s.phase[s.optimised] != 0).all() and (s.phase[~s.optimised] == 0).all()
        # never cut inside a step: every ACT marker in a segment is followed by its action and OBS
        # (or is the final ACT COMPACT), and every OBS is preceded by an action
        for a in np.flatnonzero(s.tokens == vocab.ACT):
            assert a + 1 < s.tokens.size
            if s.tokens[a + 1] != vocab.COMPACT:
                assert a + 2 < s.tokens.size and s.tokens[a + 2] == vocab.OBS
        for o in np.flatnonzero(s.tokens == vocab.OBS):
            assert s.tokens[o - 2] == vocab.ACT
        # COMPACT only ever ends a segment (then v_sum, unless there is no summariser); it is never
        # replayed in a tail
        for c in np.flatnonzero(s.tokens == vocab.COMPACT):
            assert c + 1 == s.tokens.size or s.tokens[c + 1] == vocab.VSUM
