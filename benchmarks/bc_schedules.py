"""Pilot: cheaper behaviour-cloning schedules against the preset's, by held-out success of the base model.

Issue 21 asked for a base model built at least 2x faster at equal held-out success. Length buckets alone
keep the trajectory (``benchmarks/equivalence.py base``) but save only about 1.15x; the other ways to
halve the work change the schedule. This pilot measures them on ``peekread-pos`` (the main job's base,
300 steps of 64 demonstrations at lr 1e-3), each seed with its own initial weights, demonstration
stream and 512 held-out episodes (``eval.seed = "run"``), checkpoints evaluated along the way:

- ``preset``: 64 episodes x 300 steps at lr 1e-3, evaluated at steps 100, 150, 200, 250 and 300 (so
  "stop at step 200" and "stop at step 250" are read off the same runs);
- ``half_batch``: 32 episodes x 300 steps (half the tokens per step);
- ``half_steps``: 64 episodes x 150 steps at lr 2e-3.

Each step is ``simlab.train.base.imitation_step`` in one padded pass (``base.minibatch_tokens = 0``, the
behaviour cloning of 7ee6af2 bit for bit); the result is a per-seed table with its command and commit.

    PYTHONPATH=. python benchmarks/bc_schedules.py [--seeds 0 1 2 3] [--out benchmarks/equivalence/base_schedules.csv]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np
import torch

from simlab.config import RunConfig, resolve
from simlab.harness.phases import phase_table
from simlab.policy.model import Policy
from simlab.train.base import imitation_step
from simlab.train.identity import base_harness, base_seed
from simlab.train.rollouts import collect, evaluate
from simlab.train.tokens import TokenBatch
from simlab.update import Adam

sys.path.insert(0, str(Path(__file__).resolve().parent))
import equivalence  # the sibling module: the table header and the success key

SCHEDULES = {
    "preset": {"episodes": 64, "steps": 300, "lr": 1e-3, "checks": (100, 150, 200, 250, 300)},
    "half_batch": {"episodes": 32, "steps": 300, "lr": 1e-3, "checks": (150, 300)},
    "half_steps": {"episodes": 64, "steps": 150, "lr": 2e-3, "checks": (100, 150)},
}
PRESET = "peekread-pos"
COLUMNS = ("schedule", "seed", "step", "success", "episodes", "train_seconds")


def config(schedule: str, seed: int) -> RunConfig:
    s = SCHEDULES[schedule]
    base = {"seed": seed, "steps": s["steps"], "episodes": s["episodes"], "lr": s["lr"], "minibatch_tokens": 0}
    return resolve({"task": {"preset": PRESET}, "base": base, "seed": seed,
                    "eval": {"episodes": equivalence.EPISODES, "single_window": False, "seed": "run"}})


def run(schedule: str, seed: int) -> list[dict[str, object]]:
    """behaviour_clone's loop, evaluated at the schedule's checkpoints."""
    cfg = config(schedule, seed)
    torch.manual_seed(base_seed(cfg))
    policy = Policy(cfg.policy.replace(value_head=False))
    harness = base_harness(cfg)
    opt = Adam(policy.parameters(), cfg.base.lr)
    rng = np.random.default_rng(base_seed(cfg) + 12345)  # behaviour_clone's demonstration stream
    rows, seconds = [], 0.0
    for step in range(1, cfg.base.steps + 1):
        start = time.process_time()
        first = int(rng.integers(0, cfg.train_seed_limit - cfg.base.episodes))
        rb, env, _ = collect(cfg, None, harness=harness, prompts=cfg.base.episodes, group_size=1, seed=first,
                             teacher=cfg.base.teacher)
        table = torch.from_numpy(phase_table(env, harness.trigger))
        policy.train()
        imitation_step(policy, opt, TokenBatch.from_rollouts(rb, policy.device), table, 0, step)
        seconds += time.process_time() - start
        if step in SCHEDULES[schedule]["checks"]:
            success = evaluate(cfg, policy)[0][equivalence.SUCCESS]
            rows.append({"schedule": schedule, "seed": seed, "step": step, "success": success,
                         "episodes": equivalence.EPISODES, "train_seconds": round(seconds, 2)})
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3])
    parser.add_argument("--out", type=Path, default=equivalence.HERE / "equivalence" / "base_schedules.csv")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with args.out.open("w", newline="") as f:
        f.write("\n".join(equivalence.header(["python", "benchmarks/bc_schedules.py", *sys.argv[1:]])) + "\n")
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for schedule in SCHEDULES:
            for seed in args.seeds:
                for row in run(schedule, seed):
                    writer.writerow(row)
                    f.flush()


if __name__ == "__main__":
    main()
