"""A run's outcome statistics: final success, the two learning-speed outcomes, and the learning gain.

A credit-assignment bias that scales the gradient without flipping its sign changes how fast a policy
learns, not where it ends; final success cannot show it. The speed outcomes read the evaluation curve
(``eval.every`` small, intermediate evaluations on a subset of the held-out set, ``eval.curve_episodes``):

    final      y(t_n)                                        the last evaluation (the full held-out set)
    auc        sum_k (t_k - t_{k-1}) (y_k + y_{k-1}) / 2 / (t_n - t_0)   the normalised area under the curve
    steps_to   min { t_k : y_k >= threshold }                a run that never gets there counts as t_n
                                                             and is marked censored
    gain       y(t_n) - y(t_0)                               what RL added to the step-0 evaluation (the
                                                             base model); from per-episode outcomes, on the
                                                             instances evaluated at both (:func:`run_gains`)

Rates come out in points. From per-episode outcomes, ``final`` and ``auc`` are also given per held-out
instance (the AUC over the instances evaluated at every step, the intermediate subset), which is what
lets :mod:`simlab.analysis.statistics.levels` put both seeds and instances into their SE; so is ``gain`` (paired by
instance: the intermediate subset, evaluated at step 0 and at the end); ``steps_to`` is a property
of the whole curve and has only a per-run value.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from simlab.analysis.statistics.stats import POINTS
from simlab.errors import ConfigError

Statistic = Literal["final", "auc", "steps_to", "gain"]
STATISTICS: tuple[Statistic, ...] = ("final", "auc", "steps_to", "gain")


def _two_evaluations(count: int, statistic: str) -> None:
    """Refuse a curve statistic of a run evaluated fewer than twice."""
    if count < 2:
        what = "an area" if statistic == "auc" else "a gain"
        raise ConfigError.invalid("statistic", statistic, f"{what} needs at least two evaluations, and this run "
                                  f"has {count}; choose 'final', or evaluate more often (eval.every)")


def auc(steps: npt.ArrayLike, values: npt.ArrayLike) -> float:
    """The trapezoidal area under ``values`` over ``steps`` divided by the step range (a mean level)."""
    t, y = np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64)
    _two_evaluations(t.size, "auc")
    if t[-1] <= t[0]:
        raise ConfigError.invalid("statistic", "auc", f"an area needs evaluations at two different steps, and "
                                  f"this run's are all at step {t[0]:g}; choose 'final'")
    return float(np.sum(np.diff(t) * (y[1:] + y[:-1]) / 2) / (t[-1] - t[0]))


def steps_to(steps: npt.ArrayLike, values: npt.ArrayLike, threshold: float) -> tuple[float, bool]:
    """(the first step whose value reaches ``threshold``, censored): the last step and True if none does."""
    t, y = np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64)
    reached = np.flatnonzero(y >= threshold)
    return (float(t[reached[0]]), False) if reached.size else (float(t[-1]), True)


def run_outcomes(history: pl.DataFrame, key: str, statistic: Statistic, *, threshold: float | None = None,
                 scale: float = POINTS) -> pl.DataFrame:
    """run_id, value, censored: each run's ``statistic`` of metric ``key`` from its history
    (run_id, key, step, value), the metric multiplied by ``scale`` (points for rates)."""
    curves = history.filter((pl.col("key") == key) & pl.col("value").is_not_nan()).sort("run_id", "step")
    rows = []
    for (run_id,), g in curves.group_by("run_id", maintain_order=True):
        t, y = g.get_column("step").to_numpy(), scale * g.get_column("value").to_numpy()
        value, censored = _statistic(t, y, statistic, threshold)
        rows.append({"run_id": run_id, "value": value, "censored": censored})
    return pl.DataFrame(rows, schema={"run_id": pl.String, "value": pl.Float64, "censored": pl.Boolean})


def _statistic(t: npt.NDArray[np.float64], y: npt.NDArray[np.float64], statistic: Statistic,
               threshold: float | None) -> tuple[float, bool]:
    if statistic == "final":
        return float(y[-1]), False
    if statistic == "auc":
        return auc(t, y), False
    if statistic == "gain":
        _two_evaluations(t.size, "gain")
        return float(y[-1] - y[0]), False
    if threshold is None:
        raise ConfigError.invalid("threshold", None, "steps_to needs a threshold in points")
    return steps_to(t, y, threshold)


def episode_outcomes(episodes: pl.DataFrame, evaluation: str, statistic: Statistic,
                     scale: float = POINTS) -> pl.DataFrame | None:
    """run_id, instance, value: each held-out instance's ``final`` success or its ``auc`` over the steps
    it was evaluated at every time, from per-episode outcomes (run_id, step, evaluation, instance,
    success); ``None`` for ``steps_to``, which has no per-instance form."""
    if statistic == "steps_to":
        return None
    rows = episodes.filter(pl.col("evaluation") == evaluation).select(
        "run_id", "step", "instance", (scale * pl.col("success").cast(pl.Float64)).alias("value"))
    if statistic == "final":
        last = rows.group_by("run_id").agg(pl.col("step").max().alias("last"))
        return rows.join(last, on="run_id").filter(pl.col("step") == pl.col("last")).select(
            "run_id", "instance", "value")
    steps = rows.group_by("run_id").agg(pl.col("step").n_unique().alias("evaluations"))
    if steps.height:
        _two_evaluations(int(steps.get_column("evaluations").min()), statistic)  # type: ignore[arg-type]
    if statistic == "gain":
        return _instance_gain(rows)
    every = rows.join(steps, on="run_id").filter(
        pl.col("step").n_unique().over("run_id", "instance") == pl.col("evaluations"))
    by = ("run_id", "instance")
    trapezoids = every.sort(*by, "step").with_columns(
        (pl.col("step").diff().over(by) * (pl.col("value") + pl.col("value").shift(1)).over(by) / 2).alias("area"))
    return trapezoids.group_by(*by).agg(
        (pl.col("area").sum() / (pl.col("step").max() - pl.col("step").min())).alias("value")
    ).sort(*by)


def _instance_gain(rows: pl.DataFrame) -> pl.DataFrame:
    """run_id, instance, value: last minus first evaluation of each instance evaluated at both of its
    run's first and last steps."""
    ends = rows.group_by("run_id").agg(pl.col("step").min().alias("first"), pl.col("step").max().alias("last"))
    at = rows.join(ends, on="run_id")
    first = at.filter(pl.col("step") == pl.col("first")).select("run_id", "instance", pl.col("value").alias("y0"))
    last = at.filter(pl.col("step") == pl.col("last")).select("run_id", "instance", pl.col("value").alias("y1"))
    return first.join(last, on=("run_id", "instance")).select(
        "run_id", "instance", (pl.col("y1") - pl.col("y0")).alias("value")).sort("run_id", "instance")


def run_gains(episodes: pl.DataFrame, evaluation: str, scale: float = POINTS) -> pl.DataFrame:
    """run_id, value, se, instances: each run's ``gain`` paired by instance (the mean of its per-instance
    gains, :func:`episode_outcomes`) and the SE of that mean over its instances. The logged curve's
    ``y(t_n) - y(t_0)`` (:func:`run_outcomes`) compares the whole final set with step 0's subset instead."""
    per = episode_outcomes(episodes, evaluation, "gain", scale)
    assert per is not None  # gain has a per-instance form
    return per.group_by("run_id").agg(
        pl.col("value").mean(), (pl.col("value").std() / pl.len().sqrt()).alias("se"), pl.len().alias("instances"))
