"""Credit-layer benchmark: every estimator and normaliser on about a million optimised tokens.

Baselines, measured in the same run on the same batch:
  * time_loop: GAE the way verl and TorchRL compute it, a reverse loop over the padded time axis that
    is vectorised across rows (``reference.padded_time_loop_gae``, segment-local GAE);
  * python_loop: the plain-loop twin of segment-local GAE (``reference.gae``), run once;
  * copy_floor: ``values.copy()`` of the padded value grid, the memory-bound floor.

Ratios are printed against time_loop (target: every estimator >= 5x faster on one core). Run:

    python benchmarks/bench_credit.py [--rollouts 512] [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from simlab import SegmentBatch, advantages, loss_weights, smoke
from simlab.credit import ESTIMATORS, NORMALISERS, estimator_family, reference


def make_batch(num_rollouts: int, seed: int = 0) -> SegmentBatch:
    """512 rollouts x 1-8 segments, 1,000-3,000 optimised tokens per rollout (about 1M tokens)."""
    rng = np.random.default_rng(seed)
    segment_tokens, values = [], []
    for _ in range(num_rollouts):
        total = int(rng.integers(1000, 3001))
        k = int(rng.integers(1, 9))
        cuts = np.sort(rng.choice(np.arange(1, total), size=k - 1, replace=False))
        counts = np.diff(np.concatenate([[0], cuts, [total]])).tolist()
        segment_tokens.append(counts)
        values.append([rng.normal(0.4, 0.2, size=n) for n in counts])
    rewards = rng.integers(0, 2, size=num_rollouts).astype(float).tolist()
    groups = (np.arange(num_rollouts) // 8).tolist()
    finished = (rng.random(num_rollouts) > 0.1).tolist()
    return SegmentBatch.from_rollouts(
        segment_tokens, rewards, groups=groups, values=values, finished=finished
    )


def best_of(fn: Callable[[], object], repeats: int, *, warmup: bool = True) -> float:
    if warmup:
        fn()  # compiles numba kernels on a cold cache
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def measure(batch: SegmentBatch, repeats: int, *, python_loop: bool) -> dict[str, float]:
    """Best-of-``repeats`` seconds of the baseline time loop, a copy, every estimator and normaliser."""
    values = batch.values
    assert values is not None
    rewards_grid = np.zeros(batch.shape)
    rewards_grid[np.arange(batch.num_segments), batch.seg_tokens - 1] = batch.row_reward
    mask = batch.token_mask.astype(np.float64)
    gae_opts = {"gamma": 1.0, "lam": 0.95}

    results: dict[str, float] = {}
    results["time_loop (baseline)"] = best_of(
        lambda: reference.padded_time_loop_gae(values, rewards_grid, mask, 1.0, 0.95), repeats
    )
    results["copy_floor"] = best_of(values.copy, repeats)
    for name in ESTIMATORS:
        opts = gae_opts if estimator_family(name) == "gae" else {}
        results[f"estimator {name}"] = best_of(lambda n=name, o=opts: advantages(batch, n, **o), repeats)
    for reading in ("segment_length", "trajectory_length"):
        results[f"estimator gae_compaction lam={reading}"] = best_of(
            lambda r=reading: advantages(batch, "gae_compaction", gamma=1.0, lam=r, alpha=1.5), repeats
        )
    for name in NORMALISERS:
        results[f"normaliser {name}"] = best_of(
            lambda n=name: loss_weights(batch, n, overlong_mask=True), repeats
        )
    if python_loop:
        results["python_loop (segment-local GAE)"] = best_of(
            lambda: reference.gae(batch, mode="segment_local", **gae_opts), 1, warmup=False
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    small = smoke.on()  # $SIMLAB_SMOKE: a batch of 8 rollouts, once, without the slow Python loop
    parser.add_argument("--rollouts", type=int, default=8 if small else 512)
    parser.add_argument("--repeats", type=int, default=1 if small else 5)
    parser.add_argument("--skip-python-loop", action="store_true", default=small)
    parser.add_argument("--json", type=str, default=None, help="also write the figures to this file")
    args = parser.parse_args()

    t0 = time.perf_counter()
    batch = make_batch(args.rollouts)
    build = time.perf_counter() - t0
    n_tok = int(batch.seg_tokens.sum())
    print(f"batch: {batch}  (built in {build:.2f} s)")
    print(
        f"padded grid {batch.shape[0]} x {batch.shape[1]} = {batch.token_mask.size / 1e6:.1f}M cells, "
        f"{n_tok / 1e6:.2f}M real tokens\n"
    )

    results = measure(batch, args.repeats, python_loop=not args.skip_python_loop)
    base = results["time_loop (baseline)"]
    floor = results["copy_floor"]
    print(f"{'what':<45} {'ms':>10} {'x vs time_loop':>15} {'x of copy floor':>16} {'Mtok/s':>9}")
    for what, sec in results.items():
        print(
            f"{what:<45} {sec * 1e3:>10.2f} {base / sec:>15.1f} {sec / floor:>16.2f} {n_tok / sec / 1e6:>9.0f}"
        )
    slowest = max((s for w, s in results.items() if w.startswith(("estimator", "normaliser"))))
    verdict = "meets" if base / slowest >= 5 else "MISSES"
    print(
        f"\nslowest estimator/normaliser is {base / slowest:.1f}x faster than the time loop: "
        f"{verdict} the 5x target"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"tokens": n_tok, "seconds": results}, fh, indent=2)


if __name__ == "__main__":
    main()
