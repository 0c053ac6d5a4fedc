"""Health beside success in ``simlab report``: the credit-health, evaluation-health and rollout-health tables.

Owns the per-variant means and SEs over seeds of the quantities that move with the credit choice (loss
weight against token share, the baseline's shift), of each evaluation's health (overlong rate, segments
per episode, summaries holding the answer), and of the rollouts' health in training and in each evaluation
(tied prompt groups, the reward per rollout beside per row, summary length by compaction index); the success
rates are :mod:`simlab.analysis.report.build`'s.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from simlab import names
from simlab.analysis.report.figures import mechanism_table
from simlab.analysis.report.runs import EVAL_HEALTH, STAGES, SweepRuns, eval_health_keys
from simlab.analysis.statistics import stats

Columns = dict[str, tuple[str, str, float]]
"""A health table's quantities: name -> (label, metric suffix, scale), as :data:`EVAL_HEALTH`."""


def credit_table(sweep: SweepRuns) -> pl.DataFrame | None:
    """Per variant, each credit-health quantity averaged over training steps, then mean and SE over seeds.

    These move with the credit choice itself rather than with learning, so they differ between variants
    even when a short sweep's success rates are ties: the segment normaliser hands the longer rollouts
    more loss weight than their token share (Block 1: 80% on 65.8%), and a trajectory-group baseline
    shifts when segment counts correlate with reward. ``excess`` is weight share minus token share.
    """
    if sweep.history is None:
        return None
    table = mechanism_table(sweep.history)
    if table.height == 0:
        return None
    per_run = table.group_by("variant", "seed").agg(pl.exclude("step").mean())
    rows = []
    for variant in sweep.variants:
        g = per_run.filter(pl.col("variant") == variant)
        row: dict[str, Any] = {"variant": variant, "seeds": g.height}
        for name in ("k_sd", "k_corr", "weight_share", "token_share", "excess", "baseline_shift", "adv_error"):
            row |= _mean_se(g, name, 0.01 if name == "excess" else 1.0)
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None)


def _mean_se(frame: pl.DataFrame, column: str, scale: float = 1.0) -> dict[str, float | None]:
    """``column`` and ``column_se``: the mean over the frame's rows (seeds) and its SE (None below 2)."""
    values = frame.get_column(column).drop_nulls().drop_nans().to_numpy() * scale
    if values.size == 0:
        return {column: None, f"{column}_se": None}
    m = stats.mean_se(values)
    return {column: m.mean, f"{column}_se": None if values.size < 2 else m.se}


def evaluation_table(sweep: SweepRuns) -> pl.DataFrame | None:
    """Per variant and evaluation, the final evaluation's overlong rate, segments per episode and share of
    summaries holding the answer: mean and SE over seeds (fractions; the Markdown prints rates in percent)."""
    if sweep.history is None:
        return None
    keys = eval_health_keys()
    h = sweep.history.filter(pl.col("key").is_in(keys) & pl.col("value").is_not_nan())
    if h.height == 0:
        return None
    final = h.sort("step").group_by(["variant", "seed", "key"]).agg(pl.col("value").last())
    table = _over_seeds(final, sweep.variants, names.EVALUATIONS, EVAL_HEALTH, "evaluation")
    played = table.filter(pl.any_horizontal(pl.col(f).is_not_null() for f in EVAL_HEALTH))
    return table.filter(pl.col("evaluation").is_in(played["evaluation"].unique().to_list()))


def stage_table(sweep: SweepRuns, columns: Columns) -> pl.DataFrame | None:
    """Per variant and stage (:data:`~simlab.analysis.report.runs.STAGES`), each of ``columns``: the training
    steps' mean and each evaluation's final value per run, then mean and SE over seeds; a stage that logged
    none of them (the evaluations' group shares, the single window's compactions) is left out."""
    if sweep.history is None:
        return None
    keys = [names.metric(prefix, suffix) for prefix in STAGES.values() for _, suffix, _ in columns.values()]
    h = sweep.history.filter(pl.col("key").is_in(keys) & pl.col("value").is_not_nan())
    if h.height == 0:
        return None
    training = pl.col("key").str.starts_with(names.metric(names.TRAIN, ""))
    per_run = pl.concat([
        h.filter(training).group_by(["variant", "seed", "key"]).agg(pl.col("value").mean()),
        h.filter(~training).sort("step").group_by(["variant", "seed", "key"]).agg(pl.col("value").last()),
    ])
    table = _over_seeds(per_run, sweep.variants, STAGES, columns, "stage")
    return table.filter(pl.any_horizontal(pl.col(f).is_not_null() for f in columns))


def _over_seeds(per_run: pl.DataFrame, variants: list[str], stages: dict[str, str], columns: Columns,
                where: str) -> pl.DataFrame:
    """One row per variant and stage (its name, in column ``where``, to its metric prefix): each of ``columns``
    as the mean and SE over the seeds' values in ``per_run`` (variant, seed, key, value)."""
    rows = []
    for variant in variants:
        for name, prefix in stages.items():
            row: dict[str, Any] = {"variant": variant, where: name}
            for field, (_, suffix, _) in columns.items():
                key = names.metric(prefix, suffix)
                values = per_run.filter((pl.col("variant") == variant) & (pl.col("key") == key))
                row |= {k.replace("value", field): v for k, v in _mean_se(values, "value").items()}
            rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None)
