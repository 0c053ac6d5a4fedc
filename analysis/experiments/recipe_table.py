"""The recipe comparison's per-recipe learning table (issue 22), from the `recipes` sweep's exports.

Per recipe, over its seeds (each its own base model and held-out set): compacted success of the base model
(the step-0 evaluation, on the curve's held-out subset) and after RL (the last evaluation, the whole set),
the learning gain (last minus step 0 on the instances evaluated at both, mean ± SE over seeds), how many
seeds learned (a seed learns when its own gain is at least +10 points and 3 SEs of its paired instance
differences: issue 22's bar), the final overlong rate and segments per episode, tokens per episode, and
the RL compute time per run (rollouts plus updates, evaluations excluded); ranked by the gain (ties where
two recipes' paired difference has Holm p >= 0.05 over every pair, the findings' rule), with each recipe's
effective context H = L x (S + 1) from its run config.

    python -m simlab.analysis.experiments.recipe_table --export    # write analysis/findings/recipes.* first
    python -m simlab.analysis.experiments.recipe_table             # print the table from the committed exports
    python -m simlab.analysis.experiments.recipe_table --cost-figure docs/img/recipes/cost.png  # and the figure

``--also EXPERIMENT`` adds a follow-up sweep's recipes (its exports, or the store with ``--export``).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import polars as pl

from simlab.analysis.replication.data import SpecData, live_data, read_export, write_export
from simlab.analysis.statistics.outcomes import run_gains
from simlab.analysis.statistics.power import t_quantile
from simlab.analysis.statistics.stats import rank_with_ties
from simlab.sweep.backend import SIMLAB
from simlab.sweep.shipped import locate
from simlab.sweep.spec_parse import load_spec

EXPERIMENT = "recipes"
LEARNED_POINTS, LEARNED_SE = 10.0, 3.0
"""Issue 22's bar for one seed: a gain of at least +10 points at 3 or more SEs."""


def seed_gains(data: SpecData) -> pl.DataFrame:
    """variant, seed, gain, se: each run's mean paired gain (points) and its SE over held-out instances."""
    assert data.episodes is not None, "the export has no per-episode outcomes"
    by_run = run_gains(data.episodes, "compacted").select("run_id", pl.col("value").alias("gain"), "se")
    return by_run.join(data.runs.select("run_id", "variant", "seed"), on="run_id").drop("run_id")


def table(data: SpecData) -> pl.DataFrame:
    """One row per recipe (see the module docstring)."""
    assert data.history is not None, "the export has no histories"
    h = data.history
    steps = h.filter(pl.col("key") == "eval/compacted/success")
    base = steps.filter(pl.col("step") == pl.col("step").min().over("run_id")).select("run_id", "value")
    compute = h.filter(pl.col("key").is_in(["perf/rollout_s", "perf/update_s"])).group_by("run_id").agg(
        pl.col("value").sum().alias("rl_s"))
    runs = data.runs.join(base.rename({"value": "base"}), on="run_id").join(compute, on="run_id", how="left")
    gains = seed_gains(data).with_columns(
        ((pl.col("gain") >= LEARNED_POINTS) & (pl.col("gain") >= LEARNED_SE * pl.col("se"))).alias("learned"))
    per_seed = runs.join(gains, on=("variant", "seed"))
    return per_seed.group_by("variant").agg(
        pl.len().alias("seeds"),
        (100 * pl.col("base").mean()).alias("base"),
        (100 * pl.col("final:eval/compacted/success").mean()).alias("final"),
        pl.col("gain").mean().alias("gain"),
        (pl.col("gain").std() / pl.len().sqrt()).alias("gain_se"),
        pl.col("learned").sum().alias("learned"),
        (100 * pl.col("final:eval/compacted/overlong_rate").mean()).alias("overlong"),
        pl.col("final:eval/compacted/segments_mean").mean().alias("segments"),
        pl.col("final:eval/compacted/tokens_per_episode").mean().alias("tokens"),
        pl.col("rl_s").mean().alias("rl_s"),
    ).sort("gain", descending=True)


def effective_context(experiment: str) -> pl.DataFrame:
    """variant, horizon: H = L x (S + 1) of each variant's resolved run config (W without compaction), the most
    history it may carry, as the trainer computes it (``HarnessConfig.effective_horizon``)."""
    spec = load_spec(locate(experiment))
    rows: dict[str, int] = {}
    for cell in spec.cells():
        variant = f"variant={cell.params['variant']}"
        if variant not in rows:  # H does not depend on the seed: one cell per variant
            rows[variant] = SIMLAB.config(spec, cell).harness.effective_horizon
    return pl.DataFrame({"variant": list(rows), "horizon": list(rows.values())})


