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

``base`` and ``run`` measure against a baseline commit (``--baseline``, default 7ee6af2, the commit
before issue 21), alternating the two sides, each measurement in a fresh subprocess whose ``simlab`` is
that side's (``benchmarks/baseline.py``):

``base``: build the base model of ``--preset`` (default ``peekread-pos``, the main job's: 300 steps) for
each of ``--seeds`` on both sides, into fresh stores, and print the build times, their ratio and each
base's held-out compacted success (evaluated here, by this tree, on the seed's own 512 episodes). The
equal-quality claim itself rests on more seeds: ``benchmarks/equivalence.py base``.

``run``: one 30-step RL run of the demo preset with an evaluation every 2 steps, and the same run
evaluating only at the end (256 held-out episodes in both configurations at the end), on both sides
(each side's base built first, untimed), in wall and CPU time. Issue 21's target is at most 1.3x for
the first against the second; the intermediate evaluations play :data:`EVAL_SUBSET` (issue 21, item 3)
where a side has those settings.

    PYTHONPATH=. python benchmarks/bench_train.py [demo|horizon|base|run|all] [--preset keyrecall-mini]
        [--store mlruns] [--set train.steps=60 ...] [--rollouts 256] [--horizons 8 16 32 64 128]
        [--baseline 7ee6af2] [--seeds 0 1] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simlab import names
from simlab.config import RunConfig, apply_overrides, parse_overrides, resolve
from simlab.harness import run_rollouts
from simlab.policy.agent import PolicyAgent
from simlab.policy.model import Policy
from simlab.sinks import JsonlSink, read_metrics
from simlab.train import train
from simlab.train.base import base_checkpoint, device_of
from simlab.train.rollouts import evaluate, make_env

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline  # the sibling module; this script may run under the baseline's simlab

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


BASE_PRESET = "peekread-pos"
"""The main job's preset: its base model (300 behaviour-cloning steps) is the one issue 21 times."""
BASE_EVAL_EPISODES = 512
RUN_STEPS, RUN_EVERY = 30, 2
RUN_EVAL = {"eval.episodes": 256}
"""The held-out set campaigns evaluate on (256-512 episodes, in both configurations; 256 as the demo)."""
EVAL_SUBSET: dict[str, Any] = {"eval.curve_episodes": 128, "eval.curve_single_window": False}
"""Cheap intermediate evaluations for the ``run`` benchmark's every-2-steps run (issue 21, item 3: the
first 128 held-out episodes, compacted only; the final evaluation plays the full set). A side whose
``EvalConfig`` predates these settings (7ee6af2) evaluates the full set every time."""


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
        wall, rows = timed_train(cfg, store)
        report_demo(cfg, rows, wall, base_s)


def timed_train(cfg: RunConfig, store: Path) -> tuple[float, list[dict[str, Any]]]:
    """The wall time of ``train`` (the base model cached or built in it) and the metrics it logged."""
    with tempfile.TemporaryDirectory() as tmp:
        sink = JsonlSink(tmp)
        start = time.perf_counter()
        train(cfg, sink, store=store)
        wall = time.perf_counter() - start
        sink.close()
        return wall, read_metrics(tmp)


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


# ---------------------------------------------------------------------------------------------- against a baseline
def base_side(preset: str, seed: int, store: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """In a side's subprocess: build one base model into ``store`` and time it."""
    cfg = resolve(apply_overrides({"task": {"preset": preset}, "base": {"seed": seed}, "seed": seed}, overrides))
    start, cpu = time.perf_counter(), time.process_time()
    path = base_checkpoint(cfg, store)
    return {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu, "path": str(path)}


def run_side(every: int, store: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """In a side's subprocess: the demo preset's base (cached in ``store``, untimed), then one timed RL run."""
    from simlab.config import EvalConfig

    subset = {k: v for k, v in EVAL_SUBSET.items() if k.split(".")[1] in EvalConfig.field_names()}
    settings = {"train.steps": RUN_STEPS, "eval.every": every, **RUN_EVAL, **(subset if every < RUN_STEPS else {}),
                **overrides}
    cfg = resolve(apply_overrides({"task": {"preset": DEMO_PRESET}, "train": {"recipe": "supo"}}, settings))
    base_checkpoint(cfg, store)
    cpu = time.process_time()
    return {"seconds": timed_train(cfg, store)[0], "cpu_seconds": time.process_time() - cpu, "subset": bool(subset)}


def held_out_success(preset: str, seed: int, path: str, overrides: dict[str, Any]) -> float:
    """A base checkpoint's compacted success on the seed's own held-out set, evaluated by this tree."""
    from simlab.policy.checkpoint import load_checkpoint

    settings = {"eval.episodes": BASE_EVAL_EPISODES, "eval.single_window": False, "eval.seed": "run", **overrides}
    cfg = resolve(apply_overrides({"task": {"preset": preset}, "seed": seed}, settings))
    policy, _ = load_checkpoint(path, expected_vocab_size=cfg.policy.vocab_size, device=device_of(cfg))
    return evaluate(cfg, policy)[0][names.metric(names.EVAL_COMPACTED, names.SUCCESS)]


def base_bench(args: argparse.Namespace, overrides: dict[str, Any]) -> None:
    preset = args.preset or BASE_PRESET
    sides = baseline.both(args.baseline)
    print(f"== base-model build on {preset}, seeds {args.seeds}: {' vs '.join(sides)}, alternating")
    with tempfile.TemporaryDirectory() as tmp:
        def measure(name: str, root: Path, r: int) -> dict[str, Any]:  # round r builds seed r on both sides
            store = Path(tmp) / f"{r}-{name.split()[-1]}"
            return baseline.side(root, Path(__file__), ["base", "--preset", preset, "--seed", str(args.seeds[r]),
                                                        "--store", str(store), *args.set_args])

        rows = baseline.alternate(sides, len(args.seeds), measure, echo=lambda _: None)
        for runs in rows.values():
            for seed, r in zip(args.seeds, runs, strict=True):
                r["success"] = held_out_success(preset, seed, r["path"], overrides)
    report_base(preset, args.seeds, rows)


def report_base(preset: str, seeds: list[int], rows: dict[str, list[dict[str, Any]]]) -> None:
    (old_name, old), (new_name, new) = rows.items()
    n = BASE_EVAL_EPISODES
    for seed, o, w in zip(seeds, old, new, strict=True):
        print(f"   seed {seed}: wall {o['seconds']:6.1f} s -> {w['seconds']:6.1f} s, CPU {o['cpu_seconds']:6.1f} s -> "
              f"{w['cpu_seconds']:6.1f} s; held-out success {o['success']:.3f} -> {w['success']:.3f} "
              f"(SE {binomial_se(o['success'], n):.3f} each)")
    for clock, label in (("seconds", "wall"), ("cpu_seconds", "CPU")):
        total_old, total_new = sum(r[clock] for r in old), sum(r[clock] for r in new)
        ratios = [o[clock] / w[clock] for o, w in zip(old, new, strict=True)]
        print(f"   => {preset} base build, {label} time: {old_name} {total_old:.0f} s, {new_name} {total_new:.0f} s: "
              f"x{total_old / total_new:.2f} faster (median per seed x{statistics.median(ratios):.2f}; target >= 2x)")
    print(f"   => mean held-out success {statistics.mean(r['success'] for r in old):.3f} -> "
          f"{statistics.mean(r['success'] for r in new):.3f} over {len(seeds)} seed(s), {n} episodes each")


def run_bench(args: argparse.Namespace) -> None:
    sides = baseline.both(args.baseline)
    stores = {name: Path(tempfile.gettempdir()) / f"simlab-bench-run-{name.split()[-1]}" for name in sides}
    print(f"== one {RUN_STEPS}-step run of {DEMO_PRESET} (supo), evaluating every {RUN_EVERY} steps and only at the "
          f"end: {' vs '.join(sides)}, {args.rounds} round(s) alternating (bases built first, untimed)"
          + f"; intermediate evaluations with {EVAL_SUBSET} where a side has those settings")

    def measure(name: str, root: Path, _: int) -> dict[str, Any]:
        out = {}
        for every in (RUN_EVERY, RUN_STEPS):
            side = baseline.side(root, Path(__file__), ["run", "--every", str(every), "--store", str(stores[name]),
                                                        *args.set_args])
            out.update({f"wall {every}": side["seconds"], f"cpu {every}": side["cpu_seconds"],
                        "subset": side.get("subset", False)})
        return out

    results = baseline.alternate(sides, args.rounds, measure, echo=lambda _: None)
    medians = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for name, runs in results.items()}
    for name, m in medians.items():
        print(f"   {name}: intermediate evaluations {'on the subset' if m['subset'] else 'on the full set'}")
        for clock in ("wall", "cpu"):
            every, end = m[f"{clock} {RUN_EVERY}"], m[f"{clock} {RUN_STEPS}"]
            print(f"   {name}, {clock} time: every {RUN_EVERY} steps {every:.1f} s, at the end only {end:.1f} s: "
                  f"x{every / end:.2f} ({'meets' if every / end <= 1.3 else 'misses'} <= 1.3x)")
    (_, old), (_, new) = medians.items()
    for clock in ("wall", "cpu"):
        every, end = (new[f"{clock} {k}"] / old[f"{clock} {k}"] for k in (RUN_EVERY, RUN_STEPS))
        print(f"   => this tree / baseline, {clock} time: every {RUN_EVERY} steps x{every:.2f}, "
              f"at the end only x{end:.2f}")


def side_main(args: argparse.Namespace, overrides: dict[str, Any]) -> None:
    if args.what == "base":
        out = base_side(args.preset or BASE_PRESET, args.seed, Path(args.store), overrides)
    else:
        out = run_side(args.every, Path(args.store), overrides)
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="?", default="all", choices=("demo", "horizon", "base", "run", "all"))
    parser.add_argument("--preset", default=None, help=f"default {DEMO_PRESET} ({BASE_PRESET} for base)")
    parser.add_argument("--recipes", nargs="+", default=list(DEMO_RECIPES))
    parser.add_argument("--store", default="mlruns", help="where the base checkpoint is cached")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--rollouts", type=int, default=256,
                        help="rollouts per RL step for every recipe (prompts = this / G); 0: the config's")
    parser.add_argument("--horizons", nargs="+", type=int, default=[8, 16, 32, 64, 128])
    parser.add_argument("--episodes", type=int, default=32, help="episodes per horizon point")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--baseline", default=baseline.BASELINE, help="base and run: the commit to measure against")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1], help="base: base-model seeds, one build each")
    parser.add_argument("--rounds", type=int, default=2, help="run: measurements per side")
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--every", type=int, default=RUN_EVERY, help=argparse.SUPPRESS)
    parser.add_argument(baseline.SIDE_FLAG, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.set_args = [f"--set={o}" for o in args.overrides]
    torch.set_num_threads(args.threads)
    overrides = parse_overrides(args.overrides)
    if getattr(args, baseline.SIDE_FLAG.lstrip("-")):
        side_main(args, overrides)
        return
    print(f"torch {torch.__version__}, {args.threads} thread(s)")
    if args.what in ("demo", "all"):
        demo(args.preset or DEMO_PRESET, tuple(args.recipes), Path(args.store), overrides, args.rollouts)
    if args.what in ("horizon", "all"):
        horizon_bench(args.preset or DEMO_PRESET, args.horizons, args.episodes, overrides)
    if args.what in ("base", "all"):
        base_bench(args, overrides)
    if args.what in ("run", "all"):
        run_bench(args)


if __name__ == "__main__":
    main()
