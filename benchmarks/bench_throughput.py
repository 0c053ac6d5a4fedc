"""Training throughput against what the machine can do: model FLOP/s as a fraction of a measured peak
and of the limit measured at the model's own shapes.

In one run it measures the peak, a plain matmul at its best size (fp32 on the CPU, on ``--threads``
threads; bf16 on CUDA, where the datasheet's dense bf16 peak is printed too when the GPU is known),
then plays and updates a few RL steps of the demo preset (``keyrecall-mini``, ``supo``: 32 prompts x
G = 8) with each policy of ``--models``: the preset's own (2 layers, d = 64) and one with 4x its trunk
weights (d = 128). Per model it prints:

- rollout and update GFLOP/s, their fraction of the peak and of the limit at the model's shapes. FLOPs
  are counted as ``bench_train.py horizon`` counts them (``Policy.forward_flops``: weights plus
  attended keys) over the real tokens: each rollout token once; each update pass once if it runs
  without gradients (critic values, old log-probs), three times with them (forward and backward);
- RL-step tokens/s: the batch's tokens over the whole step's wall time, and the rollout and update
  phases' trunk tokens/s as ``bench_train.py demo`` prints them;
- the step's time split: env, harness (the agent loop, the policy agent's glue, batching), model
  (trunk, heads and sampling while playing; forward and backward while updating), credit (the credit
  layer), optimiser (zeroing, clipping, Adam), other (metrics). Phases are timed by wrapping the
  trainer's own functions for the duration of the run; nothing in ``simlab`` changes.

The peak is a square matmul (256-1024 on the CPU) that the model never runs, so its share says as much
about the machine as about simlab: one commit read 49 % of the update's peak on one machine, 15 % on
another. The limit at the model's shapes is the FLOP/s the machine reaches on the matmuls the trunk
actually runs, measured after the models at the shapes the run saw (this tree's side): per block, the
linears of the model itself (qkv d -> 3d, the attention's proj d -> d, the MLP's fc and proj, d -> 4d
and 4d -> d, read off the modules); for the update at the run's mean token slots per mini-batch,
forward (with its bias) in every pass and the input's and the weight's backward products in the passes
with gradients; for the rollout at the mean rows each decoded token is appended for (the environments
still decoding), one token each, forward only. Each product weighs as often as a step runs it; the
limit is their FLOPs over their time, each timed as the peak is (calls averaged over a window, the
best of three windows). Attention's own products and the heads are not in it, though attention's are in
the model's FLOPs. A phase's share of this limit is what the model's code loses around its matmuls
(attention, norms, activations, copies, Python), and reads alike on machines whose small matmuls differ;
where the model's shapes run as fast as the peak's, the two shares agree (under load, within the
noise: the limit may then read above the peak).

Targets on one CPU thread: rollout >= 20 % of the peak, update >= 35 %, harness <= 30 % of a
rollout's time; issue 21's: the update's real-token share of the peak >= 30 % (demo) and >= 45 % (x4).
Policies start untrained (a seeded init): the episodes' lengths, and so the work, are the task's.
Timings only print; nothing here asserts.

Against a baseline (``--baseline``, default 43d397c, issue 53's previous release): each model is
measured ``--rounds`` times on each side, alternating, every measurement in a fresh subprocess whose
``simlab`` is that side's (``benchmarks/baseline.py``) running this script; the report gives each
side's median and the ratios this tree / baseline. The script needs the baseline's tree to have what
it measures and wraps (``simlab.train.rollouts`` and the trainer's functions, :data:`NEEDS`), which
commits from 41e651b (2026-12-01, the ``simlab.train`` package) on have; the default was 7ee6af2 (the
commit before issue 21), whose tree predates that package and crashed the run. Before measuring, a
subprocess imports :data:`NEEDS` in the baseline's tree; a commit without them is refused in one line
(exit 2). ``--baseline none`` measures this tree alone, in this process (what ``gpu.sh`` does: the
device machine's copy has no git history).

With ``--sync-check`` on CUDA it also plays one batch under ``torch.cuda.set_sync_debug_mode`` and
prints the host syncs per agent request and per generated token.

    PYTHONPATH=. python benchmarks/bench_throughput.py [--models demo x4] [--steps 3] [--threads 1]
        [--device cpu|cuda] [--rollouts 256] [--set policy.n_layer=4 ...] [--sync-check]
        [--baseline 43d397c|REV|none] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import simlab.train.rollouts
import simlab.update
from simlab.config import RunConfig, apply_overrides, parse_overrides, resolve
from simlab.harness import RolloutBatch, run_rollouts
from simlab.policy.agent import PolicyAgent
from simlab.policy.decode import Decoder
from simlab.policy.model import Policy
from simlab.train.base import device_of
from simlab.train.rl import Trainer
from simlab.train.tokens import TokenBatch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline  # the sibling module; this script may run under the baseline's simlab

PRESET, RECIPE = "keyrecall-mini", "supo"
MODELS: dict[str, dict[str, Any]] = {
    "demo": {},  # the preset's policy: 2 layers, d = 64, 4 heads
    "x4": {"policy.d_model": 128},  # twice the width, 4x the trunk weights
    "10m": {"policy.d_model": 384, "policy.n_layer": 6, "policy.n_head": 6},  # about 10.6M trunk weights
}
TARGETS = {"rollout": 0.20, "update": 0.35, "harness": 0.30}
ISSUE21_UPDATE_TARGET = {"demo": 0.30, "x4": 0.45}
"""Issue 21's targets for the update's real-token share of the peak. Its figures at 7ee6af2 (docs/training.md)
can no longer be scaled by a ratio measured here: that commit's tree cannot run this script (see NEEDS)."""
DEFAULT_BASELINE = "43d397c"
"""The previous release of issue 53's work, which the issue measures against; its tree has :data:`NEEDS` (the
issue's other baseline, the first commit 09c0bfe, predates ``simlab.train.rollouts``)."""
NEEDS = (
    "simlab.train.rollouts:PolicyAgent", "simlab.train.rollouts:make_env",
    "simlab.config:RunConfig", "simlab.config:apply_overrides", "simlab.config:parse_overrides",
    "simlab.config:resolve", "simlab.harness:RolloutBatch", "simlab.harness:run_rollouts",
    "simlab.policy.agent:PolicyAgent", "simlab.policy.decode:Decoder",
    "simlab.policy.model:Policy.forward_flops", "simlab.policy.model:Policy.num_parameters",
    "simlab.train.base:device_of", "simlab.train.rl:Trainer.step", "simlab.train.rl:Trainer.rollout",
    "simlab.train.rl:Trainer.credit", "simlab.train.rl:Trainer.update_passes",
    "simlab.train.tokens:TokenBatch.from_rollouts",
)
"""``module:attribute`` for everything this script imports from ``simlab`` or wraps while it measures: a
baseline's tree must have them all, since each side runs this script against its own ``simlab``."""
PREFLIGHT = """
import importlib, sys

def lacks(need):
    module, _, attrs = need.partition(":")
    try:
        obj = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name and (err.name + ".").startswith("simlab."):
            return "module " + err.name
        return f"error importing {module}: {type(err).__name__}: {err}"
    except Exception as err:
        return f"error importing {module}: {type(err).__name__}: {err}"
    parts = attrs.split(".")
    for i, part in enumerate(parts):
        if not hasattr(obj, part):
            return "attribute " + ".".join([module, *parts[: i + 1]])
        obj = getattr(obj, part)
    return None

for need in sys.argv[1:]:
    if (why := lacks(need)) is not None:
        print(why)
        sys.exit(3)
print("ok")
"""
"""Run with the baseline's tree first on the path: prints ``ok``, or the first of its arguments it lacks."""
BF16_PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0, "A10": 125.0}
"""Dense bf16 tensor-core peaks from the datasheets (SXM parts), by a substring of the device name."""


