"""``simlab report``: a sweep's variants with every difference beside its standard error, and figures.

Owns pooling each grid cell's seeds into a variant, the variant and learning-speed tables, and writing
the report; reading the runs is :mod:`.runs`, the figures :mod:`.figures`, the health tables :mod:`.health`,
the Markdown :mod:`.text`, and the arithmetic :mod:`simlab.analysis.statistics.compare` (means and
differences with SEs over seeds and held-out instances, power, TOST), the same code ``simlab findings``
judges its rows with. The published ablations, from :func:`simlab.analysis.audit.table.ablation_table`, are
set beside the variants by :mod:`.published`.

Units: success rates in percentage points; learning speed as the normalised area under the evaluation
curve (points) and the RL steps to a threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from simlab.analysis.report.figures import FIGURES, write_figures
from simlab.analysis.report.health import credit_table, evaluation_table, stage_table
from simlab.analysis.report.published import against_published
from simlab.analysis.report.runs import (
    EVALUATIONS,
    GROUP_HEALTH,
    INDEX_HEALTH,
    TOKENS_KEY,
    SweepRuns,
    load_runs,
    shared_held_out,
)
from simlab.analysis.statistics import compare, outcomes, power, stats
from simlab.analysis.statistics.compare import Arm, Judgement
from simlab.analysis.tables import check_output_dir, write_tables
from simlab.errors import ReportError
from simlab.sweep import labels

ARTIFACT_PATH = "report"
STEM = "report"
EFFECT = 5.0
"""Default equivalence margin and effect size, in points (``--effect``)."""


@dataclass(frozen=True)
class Levels:
    """What the report's statements are made at."""

    effect: float = EFFECT
    """The TOST margin (a tie is decided within +-effect) and the effect seeds are counted for."""
    alpha: float = power.ALPHA
    power: float = power.POWER


# ------------------------------------------------------------------------------------------ arms
def default_baseline(sweep: SweepRuns) -> str:
    """The sweep's named baseline when it is a variant (read by key path where the store logged it with leaf
    keys), else the first variant in grid order."""
    hint = sweep.baseline_hint
    if hint is not None and hint not in sweep.variants:
        hint = labels.respelt(hint, sweep.variants)
    return str(hint) if hint in sweep.variants else sweep.variants[0]


def arms(sweep: SweepRuns, evaluation: str, statistic: outcomes.Statistic = "final",
         threshold: float | None = None) -> dict[str, Arm]:
    """Each variant's arm for one evaluation and outcome statistic: per-seed values (points, or steps for
    ``steps_to``), and per-episode ones where the runs kept their outcomes."""
    runs = sweep.runs.filter((pl.col("status") == "FINISHED") & pl.col("episodes").is_not_null())
    shared = shared_held_out(runs)
    got = None if sweep.episodes is None else outcomes.episode_outcomes(sweep.episodes, evaluation, statistic)
    got = got if got is not None and got.height else None
    if statistic == "final":
        per_run = runs.select("run_id", (100.0 * pl.col(evaluation)).alias("value")).drop_nulls()
    elif statistic == "gain" and got is not None:  # paired by instance, not the curve's ends
        per_run = outcomes.run_gains(sweep.episodes, evaluation).select("run_id", "value")  # type: ignore[arg-type]
    else:
        assert sweep.history is not None
        per_run = outcomes.run_outcomes(sweep.history, EVALUATIONS[evaluation], statistic, threshold=threshold)
    per_run = per_run.join(runs.select("run_id", "variant", "seed", "episodes"), on="run_id")
    per_episode = None if got is None else got.join(runs.select("run_id", "variant", "seed"), on="run_id")
    out = {}
    for variant in sweep.variants:
        mine = per_run.filter(pl.col("variant") == variant)
        eps = None if per_episode is None else per_episode.filter(pl.col("variant") == variant)
        out[variant] = Arm(
            seeds=dict(zip(mine.get_column("seed").to_list(), mine.get_column("value").to_list(), strict=True)),
            episodes=None if eps is None or eps.height == 0 else eps.select("seed", "instance", "value"),
            rate_episodes=int(mine.get_column("episodes").min()) if statistic == "final" and mine.height else None,  # type: ignore[arg-type]
            shared=shared,
        )
    return out


