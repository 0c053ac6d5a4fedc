"""Equivalence experiments of issue 21: the update without padding, and the bucketed base model.

Each is a multi-seed experiment, not a unit test: it writes a per-seed table (CSV, with the command and
the commit that made it in its header) under ``benchmarks/equivalence/``; ``tests/trainer/
test_equivalence.py`` reads the committed tables and asserts the TOST. Rerun a table whenever the code it
covers changes (``simlab/train/``'s update or behaviour cloning, the policy, the harness, the tasks).

``update``: per seed, the demo preset (``keyrecall-mini``, ``supo``, its 40 RL steps) trained twice from
one base model, with the update before issue 21 (``train.length_buckets = false``: random mini-batches
padded to 256 rows) and with length buckets (the default). The arms of a seed share the base model
(``base.seed = "run"``: one per seed), the prompt stream, the rollout sampling stream and the held-out
instances (``eval.seed = "run"``), so the difference is paired by seed. Outcome: final compacted
success on the seed's 512 held-out episodes.

``base``: per seed, the main job's base model (``peekread-pos``, 300 behaviour-cloning steps) built in
one padded pass per step (``base.minibatch_tokens = 0``, which is 7ee6af2's behaviour cloning bit for
bit) and in length buckets (the default); the same initial weights and demonstrations. Outcome:
compacted success on the seed's 512 held-out episodes.

Decision rule, stated before the runs: the arms are equivalent when a paired TOST at alpha = 0.05 (the
90 % interval of the mean difference) lies inside +-2 points of success.

    PYTHONPATH=. python benchmarks/equivalence.py update|base [--seeds 0 1 ... 7] [--out FILE]
    PYTHONPATH=. python benchmarks/equivalence.py check        # the TOST of the committed tables
"""

from __future__ import annotations

import argparse
import csv
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simlab import names
from simlab.analysis.statistics import power
from simlab.config import RunConfig, resolve
from simlab.sinks import JsonlSink
from simlab.train import train
from simlab.train.base import base_checkpoint
from simlab.train.rollouts import evaluate

HERE = Path(__file__).resolve().parent
TABLES = {"update": HERE / "equivalence" / "update.csv", "base": HERE / "equivalence" / "base.csv"}
MARGIN = 0.02
"""Equivalence margin: 2 points of success."""
ALPHA = power.ALPHA
"""Each one-sided test's level: a 90 % TOST."""
EPISODES = 512
SUCCESS = names.metric(names.EVAL_COMPACTED, names.SUCCESS)
ARMS = {
    "update": {"padded": {"train": {"length_buckets": False}}, "buckets": {"train": {"length_buckets": True}}},
    "base": {"one_pass": {"base": {"minibatch_tokens": 0}}, "buckets": {}},
}
"""Each experiment's arms: the plain path first (the baseline of the difference), then the new one."""
PRESETS = {"update": "keyrecall-mini", "base": "peekread-pos"}
COLUMNS = ("seed", "arm", "success", "episodes", "seconds")


def config(experiment: str, arm: str, seed: int) -> RunConfig:
    nested: dict[str, Any] = {"task": {"preset": PRESETS[experiment]}, "train": {"recipe": "supo"}, "seed": seed,
                              "base": {"seed": "run"},
                              "eval": {"episodes": EPISODES, "seed": "run", "single_window": False}}
    for section, values in ARMS[experiment][arm].items():
        nested.setdefault(section, {}).update(values)
    nested["eval"]["every"] = 10**6  # evaluate before the first step and after the last only
    return resolve(nested)


