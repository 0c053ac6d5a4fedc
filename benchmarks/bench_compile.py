"""Does ``torch.compile`` pay at the policy's own shapes? The update's forward and backward, eager against
compiled (inductor), in one process, one torch thread.

For each model size (``d_model`` 64 and 128, 2 layers, 4 heads, the policy of :mod:`simlab.policy.model`)
and each batch shape the update runs (rows x tokens of a length bucket), it times one forward and backward
of the summed log-partition, eager and compiled, alternating the two every round so that load from other
jobs falls on both alike, and prints the median of each, their ratio, and the compile time (the first
compiled call, which a short run pays in full). simlab runs eager: on the project's 2-core CPU machine the
compiled update was no faster (issue 53's closing note gives the figures), and a compile costs tens of
seconds, which a smoke-size run must not pay.

    python benchmarks/bench_compile.py [--rounds 5] [--shapes 64x48 128x64] [--models 64 128]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from simlab.policy.config import PolicyConfig
from simlab.policy.model import Policy


def fwd_bwd(model: Callable[[torch.Tensor], object], tokens: torch.Tensor) -> None:
    """One forward and backward of the summed log-partition over every position (the update's shape of work)."""
    out = model(tokens)
    logits = out.logits  # type: ignore[attr-defined]
    logits.float().logsumexp(-1).sum().backward()


def timed(fn: Callable[[], None]) -> float:
    """Seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def one_shape(d_model: int, rows: int, tokens: int, rounds: int) -> dict[str, float]:
    """Eager and compiled median seconds per forward and backward at ``rows x tokens``, and the compile time."""
    torch.manual_seed(0)
    policy = Policy(PolicyConfig(vocab_size=64, d_model=d_model, n_layer=2, n_head=4, max_len=256))
    batch = torch.randint(0, 64, (rows, tokens))
    compiled = torch.compile(policy)
    compile_s = timed(lambda: fwd_bwd(compiled, batch))
    fwd_bwd(policy, batch)  # warm the eager path too
    eager, fast = [], []
    for _ in range(rounds):
        eager.append(timed(lambda: fwd_bwd(policy, batch)))
        fast.append(timed(lambda: fwd_bwd(compiled, batch)))
    return {"eager": statistics.median(eager), "compiled": statistics.median(fast), "compile": compile_s}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="timed calls of each path per shape")
    parser.add_argument("--shapes", nargs="*", default=["64x48", "128x64"], help="ROWSxTOKENS of an update batch")
    parser.add_argument("--models", nargs="*", type=int, default=[64, 128], help="d_model of each policy")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, one thread; median of {args.rounds} alternating rounds")
    print(f"{'d_model':>7} {'shape':>8} {'eager ms':>9} {'compiled ms':>11} {'eager/compiled':>14} {'compile s':>9}")
    for d_model in args.models:
        for shape in args.shapes:
            rows, tokens = (int(x) for x in shape.split("x"))
            r = one_shape(d_model, rows, tokens, args.rounds)
            print(f"{d_model:>7} {shape:>8} {1e3 * r['eager']:>9.1f} {1e3 * r['compiled']:>11.1f} "
                  f"{r['eager'] / r['compiled']:>14.2f} {r['compile']:>9.1f}")


if __name__ == "__main__":
    main()
