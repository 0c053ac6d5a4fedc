"""Scale-out benchmark: trials per minute with 1, 2 and 4 ``simlab worker`` processes on one PostgreSQL
study and one MLflow server (PostgreSQL backend), and the study store's overhead per trial, PostgreSQL
against the journal file.

    python benchmarks/bench_scale.py --postgres postgresql://USER:PASSWORD@127.0.0.1:PORT/DATABASE \\
        [--cells 24] [--step-seconds 0.25] [--workers 1 2 4] [--json out.json]

``--postgres`` names a role that may create databases: every measurement gets a fresh one, dropped at
the end. The trials are the tests' toy backend (noisy gradient descent, 8 steps): ``--step-seconds`` of
sleep per step stands for the training work without using a core, so the figures measure what the
cluster machinery costs (claims, heartbeats, enqueue under the database lock, MLflow writes over HTTP)
and how it scales, not the machine's cores.

- throughput: trials / minute from the first trial's start to the last trial's end (processes are
  already up), beside the ideal ``workers x 60 / work per trial``; wall time includes start-up.
- storage overhead: what one trial costs the study store, measured in-process on the runner's own
  calls (claim with its heartbeat, owner, parameters, run id, tell), journal file against PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import optuna

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests' toy backend and service helpers

from simlab.names import ATTR_OWNER, ATTR_RUN  # noqa: E402
from simlab.sweep import lifecycle, parse_spec  # noqa: E402
from simlab.sweep.plan import GridPlan  # noqa: E402
from simlab.sweep.queue import trial_queue  # noqa: E402
from simlab.sweep.spec import SweepSpec  # noqa: E402
from simlab.sweep.study import FINAL_FAILURES  # noqa: E402
from simlab.sweep.trial import TrialContext, _suggest  # noqa: E402
from tests.services import Postgres, start_mlflow_server, stop_group  # noqa: E402
from tests.stores import TOY  # noqa: E402

STEPS = 8
LRS = (0.02, 0.05, 0.08, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)


def spec_text(name: str, cells: int, step_seconds: float) -> str:
    lrs = LRS[: max(1, cells // 4)]
    return f"""
name = "{name}"
seeds = [0, 1]
[base]
train.steps = {STEPS}
train.step_seconds = {step_seconds}
[space]
train.lr = {list(lrs)}
train.overlong_mask = [true, false]
[objective]
metric = "eval/compacted_success"
"""


def workers_run(
    pg: Postgres, server: str, workers: int, cells: int, step_seconds: float, folder: Path
) -> dict[str, float]:
    """``workers`` processes of ``simlab worker`` on a fresh study database; throughput figures."""
    storage = pg.database(f"w{workers}")
    name = f"scale-w{workers}"
    spec = folder / f"{name}.toml"
    folder.mkdir(parents=True)
    spec.write_text(spec_text(name, cells, step_seconds))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "simlab.cli", "worker", str(spec), "--storage", storage, "--tracking-uri", server,
           "--trial", TOY]  # fmt: skip
    start = time.perf_counter()
    procs = []
    for i in range(workers):
        (folder / f"host{i}").mkdir()
        procs.append(subprocess.Popen(cmd, cwd=folder / f"host{i}", env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))  # fmt: skip
    for proc in procs:
        out = proc.communicate()[0]
        if proc.returncode != 0:
            raise SystemExit(f"worker failed:\n{out}")
    wall = time.perf_counter() - start
    trials = optuna.load_study(study_name=name, storage=storage).get_trials()
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    first = min(t.datetime_start for t in done if t.datetime_start)
    last = max(t.datetime_complete for t in done if t.datetime_complete)
    steady = (last - first).total_seconds()
    per_trial = statistics.mean(
        (t.datetime_complete - t.datetime_start).total_seconds()
        for t in done
        if t.datetime_complete and t.datetime_start
    )
    return {
        "trials": len(done),
        "trials_per_min": 60 * len(done) / steady,
        "ideal_per_min": workers * 60 / (STEPS * step_seconds) if step_seconds else float("nan"),
        "trial_s": per_trial,
        "wall_s": wall,
    }


def storage_cycle(spec: SweepSpec, location: str, trials: int) -> float:
    """Mean seconds one trial costs the study store (after the grid is enqueued): the runner's claim
    (with its heartbeat for a database), owner, parameters, MLflow run id and tell."""
    storage = trial_queue(location).open()
    study = optuna.create_study(study_name=spec.name, storage=storage, direction="maximize")
    GridPlan().enqueue(study, spec, FINAL_FAILURES)
    ctx = TrialContext(spec, TOY, location, "", None, "0", "0", lifecycle.this_owner(), "")
    times = []
    for _ in range(trials):
        t0 = time.perf_counter()
        trial = spec.plan.claim(study, ctx.queue, spec, ctx.final)
        assert trial is not None
        lifecycle.record(trial, {ATTR_OWNER: ctx.coordinator})
        _suggest(trial, spec)
        lifecycle.record(trial, {ATTR_RUN: "0" * 32})
        lifecycle.finish(study, trial, 0.5)
        times.append(time.perf_counter() - t0)
    return statistics.mean(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True, help="a role that may create databases")
    parser.add_argument("--cells", type=int, default=24, help="grid cells (a multiple of 4)")
    parser.add_argument("--step-seconds", type=float, default=0.25, help="sleep per training step")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--storage-trials", type=int, default=48)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    figures: dict[str, object] = {"cells": args.cells, "step_seconds": args.step_seconds, "cpus": os.cpu_count()}
    pg = Postgres(args.postgres)
    with tempfile.TemporaryDirectory(prefix="simlab-bench-scale-") as tmp:
        try:
            # the study store alone: journal file against PostgreSQL, same calls, same grid
            spec = parse_spec(tomllib.loads(spec_text("storage", args.storage_trials, 0.0)))
            journal = storage_cycle(spec, str(Path(tmp) / "journal.log"), len(spec.cells()))
            postgres = storage_cycle(spec, pg.database("storage"), len(spec.cells()))
            figures["storage_ms_per_trial"] = {"journal": 1000 * journal, "postgresql": 1000 * postgres}
            print(f"study store per trial ({len(spec.cells())} trials): journal file {1000 * journal:.1f} ms, "
                  f"PostgreSQL {1000 * postgres:.1f} ms (+{1000 * (postgres - journal):.1f} ms)")  # fmt: skip

            folder = Path(tmp) / "server"
            folder.mkdir()
            proc, server = start_mlflow_server(pg.database("mlflow"), folder)
            try:
                for n in args.workers:
                    got = workers_run(pg, server, n, args.cells, args.step_seconds, Path(tmp) / f"w{n}")
                    figures[f"workers_{n}"] = got
                    print(
                        f"{n} worker(s): {got['trials_per_min']:.1f} trials/min (ideal {got['ideal_per_min']:.1f}), "
                        f"{got['trial_s']:.2f} s per trial ({STEPS * args.step_seconds:.2f} s of it work), "
                        f"wall {got['wall_s']:.1f} s for {got['trials']:.0f} trials incl. start-up"
                    )
            finally:
                stop_group(proc)
        finally:
            pg.close()
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