def paired_se(gains: pl.DataFrame, variants: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(V, V) SE of the mean per-seed gain difference between two recipes over the seeds they share, and its
    degrees of freedom (shared seeds - 1); NaN under two shared seeds: recipes with one seed's base model and
    held-out set are compared seed by seed."""
    by = {v: dict(gains.filter(pl.col("variant") == v).select("seed", "gain").iter_rows()) for v in variants}
    se, df = np.full((len(variants), len(variants)), np.nan), np.full((len(variants), len(variants)), np.nan)
    for i, a in enumerate(variants):
        for j, b in enumerate(variants):
            shared = sorted(set(by[a]) & set(by[b]))
            if i != j and len(shared) >= 2:
                d = np.array([by[b][s] - by[a][s] for s in shared])
                se[i, j], df[i, j] = d.std(ddof=1) / math.sqrt(len(shared)), len(shared) - 1
    return se, df


def ranked(t: pl.DataFrame, gains: pl.DataFrame) -> pl.DataFrame:
    """The table with the gain's 95% t interval over seeds and a rank by gain: a recipe is behind another
    when their paired difference has Holm-adjusted p < 0.05 over every pair (the findings' rule)."""
    half = [t_quantile(0.975, n - 1) * se if n > 1 and se is not None else math.nan
            for n, se in zip(t["seeds"], t["gain_se"], strict=True)]
    ses = [math.nan if se is None else se for se in t["gain_se"]]
    pair_se, pair_df = paired_se(gains, t["variant"].to_list())
    rank = rank_with_ties(t["gain"], ses, [n - 1 for n in t["seeds"]], pair_se=pair_se, pair_df=pair_df)
    t = t.with_columns(pl.Series("gain_half", half), pl.Series("rank", rank))
    return t.sort("rank", "gain", descending=[False, True])


def markdown(t: pl.DataFrame) -> str:
    """The table as the docs print it."""
    head = ("| rank by gain | recipe | H (tokens) | seeds | base (step 0) | after RL | gain ± SE [95% CI] | "
            "seeds that learned | overlong (%) | segments | tokens / episode | RL compute per run (s) |")
    lines = [head, "|" + "---|" * 12]
    for r in t.iter_rows(named=True):
        se = "n/a" if r["gain_se"] is None or math.isnan(r["gain_se"]) else f"{r['gain_se']:.1f}"
        low, high = r["gain"] - r["gain_half"], r["gain"] + r["gain_half"]
        ci = "" if math.isnan(r["gain_half"]) else f" [{low:+.1f}, {high:+.1f}]"
        lines.append(f"| {r['rank']} | {r['variant'].removeprefix('variant=')} | {r['horizon']} | {r['seeds']} | "
                     f"{r['base']:.1f} | {r['final']:.1f} | {r['gain']:+.1f} ± {se}{ci} | {r['learned']} of "
                     f"{r['seeds']} | {r['overlong']:.1f} | {r['segments']:.2f} | {r['tokens']:.0f} | "
                     f"{r['rl_s']:.0f} |")
    return "\n".join(lines)


def cost_figure(t: pl.DataFrame, path: Path) -> Path:
    """Tokens per episode (x) against final compacted success (y), one labelled point per recipe."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    spots: dict[tuple[int, int], list[str]] = {}  # recipes at the same spot share one point and one label
    for r in t.iter_rows(named=True):
        spots.setdefault((round(r["tokens"] / 4), round(r["final"])), []).append(r["variant"].removeprefix("variant="))
    for (x4, y), names in spots.items():
        ax.scatter(4 * x4, y, s=30)
        ax.annotate(", ".join(names), (4 * x4, y), fontsize="x-small", xytext=(4, 3), textcoords="offset points")
    ax.set_xlabel("tokens the policy processed per episode (final evaluation, mean over seeds)")
    ax.set_ylabel("final compacted success (points)")
    ax.set_title("what each recipe costs and what it reaches (keyrecall-mini, seeds 20-27)", fontsize="medium")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def spec_data(experiment: str, export: bool) -> SpecData:
    """A sweep's exports, written from the live store first when ``export``."""
    if export:
        live = live_data(experiment, lambda _key: True)
        if live is None:
            raise SystemExit(f"error: no finished runs of {experiment!r} in the store; run its sweep first")
        for path in write_export(experiment, live):
            print(f"exported {path}")
    data = read_export(experiment)
    if data is None:
        raise SystemExit(f"error: no exports of {experiment!r}; run with --export after its sweep")
    return data


def main() -> None:
    """Print (and with --export, first write) the recipe table; see the module's docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default=EXPERIMENT, help="the sweep to read (default: recipes)")
    parser.add_argument("--export", action="store_true", help="write the exports from the live store first")
    parser.add_argument("--also", nargs="*", default=[], help="follow-up sweeps whose recipes join the table")
    parser.add_argument("--cost-figure", type=Path, help="draw tokens per episode against success here")
    args = parser.parse_args()
    data = {name: spec_data(name, args.export) for name in (args.experiment, *args.also)}
    t = pl.concat([table(d).join(effective_context(name), on="variant", how="left") for name, d in data.items()])
    t = ranked(t, pl.concat([seed_gains(d) for d in data.values()]))
    print(markdown(t))
    if args.cost_figure is not None:
        print(f"figure {cost_figure(t, args.cost_figure)}")


if __name__ == "__main__":
    main()
