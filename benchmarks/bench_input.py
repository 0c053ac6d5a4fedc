"""Benchmark: a sweep spec's checks against reading its TOML, as the spec grows (issue 30).

Reading the file (``tomllib.loads``) is the named baseline, measured in the same run on the same text:
the ratio check / read says what the checks cost beyond reading, and it stays flat as the spec grows when
every check is linear. Before issue 30 the duplicate-seed check scanned the seed list once per seed: at
120,000 seeds reading took 0.25 s and checking over 60 s. Sizes: seeds (one grid axis of two values) and
variants (a ``[[variants]]`` table each). Timings only print; nothing here asserts.

    PYTHONPATH=. python benchmarks/bench_input.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
import tomllib
from collections.abc import Callable

from simlab.sweep.spec import probe_settings
from simlab.sweep.spec_parse import parse_spec

HEAD = '[objective]\nmetric = "eval/compacted/success"\n'


def seeds_text(n: int) -> str:
    """A spec of ``n`` seeds over a two-value grid."""
    return f"seeds = {list(range(n))}\n{HEAD}[space]\ntrain.lr = [0.1, 0.2]\n"


def variants_text(n: int) -> str:
    """A spec of ``n`` variants and one seed."""
    tables = "".join(f'[[variants]]\nname = "v{i}"\nset = {{ "train.lr" = 0.1 }}\n' for i in range(n))
    return f"seeds = [0]\n{HEAD}{tables}"


def best(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` runs, in seconds (the least disturbed by other jobs)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(text: str, repeat: int) -> tuple[float, float]:
    """(read s, check s): TOML parsing, then the spec's checks and its probe settings on the parsed table."""
    raw = tomllib.loads(text)
    read = best(lambda: tomllib.loads(text), repeat)
    check = best(lambda: probe_settings(parse_spec(raw)), repeat)
    return read, check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="Runs per size; the fastest is kept.")
    args = parser.parse_args()
    print(f"{'input':<18} {'read s':>8} {'check s':>8} {'check/read':>11}")
    for kind, make, sizes in (("seeds", seeds_text, (1_200, 12_000, 120_000)),
                              ("variants", variants_text, (120, 1_200, 12_000))):
        ratios = []
        for n in sizes:
            read, check = measure(make(n), args.repeat)
            ratios.append(check / read)
            print(f"{f'{n:,} {kind}':<18} {read:8.3f} {check:8.3f} {check / read:10.2f}x")
        print(f"  growth of check/read over a {sizes[-1] // sizes[0]}x larger spec: "
              f"{ratios[-1] / ratios[0]:.2f}x (1 is linear)")


if __name__ == "__main__":
    main()