# ---------------------------------------------------------------------------------------------- peak
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def matmul_peak(device: torch.device, seconds: float = 0.5) -> tuple[float, int]:
    """Best FLOP/s of an (n, n) @ (n, n) matmul over a few sizes, and the size that reached it."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    sizes = (4096, 8192, 16384) if device.type == "cuda" else (256, 512, 1024)
    best, best_n = 0.0, 0
    for n in sizes:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        a @ b  # warm-up: kernels, allocator
        reps, start = 0, time.perf_counter()
        sync(device)
        while time.perf_counter() - start < seconds:
            a @ b
            reps += 1
            sync(device)
        rate = 2.0 * n**3 * reps / (time.perf_counter() - start)
        if rate > best:
            best, best_n = rate, n
    return best, best_n


def datasheet_peak(device: torch.device) -> float | None:
    """The device's dense bf16 peak in FLOP/s when its name is in :data:`BF16_PEAK_TFLOPS`."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((tf * 1e12 for key, tf in BF16_PEAK_TFLOPS.items() if key in name), None)


# ---------------------------------------------------------------------------------------------- limit
@dataclass(frozen=True)
class Product:
    """One matmul a trunk linear (``k`` -> ``n`` features) runs over ``m`` token rows: ``forward``
    (x @ W^T + b), or the backward's ``input`` (dy @ W) or ``weight`` (dy^T @ x) product."""

    m: int
    k: int
    n: int
    kind: str

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.k * self.n


