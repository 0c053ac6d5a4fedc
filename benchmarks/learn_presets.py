"""Learning check of task presets: per seed, its own base model and held-out set, SUPO, before and after.

For each preset and seed S it resolves ``--set task.preset=P --set train.recipe=supo --set seed=S
--set base.seed=run --set eval.seed=run`` (so every seed differs in base model, held-out instances and RL
sampling), builds the base model, trains, and writes one CSV row:

- held-out compacted success at RL step 0 (the base model) and after the last step, on ``eval.episodes``
  instances each, their difference and its SE (binomial, the two evaluations independent), and sigma;
- ``simlab inspect --checkpoint`` of the base model and of the trained policy in groups of G = 8 (the
  in-group SD of the segment count K, the in-group corr(K, R), success, the READ route's share, and the
  coupling inside the READ route) under the harness the run trained with;
- the wall time of the base model and of RL.

The oracle's success under the same harness (the ceiling) is written once per preset, as seed ``-1``.
Rows are appended as they finish, so a long run can be read (and resumed with ``--skip-done``) while
it goes; the first lines of a new file are ``#`` comments with the command and the commit.

    PYTHONPATH=. python benchmarks/learn_presets.py --presets peekread-routes-c0 --seeds 0 1 2 \\
        --out benchmarks/learning/preset_learning.csv [--set train.steps=20 ...] [--store mlruns]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from simlab.config import apply_overrides, parse_overrides, resolve
from simlab.sinks import JsonlSink, read_metrics
from simlab.tasks import peekread
from simlab.tasks.presets import PRESETS
from simlab.train import train
from simlab.train.base import base_checkpoint

COLUMNS = (
    "preset", "preset_key", "seed", "base_success", "final_success", "diff", "diff_se", "sigma", "eval_episodes",
    "k_sd_base", "corr_base", "read_share_base", "read_corr_base", "success_g8_base",
    "k_sd_trained", "corr_trained", "read_share_trained", "read_corr_trained", "success_g8_trained",
    "overlong_base", "overlong_trained", "mean_k_base", "mean_k_trained", "base_s", "rl_s",
)
READ = str(peekread.READ)


def inspect(preset: str, *args: str) -> dict[str, Any]:
    """``simlab inspect --json`` of a preset (as a subprocess: one torch thread, no shared state)."""
    cmd = [sys.executable, "-m", "simlab.cli", "inspect", "--task", preset, "--json", *args]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out))


def route_figures(stats: dict[str, Any]) -> dict[str, float]:
    """K's in-group SD and corr, success, overlong rate, the READ route's share and its own in-group corr."""
    read = stats["routes"].get(READ, {})
    corr = stats["within_group"]["corr"]
    rcorr = read.get("within_group", {}).get("corr")
    return {"k_sd": stats["within_group"]["segments_sd"], "corr": math.nan if corr is None else corr,
            "read_share": read.get("share", 0.0), "read_corr": math.nan if rcorr is None else rcorr,
            "success_g8": stats["success_rate"], "overlong": stats["overlong_rate"],
            "mean_k": stats["mean_segments"]}


def one_seed(preset: str, seed: int, overrides: dict[str, Any], store: Path, episodes: int,
             keep: Path | None = None) -> dict[str, Any]:
    nested = {"task": {"preset": preset}, "train": {"recipe": "supo"}, "seed": seed,
              "base": {"seed": "run"}, "eval": {"seed": "run", "single_window": False}}
    cfg = resolve(apply_overrides(nested, overrides))
    start = time.perf_counter()
    base = base_checkpoint(cfg, store)
    base_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        sink = JsonlSink(Path(tmp) / "run")
        start = time.perf_counter()
        train(cfg, sink, store=store, out_dir=Path(tmp))
        rl_s = time.perf_counter() - start
        sink.close()
        evals = [r for r in read_metrics(Path(tmp) / "run") if r.get("eval/compacted/success") is not None]
        common = ("-G", "8", "--episodes", str(episodes), "--seed", str(2_000_000 + seed * 10_000))
        before = route_figures(inspect(preset, "--checkpoint", str(base), *common))
        after = route_figures(inspect(preset, "--checkpoint", str(Path(tmp) / "policy.pt"), *common))
        if keep is not None:
            (keep / preset).mkdir(parents=True, exist_ok=True)
            shutil.copy(Path(tmp) / "policy.pt", keep / preset / f"seed{seed}.pt")
            shutil.copy(base, keep / preset / f"seed{seed}-base.pt")
    n = cfg.eval.episodes
    p0, p1 = evals[0]["eval/compacted/success"], evals[-1]["eval/compacted/success"]
    se = math.sqrt((p0 * (1 - p0) + p1 * (1 - p1)) / n)
    row = {"preset": preset, "preset_key": PRESETS[preset].fingerprint(), "seed": seed, "base_success": p0,
           "final_success": p1, "diff": p1 - p0, "diff_se": se, "sigma": (p1 - p0) / se if se else math.nan,
           "eval_episodes": n,           "base_s": round(base_s, 1), "rl_s": round(rl_s, 1)}
    row.update({f"{k}_base": v for k, v in before.items()})
    row.update({f"{k}_trained": v for k, v in after.items()})
    return row


def ceiling(preset: str, overrides: dict[str, Any], episodes: int) -> dict[str, Any]:
    """The oracle under the harness a SUPO run of the preset uses (seed -1 in the table)."""
    cfg = resolve(apply_overrides({"task": {"preset": preset}, "train": {"recipe": "supo"}}, overrides))
    h = cfg.harness
    stats = inspect(preset, "--agent", "oracle", "-G", "1", "--episodes", str(episodes), "--frac", str(h.frac),
                    "-k", str(h.tail_steps), "-S", str(h.max_compactions), "--window", str(h.window))
    return {"preset": preset, "preset_key": PRESETS[preset].fingerprint(), "seed": -1,
            "final_success": stats["success_rate"], "diff_se": stats["success_se"],
            "mean_k_trained": stats["mean_segments"], "overlong_trained": stats["overlong_rate"]}


def read_table(path: Path) -> list[dict[str, Any]]:
    """The rows of a table this script wrote (its ``#`` lines skipped), numbers as floats."""
    with path.open() as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    return [{k: (v if k in ("preset", "preset_key") else float(v) if v else math.nan) for k, v in r.items()}
            for r in rows]


def markdown(rows: list[dict[str, Any]]) -> str:
    """Per preset: the mean over seeds of each step-0 and trained figure, the ceiling, and how many seeds
    gained >= +0.10 at >= 3 SE."""
    lines = ["| preset | seeds | step 0: K SD, corr (all / READ), READ share, success | trained: K SD, corr "
             "(all / READ), READ share, success, overlong | ceiling | gain (mean, min) | seeds >= +0.10 at >= 3 SE |",
             "|---|---|---|---|---|---|---|"]
    for preset in dict.fromkeys(r["preset"] for r in rows):
        seeds = [r for r in rows if r["preset"] == preset and r["seed"] >= 0]
        top = [r for r in rows if r["preset"] == preset and r["seed"] < 0]

        def mean(key: str, rs: list[dict[str, Any]] = seeds) -> float:
            vals = [r[key] for r in rs if not math.isnan(r[key])]
            return sum(vals) / len(vals) if vals else math.nan

        wins = sum(r["diff"] >= 0.10 and r["sigma"] >= 3 for r in seeds)
        lines.append(
            f"| `{preset}` | {len(seeds)} | {mean('k_sd_base'):.2f}, {mean('corr_base'):+.2f} / "
            f"{mean('read_corr_base'):+.2f}, {mean('read_share_base'):.2f}, {mean('base_success'):.3f} | "
            f"{mean('k_sd_trained'):.2f}, {mean('corr_trained'):+.2f} / {mean('read_corr_trained'):+.2f}, "
            f"{mean('read_share_trained'):.2f}, {mean('final_success'):.3f}, {mean('overlong_trained'):.2f} | "
            f"{top[0]['final_success'] if top else math.nan:.3f} | {mean('diff'):+.3f}, "
            f"{min((r['diff'] for r in seeds), default=math.nan):+.3f} | {wins}/{len(seeds)} |")
    return "\n".join(lines)


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def done_rows(path: Path) -> set[tuple[str, int]]:
    if not path.exists():
        return set()
    with path.open() as fh:
        return {(r["preset"], int(r["seed"])) for r in csv.DictReader(line for line in fh if not line.startswith("#"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", type=Path, help="print the markdown summary of a table this script wrote, and stop")
    parser.add_argument("--presets", nargs="+", default=[])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/learning/preset_learning.csv"))
    parser.add_argument("--store", type=Path, default=Path("mlruns"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--inspect-episodes", type=int, default=512)
    parser.add_argument("--keep", type=Path, help="copy each seed's base and trained checkpoints here")
    parser.add_argument("--skip-done", action="store_true", help="leave out (preset, seed) rows already in --out")
    args = parser.parse_args()
    if args.table is not None:
        print(markdown(read_table(args.table)))
        return
    torch.set_num_threads(1)
    overrides = {"eval.episodes": 512, "eval.every": 1000, **parse_overrides(args.overrides)}
    skip = done_rows(args.out) if args.skip_done else set()
    new = not args.out.exists()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a", newline="") as fh:
        if new:
            fh.write(f"# command: {shlex.join(['python', *sys.argv])}\n# commit: {commit()}\n")
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, restval="")
        if new:
            writer.writeheader()
        for preset in args.presets:
            if (preset, -1) not in skip:
                writer.writerow(ceiling(preset, overrides, 1024))
                fh.flush()
            for seed in args.seeds:
                if (preset, seed) in skip:
                    continue
                row = one_seed(preset, seed, overrides, args.store, args.inspect_episodes, args.keep)
                writer.writerow({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})
                fh.flush()
                print(f"{preset} seed {seed}: {row['base_success']:.3f} -> {row['final_success']:.3f} "
                      f"({row['diff']:+.3f}, {row['sigma']:.1f} SE); K SD {row['k_sd_base']:.2f} -> "
                      f"{row['k_sd_trained']:.2f}, corr {row['corr_base']:+.2f} -> {row['corr_trained']:+.2f}, "
                      f"READ {row['read_share_base']:.2f} -> {row['read_share_trained']:.2f}; "
                      f"{row['base_s']:.0f} s + {row['rl_s']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
