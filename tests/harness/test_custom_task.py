"""A user's own Gymnasium task that follows the token protocol runs through the harness unchanged.

Nothing here touches simlab: the task is defined and registered in this file, without a vector
entry point, so ``gymnasium.make_vec`` wraps it in a SyncVectorEnv.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from simlab.harness import Generation, HarnessConfig, Phase, Request, run_rollouts

PAD, TASK, QUERY, SUMMARY, VSUM, ACT = 0, 12, 5, 7, 8, 2  # the reserved ids of the README's token-protocol section
ZERO, ONE = 16, 17  # content tokens
VOCAB = 24


class ParityEnv(gymnasium.Env):
    """Shows one bit per step; at the end asks for the parity of all bits shown."""

    def __init__(self, steps: int = 20) -> None:
        self.steps = steps
        self.observation_space = spaces.MultiDiscrete(np.full(4, VOCAB), dtype=np.int64)
        self.action_space = spaces.Discrete(VOCAB)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.bits = self.np_random.integers(0, 2, self.steps)
        self.t = 0
        return np.array([TASK, PAD, PAD, PAD]), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.t == self.steps:
            return np.zeros(4, dtype=np.int64), float(action == ZERO + self.bits.sum() % 2), True, False, {}
        obs = [ZERO + int(self.bits[self.t]), PAD, PAD, PAD]
        self.t += 1
        if self.t == self.steps:
            obs[1] = QUERY
        return np.array(obs), 0.0, False, False, {}


class ParityAgent:
    """Keeps the running parity in a one-token summary (the tail is 0, so no step is seen twice)."""

    def generate(self, request: Request) -> Generation:
        out = np.full((len(request.contexts), request.num_tokens), ZERO, dtype=np.int64)
        for r, ctx in enumerate(request.contexts):
            s = np.flatnonzero(ctx == SUMMARY)
            parity = int(ctx[s[-1] + 1] - ZERO) if s.size else 0
            parity += sum(int(ctx[a + 3] - ZERO) for a in np.flatnonzero(ctx[:-3] == ACT))
            if request.phase != Phase.ACT:
                out[r, 0] = ZERO + parity % 2
        return Generation(tokens=out)


if "usertest/Parity-v0" not in gymnasium.registry:
    gymnasium.register(id="usertest/Parity-v0", entry_point=ParityEnv)


def test_user_task_runs_with_the_random_agent_and_with_its_own_agent() -> None:
    # no discard: with k = 0 a discarded step (a bit) would be lost for good
    cfg = HarnessConfig(
        window=48, frac=0.75, summary_tokens=1, tail_steps=0, max_compactions=20, discard=False
    )
    env = gymnasium.make_vec("usertest/Parity-v0", num_envs=8, vectorization_mode="sync")
    rb = run_rollouts(env, "random", cfg, seed=0)
    assert rb.batch.num_rollouts == 8 and all(r.finished for r in rb.rollouts)
    env = gymnasium.make_vec("usertest/Parity-v0", num_envs=8, vectorization_mode="sync")
    solved = run_rollouts(env, ParityAgent(), cfg, seed=0)
    assert all(r.compactions >= 2 for r in solved.rollouts)  # the parity had to cross compactions
    assert [r.reward for r in solved.rollouts] == [1.0] * 8


if "usertest/ParityShort-v0" not in gymnasium.registry:
    gymnasium.register(id="usertest/ParityShort-v0", entry_point=ParityEnv, max_episode_steps=6)


def test_env_truncation_is_overlong() -> None:
    cfg = HarnessConfig(window=48, frac=0.75, summary_tokens=1, tail_steps=0, max_compactions=20)
    env = gymnasium.make_vec("usertest/ParityShort-v0", num_envs=4, vectorization_mode="sync")
    rb = run_rollouts(env, ParityAgent(), cfg, seed=0)
    assert all(r.overlong == "truncated" and r.steps == 6 and r.reward == 0 for r in rb.rollouts)
    assert not rb.batch.finished.any()