def best_seconds(fn: Callable[[], Any], device: torch.device, window: float = 0.03, windows: int = 3) -> float:
    """Seconds one call of ``fn`` takes, averaged over ``window`` seconds of calls as the peak is (so that
    other jobs' load weighs on both alike), the best of ``windows`` windows."""
    fn()  # warm-up: kernels, allocator
    best = math.inf
    for _ in range(windows):
        sync(device)
        reps, start = 0, time.perf_counter()
        while time.perf_counter() - start < window:
            fn()
            reps += 1
        sync(device)
        best = min(best, (time.perf_counter() - start) / reps)
    return best


def product_seconds(p: Product, device: torch.device) -> float:
    """Seconds one :class:`Product` takes, in the precision the model's matmuls run in (as the peak's)."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    x, dy = torch.randn(p.m, p.k, device=device, dtype=dtype), torch.randn(p.m, p.n, device=device, dtype=dtype)
    w, b = torch.randn(p.n, p.k, device=device, dtype=dtype), torch.randn(p.n, device=device, dtype=dtype)
    calls: dict[str, Callable[[], Any]] = {
        "forward": lambda: F.linear(x, w, b),  # (m, k) -> (m, n), as nn.Linear runs it
        "input": lambda: dy @ w,  # (m, n) @ (n, k): the gradient of the linear's input
        "weight": lambda: dy.t() @ x,  # (n, m) @ (m, k): the gradient of its weight
    }
    return best_seconds(calls[p.kind], device)


def trunk_linears(cfg: RunConfig) -> list[tuple[int, int]]:
    """(in, out) features of every linear in the trunk's blocks, read off the model the config builds:
    per block qkv (d, 3d), the attention's proj (d, d), the MLP's fc (d, hidden) and proj (hidden, d)."""
    policy = Policy(cfg.policy)
    return [(m.in_features, m.out_features) for m in policy.blocks.modules() if isinstance(m, torch.nn.Linear)]


def limit_work(cfg: RunConfig, t: dict[str, float]) -> dict[str, dict[Product, float]]:
    """Per phase, the products the trunk ran in one measured step and how often, from the run's own
    shapes: the update's mean token slots per mini-batch, forward in every pass and backward in the
    passes with gradients; the rollout's mean rows per decoded token, forward only."""
    linears = trunk_linears(cfg)
    tokens = round(t["minibatch_slots"] / t["minibatches"]) if t.get("minibatches") else \
        cfg.train.minibatch_tokens or 1024
    rows = round(t["decode_rows"] / t["decode_calls"]) if t.get("decode_calls") else \
        cfg.train.prompts * cfg.train.group_size
    update: dict[Product, float] = defaultdict(float)
    decode: dict[Product, float] = defaultdict(float)
    for k, n in linears:
        update[Product(tokens, k, n, "forward")] += t["update_passes"]
        update[Product(tokens, k, n, "input")] += t["grad_passes"]
        update[Product(tokens, k, n, "weight")] += t["grad_passes"]
        decode[Product(rows, k, n, "forward")] += 1
    return {"update": dict(update), "rollout": dict(decode)}