# ------------------------------------------------------------------------------------ the tables
VARIANT_SCHEMA = {
    "evaluation": pl.String, "statistic": pl.String, "variant": pl.String, "baseline": pl.String,
    "horizon": pl.Float64, "seeds": pl.Int64, "missing": pl.Int64, "unfinished": pl.Int64, "instances": pl.Int64,
    "mean": pl.Float64, "se": pl.Float64, "df": pl.Float64, "design": pl.String, "ci_low": pl.Float64,
    "ci_high": pl.Float64, "iqm": pl.Float64, "iqm_low": pl.Float64, "iqm_high": pl.Float64,
    "difference": pl.Float64, "se_difference": pl.Float64,
    "sigma": pl.Float64, "diff_df": pl.Float64, "diff_design": pl.String, "diff_ci_low": pl.Float64,
    "diff_ci_high": pl.Float64, "mde": pl.Float64, "tost_p": pl.Float64, "verdict": pl.String,
    "seeds_to_decide": pl.Int64, "horizon_ratio": pl.Float64, "like_for_like": pl.Boolean, "rank": pl.Int64,
    "alpha": pl.Float64, "power": pl.Float64, "effect": pl.Float64,
}
"""The columns of :func:`variant_table` (and of ``report.csv``)."""


def variant_table(sweep: SweepRuns, baseline: str | None = None, levels: Levels | None = None,
                  statistics: tuple[tuple[str, outcomes.Statistic], ...] = (("compacted", "final"),
                                                                            ("single_window", "final")),
                  threshold: float | None = None) -> pl.DataFrame:
    """One row per (evaluation and statistic, variant): the mean with an SE over seeds and instances and
    its t interval, the IQM over seeds, the difference from the baseline (paired by seed and instance
    where possible) with its SE, sigma and interval, the effect detectable at the stated power, a TOST
    within +-effect, the seeds that would decide a row that is not, like-for-like, and a tie-aware rank;
    ``missing`` counts finished runs without the metric and ``unfinished`` the runs that did not finish."""
    levels = levels or Levels()
    baseline = default_baseline(sweep) if baseline is None else baseline
    if baseline not in sweep.variants:
        respelt = labels.respelt(baseline, sweep.variants)
        allowed = f"write {respelt!r} ({labels.LEAF_KEYS})" if respelt else \
            f"choose one of the variants: {', '.join(sweep.variants)}"
        raise ReportError(f"`--baseline={baseline!r}` is invalid; {allowed}", key="--baseline", value=baseline)
    parts = [_one_table(sweep, baseline, evaluation, statistic, levels, threshold)
             for evaluation, statistic in statistics]
    measured = [part for part in parts if part["mean"].is_not_null().any()]
    return pl.concat(measured or parts, how="diagonal_relaxed")  # an evaluation no run played is left out


def _one_table(sweep: SweepRuns, baseline: str, evaluation: str, statistic: outcomes.Statistic,
               levels: Levels, threshold: float | None) -> pl.DataFrame:
    by_arm = arms(sweep, evaluation, statistic, threshold)
    horizon = _horizons(sweep, evaluation)
    rows = []
    for variant, arm in by_arm.items():
        est = compare.estimate(arm)
        mine = sweep.runs.filter(pl.col("variant") == variant)
        done = mine.filter(pl.col("status") == "FINISHED")
        row: dict[str, Any] = {"evaluation": evaluation, "statistic": statistic, "variant": variant,
                               "baseline": baseline, "horizon": horizon.get(variant), "seeds": 0, "instances": 0,
                               "missing": done.filter(pl.col(evaluation).is_null()).height,
                               "unfinished": mine.height - done.height,
                               "alpha": levels.alpha, "power": levels.power, "effect": levels.effect}
        if est is not None:
            low, high = est.interval()
            row |= {"seeds": est.seeds, "instances": est.instances, "mean": est.mean, "se": est.se, "df": est.df,
                    "design": est.design, "ci_low": low, "ci_high": high, **_iqm(list(arm.seeds.values()))}
        if variant != baseline:
            row |= _against(arm, by_arm[baseline], levels, horizon.get(variant), horizon.get(baseline))
        rows.append(row)
    ranks = _ranks(by_arm, rows)
    for row in rows:
        row["rank"] = ranks.get(row["variant"])
    return pl.DataFrame(rows, schema=VARIANT_SCHEMA)


def _iqm(values: list[float]) -> dict[str, float | None]:
    """The interquartile mean over seeds and its 95% percentile bootstrap interval (rliable's reading)."""
    values = sorted(v for v in values if v is not None and math.isfinite(v))  # the interval ignores row order
    if not values:
        return {"iqm": None, "iqm_low": None, "iqm_high": None}
    low, high = stats.bootstrap_ci(values, "iqm")
    return {"iqm": stats.iqm(values), "iqm_low": low, "iqm_high": high}


def _horizons(sweep: SweepRuns, evaluation: str) -> dict[str, float | None]:
    column = f"horizon_{evaluation}"
    return {v: next(iter(sweep.runs.filter(pl.col("variant") == v).get_column(column).drop_nulls()), None)
            for v in sweep.variants}


