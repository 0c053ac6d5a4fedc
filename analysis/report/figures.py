"""The report's figures, drawn from a sweep's runs (:class:`simlab.analysis.report.runs.SweepRuns`).

Every figure has a legend or direct labels, a title that fits, and axis units; an arm with a single
point (an evaluation-only ``steps=0`` arm) is a marker with its interval, never a hidden line. A figure
with no data is skipped and the report says why.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: reports are drawn in CI and at the end of a sweep

import matplotlib.pyplot as plt
import numpy as np
import polars as pl

from simlab.analysis.report.runs import CREDIT_KEYS, EVALUATIONS, HEALTH_KEYS, SEGMENT_KEY, SweepRuns

DPI = 90
MECHANISMS = {
    "k_sd": ("in-group SD of K", "segments"),
    "k_corr": ("in-group corr(K, R)", "correlation"),
    "baseline_shift": ("baseline shift (trajectory vs rollout group)", "reward units"),
    "excess": ("longer rollouts' weight share - token share", "points"),
}
"""The mechanism metrics drawn over training: key -> (title, y unit)."""


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


CROWDED = 5
"""More variants than this and a curve figure's legend goes beside the plot instead of on it."""


def _legend(ax: Any, **kwargs: Any) -> None:
    """A legend only where something carries a label (matplotlib warns on an empty one)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kwargs)


def over_steps(values: pl.DataFrame, scale: float = 1.0) -> pl.DataFrame:
    """variant, step, mean, se, seeds: one metric's per-seed ``values`` at each step, mean and SE over seeds."""
    at = values.filter(pl.col("value").is_not_nan())
    out = at.group_by("variant", "step").agg(
        (scale * pl.col("value")).mean().alias("mean"),
        ((scale * pl.col("value")).std(ddof=1) / pl.len().sqrt()).alias("se"),
        pl.len().alias("seeds"),
    )
    return out.sort("variant", "step")


def _lines_with_bands(ax: Any, curves: pl.DataFrame, variants: list[str]) -> None:
    """Each variant's curve (:func:`over_steps`) with a +-SE band; a single point as a marker with its error bar."""
    for variant in variants:
        curve = curves.filter(pl.col("variant") == variant)
        if curve.height == 0:
            continue
        x, m, se = (curve.get_column(k).to_numpy().astype(float) for k in ("step", "mean", "se"))
        se = np.nan_to_num(se)
        if x.size == 1:
            ax.errorbar(x, m, yerr=se, fmt="o", ms=6, capsize=4, label=variant)
        else:
            (line,) = ax.plot(x, m, marker="o", ms=3, label=variant)
            ax.fill_between(x, m - se, m + se, color=line.get_color(), alpha=0.2, lw=0)


def learning_curves_png(sweep: SweepRuns, path: Path) -> Path | None:
    """Held-out success over training per variant, mean over seeds with an SE band, one panel per evaluation
    the runs played (a sweep with ``eval.single_window = false`` gets one)."""
    assert sweep.history is not None
    curves = {name: over_steps(sweep.history.filter(pl.col("key") == key), 100.0) for name, key in EVALUATIONS.items()}
    curves = {name: c for name, c in curves.items() if c.height}
    if not curves:
        return None
    fig, axes = plt.subplots(1, len(curves), figsize=(5.5 * len(curves) + 1, 4), sharey=True, squeeze=False)
    for ax, (name, curve) in zip(axes[0], curves.items(), strict=True):
        _lines_with_bands(ax, curve, sweep.variants)
        ax.set_title(f"{name.replace('_', '-')} success (mean ± SE over seeds)", fontsize="medium")
        ax.set_xlabel("RL step")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("held-out success (points)")
    if len(sweep.variants) > CROWDED:  # outside the plot, where it hides no curve
        _legend(axes[0][-1], fontsize="x-small", loc="center left", bbox_to_anchor=(1.02, 0.5))
    else:
        _legend(axes[0][0], fontsize="x-small")
    return _save(fig, path)


