"""Benchmark: the native vector env against SyncVectorEnv, and the harness's token throughput.

Prints, per task: steps/s of the batched env and of ``gymnasium.vector.SyncVectorEnv`` over the single
env (both at ``--envs`` envs, random sensible actions, autoreset included) and their ratio (target
>= 50x); then the harness's tokens/s with the scripted agent and the share of its time spent in the
env, in the agent and in the harness itself. Timings only print; nothing here asserts.

    PYTHONPATH=. python benchmarks/bench_env.py [--envs 1024] [--seconds 2]
"""

from __future__ import annotations

import argparse
import time

import gymnasium
import numpy as np

from simlab import tasks
from simlab.harness import HarnessConfig, run_rollouts
from simlab.harness.stats import rollout_stats
from simlab.tasks.presets import PRESETS

HARNESS_PRESET = {"simlab/KeyRecall-v0": "keyrecall-tiny", "simlab/PointerChase-v0": "pointerchase-tiny",
                  "simlab/PeekRead-v0": "peekread-pos"}


def steps_per_second(env: gymnasium.vector.VectorEnv, seconds: float, seed: int = 0) -> float:
    """Env steps (summed over envs) per wall-clock second, actions drawn ahead of time."""
    rng = np.random.default_rng(seed)
    act = np.asarray(env.metadata.get("act_tokens", np.arange(16, 48)))
    env.reset(seed=seed)
    batches = act[rng.integers(act.size, size=(64, env.num_envs))]
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for a in batches:
            env.step(a)
        steps += len(batches)
    return steps * env.num_envs / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=3.0, help="time per env kind and task")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best one counts)")
    args = parser.parse_args()
    for env_id in tasks.ENV_IDS:
        native = gymnasium.make_vec(env_id, num_envs=args.envs, vectorization_mode="vector_entry_point")
        sync = gymnasium.make_vec(env_id, num_envs=args.envs, vectorization_mode="sync")
        sync.metadata["act_tokens"] = native.metadata["act_tokens"]
        # interleaved rounds, best of each: the machine is shared, so a slow round says little
        n_rate = s_rate = 0.0
        for _ in range(args.rounds):
            n_rate = max(n_rate, steps_per_second(native, args.seconds / args.rounds))
            s_rate = max(s_rate, steps_per_second(sync, args.seconds / args.rounds))
        print(f"{env_id}: native {n_rate / 1e6:.2f}M steps/s | SyncVectorEnv {s_rate / 1e3:.1f}k steps/s | "
              f"ratio {n_rate / s_rate:.0f}x (target >= 50x) at {args.envs} envs")

        preset = PRESETS[HARNESS_PRESET[env_id]]
        env = gymnasium.make_vec(env_id, num_envs=args.envs, config=preset.task)
        rb = run_rollouts(env, "scripted", HarnessConfig(**preset.harness), seed=0)
        st = rollout_stats([rb])
        share = st["time_share"]
        print(f"  harness ({preset.name}, scripted, {args.envs} rollouts): "
              f"{st['tokens_per_s'] / 1e3:.0f}k tokens/s, {st['rollouts_per_s']:.0f} rollouts/s; "
              f"time in env {share['env']:.1%}, agent {share['agent']:.1%}, harness {share['harness']:.1%}")


if __name__ == "__main__":
    main()