def one_run(experiment: str, arm: str, seed: int, store: Path) -> dict[str, Any]:
    """One row of the table: the arm's final held-out success on ``seed``, and the seconds it took."""
    cfg = config(experiment, arm, seed)
    start = time.perf_counter()
    if experiment == "base":
        from simlab.policy.checkpoint import load_checkpoint

        path = base_checkpoint(cfg, store / arm)  # a store per arm: both arms build their own
        seconds = time.perf_counter() - start
        policy, _ = load_checkpoint(path, expected_vocab_size=cfg.policy.vocab_size, device=torch.device("cpu"))
        success = evaluate(cfg, policy)[0][SUCCESS]
    else:
        base_checkpoint(cfg, store)  # the seed's base, shared by the arms; not part of the run's time
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            sink = JsonlSink(tmp)
            success = train(cfg, sink, store=store)[SUCCESS]
            sink.close()
        seconds = time.perf_counter() - start
    return {"seed": seed, "arm": arm, "success": success, "episodes": EPISODES, "seconds": round(seconds, 2)}


def header(command: list[str]) -> list[str]:
    commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(HERE), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=False).stdout.strip()
    return [f"# command: {' '.join(command)}", f"# commit: {commit}{'+changes' if dirty else ''}",
            f"# torch {torch.__version__}, {torch.get_num_threads()} thread(s), {time.strftime('%Y-%m-%d')}"]


def run(experiment: str, seeds: list[int], out: Path, command: list[str]) -> None:
    """Every arm on every seed (arms alternating within a seed), written row by row to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as store, out.open("w", newline="") as f:
        f.write("\n".join(header(command)) + "\n")
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for seed in seeds:
            for arm in ARMS[experiment]:
                row = one_run(experiment, arm, seed, Path(store) / str(seed))
                writer.writerow(row)
                f.flush()
                print(row, flush=True)


# ---------------------------------------------------------------------------------------------- the TOST
def read_table(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def paired(rows: list[dict[str, str]], experiment: str) -> tuple[np.ndarray, np.ndarray]:
    """(baseline arm, new arm) success per seed, seeds present in both arms only, in seed order."""
    base_arm, new_arm = ARMS[experiment]
    by = {(int(r["seed"]), r["arm"]): float(r["success"]) for r in rows}
    seeds = sorted(s for s, a in by if a == new_arm and (s, base_arm) in by)
    return np.array([by[s, base_arm] for s in seeds]), np.array([by[s, new_arm] for s in seeds])


@dataclass(frozen=True)
class Paired:
    """The paired difference ``new - old`` over seeds, and its TOST against +-``MARGIN``."""

    n: int
    mean: float
    se: float
    test: power.Tost


def tost(old: np.ndarray, new: np.ndarray, margin: float = MARGIN) -> Paired:
    """The seeds' paired TOST (``simlab.analysis.statistics.power.tost`` on n - 1 degrees of freedom)."""
    d = new - old
    mean, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size))
    return Paired(d.size, mean, se, power.tost(mean, se, d.size - 1, margin, alpha=ALPHA))


def describe(experiment: str, old: np.ndarray, new: np.ndarray, result: Paired) -> str:
    base_arm, new_arm = ARMS[experiment]
    t = result.test
    verdict = "equivalent" if t.equivalent else "not shown equivalent"
    return (f"{experiment}: {result.n} seeds, {base_arm} {old.mean():.4f} vs {new_arm} {new.mean():.4f}; "
            f"difference {result.mean:+.4f} (SE {result.se:.4f}), 90% interval [{t.low:+.4f}, {t.high:+.4f}] "
            f"against +-{MARGIN}: p = {t.p_lower:.2g} (lower), {t.p_upper:.2g} (upper): {verdict}")


def check() -> None:
    for experiment, path in TABLES.items():
        if not path.is_file():
            print(f"{experiment}: no table at {path}")
            continue
        old, new = paired(read_table(path), experiment)
        print(describe(experiment, old, new, tost(old, new)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("update", "base", "check"))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(8)))
    parser.add_argument("--out", type=Path, default=None, help="the table (default: benchmarks/equivalence/<what>.csv)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.what == "check":
        check()
        return
    run(args.what, args.seeds, args.out or TABLES[args.what], ["python", "benchmarks/equivalence.py", *sys.argv[1:]])
    check()


if __name__ == "__main__":
    main()