def segment_table(history: pl.DataFrame) -> pl.DataFrame:
    """variant, step, segments, rollouts (summed over seeds), share of the step's rollouts."""
    counts = history.filter(pl.col("key").str.starts_with(SEGMENT_KEY) & pl.col("value").is_not_nan())
    counts = counts.with_columns(
        pl.col("key").str.strip_prefix(SEGMENT_KEY).cast(pl.Int64, strict=False).alias("segments")
    ).drop_nulls("segments")
    table = counts.group_by("variant", "step", "segments").agg(pl.col("value").sum().alias("rollouts"))
    return table.sort("variant", "step", "segments").with_columns(
        (pl.col("rollouts") / pl.col("rollouts").sum().over("variant", "step")).alias("share")
    )


def evaluation_segments(sweep: SweepRuns) -> pl.DataFrame | None:
    """variant, segments, share: how many segments the final compacted evaluation's episodes took."""
    if sweep.episodes is None:
        return None
    e = sweep.episodes.filter(pl.col("evaluation") == "compacted")
    e = e.filter(pl.col("step") == pl.col("step").max().over("run_id"))
    if e.height == 0:
        return None
    counts = e.group_by("variant", "segments").len()
    return counts.with_columns((pl.col("len") / pl.col("len").sum().over("variant")).alias("share"))


def segment_counts_png(sweep: SweepRuns, path: Path) -> Path | None:
    """The segment count K per episode: at the final compacted evaluation, one bar group per K (every arm,
    an evaluation-only one included), and during training, the share of rollouts by K per arm."""
    assert sweep.history is not None
    train = segment_table(sweep.history)
    final = evaluation_segments(sweep)
    trained = [v for v in sweep.variants if train.filter(pl.col("variant") == v).height]
    panels = (1 if final is not None else 0) + len(trained)
    if panels == 0:
        return None
    fig, axes = _grid(panels)
    if final is not None:
        _segment_bars(axes[0], final, sweep.variants)
    top = max(2, int(train.get_column("segments").max() or 1))  # type: ignore[arg-type]
    colours = plt.get_cmap("viridis")(np.linspace(0.0, 0.9, top))
    for ax, variant in zip(axes[panels - len(trained):], trained, strict=True):
        wide = train.filter(pl.col("variant") == variant).pivot(on="segments", index="step", values="share")
        wide = wide.sort("step").fill_null(0.0)
        shares = [wide.get_column(str(k)).to_numpy() if str(k) in wide.columns else np.zeros(wide.height)
                  for k in range(1, top + 1)]
        ax.stackplot(wide.get_column("step").to_numpy(), shares, labels=[f"K = {k}" for k in range(1, top + 1)],
                     colors=colours)
        ax.set_title(f"training rollouts by K:\n{variant}", fontsize="x-small")
        ax.set_ylim(0, 1)
        ax.set_xlabel("RL step")
        ax.set_ylabel("share of rollouts")
        _legend(ax, fontsize="xx-small", loc="lower left", ncols=2)
    return _save(fig, path)


def _segment_bars(ax: Any, final: pl.DataFrame, variants: list[str]) -> None:
    ks = sorted(final.get_column("segments").unique().to_list())
    width = 0.8 / max(len(variants), 1)
    for i, variant in enumerate(variants):
        share = dict(final.filter(pl.col("variant") == variant).select("segments", "share").iter_rows())
        if share:
            ax.bar(np.arange(len(ks)) + i * width, [share.get(k, 0.0) for k in ks], width, label=variant)
    ax.set_xticks(np.arange(len(ks)) + width * (len(variants) - 1) / 2, [str(k) for k in ks])
    ax.set_xlabel("segments per episode K")
    ax.set_ylabel("share of episodes")
    ax.set_title("final compacted evaluation", fontsize="small")
    _legend(ax, fontsize="xx-small")


