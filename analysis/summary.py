"""A sweep's per-point summary: each grid point's completed seeds, the objective's mean and SE over them.

Written next to the runner's ``trials.csv`` when ``simlab sweep`` or ``simlab worker`` ends
(``summary.csv`` and ``summary.md``). The arithmetic is :func:`simlab.analysis.statistics.stats.mean_se`, the same
code the report uses; it is the objective's own unit and seed spread only, since the objective may be
any metric (``simlab report`` adds the binomial part for success rates).
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from simlab.analysis.statistics import stats

SCHEMA = {"point": pl.Utf8, "n": pl.Int64, "mean": pl.Float64, "se": pl.Float64, "diverged": pl.Int64,
          "failed": pl.Int64}


def point_summary(trials: pl.DataFrame, direction: str) -> pl.DataFrame:
    """Per grid point of ``trials`` (the runner's ``trials.csv``): completed seeds ``n``, the objective's
    mean and SE over them (null SE for one seed), and how many trials diverged or failed. Best first."""
    rows = []
    for (point,), g in trials.group_by("point", maintain_order=True):
        done = g.filter(pl.col("state") == "COMPLETE").get_column("value").drop_nulls().to_numpy()
        m = stats.mean_se(done) if done.size else None
        rows.append({
            "point": point,
            "n": int(done.size),
            "mean": None if m is None else m.mean,
            "se": None if m is None or not math.isfinite(m.se) else m.se,
            "diverged": int((g.get_column("failure") == "diverged").sum()),
            "failed": int((g.get_column("state") == "FAIL").sum()),
        })
    return pl.DataFrame(rows, schema=SCHEMA).sort("mean", descending=direction == "maximize", nulls_last=True)


def write_summary(trials_csv: Path, *, sweep: str, metric: str, direction: str) -> Path:
    """``summary.csv`` and ``summary.md`` beside ``trials_csv``; the CSV's path."""
    trials = pl.read_csv(trials_csv, schema_overrides={"value": pl.Float64, "failure": pl.Utf8, "point": pl.Utf8})
    summary = point_summary(trials.with_columns(pl.col("failure").fill_null("")), direction)
    path = trials_csv.with_name("summary.csv")
    summary.write_csv(path)
    lines = [
        f"# sweep {sweep}: {metric} ({direction})",
        "",
        "| point | n | mean | se | diverged | failed (incl. killed, retried) |",
        "|---|---|---|---|---|---|",
    ]
    for r in summary.iter_rows(named=True):
        mean = "-" if r["mean"] is None else f"{r['mean']:.4f}"
        se = "-" if r["se"] is None else f"{r['se']:.4f}"
        lines.append(f"| {r['point']} | {r['n']} | {mean} | {se} | {r['diverged']} | {r['failed']} |")
    path.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
