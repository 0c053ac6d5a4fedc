"""Training benchmarks: the learning demo, and per-episode cost against effective horizon.

``demo``: from the cached base checkpoint of the demo preset, run the ``supo`` and ``compactionrl``
recipes with their default settings and print compacted success before (the base model, RL step 0)
and after, each with its binomial standard error and the difference's, the wall time of each recipe,
and rollout and update throughput separately (trunk tokens per second of each phase).

``horizon``: scale the task horizon and play episodes with the same untrained policy under the
``supo`` harness (compaction at L of the preset's window) and the ``react`` harness (no compaction,
a window wide enough for the whole episode). Per episode it counts the tokens the trunk processed,
the keys those tokens attended to (attention's share, which a KV cache does not remove), the
resulting forward FLOPs and the wall time, fits the log-log slope of each against the horizon, and
prints no-compaction / compaction ratios with ``supo`` as the named baseline. With compaction every
token attends to at most W keys, so the cost is linear in the horizon; without, attention is
quadratic.

    PYTHONPATH=. python benchmarks/bench_train.py [demo|horizon|all] [--preset keyrecall-mini]
        [--store mlruns] [--set train.steps=60 ...] [--rollouts 256] [--horizons 8 16 32 64 128]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simlab.config import RunConfig, apply_overrides, parse_overrides, resolve
from simlab.harness import run_rollouts
from simlab.policy.agent import PolicyAgent
from simlab.policy.model import Policy
from simlab.sinks import JsonlSink, read_metrics
from simlab.train import base_checkpoint, device_of, make_env, train

DEMO_PRESET = "keyrecall-mini"
DEMO_RECIPES = ("supo", "compactionrl")
DEMO_EVAL = {"eval.episodes": 256, "eval.every": 10}
"""256 held-out episodes: a binomial SE of at most 0.031 per evaluation, 0.044 on a difference."""
RECIPE_OVERRIDES: dict[str, dict[str, Any]] = {
    # CompactionRL keeps 2 verbatim steps after every compaction and allows S = 3: at the preset's
    # W = 32 that leaves no room for new steps and every rollout is overlong (the oracle's too); at
    # W = 64 the oracle finishes 87 % of them
    "compactionrl": {"harness.window": 64},
}


def binomial_se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1.0 - p), 0.0) / n)


# ---------------------------------------------------------------------------------------------- demo
def demo(preset: str, recipes: tuple[str, ...], store: Path, overrides: dict[str, Any],
         rollouts: int) -> None:
    print(f"== demo: RL from the base checkpoint on {preset} (defaults of each recipe)")
    for recipe in recipes:
        nested = {"task": {"preset": preset}, "train": {"recipe": recipe}}
        fitted = RECIPE_OVERRIDES.get(recipe, {}) if preset == DEMO_PRESET else {}
        own = {**DEMO_EVAL, **fitted, **overrides}
        cfg = resolve(apply_overrides(nested, own))
        if rollouts and "train.prompts" not in own:
            # the same rollouts per step for every recipe: G = 1 recipes (CompactionRL) take G x more prompts
            own["train.prompts"] = max(rollouts // cfg.train.group_size, 1)
            cfg = resolve(apply_overrides(nested, own))
        if own:
            print(f"-- {recipe} settings beyond the defaults: {own}")
        start = time.perf_counter()
        base_checkpoint(cfg, store)  # cached: recipes with the same context geometry share one base model
        base_s = time.perf_counter() - start
        with tempfile.TemporaryDirectory() as tmp:
            sink = JsonlSink(tmp)
            start = time.perf_counter()
            train(cfg, sink, store=store)
            wall = time.perf_counter() - start
            sink.close()
            rows = read_metrics(tmp)
        report_demo(cfg, rows, wall, base_s)


def report_demo(cfg: RunConfig, rows: list[dict[str, Any]], wall: float, base_s: float) -> None:
    t = cfg.train
    evals = [r for r in rows if r.get("eval/compacted/success") is not None]
    steps = [r for r in rows if "perf/rollout_s" in r and "train/success" in r]
    n = cfg.eval.episodes
    before, after = evals[0]["eval/compacted/success"], evals[-1]["eval/compacted/success"]
    se_b, se_a = binomial_se(before, n), binomial_se(after, n)
    diff, se_d = after - before, math.hypot(se_b, se_a)
    roll_tok = sum(r["perf/rollout_tokens"] for r in steps)
    roll_s = sum(r["perf/rollout_s"] for r in steps)
    upd_tok = sum(r["perf/update_tokens"] for r in steps)
    upd_s = sum(r["perf/update_s"] for r in steps)
    print(f"-- {t.recipe}: {t.algorithm}, estimator {t.estimator}, {t.steps} steps of {t.prompts} prompts x "
          f"G={t.group_size}, lr {t.lr:g}, value pretrain {t.value_pretrain_steps} steps")
    print(f"   compacted success  before {before:.3f} +- {se_b:.3f}   after {after:.3f} +- {se_a:.3f}   "
          f"diff {diff:+.3f} +- {se_d:.3f} ({diff / se_d if se_d else math.inf:.1f} SE; "
          f"{'meets' if diff >= 0.10 else 'misses'} the +0.10 target)   n={n} held-out episodes each")
    sw = [r.get("eval/single_window/success") for r in (evals[0], evals[-1])]
    if None not in sw:
        print(f"   single-window      before {sw[0]:.3f}   after {sw[1]:.3f}")
    trend = "  ".join(f"{r['step']}:{r['eval/compacted/success']:.2f}" for r in evals)
    print(f"   eval trajectory    {trend}")
    print(f"   wall time          {wall:.0f} s RL (value pretraining and evaluations included; "
          f"target <= 300 s), base model {base_s:.0f} s ({'cached' if base_s < 1 else 'built'})")
    print(f"   rollout            {roll_tok / max(roll_s, 1e-9):,.0f} trunk tokens/s ({roll_tok:,} tokens, "
          f"{roll_s:.0f} s)")
    print(f"   update             {upd_tok / max(upd_s, 1e-9):,.0f} trunk tokens/s ({upd_tok:,} tokens, "
          f"{upd_s:.0f} s; scoring, policy epochs and critic passes)")


# ---------------------------------------------------------------------------------------------- horizon
def episode_cost(cfg: RunConfig, policy: Policy, episodes: int, seed: int) -> dict[str, float]:
    env = make_env(cfg, episodes)
    agent = PolicyAgent(policy, episodes, generator=torch.Generator().manual_seed(seed))
    start = time.perf_counter()
    rb = run_rollouts(env, agent, cfg.harness, seed=seed)
    wall = time.perf_counter() - start
    env.close()
    tokens, keys = agent.prefilled_tokens / episodes, agent.attended_keys / episodes
    return {"wall_ms": 1e3 * wall / episodes, "tokens": tokens, "keys": keys,
            "mflops": policy.forward_flops(tokens, keys) / 1e6,
            "segments": float(rb.batch.segments_per_rollout.mean()),
            "overlong": float(np.mean([not r.finished for r in rb.rollouts]))}


def horizon_configs(preset: str, horizon: int, overrides: dict[str, Any]) -> dict[str, RunConfig]:
    """``supo`` (compaction) and ``react`` (none, window holding the whole episode) at one horizon."""
    base = resolve(apply_overrides({"task": {"preset": preset}}, overrides))
    step_tokens = 3 + base.task.obs_tokens[1]  # ACT action OBS observation
    steps = horizon + 2
    wide = 8 + steps * step_tokens + base.harness.summary_tokens
    task = {"preset": preset, "horizon": [horizon, horizon]}
    caps = {"max_steps": steps, "max_compactions": steps}
    out = {}
    for recipe, harness in (("supo", caps), ("react", {**caps, "window": wide})):
        nested = apply_overrides({"task": task, "harness": harness, "train": {"recipe": recipe}}, overrides)
        out[recipe] = resolve(nested)
    return out


def loglog_slope(x: list[float], y: list[float]) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def horizon_bench(preset: str, horizons: list[int], episodes: int, overrides: dict[str, Any]) -> None:
    print(f"== cost per episode against horizon on {preset}: supo (compaction; the baseline) vs react "
          f"(no compaction), {episodes} episodes per point, untrained policy")
    cfgs = {h: horizon_configs(preset, h, overrides) for h in horizons}
    widest = max(c["react"].harness.window for c in cfgs.values())
    probe = cfgs[horizons[0]]["supo"]
    torch.manual_seed(0)
    # one policy for every point: position table wide enough for the widest no-compaction window
    policy_cfg = type(probe.policy)(**{**vars(probe.policy), "max_len": widest + 16, "value_head": False})
    policy = Policy(policy_cfg).to(device_of(probe)).eval()
    episode_cost(cfgs[horizons[0]]["supo"], policy, episodes, seed=0)  # warm-up
    table: dict[str, dict[int, dict[str, float]]] = {"supo": {}, "react": {}}
    print(f"{'H':>5} {'W':>5} | {'harness':>7} {'segs':>5} {'tokens':>8} {'keys':>9} {'MFLOP':>8} {'ms':>8} |"
          f" {'react/supo: keys':>16} {'MFLOP':>6} {'ms':>6}")
    for h in horizons:
        for name in ("supo", "react"):
            table[name][h] = episode_cost(cfgs[h][name], policy, episodes, seed=1000 + h)
        s, r = table["supo"][h], table["react"][h]
        for name, c in (("supo", s), ("react", r)):
            ratio = (f"{r['keys'] / s['keys']:16.2f} {r['mflops'] / s['mflops']:6.2f} "
                     f"{r['wall_ms'] / s['wall_ms']:6.2f}" if name == "react" else "")
            print(f"{h:5d} {cfgs[h][name].harness.window:5d} | {name:>7} {c['segments']:5.1f} "
                  f"{c['tokens']:8.0f} {c['keys']:9.0f} {c['mflops']:8.2f} {c['wall_ms']:8.2f} | {ratio}")
        if r["overlong"] or s["overlong"]:
            print(f"      warning: overlong rate supo {s['overlong']:.2f}, react {r['overlong']:.2f}")
    print("log-log slope of cost against horizon (1 = linear, 2 = quadratic):")
    for metric in ("tokens", "keys", "mflops", "wall_ms"):
        slopes = {name: loglog_slope([float(h) for h in horizons], [table[name][h][metric] for h in horizons])
                  for name in table}
        print(f"   {metric:>8}: supo {slopes['supo']:.2f}   react {slopes['react']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="?", default="all", choices=("demo", "horizon", "all"))
    parser.add_argument("--preset", default=DEMO_PRESET)
    parser.add_argument("--recipes", nargs="+", default=list(DEMO_RECIPES))
    parser.add_argument("--store", default="mlruns", help="where the base checkpoint is cached")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--rollouts", type=int, default=256,
                        help="rollouts per RL step for every recipe (prompts = this / G); 0: the config's")
    parser.add_argument("--horizons", nargs="+", type=int, default=[8, 16, 32, 64, 128])
    parser.add_argument("--episodes", type=int, default=32, help="episodes per horizon point")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    overrides = parse_overrides(args.overrides)
    print(f"torch {torch.__version__}, {args.threads} thread(s)")
    if args.what in ("demo", "all"):
        demo(args.preset, tuple(args.recipes), Path(args.store), overrides, args.rollouts)
    if args.what in ("horizon", "all"):
        horizon_bench(args.preset, args.horizons, args.episodes, overrides)


if __name__ == "__main__":
    main()