def _against(arm: Arm, base: Arm, levels: Levels, h: float | None, h_base: float | None) -> dict[str, Any]:
    d = compare.difference(arm, base)
    if d is None:
        return stats.horizon_match(h, h_base)
    j = compare.judge(d, margin=levels.effect, alpha=levels.alpha, power_=levels.power)
    low, high = j.interval()
    return {
        "difference": d.mean, "se_difference": d.se, "sigma": None if math.isnan(j.sigma) else j.sigma,
        "diff_df": d.df, "diff_design": d.design, "diff_ci_low": low, "diff_ci_high": high,
        "mde": None if math.isnan(j.mde) else j.mde, "tost_p": None if j.tost is None else j.tost.p,
        "verdict": verdict_text(j), "seeds_to_decide": None if j.significant or j.decided_tie else j.seeds_to_decide(),
        **stats.horizon_match(h, h_base),
    }


def verdict_text(j: Judgement) -> str:
    """"differs", "tie" (TOST within the margin) or "undecided"."""
    if j.significant:
        return "differs"
    return "tie" if j.decided_tie else "undecided"


def _ranks(by_arm: dict[str, Arm], rows: list[dict[str, Any]]) -> dict[str, int]:
    """Ranks over the measured variants by the findings' rule (t tests Holm-adjusted over every pair,
    :func:`stats.rank_with_ties`), with paired differences between arms where they exist."""
    measured = [r for r in rows if r.get("mean") is not None]
    if not measured:
        return {}
    variants = [r["variant"] for r in measured]
    pair_se, pair_df = (np.full((len(variants), len(variants)), np.nan) for _ in range(2))
    for a, i in enumerate(variants):
        for b, j in enumerate(variants):
            got = compare.difference(by_arm[j], by_arm[i]) if a != b else None
            if got is not None:
                pair_se[a, b], pair_df[a, b] = got.se, got.df
    ses = [math.nan if r["se"] is None else r["se"] for r in measured]
    dfs = [math.nan if r.get("df") is None else r["df"] for r in measured]
    ranks = stats.rank_with_ties([r["mean"] for r in measured], ses, dfs, pair_se=pair_se, pair_df=pair_df)
    return dict(zip(variants, ranks.tolist(), strict=True))


def speed_table(sweep: SweepRuns, baseline: str | None, levels: Levels, threshold: float | None) -> pl.DataFrame | None:
    """The learning-speed outcomes of the compacted evaluation (AUC; steps to ``threshold`` when given) of
    the variants whose runs evaluated more than once, as :func:`variant_table` rows; ``None`` when none did.
    The baseline is the sweep's when it has a curve, else the first variant that has one."""
    curved = _curved_variants(sweep)
    if not curved:
        return None
    sub = _only(sweep, curved)
    statistics: tuple[tuple[str, outcomes.Statistic], ...] = (("compacted", "auc"), ("compacted", "gain"))
    if threshold is not None:
        statistics += (("compacted", "steps_to"),)
    return variant_table(sub, baseline if baseline in curved else curved[0], levels, statistics, threshold)


RANKING_SCHEMA = {
    "variant": pl.String, "horizon": pl.Float64, "tokens": pl.Float64, "gain": pl.Float64, "gain_se": pl.Float64,
    "gain_low": pl.Float64, "gain_high": pl.Float64, "gain_rank": pl.Int64, "final": pl.Float64,
    "final_se": pl.Float64, "final_low": pl.Float64, "final_high": pl.Float64, "final_rank": pl.Int64,
}
"""The columns of :func:`ranking_table`."""


def ranking_table(sweep: SweepRuns, table: pl.DataFrame, speed: pl.DataFrame | None) -> pl.DataFrame | None:
    """Per variant with a learning curve: its paired learning gain (the last compacted evaluation minus step
    0's on the same instances) with its t interval and tie-aware rank, beside its final success and rank, the
    effective context it may carry (H) and the tokens it processed per evaluation episode; ranked by gain.
    ``None`` when no variant has a gain row."""
    gains = None if speed is None else speed.filter(pl.col("statistic") == "gain")
    if gains is None or gains.height == 0:
        return None
    final = table.filter((pl.col("evaluation") == "compacted") & (pl.col("statistic") == "final"))
    suffixes = {"mean": "", "se": "_se", "ci_low": "_low", "ci_high": "_high", "rank": "_rank"}
    out = gains.select("variant", "horizon", *(pl.col(c).alias(f"gain{s}") for c, s in suffixes.items()))
    out = out.join(final.select("variant", *(pl.col(c).alias(f"final{s}") for c, s in suffixes.items())),
                   on="variant", how="left")
    return out.join(_tokens(sweep), on="variant", how="left").select(list(RANKING_SCHEMA)).cast(
        RANKING_SCHEMA).sort("gain_rank", nulls_last=True, maintain_order=True)  # type: ignore[arg-type]


