"""Sweep benchmark: MLflow tracking overhead per trial, and sweep wall time with 1 vs 2 workers.

Runs a sweep spec (default ``sweeps/quick.toml``) three times into fresh stores in a temporary folder,
sharing the repository's cached base checkpoints (``mlruns/base``; built first, outside the timings):

  * overhead: seconds each trial spent writing to MLflow (run creation, params, every metric batch,
    figures, close), as a share of the trial's wall time (target: <= 5%);
  * speedup: the sweep's trial phase with ``--workers 1`` against ``--workers 2`` (target: >= 1.8x on a
    2-core machine; other load on the machine lowers it).

    python benchmarks/bench_sweep.py [--spec sweeps/quick.toml] [--cells N] [--json out.json]

``--cells N`` keeps the first N grid points (x every seed) for a shorter run; the figures printed say
which cells ran.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from simlab import stores, tracking
from simlab.sweep import load_spec
from simlab.sweep.backend import DEFAULT_BACKEND, load_backend
from simlab.sweep.runner import SweepResult, run_sweep
from simlab.sweep.space import Cell
from simlab.sweep.spec import SweepSpec


def trimmed(spec: SweepSpec, cells: int | None) -> SweepSpec:
    """The spec with only its first ``cells`` grid values kept (first axis first)."""
    if not cells:
        return spec
    axes, left = [], cells
    for axis in spec.axes:
        keep = max(1, min(len(axis.grid or ()), left))
        axes.append(replace(axis, grid=(axis.grid or ())[:keep]))
        left = max(1, left // keep)
    return replace(spec, axes=tuple(axes))


def one(spec: SweepSpec, workers: int, folder: Path, backend: str, template: Path) -> SweepResult:
    folder.mkdir(parents=True)
    shutil.copy(template, folder / "mlflow.db")  # tables already created: not part of the timing
    return run_sweep(
        spec,
        workers=workers,
        storage=str(folder / "journal.log"),
        tracking_uri=f"sqlite:///{folder / 'mlflow.db'}",
        backend=backend,
        progress=True,
        echo=lambda line: print("  " + line),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=str(tracking.repo_root() / "sweeps" / "quick.toml"))
    parser.add_argument("--cells", type=int, default=None, help="keep only the first N grid points")
    parser.add_argument("--backend", default=DEFAULT_BACKEND, help="trial backend (module:attribute)")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()

    spec = trimmed(load_spec(args.spec).at_smoke_size(), args.cells)  # $SIMLAB_SMOKE: one seed, tiny runs
    backend = load_backend(args.backend)
    if backend.prepare is not None:  # the cached base checkpoints: shared, never part of a trial
        t0 = time.perf_counter()
        # where the sweeps below look for them: <home>/mlruns ($SIMLAB_HOME, else the working folder), never
        # the checkout's own store
        cfgs = [backend.config(spec, Cell(point, seed)) for seed in spec.seeds for point in spec.plan.probes(spec)]
        backend.prepare(cfgs, stores.local_store(), 2)
        print(f"base checkpoints ready in {time.perf_counter() - t0:.1f} s")
    print(
        f"spec {args.spec}: {len(spec.cells())} trials "
        f"({len(spec.grid_points())} points x {len(spec.seeds)} seeds)"
    )

    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="simlab-bench-sweep-") as tmp:
        # the MLflow store's tables are created on first use: warm that outside the timings
        template = Path(tmp) / "template.db"
        tracking.prepare(tracking.resolve_store(f"sqlite:///{template}")).search_experiments()
        timings = {}
        for workers in (1, 2):
            print(f"\n--workers {workers}")
            result = one(spec, workers, Path(tmp) / f"w{workers}", args.backend, template)
            trial_wall = sum(o.wall_s for o in result.outcomes)
            tracked = sum(o.tracking_s for o in result.outcomes)
            timings[workers] = result.wall_s
            figures[f"wall_s_workers_{workers}"] = result.wall_s
            figures[f"tracking_share_workers_{workers}"] = (
                tracked / trial_wall if trial_wall else float("nan")
            )
            print(
                f"  sweep wall {result.wall_s:.1f} s; trials {trial_wall:.1f} s; tracking {tracked:.2f} s "
                f"({100 * tracked / trial_wall:.2f}% of trial time); failed {result.failed}"
            )
    figures["speedup"] = timings[1] / timings[2]
    print(
        f"\ntracking overhead (1 worker): {100 * figures['tracking_share_workers_1']:.2f}% "
        "of trial wall time (target <= 5%)"
    )
    print(
        f"sweep wall time: 1 worker {timings[1]:.1f} s, 2 workers {timings[2]:.1f} s, "
        f"speedup {figures['speedup']:.2f}x (target >= 1.8x; os.cpu_count()={os.cpu_count()})"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
