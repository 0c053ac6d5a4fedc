"""Benchmark: the fix a refused harness setting is offered (simlab.blame), against a full scan.

The named baseline is the scan the blame used before issue 33's step: every integer outward from the bad
value, up to 4,096 each way (8,192 configurations built when no fix lies that near). It is measured in the
same run on the same settings by swapping it in for :func:`simlab.blame._nearest`. Each row prints the
configurations built, the seconds and the ratio search / scan, and the fix each found. Timings only
print; nothing here asserts (tests/test_blame.py checks the answers).

    PYTHONPATH=. python benchmarks/bench_blame.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

from simlab import blame
from simlab.config import resolve
from simlab.errors import ConfigError

CASES: dict[str, dict[str, Any]] = {
    "window=8 (supo)": {"harness": {"window": 8}},
    "max_compactions=1000 (grpo)": {"train": {"recipe": "grpo"}, "harness": {"max_compactions": 1000}},
    "summary_tokens=90": {"harness": {"summary_tokens": 90}},
    "t_comp=60, window=48 (compactionrl)": {"train": {"recipe": "compactionrl"},
                                            "harness": {"window": 48, "t_comp": 60}},
    "summary_tokens=5000 (supo)": {"harness": {"summary_tokens": 5000}},
    "max_compactions=100000 (grpo)": {"train": {"recipe": "grpo"}, "harness": {"max_compactions": 100_000}},
}


def scan(value: int, works: Callable[[int], bool], limit: int = 4096) -> str | None:
    """The baseline: every integer outward from ``value``, up before down at each distance."""
    for step in range(1, limit + 1):
        for cand, how in ((value + step, ">="), (value - step, "<=")):
            if cand >= 0 and works(cand):
                return f"choose an integer {how} {cand}"
    return None


def measure(nested: dict[str, Any], nearest: Callable[..., str | None], repeat: int) -> tuple[int, float, str]:
    """(configurations the nearest-value search asked about, best seconds of ``resolve``, the fix offered)."""
    asked = [0]

    def counted(value: int, works: Callable[[int], bool]) -> str | None:
        def count(v: int) -> bool:
            asked[0] += 1
            return works(v)

        return nearest(value, count)

    best, said = float("inf"), ""
    for _ in range(repeat):
        asked[0] = 0
        with mock.patch.object(blame, "_nearest", counted):
            start = time.perf_counter()
            try:
                resolve(nested)
            except ConfigError as exc:
                said = str(exc).rsplit("; ", 1)[-1]
            best = min(best, time.perf_counter() - start)
    return asked[0], best, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'case':38} {'scan: asked':>11} {'s':>7} {'search: asked':>13} {'s':>7} {'ratio':>6}  fix (search | scan)")
    for name, nested in CASES.items():
        n_scan, t_scan, fix_scan = measure(nested, scan, args.repeat)
        n_new, t_new, fix_new = measure(nested, blame._nearest, args.repeat)
        print(f"{name:38} {n_scan:>11} {t_scan:>7.3f} {n_new:>13} {t_new:>7.3f} {t_new / t_scan:>6.2f}  "
              f"{fix_new} | {fix_scan}")


if __name__ == "__main__":
    main()
