"""KV-cache decoding against full recomputation, per generated token, near a full working window.

Both paths generate the same tokens greedily for a batch of environments whose contexts run from
``window - steps`` up to ``window`` tokens, the regime a rollout spends most of its time in before a
compaction fires. Full recomputation re-runs the whole context for every new token (O(T) tokens of
work per token); the KV cache runs one token against cached keys and values (O(1) tokens of MLP and
projection work, O(T) attention reads). Prints tokens/s of both, the ratio and the parameter count.

    PYTHONPATH=. python benchmarks/bench_policy.py [--batch 64] [--window 256] [--steps 32] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TypeVar

import torch

from simlab.policy import Decoder, Policy, PolicyConfig, default_device

R = TypeVar("R")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def full_recompute(policy: Policy, prompt: torch.Tensor, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy generation re-running the whole context each step -> (tokens (B, steps), last logits)."""
    tokens = prompt
    logits = torch.empty(0)
    for _ in range(steps):
        logits = policy(tokens).logits[:, -1]  # (B, V)
        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
    return tokens[:, prompt.shape[1] :], logits


@torch.no_grad()
def kv_cached(policy: Policy, prompt: torch.Tensor, steps: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """The same greedy generation through a Decoder: one prefill, then one cached step per token.

    Returns (tokens (B, steps), last logits, seconds spent in the prefill).
    """
    B, T = prompt.shape
    device = prompt.device
    decoder = Decoder(policy, B)
    sync(device)
    start = time.perf_counter()
    state = decoder.prefill(prompt, torch.full((B,), T))
    sync(device)
    prefill_s = time.perf_counter() - start
    out = []
    logits = state.logits
    for _ in range(steps):
        logits = state.logits  # (B, V): the ones the token is chosen from, as in full_recompute
        nxt = logits.argmax(-1)
        out.append(nxt)
        state = decoder.decode_step(nxt)
    return torch.stack(out, dim=1), logits, prefill_s


def timed(fn: Callable[..., R], policy: Policy, *args: object) -> tuple[float, R]:
    """(seconds, result) of ``fn(policy, *args)``, synchronised on CUDA."""
    device = policy.device
    sync(device)
    start = time.perf_counter()
    result = fn(policy, *args)
    sync(device)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--steps", type=int, default=32, help="tokens generated, ending at the window")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--vocab", type=int, default=128)
    parser.add_argument("--device", default=str(default_device()))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)

    cfg = PolicyConfig(vocab_size=args.vocab, n_layer=3, n_head=4, d_model=96, max_len=args.window)
    policy = Policy(cfg).to(device).eval()
    prompt = torch.randint(0, args.vocab, (args.batch, args.window - args.steps), device=device)
    print(
        f"device={device} threads={args.threads} params={policy.num_parameters():,} "
        f"(n_layer=3, d_model=96, vocab={args.vocab})"
    )
    print(
        f"batch={args.batch}, context {args.window - args.steps} -> {args.window}, "
        f"{args.steps} tokens per row"
    )

    kv_cached(policy, prompt[:, :16], 4)  # warm-up (allocator, kernels)
    full_recompute(policy, prompt[:, :16], 4)
    t_kv, (tok_kv, logits_kv, t_prefill) = timed(kv_cached, policy, prompt, args.steps)
    t_full, (tok_full, logits_full) = timed(full_recompute, policy, prompt, args.steps)
    t_decode = t_kv - t_prefill

    generated = args.batch * args.steps
    agree = (tok_kv == tok_full).float().mean().item()
    delta = (logits_kv - logits_full).abs().max().item()
    print(f"full recompute        : {generated / t_full:9.0f} tokens/s  ({t_full:.2f} s)")
    print(f"KV cache, decode only : {generated / t_decode:9.0f} tokens/s  ({t_decode:.2f} s)")
    print(
        f"KV cache + prefill    : {generated / t_kv:9.0f} tokens/s  ({t_kv:.2f} s, prefill {t_prefill:.2f} s)"
    )
    print(
        f"speed-up per token    : {t_full / t_decode:9.1f}x decode only, {t_full / t_kv:.1f}x with the "
        f"prefill amortised over {args.steps} tokens (target >= 5x)"
    )
    print(
        f"check                 : greedy tokens agree on {agree:.1%}, "
        f"max |logit diff| at the last step {delta:.2e}"
    )


if __name__ == "__main__":
    main()