def _grid(n: int) -> tuple[Any, list[Any]]:
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def compaction_health_png(sweep: SweepRuns, path: Path) -> Path | None:
    """Compaction rate against the success of rollouts that compacted, over training and as a path.

    The seed's healthy pattern is both rising together (the path runs up and to the right); a rate that
    climbs while the conditional success falls means the policy compacts more and summarises worse.
    """
    assert sweep.history is not None
    rate_key, success_key = HEALTH_KEYS
    means = (
        sweep.history.filter(pl.col("key").is_in(HEALTH_KEYS) & pl.col("value").is_not_nan())
        .group_by("variant", "step", "key")
        .agg(pl.col("value").mean())
        .pivot(on="key", index=["variant", "step"], values="value")
    )
    if not {rate_key, success_key} <= set(means.columns):
        return None
    means = means.drop_nulls([rate_key, success_key]).sort("step")
    if means.height == 0:
        return None
    fig, (over_time, path_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for variant in sweep.variants:
        v = means.filter(pl.col("variant") == variant)
        if v.height == 0:
            continue
        step = v.get_column("step").to_numpy()
        x, y = 100 * v.get_column(rate_key).to_numpy(), 100 * v.get_column(success_key).to_numpy()
        (line,) = over_time.plot(step, x, marker="o", ms=3, label=variant)
        over_time.plot(step, y, marker="x", ms=4, ls="--", color=line.get_color())
        path_ax.plot(x, y, marker="o", ms=3, color=line.get_color(), label=variant)
        path_ax.plot(x[-1:], y[-1:], marker="s", ms=7, color=line.get_color())  # the last step
    over_time.set_xlabel("RL step")
    over_time.set_ylabel("points")
    over_time.set_title("compaction rate (solid), success of compacted rollouts (dashed)", fontsize="small")
    _legend(over_time, fontsize="x-small")
    path_ax.set_xlabel("compaction rate (% of rollouts that compacted)")
    path_ax.set_ylabel("success of compacted rollouts (points)")
    path_ax.set_title("one against the other (square: last step; healthy: up and right)", fontsize="small")
    for ax in (over_time, path_ax):
        ax.grid(alpha=0.3)
    return _save(fig, path)


def mechanism_table(history: pl.DataFrame) -> pl.DataFrame:
    """variant, seed, step and one column per :data:`MECHANISMS` key (``excess`` in points)."""
    wanted = {v: k for k, v in CREDIT_KEYS.items()}
    h = history.filter(pl.col("key").is_in(list(wanted)) & pl.col("value").is_not_nan())
    wide = h.with_columns(pl.col("key").replace_strict(wanted)).pivot(
        on="key", index=["variant", "seed", "step"], values="value")
    wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(n) for n in CREDIT_KEYS if n not in wide.columns)
    return wide.with_columns((100 * (pl.col("weight_share") - pl.col("token_share"))).alias("excess"))


def mechanisms_png(sweep: SweepRuns, path: Path) -> Path | None:
    """The credit mechanisms' conditions over RL steps, one line per arm with a +-SE band over seeds:
    in-group SD of K, in-group corr(K, R), the baseline shift, and the longer rollouts' excess weight."""
    assert sweep.history is not None
    table = mechanism_table(sweep.history)
    if table.height == 0:
        return None
    fig, axes = plt.subplots(1, len(MECHANISMS), figsize=(4.0 * len(MECHANISMS), 3.6), squeeze=False)
    for ax, (key, (title, unit)) in zip(axes[0], MECHANISMS.items(), strict=True):
        curve = over_steps(table.select("variant", "step", pl.col(key).alias("value")).drop_nulls("value"))
        _lines_with_bands(ax, curve, sweep.variants)
        ax.set_title(title, fontsize="small")
        ax.set_xlabel("RL step")
        ax.set_ylabel(unit)
        ax.axhline(0.0, color="grey", lw=0.6)
        ax.grid(alpha=0.3)
    _legend(axes[0][0], fontsize="xx-small")
    return _save(fig, path)