def _tokens(sweep: SweepRuns) -> pl.DataFrame:
    """variant, tokens: the compacted evaluation's tokens per episode at each run's last evaluation, mean over seeds."""
    if sweep.history is None:
        return pl.DataFrame(schema={"variant": pl.String, "tokens": pl.Float64})
    last = sweep.history.filter(pl.col("key") == TOKENS_KEY).sort("step").group_by("variant", "run_id").agg(
        pl.col("value").last())
    return last.group_by("variant").agg(pl.col("value").mean().alias("tokens"))


def _curved_variants(sweep: SweepRuns) -> list[str]:
    """Variants whose every finished run evaluated the compacted configuration at least twice."""
    if sweep.history is None:
        return []
    key = EVALUATIONS["compacted"]
    per_run = sweep.history.filter(pl.col("key") == key).group_by("variant", "run_id").agg(pl.col("step").n_unique())
    fewest = dict(per_run.group_by("variant").agg(pl.col("step").min()).iter_rows())
    return [v for v in sweep.variants if fewest.get(v, 0) >= 2]


def _only(sweep: SweepRuns, variants: list[str]) -> SweepRuns:
    keep = pl.col("variant").is_in(variants)
    return replace(sweep, runs=sweep.runs.filter(keep),
                   history=None if sweep.history is None else sweep.history.filter(keep),
                   episodes=None if sweep.episodes is None else sweep.episodes.filter(keep))


# ------------------------------------------------------------------------------------ the report
@dataclass(frozen=True)
class Report:
    """A written report: the runs it read, its tables, its Markdown, the files written and skipped."""

    sweep: SweepRuns
    table: pl.DataFrame
    published: pl.DataFrame | None
    markdown: str
    files: list[Path]
    skipped: list[str]
    logged_to: str | None
    """The parent run the files were attached to, if the experiment has one."""
    speed: pl.DataFrame | None = None
    """The learning-speed rows (AUC, steps to a threshold), when the runs evaluated more than once."""
    ranking: pl.DataFrame | None = None
    """The ranking by paired learning gain beside final success (:func:`ranking_table`), when there are gains."""


def default_out_dir(experiment: str, tracking_uri: str | None = None) -> Path:
    """``<store folder>/sweeps/<experiment>/report``, beside the runner's results table."""
    from simlab import stores, tracking

    store = tracking.resolve_store(tracking_uri)
    base = store.local_folder or (stores.home() / "mlruns")
    return base / "sweeps" / experiment / "report"


def build_report(
    experiment: str,
    *,
    baseline: str | None = None,
    out: Path | None = None,
    against: bool = False,
    tracking_uri: str | None = None,
    log: bool = True,
    levels: Levels | None = None,
    threshold: float | None = None,
) -> Report:
    """Load, tabulate, render and write the report; attach it to the sweep's parent run when ``log``."""
    from simlab import tracking
    from simlab.analysis.report.text import to_markdown

    levels = levels or Levels()
    if out is not None:
        check_output_dir(out)  # before any work, like `simlab audit`
    sweep = load_runs(experiment, tracking_uri)
    table = variant_table(sweep, baseline, levels)
    speed = speed_table(sweep, baseline, levels, threshold)
    published = against_published(table) if against else None
    ranking = ranking_table(sweep, table, speed)
    markdown = to_markdown(sweep, table, speed=speed, published=published, ranking=ranking,
                           health=(evaluation_table(sweep), stage_table(sweep, GROUP_HEALTH),
                                   stage_table(sweep, INDEX_HEALTH), credit_table(sweep)))
    if out is None:
        out = default_out_dir(experiment, tracking_uri)
        out.mkdir(parents=True, exist_ok=True)
    full = table if speed is None else pl.concat([table, speed])
    files = []
    for stem, frame in ((STEM, full), (f"{STEM}-ranking", ranking), (f"{STEM}-published", published)):
        if frame is not None:
            files += write_tables(frame, markdown, out, stem)
    figures, skipped = write_figures(sweep, table, out)
    files += figures
    logged_to = None
    if log and sweep.parent_run_id is not None:
        tracking.log_artifacts(tracking.resolve_store(tracking_uri), sweep.parent_run_id, files, ARTIFACT_PATH)
        logged_to = sweep.parent_run_id
    return Report(sweep, table, published, markdown, files, skipped, logged_to, speed, ranking)


__all__ = ["FIGURES", "Levels", "Report", "build_report", "default_baseline", "load_runs", "ranking_table",
           "variant_table"]
