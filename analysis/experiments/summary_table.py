"""What RL did to the summaries (issue 42): per arm of a sweep, the summary metrics before RL and after.

For every variant of a sweep's exports (``analysis/findings/<experiment>.*``): the seeds, and for each
metric of ``--metrics`` (default: the share of summaries holding the cued fact, success, summary length)
its mean over seeds at the first evaluation (the base model, step 0) and at the last, the per-seed
change with its SE over seeds (t, df = seeds - 1), and on how many seeds it rose. With ``--baseline V``
each arm's final value is also paired by seed against arm V's, with its SE and two-sided p. Rates print
in points.

``--figure PATH`` draws, per arm, the first metric's mean over seeds at every evaluation (the band: the
seeds' range), over training.

    python -m simlab.analysis.experiments.summary_table --experiment summaries-relevance [--export] [--baseline V]
        [--metrics eval/compacted/summary_holds_cued ...] [--figure docs/img/summaries/relevance.png] [--step N]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import polars as pl

from simlab import names
from simlab.analysis.experiments.recipe_table import spec_data
from simlab.analysis.replication.data import SpecData
from simlab.analysis.statistics import levels, power

METRICS = (names.metric(names.EVAL_COMPACTED, names.SUMMARY_HOLDS_CUED), names.EVAL_COMPACTED_SUCCESS,
           names.metric(names.EVAL_COMPACTED, names.SUMMARY_LENGTH))


def first_and_last(data: SpecData, metric: str, step: int | None = None) -> pl.DataFrame:
    """variant, seed, first, last: each run's ``metric`` at its first and its last evaluation (``step``: the
    last evaluation at or before it)."""
    assert data.history is not None, "the export has no histories"
    h = data.history.filter(pl.col("key") == metric).sort("step")
    if step is not None:
        h = h.filter(pl.col("step") <= step)
    ends = h.group_by("run_id").agg(pl.col("value").first().alias("first"), pl.col("value").last().alias("last"))
    return ends.join(data.runs.select("run_id", "variant", "seed"), on="run_id").drop("run_id")


def _cell(values: np.ndarray, scale: float) -> str:
    est = levels.from_seeds(scale * values)
    return f"{est.mean:+.1f} ± {est.se:.1f}"


def table(data: SpecData, metrics: tuple[str, ...], baseline: str | None, step: int | None = None) -> str:
    """The Markdown table (see the module docstring); ``step``: read "final" at that step instead."""
    head = ["arm", "seeds"]
    for m in metrics:
        short = m.rsplit("/", 1)[-1]
        head += [f"{short} step 0", f"{short} final", "change (rose on)"]
        if baseline is not None:
            head.append(f"final vs {baseline} (p)")
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    frames = {m: first_and_last(data, m, step) for m in metrics}
    for variant in sorted(data.runs["variant"].unique().to_list()):
        cells: list[str] = []
        for m in metrics:
            scale = 100.0 if names.is_rate(m) else 1.0
            arm = frames[m].filter(pl.col("variant") == variant).sort("seed")
            change = (arm["last"] - arm["first"]).to_numpy()
            first, last = float(arm["first"].mean()), float(arm["last"].mean())  # type: ignore[arg-type]
            cells += [f"{scale * first:.1f}", f"{scale * last:.1f}",
                      f"{_cell(change, scale)} ({int((change > 0).sum())}/{arm.height})"]
            if baseline is not None:
                cells.append(_paired(frames[m], variant, baseline, scale))
        rows.append(f"| {variant.removeprefix('variant=')} | {arm.height} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _paired(frame: pl.DataFrame, variant: str, baseline: str, scale: float) -> str:
    """The arm's final value minus the baseline arm's, paired by seed: mean ± SE (p)."""
    if variant.removeprefix("variant=") == baseline:
        return ""
    pair = frame.filter(pl.col("variant") == variant).join(
        frame.filter(pl.col("variant").str.strip_prefix("variant=") == baseline), on="seed", suffix="_b")
    if pair.height < 2:
        return "n/a"
    est = levels.from_seeds(scale * (pair["last"] - pair["last_b"]).to_numpy())
    return f"{est.mean:+.1f} ± {est.se:.1f} (p {power.two_sided_p(est.mean, est.se, est.df):.3f})"


def curve_figure(data: SpecData, metric: str, path: Path) -> Path:
    """Each arm's ``metric`` over training: the mean over seeds, and the seeds' range as a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    assert data.history is not None, "the export has no histories"
    h = data.history.filter(pl.col("key") == metric).join(data.runs.select("run_id", "variant"), on="run_id")
    curves = h.group_by("variant", "step").agg(pl.col("value").mean().alias("mean"), pl.col("value").min().alias("lo"),
                                               pl.col("value").max().alias("hi")).sort("variant", "step")
    scale = 100.0 if names.is_rate(metric) else 1.0
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    for (variant,), c in curves.group_by("variant", maintain_order=True):
        line = ax.plot(c["step"], scale * c["mean"], marker="o", ms=3, label=str(variant).removeprefix("variant="))
        ax.fill_between(c["step"], scale * c["lo"], scale * c["hi"], alpha=0.12, color=line[0].get_color())
    ax.set_xlabel("RL step")
    ax.set_ylabel(metric + (" (points)" if scale != 1.0 else ""))
    ax.legend(fontsize="x-small", ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    """Print the per-arm summary table of one sweep; see the module's docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", required=True, help="the sweep to read")
    parser.add_argument("--export", action="store_true", help="write the exports from the live store first")
    parser.add_argument("--baseline", help="pair every arm's final value with this arm's, by seed")
    parser.add_argument("--metrics", nargs="+", default=list(METRICS))
    parser.add_argument("--figure", type=Path, help="draw the first metric over training here")
    parser.add_argument("--step", type=int, help="read the 'final' columns at this step (the speed)")
    args = parser.parse_args()
    data = spec_data(args.experiment, args.export)
    print(table(data, tuple(args.metrics), args.baseline, args.step))
    if args.figure is not None:
        print(f"figure {curve_figure(data, args.metrics[0], args.figure)}")


if __name__ == "__main__":
    main()