def attainable(work: dict[Product, float], device: torch.device, timed: dict[Product, float]) -> float:
    """FLOP/s of ``work`` (product: how often): its FLOPs over its time; ``timed`` caches each product's."""
    for p in work:
        if p not in timed:
            timed[p] = product_seconds(p, device)
    return sum(c * p.flops for p, c in work.items()) / sum(c * timed[p] for p, c in work.items())


def print_limits(model: str, work: dict[str, dict[Product, float]], limits: dict[str, float], peak: float) -> None:
    """The limit at ``model``'s shapes, per phase, beside the peak."""
    sizes = ", ".join(dict.fromkeys(f"{p.k}x{p.n}" for p in work["update"]))
    rows = {phase: next(iter(w)).m for phase, w in work.items()}
    print(f"== limit at {model}'s own shapes: its trunk's matmuls (per block {sizes}), measured after the models")
    print(f"   update  {limits['update'] / 1e9:7.2f} GFLOP/s = {limits['update'] / peak:6.1%} of peak "
          f"({rows['update']:,} token slots per mini-batch; forward, input and weight gradients)")
    print(f"   rollout {limits['rollout'] / 1e9:7.2f} GFLOP/s = {limits['rollout'] / peak:6.1%} of peak "
          f"({rows['rollout']:,} rows decoding, one token each; forward)")


