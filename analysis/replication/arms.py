"""A finding's arms: which of a sweep's runs each arm selects, and its outcome per seed.

An arm is a selector over the sweep's variant labels (:class:`~simlab.analysis.replication.spec.FindingRow`
``arms``); its value per seed is the row's statistic of its metric (``final``, ``auc``, ``steps_to``,
``gain``: :mod:`simlab.analysis.statistics.outcomes`) or the slope across its runs, and per held-out
episode where the runs kept their outcomes. The result is a :class:`~simlab.analysis.statistics.compare.Arm`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from simlab import names
from simlab.analysis.replication.data import SpecData, column
from simlab.analysis.replication.spec import Design, FindingRow, grid_variants, label_keys
from simlab.analysis.statistics import outcomes, stats
from simlab.analysis.statistics.compare import Arm
from simlab.errors import ConfigError, FindingsError
from simlab.sweep import labels

ROUND = 9
"""Decimals a per-seed outcome is kept at (far below any difference a finding reports)."""



def settings(variant: str) -> dict[str, str]:
    """A variant label (``task.preset=peekread-neg,train.estimator=trajectory_group``) as its settings,
    lower-cased booleans (:func:`simlab.sweep.labels.parse_label`)."""
    return {k: v.lower() if v in ("True", "False") else v for k, v in labels.parse_label(variant).items()}


def selects(variant: str, selector: Mapping[str, tuple[str, ...]]) -> bool:
    """Whether a variant label's settings match every key of ``selector``."""
    got = settings(variant)
    return all(got.get(k) in allowed for k, allowed in selector.items())


def arm_runs(frame: pl.DataFrame, selector: Mapping[str, tuple[str, ...]]) -> pl.DataFrame:
    """The runs whose variant settings match every key of ``selector``."""
    keep = [selects(v, selector) for v in frame.get_column("variant").to_list()]
    return frame.filter(pl.Series(keep, dtype=pl.Boolean))


def check_arms(row: FindingRow) -> None:
    """Each arm of ``row``, and each value an arm lists for a key, selects at least one variant its spec
    runs (a grid spec's; a sampled space's variants are not known before it runs). A misspelt value would
    otherwise read "not run" beside runs, or, one of a list, pool fewer runs than the row says."""
    text = row.spec_path.read_text(encoding="utf-8")
    _check_keys(row, label_keys(text))
    variants = grid_variants(text)
    if not variants:
        return
    runs = "; ".join(sorted(variants)[:4]) + (" ..." if len(variants) > 4 else "")
    for arm, selector in row.arms.items():
        if not any(selects(v, selector) for v in variants):
            given = ", ".join(f"{k} = {'|'.join(vs)}" for k, vs in selector.items())
            raise FindingsError(f"{row.spec_path.name}: " + FindingsError.invalid(
                f"findings.{arm}", given, f"select a variant of the spec (row {row.id}); it runs {runs}").args[0])
        for key, values in selector.items():
            for value in values if len(values) > 1 else ():  # a single value is the arm just checked
                if not any(selects(v, {**selector, key: (value,)}) for v in variants):
                    raise FindingsError(f"{row.spec_path.name}: " + FindingsError.invalid(
                        f"findings.{arm}.{key}", value, f"no variant of the spec (row {row.id}) with the arm's "
                        f"other settings has {key}={value}; it runs {runs}").args[0])


def _check_keys(row: FindingRow, known: tuple[str, ...]) -> None:
    """Each arm selects by keys the spec's labels carry (:func:`~simlab.analysis.replication.spec.label_keys`):
    a swept key path or ``variant``. A leaf key (``preset``, the spelling before labels used key paths)
    gets the key path to write."""
    for arm, selector in row.arms.items():
        for key in selector:
            if not known or key in known:
                continue
            paths = labels.leaf_paths(key, known)
            shown = f"`findings.{arm}.{key}`"
            raise FindingsError(f"{row.spec_path.name}: " + (
                f"{shown} is not a key path; write `{paths[0]}` ({labels.LEAF_KEYS})" if len(paths) == 1
                else f"{shown} is no setting the spec sweeps (row {row.id}); choose one of {sorted(known)}"))


def scale(metric: str) -> float:
    """Rates are reported in points, like the papers; any other metric in its own unit."""
    return stats.POINTS if names.is_rate(metric) else 1.0


def evaluation_of(metric: str) -> str | None:
    """The evaluation (``compacted``, ``single_window``) whose per-episode outcomes give ``metric``."""
    return next((name for name, prefix in names.EVALUATIONS.items()
                 if metric == names.metric(prefix, names.SUCCESS)), None)


def per_seed(row: FindingRow, data: SpecData, arm: str) -> dict[int, float]:
    """seed -> the arm's outcome for that seed: the row's statistic of its metric (mean over the seed's runs),
    or the slope across its runs."""
    runs = arm_runs(data.runs, row.arms[arm])
    if row.statistic == "slope":
        return _slopes(row, runs)
    if row.statistic == "final":
        values = runs.select("run_id", "seed",
                             (scale(row.metric) * pl.col(column(row.metric, "final"))).alias("value"))
    else:
        if data.history is None:
            return {}
        try:
            got = outcomes.run_outcomes(data.history, row.metric, row.statistic,  # type: ignore[arg-type]
                                        threshold=row.threshold, scale=scale(row.metric))
        except ConfigError as exc:  # an area asked of a run with one evaluation: the row's choice is named
            raise FindingsError(f"{row.spec_path.name}: {exc.under(f'findings.{row.id}')}") from None
        values = runs.select("run_id", "seed").join(got, on="run_id").select("run_id", "seed", "value")
    ordered = values.drop_nulls("value").sort("seed", "run_id")  # one order: the same sums on every run
    means = ordered.group_by("seed", maintain_order=True).agg(pl.col("value").mean())
    # a CSV round trip perturbs the last bits; arms that computed the same thing must stay identical
    return {int(s): round(float(v), ROUND) for s, v in means.iter_rows()}


def _slopes(row: FindingRow, runs: pl.DataFrame) -> dict[int, float]:
    assert row.x is not None
    y, x = column(row.metric, "final"), column(row.x, "final")
    out: dict[int, float] = {}
    for (seed,), g in runs.drop_nulls([y, x]).group_by("seed", maintain_order=True):
        xs, ys = g.get_column(x).to_numpy(), g.get_column(y).to_numpy()
        if g.height >= 2 and np.all(xs > 0) and np.all(ys > 0) and np.ptp(xs) > 0:
            out[int(seed)] = round(float(np.polyfit(np.log(xs), np.log(ys), 1)[0]), ROUND)
    return out


def arm(row: FindingRow, data: SpecData, name: str, spec: Design) -> Arm:
    """One arm's :class:`~simlab.analysis.statistics.compare.Arm`: per-seed values, per-episode ones where kept."""
    seeds = per_seed(row, data, name)
    evaluation = evaluation_of(row.metric)
    episodes = None
    if data.episodes is not None and evaluation is not None and row.statistic in ("final", "auc", "gain"):
        runs = arm_runs(data.runs, row.arms[name]).select("run_id", "seed")
        got = outcomes.episode_outcomes(data.episodes, evaluation, row.statistic)  # type: ignore[arg-type]
        if got is not None:
            episodes = got.join(runs, on="run_id").select("seed", "instance", "value")
            episodes = episodes if episodes.height else None
    rate = row.statistic == "final" and scale(row.metric) == stats.POINTS
    return Arm(seeds, episodes, spec.episodes if rate else None, shared=spec.eval_fixed)
