"""The reference agents order as designed, the scripted flaw is systematic, and the corr knob works."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from simlab.harness.agents import SolverAgent
from simlab.harness.stats import corr
from simlab.tasks import vocab

from .helpers import KR, PC, run


def _success(env_id: str, agent: str, **kw: object) -> float:
    rb = run(env_id, agent, n=128, **kw)  # type: ignore[arg-type]
    return float(np.mean([r.reward for r in rb.rollouts]))


@pytest.mark.parametrize("env_id", [KR, PC])
def test_oracle_beats_scripted_beats_random(env_id: str) -> None:
    oracle, scripted, rand = (
        _success(env_id, a, trigger="threshold") for a in ("oracle", "scripted", "random")
    )
    assert oracle > scripted + 0.1 > rand + 0.2


def test_memory_task_needs_the_summary_oracle_against_sliding() -> None:
    assert _success(KR, "oracle", trigger="threshold") - _success(KR, "oracle", trigger="sliding") > 0.5


def test_scripted_flaw_is_systematic_recency_not_noise() -> None:
    env = gymnasium.make_vec(KR, num_envs=1)
    solver = env.solver
    steps = [[vocab.ACT, vocab.NEXT, vocab.OBS, 30, vocab.FACT, 16 + k, 40 + k] for k in range(6)]
    # facts of keys 16..21, oldest first
    ctx = np.array([vocab.BOS, vocab.TASK, 22, *(t for step in steps for t in step)])
    rng = np.random.default_rng(0)
    flawed = [solver.summarise(ctx, 6, "recency", -1, rng) for _ in range(5)]
    assert all(np.array_equal(flawed[0], f) for f in flawed)  # the same context always gives the same summary
    np.testing.assert_array_equal(flawed[0], [21, 45, 20, 44, 19, 43])  # the three most recent facts
    np.testing.assert_array_equal(solver.summarise(ctx, 6, "relevant", -1, rng), [16, 40, 17, 41, 18, 42])
    # q only decides which priority a summary follows
    agent = SolverAgent(env, quality=0.0)
    assert {agent._mode() for _ in range(20)} == {"recency"}


def test_summary_quality_q_raises_success() -> None:
    import gymnasium as gym

    from simlab.harness import HarnessConfig, run_rollouts

    cfg = HarnessConfig(window=96, summary_tokens=6, max_compactions=8)
    s = [
        np.mean(
            [
                r.reward
                for r in run_rollouts(gym.make_vec(PC, num_envs=96), "scripted", cfg, quality=q).rollouts
            ]
        )
        for q in (0.0, 1.0)
    ]
    assert s[1] > s[0] + 0.3


@pytest.mark.parametrize("env_id", [KR, PC])
def test_compaction_reward_corr_sets_sign_and_strength(env_id: str) -> None:
    realised = []
    for knob in (-1.0, -0.4, 0.0, 0.4, 1.0):
        # S high enough that no padded instance is cut short (that would mask the knob)
        rb = run(
            env_id,
            "oracle",
            n=320,
            seed=1,
            trigger="threshold",
            max_compactions=30,
            task={"compaction_reward_corr": knob},
        )
        segs = np.array([r.compactions + 1 for r in rb.rollouts], dtype=float)
        realised.append(corr(segs, np.array([r.reward for r in rb.rollouts])))
    assert realised[0] < realised[1] < -0.1
    assert abs(realised[2]) < 0.1
    assert 0.1 < realised[3] < realised[4]
