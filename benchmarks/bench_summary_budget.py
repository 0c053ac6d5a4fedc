"""Variable-length summaries (``harness.summary_budget``) against the fixed-length path, in one run.

The named baseline is the fixed-length path: ``keyrecall-mark-budget`` with ``summary_budget`` unset and
``summary_tokens`` equal to the budget (every summary is 7 tokens). The other side is the preset as
shipped: summaries end at the policy's end token, at most 7 tokens. Both sides start from the same
seeded, untrained policy (its summaries end wherever the end token is drawn, about one token in 13) and
run ``--steps`` RL steps of SUPO's recipe (32 prompts x G = 8) through the real trainer. The sides
alternate for ``--rounds`` rounds in this process, so both see the same machine load; per side the
report gives the median of:

- rollout trunk tokens/s and update tokens/s (the trainer's own ``perf/`` metrics): the cost per token,
  where the variable path pays one host read per summary token to see whether every row has ended;
- the step's wall time and the summary length: the cost per step, where it writes fewer tokens;

and the ratios variable / fixed. Timings only print; nothing here asserts.

    PYTHONPATH=. python benchmarks/bench_summary_budget.py [--steps 3] [--rounds 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from simlab import names
from simlab.config import RunConfig, resolve
from simlab.policy.model import Policy
from simlab.train.rl import Trainer

PRESET = "keyrecall-mark-budget"
BUDGET = 7
ROLLOUT = names.PERF_ROLLOUT_TOKENS_PER_S
UPDATE = names.PERF_UPDATE_TOKENS_PER_S
LENGTH = names.metric(names.TRAIN, names.SUMMARY_LENGTH)


def configs() -> dict[str, RunConfig]:
    """The two sides: the fixed-length baseline first."""
    variable = resolve({"task": {"preset": PRESET}})
    fixed = resolve({"task": {"preset": PRESET}, "harness": {"summary_budget": None, "summary_tokens": BUDGET}})
    assert variable.harness.summary_budget == BUDGET and fixed.harness.summary_room == BUDGET
    return {"fixed": fixed, "variable": variable}


def measure(cfg: RunConfig, steps: int) -> dict[str, float]:
    """Medians over ``steps`` RL steps from a seeded untrained policy: throughput, step time, lengths."""
    torch.manual_seed(0)
    trainer = Trainer(cfg, Policy(cfg.policy))
    rows, walls = [], []
    for step in range(steps):
        start = time.perf_counter()
        rows.append(trainer.step(step))
        walls.append(time.perf_counter() - start)
    return {"rollout": statistics.median(r[ROLLOUT] for r in rows),
            "update": statistics.median(r[UPDATE] for r in rows),
            "step_s": statistics.median(walls),
            "length": statistics.mean(r[LENGTH] for r in rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sides = configs()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, cfg in sides.items():
            runs[name].append(measure(cfg, args.steps))
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    print(f"{PRESET}, SUPO 32 x 8, {args.steps} steps x {args.rounds} rounds, {args.threads} thread(s); "
          "medians; baseline: fixed length")
    print(f"{'side':<9} {'rollout tok/s':>14} {'update tok/s':>13} {'step s':>8} {'summary tokens':>15}")
    for name, m in med.items():
        print(f"{name:<9} {m['rollout']:>14,.0f} {m['update']:>13,.0f} {m['step_s']:>8.2f} {m['length']:>15.2f}")
    f, v = med["fixed"], med["variable"]
    print(f"{'ratio':<9} {v['rollout'] / f['rollout']:>14.2f} {v['update'] / f['update']:>13.2f} "
          f"{v['step_s'] / f['step_s']:>8.2f} {v['length'] / f['length']:>15.2f}   (variable / fixed)")


if __name__ == "__main__":
    main()
