"""The whole training run against named commits, in one run: issue 53's "same run, twice as fast".

Each side runs the same command line in a fresh subprocess whose ``simlab`` is that side's tree
(``benchmarks/baseline.py``), in a fresh store, so base-model cloning, RL, the evaluations and the imports
are all timed, as a user meets them:

    simlab train --set task.preset=keyrecall-mini --set train.recipe=supo --set base.steps=10 \\
        --set train.steps=6

with one torch thread (``OMP_NUM_THREADS=1``). The sides alternate, the first one rotating each round, so
load from other jobs falls on all of them alike; the ratio of each baseline's median wall time to this
tree's is printed beside the best-of-rounds ratio, for wall time and for CPU time (the child's user and system
seconds, which load from other jobs moves less). Only these ratios are meant to be compared across
machines. What a side does by default is part of what is timed (this tree also measures the base model
three ways before RL, ``eval.base_quality``, which the first commit did not).

    python benchmarks/bench_run.py [--baselines 09c0bfe 43d397c] [--rounds 3] [--set KEY=VALUE ...]

The defaults are the first commit (09c0bfe) and the previous release of issue 53's work (43d397c). A
commit whose tree cannot run the command line fails its first round with the side's last error lines.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline

BASELINES = ("09c0bfe", "43d397c")
"""The first commit, and the previous release of issue 53's work."""
RUN = ("task.preset=keyrecall-mini", "train.recipe=supo", "base.steps=10", "train.steps=6")
"""The run issue 53 measures: keyrecall-mini, SUPO, 10 cloning steps, 6 RL steps (the preset's shape)."""
CLI = "import sys; from simlab.cli import app; sys.argv = ['simlab', *sys.argv[1:]]; app()"
"""Every side's ``simlab`` entry point, called the same way (early trees have no ``__main__``)."""


def one_run(root: Path, settings: list[str], timeout: float) -> dict[str, float]:
    """Wall and CPU seconds (the child's user + system time) of one training run with ``root``'s simlab, in a
    fresh store. CPU time reads the same under load from other jobs; wall time is what a user waits."""
    with tempfile.TemporaryDirectory(prefix="simlab-bench-run-") as tmp:
        args = [arg for item in settings for arg in ("--set", item)]
        command = [sys.executable, "-c", CLI, "train", *args, "--store", f"{tmp}/store", "--out", f"{tmp}/run"]
        env = {"PYTHONPATH": str(root), "OMP_NUM_THREADS": "1", "SIMLAB_HOME": tmp,
               "PATH": "/usr/bin:/bin", "HOME": tmp}
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        out = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{root}: the run failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu}


def report(times: dict[str, list[float]], this: str, clock: str) -> list[str]:
    """Per side its times on ``clock``, and per baseline its ratio to this tree (medians, best of the rounds)."""
    lines = [f"{clock:>4} {name:<28} {' '.join(f'{t:6.1f}' for t in runs)}  median {statistics.median(runs):6.1f} s"
             for name, runs in times.items()]
    mine = times[this]
    for name, runs in times.items():
        if name != this:
            lines.append(f"{clock:>4} {name} / {this}: x{statistics.median(runs) / statistics.median(mine):.2f} "
                         f"(medians), x{min(runs) / min(mine):.2f} (best of {len(runs)})")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baselines", nargs="*", default=list(BASELINES), help="commits to compare against")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every side once")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                        help="added to the run's settings on every side")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds={args.rounds} is invalid; choose an integer >= 1")
    sides = {baseline.label(rev): baseline.tree(rev) for rev in args.baselines}
    this = baseline.this_tree()
    sides[this] = baseline.REPO
    settings = [*RUN, *args.settings]
    print(f"== the same training run on {len(sides)} sides, {args.rounds} rounds: simlab train "
          + " ".join(f"--set {s}" for s in settings))
    results = baseline.alternate(sides, args.rounds, lambda name, root, _: one_run(root, settings, args.timeout))
    for clock in ("wall", "cpu"):
        print("\n".join(report({name: [r[clock] for r in rows] for name, rows in results.items()}, this, clock)))


if __name__ == "__main__":
    main()
