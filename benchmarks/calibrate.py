"""Calibration table: oracle / scripted / random success per task preset, produced with `simlab inspect`.

Runs ``python -m simlab.cli inspect --json`` for every preset and agent under the preset's own harness
settings (trigger ``threshold``), plus the oracle under ``sliding`` (no summary) to show what the summary
is worth, and prints the markdown table kept in the README's preset table. Success rates are over
distinct instances (G = 1). The within-group columns are the scripted agent's, in groups of G = 8
rollouts per prompt: the mean in-group SD of the segment count K and the pooled in-group corr(K, reward),
which is all a group-relative estimator can see.

    PYTHONPATH=. python benchmarks/calibrate.py [--episodes 1024] [--presets NAME ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from simlab.tasks.presets import PRESETS


def inspect(preset: str, agent: str, episodes: int, *extra: str) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "simlab.cli",
        "inspect",
        "--task",
        preset,
        "--agent",
        agent,
        "--episodes",
        str(episodes),
        "--json",
        *extra,
    ]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1024)
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), help="the rows to make (default: all)")
    args = parser.parse_args()
    print(
        "| preset | W | L | m | k | S | oracle | scripted (q=0.7) | random | oracle, sliding | "
        "segments (oracle) | corr(segments, reward), oracle | overlong (scripted) | "
        "K SD in group (scripted) | corr(K, R) in group (scripted) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.presets:
        p = PRESETS[name]
        # success over distinct instances (G = 1); the within-group figures from groups of G = 8
        res = {a: inspect(name, a, args.episodes, "-G", "1") for a in ("oracle", "scripted", "random")}
        slide = inspect(name, "oracle", args.episodes, "-G", "1", "--trigger", "sliding")
        o = res["oracle"]
        h = p.harness

        def fmt(s: dict) -> str:
            return f"{s['success_rate']:.3f} ± {s['success_se']:.3f}"

        corr = o["corr_segments_reward"]
        within = inspect(name, "scripted", args.episodes, "-G", "8")["within_group"]
        in_corr = within["corr"]
        print(
            f"| `{name}` | {o['window']} | {o['threshold']} | {h['summary_tokens']} | {h['tail_steps']} | "
            f"{h['max_compactions']} | {fmt(o)} | {fmt(res['scripted'])} | {fmt(res['random'])} | "
            f"{fmt(slide)} | "
            f"{o['mean_segments']:.2f} | {'n/a' if corr is None else f'{corr:+.2f}'} | "
            f"{res['scripted']['overlong_rate']:.3f} | {within['segments_sd']:.2f} | "
            f"{'n/a' if in_corr is None else f'{in_corr:+.2f}'} |"
        )


if __name__ == "__main__":
    main()