def differences_png(table: pl.DataFrame, path: Path) -> Path | None:
    """A forest plot: each variant's difference from the baseline with its 95% interval, per evaluation."""
    rows = table.filter(pl.col("difference").is_not_null())
    if rows.height == 0:
        return None
    evaluations = rows.get_column("evaluation").unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(1, len(evaluations), figsize=(5.5 * len(evaluations), 0.6 + 0.45 * rows.height),
                             squeeze=False, sharey=True)
    for ax, name in zip(axes[0], evaluations, strict=True):
        r = rows.filter(pl.col("evaluation") == name)
        y = np.arange(r.height)[::-1]
        d = r.get_column("difference").to_numpy()
        low, high = r.get_column("diff_ci_low").to_numpy(), r.get_column("diff_ci_high").to_numpy()
        ax.errorbar(d, y, xerr=[d - low, high - d], fmt="o", capsize=4, label="difference, 95% interval")
        ax.axvline(0.0, color="grey", lw=0.8)
        ax.set_yticks(y, r.get_column("variant").to_list(), fontsize="x-small")
        ax.set_xlabel(f"{name.replace('_', '-')} success - baseline (points)")
        ax.set_title(f"{name.replace('_', '-')}: against {r.get_column('baseline')[0]}", fontsize="small")
        ax.grid(alpha=0.3, axis="x")
        _legend(ax, fontsize="x-small")
    return _save(fig, path)


FIGURES: dict[str, Callable[[SweepRuns, Path], Path | None]] = {
    "learning_curves.png": learning_curves_png,
    "segment_counts.png": segment_counts_png,
    "compaction_health.png": compaction_health_png,
    "mechanisms.png": mechanisms_png,
}
"""The figures drawn from the runs alone, by file name (``differences.png`` also needs the variant table)."""


def write_figures(sweep: SweepRuns, table: pl.DataFrame, folder: Path) -> tuple[list[Path], list[str]]:
    """(figures written, why each other one was not): a figure with no data is skipped and said so."""
    drawn: dict[str, tuple[Path | None, str]]  # file name -> (its path or None, why it is skipped)
    if sweep.history is None:
        drawn = {name: (None, "no metric histories were read") for name in FIGURES}
    else:
        drawn = {name: (draw(sweep, folder / name), "the finished runs logged none of its metrics")
                 for name, draw in FIGURES.items()}
    drawn["differences.png"] = (differences_png(table, folder / "differences.png"),
                                "no variant has a difference from the baseline")
    written = [path for path, _ in drawn.values() if path is not None]
    return written, [f"{name}: {why}" for name, (path, why) in drawn.items() if path is None]


def interval(rows: list[dict[str, Any]], prefix: str = "") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(difference, low, high) of ``rows``' ``<prefix>difference`` and its 95% interval
    (``<prefix>ci_low``, ``<prefix>ci_high``); a missing bound is the difference itself (no bar that side),
    a bound of 0 is a bound."""
    d = np.array([float(r[f"{prefix}difference"]) for r in rows])
    low = np.array([v if (v := r[f"{prefix}ci_low"]) is not None else x for r, x in zip(rows, d, strict=True)])
    high = np.array([v if (v := r[f"{prefix}ci_high"]) is not None else x for r, x in zip(rows, d, strict=True)])
    return d, low, high


def dose_response_png(rows: list[dict[str, Any]], path: Path, *, title: str) -> Path | None:
    """A findings campaign's effect against its dose: treatment - baseline with its 95% interval at each
    dose (``dose`` of the findings rows), the control's difference at its dose as a hollow marker, and 0."""
    rows = [r for r in rows if r.get("dose") is not None and r.get("difference") is not None]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    x = np.array([float(r["dose"]) for r in rows])
    d, low, high = interval(rows)
    ax.errorbar(x, d, yerr=[d - low, high - d], fmt="o-", capsize=4, label="treatment - baseline, 95% interval")
    control = [r for r in rows if r.get("control_dose") is not None and r.get("control_difference") is not None]
    if control:
        cd, clow, chigh = interval(control[:1], "control_")
        ax.errorbar([float(control[0]["control_dose"])], cd, yerr=[cd - clow, chigh - cd],
                    fmt="s", mfc="none", capsize=4, label="control (mechanism absent)")
    if rows[0].get("published") is not None:
        ax.axhline(float(rows[0]["published"]), color="tab:red", ls="--", lw=0.8, label="published delta")
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xlabel(str(rows[0].get("dose_label") or "dose"))
    ax.set_ylabel(f"difference ({rows[0].get('unit', 'points')})")
    ax.set_title(textwrap.fill(title, 90), fontsize="small")
    ax.grid(alpha=0.3)
    _legend(ax, fontsize="x-small")
    return _save(fig, path)
