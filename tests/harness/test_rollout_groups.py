"""The harness tells each env its index in its GRPO group; bursts then vary K inside a group."""

from __future__ import annotations

import gymnasium
import numpy as np

from simlab import tasks  # noqa: F401  (registers the envs)
from simlab.harness import HarnessConfig, run_rollouts
from simlab.harness.protocol import Generation, Phase, Request
from simlab.harness.stats import first_actions, route_stats
from simlab.tasks import core, peekread
from simlab.tasks.config import PeekReadConfig

PR = "simlab/PeekRead-v0"
TASK = PeekReadConfig(vocab_size=34, horizon=(6, 7), read_tokens=(7, 8), hard_frac=0.0, read_payoff=0.75,
                      burst_prob=0.5, burst_steps=2, burst_tokens=80)
SUPO = HarnessConfig(window=88, frac=0.95, summary_tokens=2, tail_steps=0, max_compactions=4, max_steps=16)
"""L = 83: a reader without a burst fits one segment (at most 2 + 7 x 11 = 79 tokens); a burst step of
83 tokens crosses L from any context, so the discard rule drops it after one compaction."""


def test_a_group_shares_its_instance_and_a_burst_reader_compacts_once_per_burst_step() -> None:
    n, g, seed = 64, 8, 11
    env = gymnasium.make_vec(PR, num_envs=n, config=TASK)
    rb = run_rollouts(env, "scripted", SUPO, seed=seed, group_size=g)
    keys = core.episode_keys(np.array([seed + i // g for i in range(n)]), np.zeros(n, dtype=np.int64))
    inst = peekread.generate(keys, TASK, core.rollout_keys(keys, np.arange(n) % g))  # what each env played
    assert inst.arm_step is not None
    assert (inst.answer.reshape(-1, g) == inst.answer[::g, None]).all()  # one instance per group
    segments = rb.batch.segments_per_rollout
    burst = (first_actions(rb) == peekread.READ) & (inst.arm_step >= 0)
    np.testing.assert_array_equal(segments, np.where(burst, 1 + TASK.burst_steps, 1))
    inside = segments.reshape(-1, g).std(axis=1)
    assert (inside > 0).mean() > 0.5  # K varies inside most groups
    assert all(r.finished for r in rb.rollouts)


class Reader:
    """Reads at every step; otherwise the first token the phase allows."""

    def generate(self, request: Request) -> Generation:
        first = int(np.flatnonzero(request.allowed)[0])
        token = peekread.READ if request.phase == Phase.ACT else first
        return Generation(tokens=np.full((len(request.contexts), request.num_tokens), token))


def test_a_sync_vector_env_plays_rollout_zero_everywhere() -> None:
    # SyncVectorEnv hands one options dict to every sub-env, so the harness passes no rollout index to it
    env = gymnasium.make_vec(PR, num_envs=16, vectorization_mode="sync", config=TASK)
    rb = run_rollouts(env, Reader(), SUPO, seed=3, group_size=8)
    native = gymnasium.make_vec(PR, num_envs=16, config=TASK)
    native.reset(seed=[3] * 8 + [4] * 8, options={"rollout": 0})
    assert native.instances.arm_step is not None
    want = np.where(native.instances.arm_step >= 0, 3, 1)
    np.testing.assert_array_equal(rb.batch.segments_per_rollout, want)
    assert (want.reshape(2, 8) == want[::8, None]).all()  # no variation inside a group


def test_route_stats_by_hand() -> None:
    # two groups of four; route 17 holds K = 1, 3, 1 with R = 1, 0, 1 in group 0 and K = 3, 1 with R = 0, 1
    # in group 1 (corr -1),
    # route 16 holds K = 1 everywhere (no variation: NaN)
    segs = np.array([1, 3, 1, 1, 3, 1, 1, 1])
    reward = np.array([1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0])
    groups = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    first = np.array([17, 17, 17, 16, 17, 17, 16, 16])
    out = route_stats(segs, reward, groups, first)
    assert out["17"]["share"] == 5 / 8 and out["17"]["success_rate"] == 3 / 5
    assert out["17"]["mean_segments"] == 9 / 5
    assert np.isclose(out["17"]["within_group"]["corr"], -1.0)
    assert np.isnan(out["16"]["within_group"]["corr"]) and out["16"]["within_group"]["segments_sd"] == 0.0
