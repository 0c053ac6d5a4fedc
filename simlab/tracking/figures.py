"""The figures a run's sink draws: pure functions of the metric rows, so they can be tested and redrawn
from a store (the learning curve, the segment-count histogram over training).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: figures are rendered in workers and in CI

import matplotlib.pyplot as plt
import polars as pl

from simlab import names
from simlab.names import SEG_COUNT


def learning_curve_png(
    rows: Sequence[Mapping[str, float]], path: Path, *, keys: Sequence[str] = ()
) -> Path | None:
    """Plot ``keys`` (default: every success, return and compaction-rate metric) against step."""
    present = sorted({k for row in rows for k in row if k != "step"})
    wanted = [k for k in keys if k in present] or [
        k
        for k in present
        if k.rsplit("/", 1)[-1] in {names.SUCCESS, names.RETURN, names.COMPACTION_RATE}
    ]
    if not wanted:
        return None
    fig = plt.figure(figsize=(6.4, 3.6), dpi=100)
    ax = fig.add_axes((0.1, 0.14, 0.86, 0.8))
    for key in wanted:
        pts = [(row["step"], row[key]) for row in rows if key in row and math.isfinite(row[key])]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=key)
    ax.set_xlabel("training step")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.savefig(path)
    plt.close(fig)
    return path


def _segment_bucket(key: str) -> int | None:
    # the credit layer's health summary writes counts as ``segments/count_<k>`` (optionally prefixed)
    head, sep, tail = key.rpartition(SEG_COUNT)
    if not sep or (head and not head.endswith("/")) or not tail.isdigit():
        return None
    return int(tail)


def segment_histogram_table(rows: Sequence[Mapping[str, float]]) -> pl.DataFrame:
    """Long table (step, segments, rollouts, share): the segment-count distribution at every step."""
    records: list[tuple[int, int, float]] = []
    for row in rows:
        for key, value in row.items():
            bucket = _segment_bucket(key)
            if bucket is not None and math.isfinite(value):
                records.append((int(row["step"]), bucket, float(value)))
    frame = pl.DataFrame(
        records, schema={"step": pl.Int64, "segments": pl.Int64, "rollouts": pl.Float64}, orient="row"
    )
    if frame.height == 0:
        return frame.with_columns(pl.lit(0.0).alias("share"))
    frame = frame.group_by("step", "segments").agg(pl.col("rollouts").sum()).sort("step", "segments")
    return frame.with_columns((pl.col("rollouts") / pl.col("rollouts").sum().over("step")).alias("share"))


def segment_histogram_images(table: pl.DataFrame, snapshots: int = 6) -> list[tuple[int, Any]]:
    """(step, PIL image) at up to ``snapshots`` evenly spaced steps, for MLflow's step slider.

    Drawn with PIL rather than matplotlib: a bar chart needs no layout engine, and figures are drawn
    in every trial, where matplotlib's ~0.2 s per figure would count against the tracking overhead.
    """
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=13)

    steps = table.get_column("step").unique().sort().to_list()
    if not steps:
        return []
    picks = sorted({steps[round(i * (len(steps) - 1) / max(snapshots - 1, 1))] for i in range(snapshots)})
    top = int(table.get_column("segments").max())  # type: ignore[arg-type]
    width, height, left, bottom, pad = 400, 260, 44, 34, 26
    slot = (width - left - pad) / max(top, 1)
    out: list[tuple[int, Any]] = []
    for step in picks:
        at = table.filter(pl.col("step") == step)
        image = Image.new("RGB", (width, height), "white")
        draw = ImageDraw.Draw(image)
        y0, y1 = height - bottom, pad
        draw.line([(left, y1), (left, y0), (width - pad, y0)], fill="black")
        for frac in (0.0, 0.5, 1.0):
            y = y0 - frac * (y0 - y1)
            draw.text((6, y - 7), f"{frac:.1f}", fill="black", font=font)
        for segs, share in zip(
            at.get_column("segments").to_list(), at.get_column("share").to_list(), strict=True
        ):
            x = left + (segs - 1) * slot
            draw.rectangle(
                [x + 0.15 * slot, y0 - share * (y0 - y1), x + 0.85 * slot, y0], fill=(31, 119, 180)
            )
            draw.text((x + 0.45 * slot, y0 + 8), str(segs), fill="black", font=font)
        draw.text(
            (left, 4), f"share of rollouts by segments per rollout, step {step}", fill="black", font=font
        )
        out.append((int(step), image))
    return out