# ---------------------------------------------------------------------------------------------- timers
@dataclass
class Probe:
    """What the wrapped trainer functions saw during the measured steps."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    agents: list[PolicyAgent] = field(default_factory=list)
    batches: list[RolloutBatch] = field(default_factory=list)
    shapes: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    """Mini-batches and their token slots (rows x width); decoded-token appends and their rows."""


@contextlib.contextmanager
def patched(owner: Any, name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, wrap(original))
    try:
        yield
    finally:
        setattr(owner, name, original)


def timing(probe: Probe, key: str, device: torch.device) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A wrapper that adds each call's wall time (synchronised on CUDA) to ``probe.seconds[key]``."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            sync(device)
            start = time.perf_counter()
            out = fn(*args, **kwargs)
            sync(device)
            probe.seconds[key] += time.perf_counter() - start
            return out

        return timed

    return wrap


@contextlib.contextmanager
def probing(probe: Probe, device: torch.device) -> Iterator[None]:
    """Wrap the trainer's phases: credit, the optimiser's calls, batching, and keep agents and batches."""

    class RecordingAgent(PolicyAgent):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            probe.agents.append(self)

    def keep_batch(fn: Callable[..., Any]) -> Callable[..., Any]:
        def rollout(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            probe.batches.append(out[0])
            return out

        return rollout

    def count_minibatches(fn: Callable[..., Any]) -> Callable[..., Any]:
        def minibatches(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            probe.shapes["minibatches"] += len(out)
            probe.shapes["minibatch_slots"] += sum(mb.rows.numel() * mb.width for mb in out)
            return out

        return minibatches

    def count_rows(fn: Callable[..., Any]) -> Callable[..., Any]:
        def append_sampled(self: Any, rows: np.ndarray, *args: Any, **kwargs: Any) -> Any:
            probe.shapes["decode_calls"] += 1
            probe.shapes["decode_rows"] += len(rows)
            return fn(self, rows, *args, **kwargs)

        return append_sampled

    with contextlib.ExitStack() as stack:
        stack.enter_context(patched(simlab.train.rollouts, "PolicyAgent", lambda _: RecordingAgent))
        stack.enter_context(patched(Trainer, "rollout", keep_batch))
        stack.enter_context(patched(Trainer, "credit", timing(probe, "credit", device)))
        stack.enter_context(patched(TokenBatch, "from_rollouts", timing(probe, "batching", device)))
        # the shapes the limit is measured at; only this tree's run needs them, so a baseline may lack these
        if hasattr(Trainer, "minibatches"):
            stack.enter_context(patched(Trainer, "minibatches", count_minibatches))
        if hasattr(Decoder, "append_sampled"):
            stack.enter_context(patched(Decoder, "append_sampled", count_rows))
        own = getattr(simlab.update, "Optimiser", None)  # simlab's own optimisers; torch.optim's before them
        for owner, name in ((own or torch.optim.Adam, "step"), (own or torch.optim.Optimizer, "zero_grad"),
                            (torch.nn.utils, "clip_grad_norm_")):
            stack.enter_context(patched(owner, name, timing(probe, "optimiser", device)))
        yield


# ---------------------------------------------------------------------------------------------- steps
def run_config(model: str, overrides: dict[str, Any], device: str, rollouts: int) -> RunConfig:
    nested = {"task": {"preset": PRESET}, "train": {"recipe": RECIPE}, "device": device}
    own = {**MODELS[model], **overrides}
    cfg = resolve(apply_overrides(nested, own))
    if rollouts and "train.prompts" not in own:
        cfg = resolve(apply_overrides(nested, {**own, "train.prompts": max(rollouts // cfg.train.group_size, 1)}))
    return cfg


def segment_work(batches: list[RolloutBatch]) -> tuple[int, int]:
    """Real tokens of the batches' segments, and the keys one causal pass over them attends to."""
    lengths = np.array([s.tokens.size for rb in batches for s in rb.segments], dtype=np.int64)
    return int(lengths.sum()), int((lengths * (lengths + 1) // 2).sum())


def measure(cfg: RunConfig, steps: int) -> dict[str, float]:
    """Play and update ``steps`` RL steps (after one warm-up) and return their totals."""
    device = device_of(cfg)
    torch.manual_seed(cfg.seed)
    policy = Policy(cfg.policy).to(device)
    trainer = Trainer(cfg, policy)
    trainer.step(0)  # warm-up: allocator, kernels, numba's compiled credit loops
    probe = Probe()
    totals: dict[str, float] = defaultdict(float)
    with probing(probe, device):
        for step in range(1, steps + 1):
            sync(device)
            start = time.perf_counter()
            metrics = trainer.step(step)
            sync(device)
            totals["step"] += time.perf_counter() - start
            totals["rollout"] += metrics["perf/rollout_s"]
            totals["update"] += metrics["perf/update_s"]
            totals["update_trunk_tokens"] += metrics["perf/update_tokens"]
    totals.update(probe.seconds)
    totals.update(probe.shapes)
    totals["env"] = sum(rb.env_seconds for rb in probe.batches)
    totals["rollout_model"] = sum(a.model_seconds for a in probe.agents)
    tokens = sum(a.prefilled_tokens for a in probe.agents)
    keys = sum(a.attended_keys for a in probe.agents)
    totals["rollout_tokens"] = tokens
    totals["rollout_flops"] = policy.forward_flops(tokens, keys)
    seg_tokens, seg_keys = segment_work(probe.batches)
    critic = trainer.critic is not None and cfg.train.algorithm == "ppo"
    passes = trainer.update_passes(True, critic)
    grad_passes = cfg.train.epochs + (cfg.train.value_updates if critic else 0)
    totals["update_flops"] = policy.forward_flops(seg_tokens, seg_keys) * (passes - grad_passes + 3 * grad_passes)
    totals["update_passes"], totals["grad_passes"] = passes, grad_passes  # per step: each runs every mini-batch
    totals["batch_tokens"] = seg_tokens
    totals["params"] = policy.num_parameters()
    return totals


def count_syncs(cfg: RunConfig) -> None:
    """CUDA only: play one batch of rollouts under the sync debug mode and count the host syncs."""
    device = device_of(cfg)
    torch.manual_seed(cfg.seed)
    policy = Policy(cfg.policy).to(device).eval()
    n = cfg.train.prompts * cfg.train.group_size
    seen = {"requests": 0, "tokens": 0}

    class CountingAgent(PolicyAgent):
        def generate(self, request: Any) -> Any:
            seen["requests"] += 1
            seen["tokens"] += len(request.contexts) * request.num_tokens
            return super().generate(request)

    agent = CountingAgent(policy, n, generator=torch.Generator(device).manual_seed(0))
    env = simlab.train.rollouts.make_env(cfg, n)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            run_rollouts(env, agent, cfg.harness, seed=0, group_size=cfg.train.group_size)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = sum("synchroniz" in str(w.message) for w in caught)
    print(f"== host syncs while playing {n} rollouts: {syncs} over {seen['requests']} agent requests "
          f"({syncs / max(seen['requests'], 1):.2f} per request) and {seen['tokens']:,} generated tokens "
          f"({syncs / max(seen['tokens'], 1):.4f} per token)")


# ---------------------------------------------------------------------------------------------- baseline
def added_in(module: str) -> str | None:
    """The commit that added ``module``'s file to this history, when it has one."""
    path = module.replace(".", "/")
    added = baseline.git("log", "--diff-filter=A", "--format=%h", "--", f"{path}.py", f"{path}/__init__.py")
    return added.splitlines()[-1] if added else None


def preflight(rev: str) -> str | None:
    """Why commit ``rev``'s tree cannot run this script as a baseline side (one line), or None when it can:
    a subprocess with that tree's ``simlab`` imports :data:`NEEDS`, a second or two instead of a traceback
    from the first measurement."""
    try:
        root, name = baseline.tree(rev), baseline.label(rev)
    except subprocess.CalledProcessError as err:
        why = (err.stderr.decode() if isinstance(err.stderr, bytes) else err.stderr or "").strip().splitlines()
        return f"--baseline {rev}: git cannot read that commit here ({why[-1] if why else err}); name one it can, " \
            "or --baseline none"
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", PREFLIGHT, *NEEDS], cwd=root, env=env, capture_output=True,
                         text=True, check=False)
    if out.returncode == 0:
        return None
    kind, _, what = (out.stdout.strip().splitlines() or [""])[-1].partition(" ")
    if kind == "module":
        since = added_in(what)
        choose = f"choose a commit from {since} on" if since else "choose a later commit"
        return f"{name} lacks {what}, which this benchmark measures; {choose}, or --baseline none"
    if kind == "attribute":
        return f"{name} lacks {what}, which this benchmark wraps; choose a later commit, or --baseline none"
    detail = what or (out.stderr.strip().splitlines() or ["no output"])[-1]
    return f"{name} cannot run this benchmark ({detail}); choose another commit, or --baseline none"


# ---------------------------------------------------------------------------------------------- report
def split(t: dict[str, float]) -> dict[str, float]:
    """The step's wall time by phase (seconds); the phases add up to the step."""
    rollout_harness = t["rollout"] - t["env"] - t["rollout_model"]
    update_model = t["update"] - t["credit"] - t["optimiser"] - t["batching"]
    return {
        "env": t["env"],
        "harness": rollout_harness + t["batching"],
        "model": t["rollout_model"] + update_model,
        "credit": t["credit"],
        "optimiser": t["optimiser"],
        "other": t["step"] - t["rollout"] - t["update"],
    }


def verdict(value: float, target: float, at_most: bool = False) -> str:
    met = value <= target if at_most else value >= target
    return f"{'meets' if met else 'misses'} {'<=' if at_most else '>='} {target:.0%}"


def report(name: str, cfg: RunConfig, t: dict[str, float], peak: float, limits: dict[str, float]) -> None:
    """One side's figures for model ``name``; ``limits`` is each phase's limit at the model's shapes."""
    p = cfg.policy
    rollout_rate, update_rate = t["rollout_flops"] / t["rollout"], t["update_flops"] / t["update"]
    harness = (t["rollout"] - t["env"] - t["rollout_model"]) / t["rollout"]
    print(f"-- {name}: {p.n_layer} layers, d={p.d_model}, {p.n_head} heads, {t['params'] / 1e6:.2f}M parameters; "
          f"{cfg.train.prompts} prompts x G={cfg.train.group_size} per step")
    print(f"   rollout   {rollout_rate / 1e9:7.2f} GFLOP/s = {rollout_rate / peak:6.1%} of peak "
          f"({verdict(rollout_rate / peak, TARGETS['rollout'])}), {rollout_rate / limits['rollout']:6.1%} of the "
          f"limit at the model's shapes; {t['rollout_tokens'] / t['rollout']:,.0f} trunk tokens/s")
    print(f"   update    {update_rate / 1e9:7.2f} GFLOP/s = {update_rate / peak:6.1%} of peak "
          f"({verdict(update_rate / peak, TARGETS['update'])}), {update_rate / limits['update']:6.1%} of the "
          f"limit at the model's shapes; {t['update_trunk_tokens'] / t['update']:,.0f} trunk tokens/s")
    print(f"   harness   {harness:6.1%} of the rollout's time ({verdict(harness, TARGETS['harness'], at_most=True)})")
    print(f"   RL step   {t['step'] / t['steps']:.3f} s, {t['batch_tokens'] / t['step']:,.0f} batch tokens/s; "
          f"rollout {t['rollout'] / t['step']:.0%}, update {t['update'] / t['step']:.0%}")
    shares = "  ".join(f"{k} {v / t['step']:5.1%}" for k, v in split(t).items())
    print(f"   time      {shares}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["demo", "x4"], choices=list(MODELS))
    parser.add_argument("--steps", type=int, default=3, help="measured RL steps per model (after one warm-up)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--rollouts", type=int, default=0, help="rollouts per step (prompts = this / G); 0: preset's")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--sync-check", action="store_true",
                        help="CUDA: count host syncs while playing (torch.cuda.set_sync_debug_mode)")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE,
                        help="commit to measure against, alternating, in subprocesses (from 41e651b on); "
                             "'none': this tree alone")
    parser.add_argument("--rounds", type=int, default=3, help="measurements per model and side")
    parser.add_argument(baseline.SIDE_FLAG, action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def measure_side(args: argparse.Namespace) -> None:
    """In a side's subprocess: measure the one model of ``--models`` and print its totals as JSON."""
    torch.set_num_threads(args.threads)
    cfg = run_config(args.models[0], parse_overrides(args.overrides), args.device, args.rollouts)
    print(json.dumps({**measure(cfg, args.steps), "steps": args.steps}))


def side_args(args: argparse.Namespace, model: str) -> list[str]:
    out = ["--models", model, "--steps", str(args.steps), "--threads", str(args.threads), "--device", args.device,
           "--rollouts", str(args.rollouts)]
    return out + [f"--set={o}" for o in args.overrides]


def side_runner(argv: list[str]) -> Callable[[str, Path, int], dict[str, Any]]:
    """What :func:`baseline.alternate` calls per side and round: this script with ``argv`` in the side's tree."""
    return lambda _name, root, _round: baseline.side(root, Path(__file__), argv)


def median_totals(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per key, the median over the runs (each key's own median: a ratio of medians, not of one run)."""
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def rate_ratios(sides: dict[str, list[dict[str, float]]], phase: str) -> list[float]:
    """Per round, this tree's FLOP/s in ``phase`` (rollout or update) over the baseline's: pairs measured
    back to back, so load from other jobs mostly cancels."""
    old, new = sides.values()
    return [n[f"{phase}_flops"] / n[phase] / (o[f"{phase}_flops"] / o[phase]) for o, n in zip(old, new, strict=True)]


def compare(model: str, cfg: RunConfig, sides: dict[str, list[dict[str, float]]], peak: float,
            limits: dict[str, float]) -> None:
    """Each side's median report, then this tree against the baseline: the update's and the rollout's
    FLOP/s ratios per round, and the update's shares of the peak and of the limit on both sides."""
    rates = []
    for name, runs in sides.items():
        t = median_totals(runs)
        print(f"== {name} (median of {len(runs)})")
        report(model, cfg, t, peak, limits)
        rates.append(t["update_flops"] / t["update"])
    update, rollout = rate_ratios(sides, "update"), rate_ratios(sides, "rollout")
    rounds = {phase: ", ".join(f"{r:.2f}" for r in rs) for phase, rs in (("update", update), ("rollout", rollout))}
    print(f"   => {model}: update FLOP/s x{statistics.median(update):.2f} the baseline's (median of rounds "
          f"{rounds['update']}); rollout x{statistics.median(rollout):.2f} ({rounds['rollout']})")
    target = ISSUE21_UPDATE_TARGET.get(model)
    goal = f" (issue 21's target: {verdict(rates[1] / peak, target)})" if target else ""
    print(f"      update's real-token share of the peak measured here {rates[0] / peak:.1%} -> "
          f"{rates[1] / peak:.1%}{goal}; of the limit at the model's shapes {rates[0] / limits['update']:.1%} -> "
          f"{rates[1] / limits['update']:.1%}")


def main() -> None:
    args = parse_args()
    if getattr(args, baseline.SIDE_FLAG.lstrip("-")):
        measure_side(args)
        return
    if args.baseline != "none" and (why := preflight(args.baseline)) is not None:
        print(why, file=sys.stderr)
        raise SystemExit(2)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    overrides = parse_overrides(args.overrides)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {args.threads} thread(s)"
    print(f"torch {torch.__version__}, {name}")
    peak, n = matmul_peak(device)
    kind = "bf16" if device.type == "cuda" else "fp32"
    print(f"== peak: {kind} matmul {peak / 1e9:,.1f} GFLOP/s (best size {n} x {n}, measured before the models)")
    sheet = datasheet_peak(device)
    if sheet is not None:
        print(f"   datasheet dense bf16 peak {sheet / 1e12:,.0f} TFLOP/s: the fractions below use it (MFU)")
    results = []
    for model in args.models:
        cfg = run_config(model, overrides, args.device, args.rollouts)
        if args.baseline == "none":
            sides = {"this tree": [{**measure(cfg, args.steps), "steps": args.steps}]}
        else:
            print(f"== {model}: {args.rounds} round(s), alternating {baseline.label(args.baseline)} and this tree")
            sides = baseline.alternate(baseline.both(args.baseline), args.rounds, side_runner(side_args(args, model)))
        results.append((model, cfg, sides))
    after, _ = matmul_peak(device)
    peak = max(peak, after)
    print(f"== peak again after the models: {after / 1e9:,.1f} GFLOP/s; fractions use the larger, "
          f"{peak / 1e9:,.1f} GFLOP/s")
    timed: dict[Product, float] = {}
    for model, cfg, sides in results:
        work = limit_work(cfg, median_totals(list(sides.values())[-1]))  # this tree's shapes
        limits = {phase: attainable(w, device, timed) for phase, w in work.items()}
        print_limits(model, work, limits, sheet or peak)
        if len(sides) == 1:
            report(model, cfg, median_totals(next(iter(sides.values()))), sheet or peak, limits)
        else:
            compare(model, cfg, sides, sheet or peak, limits)
    if args.sync_check and device.type == "cuda":
        count_syncs(results[0][1])


if __name__ == "__main__":
    main()
