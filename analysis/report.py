"""``simlab report``: a sweep's variants with every difference beside its standard error, and figures.

Owns reading a sweep's (or any experiment's) trial runs out of the MLflow store, pooling each grid cell's
seeds into a variant, and the report's tables and figures. The arithmetic (SE over seeds, differences,
sigma, like-for-like, tie-aware ranks) is :mod:`simlab.analysis.stats`, the same code ``simlab audit`` judges
the published results with; the published ablations come from :func:`simlab.analysis.audit.ablation_table`.

Reading goes through the MLflow client, whatever the store (:mod:`simlab.tracking`, the only module that
imports mlflow): one paged ``search_runs`` gives every run's tags, params and latest metrics, and each
finished run's metric history comes from its export (``tables/metrics.parquet``, one artifact per run,
written when the run closes); a run logged before the export existed is read one metric at a time,
several requests in flight. Nothing reads MLflow's database schema.

Units: success rates in percentage points, as in :mod:`simlab.analysis.stats`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: reports are drawn in CI and at the end of a sweep

import matplotlib.pyplot as plt
import numpy as np
import polars as pl

from simlab import names
from simlab.analysis import stats
from simlab.analysis.audit import ablation_table, like_for_like_text
from simlab.analysis.tables import check_output_dir, markdown_table, write_tables
from simlab.errors import ReportError
from simlab.harness.config import effective_horizon

EVALUATIONS = {name: names.metric(prefix, names.SUCCESS) for name, prefix in names.EVALUATIONS.items()}
"""The two evaluation configurations every run is scored in: its own harness, and compaction disabled."""
HEALTH_KEYS = (names.TRAIN_COMPACTION_RATE, names.TRAIN_SUMMARISED_SUCCESS)
EVAL_HEALTH = {
    "overlong": ("overlong rate (%)", names.OVERLONG_RATE, 100.0),
    "segments": ("segments per episode", names.SEGMENTS_MEAN, 1.0),
    "holds_answer": ("summaries holding the answer (%)", names.SUMMARY_HOLDS_ANSWER, 100.0),
}
"""What each evaluation saw besides success: name -> (label, metric suffix under eval/<evaluation>/, scale).
The mechanisms that success alone hides (a policy that now overflows the single window) show here."""
CREDIT_KEYS = {
    "weight_share": names.health(names.LONGER_LOSS_SHARE),
    "token_share": names.health(names.LONGER_TOKEN_SHARE),
    "baseline_shift": names.health(names.BASELINE_SHIFT_MEAN),
    "adv_error": names.ADV_ERROR_PRE_FINAL_REL_L2,
    "k_sd": names.health(names.WITHIN_GROUP_SD),
    "k_corr": names.health(names.WITHIN_GROUP_CORR),
}
"""What each variant's credit assignment did to its batches, logged every step (seed Blocks 1 and 2)."""
SEGMENT_KEY = names.health(names.SEG_COUNT)
"""Prefix of the per-bucket rollout counts the credit layer's health summary writes every step."""
FINAL_PREFIX = names.FINAL
"""An earlier runner logged the trial's returned result again under this prefix when the trial finished."""
PARAMS = {
    names.PARAM_EPISODES: "episodes",
    names.PARAM_WINDOW: "window",
    names.PARAM_FRAC: "frac",
    names.PARAM_MAX_COMPACTIONS: "max_compactions",
    names.PARAM_TRIGGER: "trigger",
    names.PARAM_T_COMP: "t_comp",
}
"""Run params the report reads (flattened run config): the evaluation size and the harness geometry."""
TAGS = {
    names.ROLE_TAG: "role",
    names.SWEEP_TAG: "sweep",
    names.CELL_TAG: "cell",
    names.VARIANT_TAG: "variant",
    names.SEED_TAG: "seed",
    names.TRIAL_TAG: "trial",
    names.BASELINE_TAG: "baseline",
}
"""The tags the report reads, by the column it puts them in."""
FIGURES = ("learning_curves.png", "segment_counts.png", "compaction_health.png")
ARTIFACT_PATH = "report"
STEM = "report"

_RUN_SCHEMA = {"run_id": pl.String, "run_name": pl.String, "status": pl.String, "start_time": pl.Int64}
_KV_SCHEMA = {"run_id": pl.String, "key": pl.String, "value": pl.String}
_METRIC_SCHEMA = {"run_id": pl.String, "key": pl.String, "value": pl.Float64, "is_nan": pl.Boolean}


# ------------------------------------------------------------------------------------- loading
@dataclass(frozen=True)
class SweepRuns:
    """One experiment's trial runs, one row each, and their metric histories."""

    experiment: str
    experiment_id: str
    parent_run_id: str | None
    """The sweep's parent run (artifacts go there); ``None`` for an experiment no sweep made."""
    baseline_hint: str | None
    """The parent run's ``simlab.baseline`` tag, if the sweep named a baseline."""
    runs: pl.DataFrame
    """run_id, status, trial, variant, seed, episodes, horizon_compacted, horizon_single_window, and one
    rate column per evaluation (``compacted``, ``single_window``: fractions, null when not logged)."""
    history: pl.DataFrame | None
    """run_id, key, step, value for the figures (finished runs); ``None`` when the store gave none."""

    @property
    def variants(self) -> list[str]:
        """Variant names in grid order (the order the sweep ran its cells)."""
        return self.runs.get_column("variant").unique(maintain_order=True).to_list()


def load_runs(experiment: str, tracking_uri: str | None = None) -> SweepRuns:
    """Read an experiment's runs through the MLflow client: one paged ``search_runs`` for every run's
    tags, params and latest metrics, then the finished runs' metric histories (:func:`_histories`).

    Raises :class:`ReportError` for an unknown experiment or one without a finished trial run.
    """
    from simlab import tracking

    store = tracking.resolve_store(tracking_uri)
    db = tracking.sqlite_path(store.tracking_uri)
    if db is not None and not db.is_file():  # reading must not create an empty store
        raise _unknown(experiment, f"sqlite:///{db} (no such file)")
    fetched = tracking.fetch_runs(store, experiment)
    if fetched is None:
        raise _unknown(experiment, store.tracking_uri)
    eid, records = fetched
    runs = pl.DataFrame([{k: r[k] for k in _RUN_SCHEMA} for r in records], schema=_RUN_SCHEMA)

    def long(field: str, keys: Sequence[str]) -> pl.DataFrame:
        rows = [(r["run_id"], k, str(v)) for r in records for k, v in r[field].items() if k in keys]
        return pl.DataFrame(rows, schema=_KV_SCHEMA, orient="row")

    wanted = {*EVALUATIONS.values(), *(FINAL_PREFIX + k for k in EVALUATIONS.values())}
    metrics = [
        (r["run_id"], k, 0.0 if math.isnan(v) else float(v), math.isnan(v))
        for r in records
        for k, v in r["metrics"].items()
        if k in wanted
    ]
    latest = pl.DataFrame(metrics, schema=_METRIC_SCHEMA, orient="row")
    tags, params = long("tags", [*TAGS, names.RUN_NAME_TAG]), long("params", list(PARAMS))
    history = _histories(store, [r for r in records if r["status"] == "FINISHED"])
    return _assemble(experiment, eid, runs, tags, params, latest, history)


def _histories(store: Any, records: list[dict[str, Any]]) -> pl.DataFrame:
    """run_id, key, step, value of what the figures and the credit table draw, for ``records``' runs:
    one artifact per run that carries the metrics export, else one request per wanted key it has."""
    from simlab import tracking

    curve_keys = {*EVALUATIONS.values(), *HEALTH_KEYS, *CREDIT_KEYS.values(), *_eval_health_keys()}
    trials = [r for r in records if r["tags"].get(names.ROLE_TAG) != "parent"]
    return tracking.history_table(store, trials, lambda k: k in curve_keys or k.startswith(SEGMENT_KEY))


def _unknown(experiment: str, where: str) -> ReportError:
    return ReportError(f"experiment {experiment!r} does not exist in {where}; run `simlab sweep` first",
                       key="experiment", value=experiment, allowed="run `simlab sweep` first")


def _wide(long: pl.DataFrame, names: dict[str, str], index: pl.DataFrame) -> pl.DataFrame:
    """Long (run_id, key, value) to one column per wanted key, every run kept, absent keys null."""
    wide = long.filter(pl.col("key").is_in(list(names))).pivot(on="key", index="run_id", values="value")
    wide = wide.rename({k: v for k, v in names.items() if k in wide.columns})
    out = index.select("run_id").join(wide, on="run_id", how="left")
    return out.with_columns(pl.lit(None, pl.String).alias(v) for v in names.values() if v not in out.columns)


def _variant_of(cell: str | None) -> str | None:
    """A cell label without its seed, for runs logged before the ``simlab.variant`` tag existed."""
    if cell is None:
        return None
    parts = [p for p in cell.split(",") if not re.fullmatch(r"seed=.*", p)]
    return ",".join(parts) or "base"


def _horizon(row: dict[str, Any]) -> float | None:
    """The run's effective horizon from its logged params (:func:`simlab.harness.config.effective_horizon`)."""
    try:
        return float(effective_horizon(
            window=int(row["window"]),
            frac=float(row["frac"]),
            max_compactions=int(row["max_compactions"]),
            trigger=str(row["trigger"]),
            t_comp=None if row["t_comp"] is None else int(row["t_comp"]),
        ))
    except (TypeError, ValueError):  # a param not logged: the horizon is unknown, never guessed
        return None


def _assemble(
    experiment: str,
    eid: str,
    runs: pl.DataFrame,
    tags: pl.DataFrame,
    params: pl.DataFrame,
    latest: pl.DataFrame,
    history: pl.DataFrame | None,
) -> SweepRuns:
    """One row per trial run (variant, seed, evaluation size, horizons, both success rates) in grid
    order, the parent run, and the finished runs' histories joined with their variant and seed."""
    t = _wide(tags, {**TAGS, names.RUN_NAME_TAG: "tag_run_name"}, runs)
    p = _wide(params, PARAMS, runs)
    frame = runs.join(t, on="run_id", how="left").join(p, on="run_id", how="left")
    parents = frame.filter(pl.col("role") == "parent").sort("start_time")
    trials = _trial_rows(frame.filter(pl.col("role").is_null() | (pl.col("role") != "parent")), latest)
    if trials.filter(pl.col("status") == "FINISHED").height == 0:
        statuses = trials.get_column("status").value_counts(sort=True).rows()
        got = ", ".join(f"{n} {s}" for s, n in statuses) or "no trial runs at all"
        raise ReportError(f"experiment {experiment!r} has no finished runs ({got}); nothing to report")
    columns = ["run_id", "status", "trial", "variant", "seed", "episodes", "horizon_compacted",
               "horizon_single_window", *EVALUATIONS]
    parent = parents.row(0, named=True) if parents.height else None
    finished_ids = trials.filter(pl.col("status") == "FINISHED").get_column("run_id")
    hist = None
    if history is not None:
        hist = history.filter(pl.col("run_id").is_in(finished_ids.implode())).join(
            trials.select("run_id", "variant", "seed", "episodes"), on="run_id", how="left"
        )
    return SweepRuns(
        experiment=experiment,
        experiment_id=eid,
        parent_run_id=None if parent is None else parent["run_id"],
        baseline_hint=None if parent is None else parent["baseline"],
        runs=trials.select(columns),
        history=hist,
    )


def _trial_rows(trials: pl.DataFrame, latest: pl.DataFrame) -> pl.DataFrame:
    """The trial runs with both evaluations' latest rates, their variant, typed columns and horizons,
    in grid order (the runner enqueues cells in spec order, so trial numbers follow it)."""
    # the latest value of each evaluation metric; the runner's final/ copy wins where it exists
    values = latest.with_columns(
        pl.when(pl.col("is_nan")).then(None).otherwise(pl.col("value")).alias("value"),
        pl.col("key").str.starts_with(FINAL_PREFIX).alias("final"),
        pl.col("key").str.strip_prefix(FINAL_PREFIX).alias("key"),
    )
    for name, key in EVALUATIONS.items():
        picked = (
            values.filter(pl.col("key") == key)
            .sort("final", descending=True)
            .unique("run_id", keep="first")
            .select("run_id", pl.col("value").alias(name))
        )
        trials = trials.join(picked, on="run_id", how="left")
    trials = trials.with_columns(
        pl.coalesce(
            "variant",
            pl.col("cell").map_elements(_variant_of, return_dtype=pl.String),
            "tag_run_name",
            "run_name",
        ).alias("variant"),
        pl.col("seed").cast(pl.Int64, strict=False),
        pl.col("trial").cast(pl.Int64, strict=False),
        pl.col("episodes").cast(pl.Int64, strict=False),
    )
    horizons = [_horizon(r) for r in trials.iter_rows(named=True)]
    trials = trials.with_columns(
        pl.Series("horizon_compacted", horizons, dtype=pl.Float64),
        pl.col("window").cast(pl.Float64, strict=False).alias("horizon_single_window"),
    )
    return trials.sort(["trial", "start_time"], nulls_last=True)


# ------------------------------------------------------------------------------------ the table
def default_baseline(sweep: SweepRuns) -> str:
    """The sweep's named baseline when it is a variant, else the first variant in grid order."""
    if sweep.baseline_hint in sweep.variants:
        return str(sweep.baseline_hint)
    return sweep.variants[0]


def variant_table(sweep: SweepRuns, baseline: str | None = None, effect: float = 5.0) -> pl.DataFrame:
    """One row per (evaluation, variant): mean, IQM, 95% interval and SE over seeds, difference from the
    baseline with its SE (paired by seed where the seeds match) and sigma, the detectable effect and the
    seeds an ``effect``-point difference needs, like-for-like, tie-aware rank; ``missing`` counts finished
    runs without the metric and ``unfinished`` the runs that did not finish (FAILED, KILLED, RUNNING)."""
    names = sweep.variants
    baseline = default_baseline(sweep) if baseline is None else baseline
    if baseline not in names:
        raise ReportError(f"`--baseline={baseline!r}` is invalid; choose one of the variants: {', '.join(names)}")
    runs = sweep.runs
    done = pl.col("status") == "FINISHED"
    unfinished = runs.group_by("variant").agg((~done).sum().alias("unfinished"))
    parts = []
    for name in EVALUATIONS:
        horizon = f"horizon_{name}"
        # an unfinished run enters as a null rate so its variant stays in the table even with no
        # finished seed; it is then moved from `missing` to `unfinished`
        frame = runs.with_columns(
            pl.when(done & pl.col("episodes").is_not_null()).then(pl.col(name)).alias("rate"),
            pl.col(horizon).drop_nulls().first().over("variant").alias("horizon"),
        )
        summary = stats.variant_summary(frame, variant="variant", rate="rate", episodes="episodes", horizon="horizon")
        table = stats.against_baseline(summary, baseline, variant="variant", horizon="horizon", per_seed=frame,
                                       effect=effect)
        parts.append(
            table.join(unfinished, on="variant", how="left", maintain_order="left").with_columns(
                (pl.col("missing") - pl.col("unfinished")).alias("missing"),
                pl.lit(name).alias("evaluation"),
                pl.lit(baseline).alias("baseline"),
            )
        )
    out = pl.concat(parts)
    first = ["evaluation", "variant", "baseline", "horizon", "seeds", "missing", "unfinished"]
    return out.select(first + [c for c in out.columns if c not in first])


# ------------------------------------------------------------------- against published ablations
def _settings(variant: str) -> dict[str, str]:
    return dict(p.split("=", 1) for p in variant.split(",") if "=" in p)


def _same(a: str | None, b: str) -> bool:
    # cell labels print Python values (True), the published data writes TOML ones (true)
    return a is not None and a.lower() == b.lower()


PUBLISHED_SCHEMA = {
    "ablation": pl.String, "claim": pl.String, "axis": pl.String, "full_setting": pl.String,
    "ablated_setting": pl.String, "published_difference": pl.Float64, "published_sigma": pl.Float64,
    "full_variant": pl.String, "ablated_variant": pl.String, "difference": pl.Float64, "se": pl.Float64,
    "sigma": pl.Float64, "horizon_ratio": pl.Float64, "like_for_like": pl.Boolean, "same_direction": pl.Boolean,
    "reproduces_direction": pl.Boolean, "verdict": pl.String,
}
"""The columns of :func:`against_published`."""


def against_published(table: pl.DataFrame, evaluation: str = "compacted") -> pl.DataFrame:
    """Each published ablation beside every pair of this sweep's variants that differ only in its
    setting (ablated - full, like the papers print it), and whether the direction is reproduced."""
    rows = table.filter(pl.col("evaluation") == evaluation).to_dicts()
    estimate = {
        r["variant"]: stats.MeanSE(**{k: r[k] for k in ("mean", "se", "se_binomial", "se_seeds", "seeds", "episodes")})
        for r in rows
        if r["mean"] is not None
    }
    horizon = {r["variant"]: r["horizon"] for r in rows}
    settings = {r["variant"]: _settings(r["variant"]) for r in rows}
    out: list[dict[str, Any]] = []
    for ab in ablation_table().iter_rows(named=True):
        axis = ab["axis"]
        published = {
            "ablation": ab["id"], "claim": ab["claim"], "axis": axis, "full_setting": ab["full_setting"],
            "ablated_setting": ab["ablated_setting"], "published_difference": ab["difference"],
            "published_sigma": ab["sigma"],
        }
        pairs = _ablation_pairs(settings, axis, ab["full_setting"], ab["ablated_setting"])
        if not pairs:
            values = sorted({s[axis] for s in settings.values() if axis in s})
            why = f"takes only {', '.join(values)}" if values else "is not varied"
            out.append(published | {"verdict": f"not tested: this sweep's `{axis}` {why}"})
        for f, a in pairs:
            row = published | {"full_variant": f, "ablated_variant": a}
            if f in estimate and a in estimate:
                row |= _pair_difference(estimate[f], estimate[a], horizon[f], horizon[a], ab["difference"])
            else:
                row |= {"verdict": "not measured: a variant of the pair has no finished run with the metric"}
            out.append(row)
    return pl.DataFrame(out, schema=PUBLISHED_SCHEMA)


def _ablation_pairs(settings: dict[str, dict[str, str]], axis: str, full: str, ablated: str) -> list[tuple[str, str]]:
    """(full variant, ablated variant) pairs that differ only in ``axis``, set to ``full`` and ``ablated``."""
    return [
        (f, a)
        for f, sf in settings.items()
        for a, sa in settings.items()
        if _same(sf.get(axis), full)
        and _same(sa.get(axis), ablated)
        and {k: v for k, v in sf.items() if k != axis} == {k: v for k, v in sa.items() if k != axis}
    ]


def _pair_difference(
    full: stats.MeanSE, ablated: stats.MeanSE, h_full: float | None, h_ablated: float | None, published: float
) -> dict[str, Any]:
    """ablated - full with its SE and sigma, the horizon ratio, and the verdict against ``published``."""
    d = stats.difference(ablated, full)
    return {
        "difference": d.difference,
        "se": d.se,
        "sigma": d.sigma,
        **stats.horizon_match(h_ablated, h_full),
        **_direction(d.difference, d.sigma, published),
    }


def _direction(diff: float, sigma: float, published: float) -> dict[str, Any]:
    """Same sign as the published delta, and reproduced only when also significant (>= 2 sigma)."""
    size = "n/a" if math.isnan(sigma) else f"{abs(sigma):.2f} sigma"
    if diff == 0:  # no sign to compare: neither reproduces nor contradicts the published direction
        return {"same_direction": False, "reproduces_direction": False, "verdict": f"no difference ({size})"}
    same = math.copysign(1.0, diff) == math.copysign(1.0, published)
    significant = not math.isnan(sigma) and abs(sigma) >= stats.TIE_SIGMA
    reading = stats.describe_sigma(sigma).split(" (")[0]
    if same and significant:
        verdict = f"reproduces the direction at {size}"
    elif same:
        verdict = f"same direction, {reading} ({size})"
    elif significant:
        verdict = f"opposite direction at {size}"
    else:
        verdict = f"opposite direction, {reading} ({size})"
    return {"same_direction": same, "reproduces_direction": same and significant, "verdict": verdict}


# ------------------------------------------------------------------------------------ rendering
def _num(x: float | None, fmt: str) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def credit_table(sweep: SweepRuns) -> pl.DataFrame | None:
    """Per variant, each credit-health quantity averaged over training steps, then mean and SE over seeds.

    These move with the credit choice itself rather than with learning, so they differ between variants
    even when a short sweep's success rates are ties: the segment normaliser hands the longer rollouts
    more loss weight than their token share (Block 1: 80% on 65.8%), and a trajectory-group baseline
    shifts when segment counts correlate with reward. ``excess`` is weight share minus token share.
    """
    if sweep.history is None:
        return None
    wanted = {v: k for k, v in CREDIT_KEYS.items()}
    h = sweep.history.filter(pl.col("key").is_in(list(wanted)) & pl.col("value").is_not_nan())
    if h.height == 0:
        return None
    per_run = (
        h.group_by(["variant", "seed", "key"])
        .agg(pl.col("value").mean())
        .with_columns(pl.col("key").replace_strict(wanted))
        .pivot(on="key", index=["variant", "seed"], values="value")
    )
    for name in CREDIT_KEYS:
        if name not in per_run.columns:
            per_run = per_run.with_columns(pl.lit(None, dtype=pl.Float64).alias(name))
    per_run = per_run.with_columns((pl.col("weight_share") - pl.col("token_share")).alias("excess"))
    rows = []
    for variant in sweep.variants:
        g = per_run.filter(pl.col("variant") == variant)
        row: dict[str, Any] = {"variant": variant, "seeds": g.height}
        for name in ("k_sd", "k_corr", "weight_share", "token_share", "excess", "baseline_shift", "adv_error"):
            values = g.get_column(name).drop_nulls().to_numpy() if g.height else np.array([])
            m = stats.mean_se(values) if values.size else None
            row[name] = None if m is None else m.mean
            row[f"{name}_se"] = None if m is None or values.size < 2 else m.se
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None)


def _eval_health_keys() -> list[str]:
    """``eval/<evaluation>/<suffix>`` of every :data:`EVAL_HEALTH` quantity in both evaluations."""
    suffixes = [suffix for _, suffix, _ in EVAL_HEALTH.values()]
    return [names.metric(prefix, suffix) for prefix in names.EVALUATIONS.values() for suffix in suffixes]


def evaluation_table(sweep: SweepRuns) -> pl.DataFrame | None:
    """Per variant and evaluation, the final evaluation's overlong rate, segments per episode and share of
    summaries holding the answer: mean and SE over seeds (fractions; the Markdown prints rates in percent)."""
    if sweep.history is None:
        return None
    keys = _eval_health_keys()
    h = sweep.history.filter(pl.col("key").is_in(keys) & pl.col("value").is_not_nan())
    if h.height == 0:
        return None
    final = h.sort("step").group_by(["variant", "seed", "key"]).agg(pl.col("value").last())
    rows = []
    for variant in sweep.variants:
        for name in EVALUATIONS:
            row: dict[str, Any] = {"variant": variant, "evaluation": name}
            for field, (_, suffix, _) in EVAL_HEALTH.items():
                key = names.metric(names.EVALUATIONS[name], suffix)
                values = final.filter((pl.col("variant") == variant) & (pl.col("key") == key))
                v = values.get_column("value").to_numpy()
                m = stats.mean_se(v) if v.size else None
                row[field] = None if m is None else m.mean
                row[f"{field}_se"] = None if m is None or v.size < 2 else m.se
            rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None)


def evaluation_markdown(table: pl.DataFrame) -> str:
    """The evaluation table as a Markdown section with its explanation."""
    headers = ["Variant", "Evaluation", *(label for label, _, _ in EVAL_HEALTH.values())]
    rows = [
        [r["variant"], r["evaluation"].replace("_", "-"),
         *(_mean_se_text(r[f], r[f"{f}_se"], scale, ".1f" if scale > 1 else ".2f")
           for f, (_, _, scale) in EVAL_HEALTH.items())]
        for r in table.iter_rows(named=True)
    ]
    return ("### What the evaluations saw (final evaluation; mean ± SE over seeds)\n\n"
            "Beside success: how often an episode ended unanswered (overlong: out of window, steps or compactions), "
            "how many segments it took, and how many of its summaries held the answer. A policy that learned "
            "behaviour which only fits with compaction shows a single-window overlong rate near 100%.\n\n"
            + markdown_table(headers, rows))


def _mean_se_text(mean: float | None, se: float | None, scale: float, fmt: str) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "n/a"
    text = format(mean * scale, fmt)
    return text if se is None else f"{text} ± {format(se * scale, '.1f' if scale > 1 else '.3f')}"


def credit_markdown(credit: pl.DataFrame) -> str:
    """The credit-health table as a Markdown section with its explanation."""
    headers = ["Variant", "Seeds", "K SD in group", "corr(K, R) in group", "Longer rollouts' weight share (%)",
               "Their token share (%)", "Excess weight (points)", "Baseline shift",
               "Adv. error, pre-final segments (rel. L2)"]
    rows = [
        [
            r["variant"],
            str(r["seeds"]),
            _mean_se_text(r["k_sd"], r["k_sd_se"], 1, ".2f"),
            _mean_se_text(r["k_corr"], r["k_corr_se"], 1, "+.2f"),
            _mean_se_text(r["weight_share"], r["weight_share_se"], 100, ".1f"),
            _mean_se_text(r["token_share"], r["token_share_se"], 100, ".1f"),
            _mean_se_text(r["excess"], r["excess_se"], 100, "+.1f"),
            _mean_se_text(r["baseline_shift"], r["baseline_shift_se"], 1, "+.3f"),
            _mean_se_text(r["adv_error"], r["adv_error_se"], 1, ".3f"),
        ]
        for r in credit.iter_rows(named=True)
    ]
    return (
        "### Credit health over training (mean over steps; ± SE over seeds)\n\n"
        "Whether the mechanisms could act, and what each variant's credit assignment did to its batches: how "
        "much the segment count K varied inside prompt groups and how it went with reward there, the share of "
        "loss weight the longer rollouts (K above their group's median) got against their share of tokens, the "
        "trajectory-group baseline's shift from the rollout-group one, and (GAE estimators) the error against "
        "the concatenated-GAE reference.\n\n"
        + markdown_table(headers, rows)
    )


def _se_from(r: dict[str, Any]) -> str:
    """Where a difference's SE comes from: paired seeds (with their count), the held-out set (every
    seed gave the same difference), or the two arms' own SEs."""
    if r["dominant_difference"] == "paired":
        return f"paired seeds (n={r['pairs']})"
    if r["dominant_difference"] == "held-out":
        return f"held-out set (same in all {r['pairs']} seeds)"
    return r["dominant_difference"] or "n/a"


def _power(r: dict[str, Any], effect: float) -> str:
    """For a tie: the effect it could have detected, and the seeds a ``effect``-point one needs."""
    if r["se_difference"] == 0 and r["difference"] == 0:
        return "identical in every seed"
    if r["sigma"] is None or r["mde"] is None or abs(r["sigma"]) >= stats.TIE_SIGMA:
        return "-"
    need = "n/a" if r["seeds_needed"] is None else str(r["seeds_needed"])
    return f"MDE {r['mde']:.1f}; {need} seeds for {effect:g} pts"


def _interval(low: float | None, high: float | None, fmt: str = ".1f") -> str:
    return "n/a" if low is None or high is None else f"[{format(low, fmt)}, {format(high, fmt)}]"


VARIANT_HEADERS = ["Rank", "Variant", "H", "Seeds", "Missing", "Unfinished", "Mean", "IQM", "95% CI", "SE", "Diff",
                   "Diff 95% CI", "SE diff", "SE from", "Sigma", "Power", "Like-for-like"]
PUBLISHED_HEADERS = ["Published ablation", "Published", "Pub. sigma", "Simlab full -> ablated", "Diff", "SE", "Sigma",
                     "Like-for-like", "Direction"]


def to_markdown(
    sweep: SweepRuns, table: pl.DataFrame, published: pl.DataFrame | None = None, effect: float = 5.0
) -> str:
    """The report as Markdown: one table per evaluation configuration, what the evaluations saw, the
    credit health, then the published ablations."""
    baseline = table.get_column("baseline")[0]
    parts = [_preamble(sweep, baseline, effect)]
    for name, key in EVALUATIONS.items():
        ranked = table.filter(pl.col("evaluation") == name).sort("rank", nulls_last=True, maintain_order=True)
        rows = [_variant_row(r, r["variant"] == baseline, effect) for r in ranked.iter_rows(named=True)]
        parts.append(f"### {name.replace('_', '-')} success (`{key}`)\n\n{markdown_table(VARIANT_HEADERS, rows)}")
    evaluations = evaluation_table(sweep)
    if evaluations is not None:
        parts.append(evaluation_markdown(evaluations))
    credit = credit_table(sweep)
    if credit is not None:
        parts.append(credit_markdown(credit))
    if published is not None:
        rows = [_published_row(r) for r in published.iter_rows(named=True)]
        parts.append(
            "### Against the published ablations (ablated - full, compacted success, points)\n\n"
            + markdown_table(PUBLISHED_HEADERS, rows)
        )
    return "\n".join(parts)


def _preamble(sweep: SweepRuns, baseline: str, effect: float) -> str:
    total = sweep.runs.height
    finished = sweep.runs.filter(pl.col("status") == "FINISHED").height
    return (
        f"## simlab report: {sweep.experiment}\n\n"
        f"{finished} of {total} trial runs finished; {len(sweep.variants)} variants; baseline `{baseline}`. "
        f"Means and SEs in points over seeds; a mean's SE is max(binomial, seed spread). IQM is the interquartile "
        f"mean and CI a bootstrap 95% interval over seeds. A difference is paired by seed when the arms share "
        f"at least {stats.PAIRED_MIN_SEEDS} seeds (same base model, prompts and evaluation instances) and its "
        f"`SE from` says so. Ranks treat differences under {stats.TIE_SIGMA:g} sigma as ties; for a tie, "
        f"Power gives the minimum detectable effect at {stats.TIE_SIGMA:g} sigma and the seeds a "
        f"{effect:g}-point effect needs (`--effect`). H = L x (S+1) (W without summaries); a difference across "
        f"different H is not like-for-like.\n"
    )


def _variant_row(r: dict[str, Any], is_base: bool, effect: float) -> list[str]:
    own = [
        _num(r["rank"], "d"),
        r["variant"] + (" (baseline)" if is_base else ""),
        _num(r["horizon"], "g"),
        str(r["seeds"]),
        str(r["missing"]),
        str(r["unfinished"]),
        _num(r["mean"], ".1f"),
        _num(r["iqm"], ".1f"),
        _interval(r["ci_low"], r["ci_high"]),
        _num(r["se"], ".1f") + (f" ({r['dominant']})" if r["dominant"] else ""),
    ]
    if is_base:
        return [*own, *["-"] * 7]
    return [
        *own,
        _num(r["difference"], "+.1f"),
        _interval(r["diff_ci_low"], r["diff_ci_high"], "+.1f"),
        _num(r["se_difference"], ".1f"),
        _se_from(r),
        _num(r["sigma"], "+.2f"),
        _power(r, effect),
        like_for_like_text(r["like_for_like"], r["horizon_ratio"]),
    ]


def _published_row(r: dict[str, Any]) -> list[str]:
    return [
        r["claim"] or r["ablation"],
        _num(r["published_difference"], "+.1f"),
        _num(r["published_sigma"], "+.2f"),
        _pair(r["full_variant"], r["ablated_variant"], r["axis"]),
        _num(r["difference"], "+.1f"),
        _num(r["se"], ".1f"),
        _num(r["sigma"], "+.2f"),
        "-" if r["difference"] is None else like_for_like_text(r["like_for_like"], r["horizon_ratio"]),
        r["verdict"],
    ]


def _pair(full: str | None, ablated: str | None, axis: str) -> str:
    """``axis: full -> ablated (where the rest)``: the pair by what changes, then what is held fixed."""
    if full is None or ablated is None:
        return "-"
    held = {k: v for k, v in _settings(full).items() if k != axis}
    where = ",".join(f"{k}={v}" for k, v in held.items())
    change = f"{axis}: {_settings(full)[axis]} -> {_settings(ablated)[axis]}"
    return f"{change} ({where})" if where else change


# --------------------------------------------------------------------------------------- figures
def _by_step(history: pl.DataFrame, key: str) -> pl.DataFrame:
    """variant, step, mean, se (points) of one success-rate metric over seeds, with rate_mean_se."""
    rows = []
    at = history.filter((pl.col("key") == key) & pl.col("value").is_not_nan() & pl.col("episodes").is_not_null())
    for (variant, step), g in at.group_by("variant", "step", maintain_order=True):
        m = stats.rate_mean_se(g.get_column("value").to_numpy(), g.get_column("episodes").to_numpy())
        rows.append({"variant": variant, "step": step, "mean": m.mean, "se": m.se})
    schema = {"variant": pl.String, "step": pl.Int64, "mean": pl.Float64, "se": pl.Float64}
    return pl.DataFrame(rows, schema=schema).sort("variant", "step", maintain_order=True)


def _grid(n: int) -> tuple[Any, list[Any]]:
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.8 * rows), squeeze=False, sharey=True)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def learning_curves_png(sweep: SweepRuns, path: Path) -> Path | None:
    """Held-out success over training per variant, mean over seeds with an SE band, both evaluations."""
    assert sweep.history is not None
    curves = {name: _by_step(sweep.history, key) for name, key in EVALUATIONS.items()}
    if all(c.height == 0 for c in curves.values()):
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True, squeeze=False)
    for ax, (name, curve) in zip(axes[0], curves.items(), strict=True):
        for variant in sweep.variants:
            c = curve.filter(pl.col("variant") == variant)
            if c.height == 0:
                continue
            x, m, se = (c.get_column(k).to_numpy() for k in ("step", "mean", "se"))
            (line,) = ax.plot(x, m, marker="o", ms=3, label=variant)
            ax.fill_between(x, m - se, m + se, color=line.get_color(), alpha=0.2, lw=0)
        ax.set_title(f"{name.replace('_', '-')} success (mean +- SE over seeds)", fontsize="medium")
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("success (points)")
    axes[0][0].legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


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


def segment_counts_png(sweep: SweepRuns, path: Path) -> Path | None:
    """Share of rollouts by segments per rollout over training, one panel per variant (seeds pooled)."""
    assert sweep.history is not None
    table = segment_table(sweep.history)
    if table.height == 0:
        return None
    top = int(table.get_column("segments").max())  # type: ignore[arg-type]
    buckets = list(range(1, top + 1))
    colours = plt.get_cmap("viridis")(np.linspace(0.0, 0.9, len(buckets)))
    fig, axes = _grid(len(sweep.variants))
    for ax, variant in zip(axes, sweep.variants, strict=True):
        t = table.filter(pl.col("variant") == variant)
        ax.set_title(variant.replace(",", ",\n"), fontsize="x-small")
        if t.height == 0:
            ax.text(0.5, 0.5, "no finished run with segment counts", ha="center", transform=ax.transAxes)
            continue
        wide = t.pivot(on="segments", index="step", values="share").sort("step").fill_null(0.0)
        shares = [
            wide.get_column(str(b)).to_numpy() if str(b) in wide.columns else np.zeros(wide.height) for b in buckets
        ]
        ax.stackplot(wide.get_column("step").to_numpy(), shares, labels=[str(b) for b in buckets], colors=colours)
        ax.set_ylim(0, 1)
        ax.set_xlabel("training step")
    axes[0].set_ylabel("share of rollouts")
    axes[0].legend(title="segments", fontsize="x-small", title_fontsize="x-small", loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def compaction_health_png(sweep: SweepRuns, path: Path) -> Path | None:
    """Compaction rate against the success of rollouts that compacted, as a path over training steps.

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
    # left: both over training (a constant rate, e.g. every rollout compacting, leaves the path on the
    # right a vertical line, so the time series are drawn too); right: one against the other
    fig, (over_time, path_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for variant in sweep.variants:
        v = means.filter(pl.col("variant") == variant)
        if v.height == 0:
            continue
        step = v.get_column("step").to_numpy()
        x, y = 100 * v.get_column(rate_key).to_numpy(), 100 * v.get_column(success_key).to_numpy()
        (line,) = over_time.plot(step, x, marker="o", ms=3, label=variant)
        over_time.plot(step, y, marker="x", ms=4, ls="--", color=line.get_color())
        path_ax.plot(x, y, marker="o", ms=3, color=line.get_color())
        path_ax.plot(x[-1:], y[-1:], marker="s", ms=7, color=line.get_color())  # the last step
    over_time.set_xlabel("training step")
    over_time.set_ylabel("points")
    over_time.set_title("compaction rate (solid), success of compacted rollouts (dashed)", fontsize="small")
    over_time.legend(fontsize="x-small")
    path_ax.set_xlabel("compaction rate (% of rollouts that compacted)")
    path_ax.set_ylabel("success of compacted rollouts (points)")
    path_ax.set_title("one against the other (square: last step; healthy: up and right)", fontsize="small")
    for ax in (over_time, path_ax):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def write_figures(sweep: SweepRuns, folder: Path) -> tuple[list[Path], list[str]]:
    """(figures written, why each other one was not): a figure with no data is skipped and said so."""
    if sweep.history is None:
        return [], [f"{f}: no metric histories were read" for f in FIGURES]
    written, skipped = [], []
    for name, draw in zip(FIGURES, (learning_curves_png, segment_counts_png, compaction_health_png), strict=True):
        path = draw(sweep, folder / name)
        if path is None:
            skipped.append(f"{name}: the finished runs logged none of its metrics")
        else:
            written.append(path)
    return written, skipped


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
    effect: float = 5.0,
) -> Report:
    """Load, tabulate, render and write the report; attach it to the sweep's parent run when ``log``."""
    from simlab import tracking

    if out is not None:
        check_output_dir(out)  # before any work, like `simlab audit`
    sweep = load_runs(experiment, tracking_uri)
    table = variant_table(sweep, baseline, effect)
    published = against_published(table) if against else None
    markdown = to_markdown(sweep, table, published, effect)
    if out is None:
        out = default_out_dir(experiment, tracking_uri)
        out.mkdir(parents=True, exist_ok=True)
    files = write_tables(table, markdown, out, STEM)
    if published is not None:
        files += write_tables(published, markdown, out, f"{STEM}-published")
    figures, skipped = write_figures(sweep, out)
    files += figures
    logged_to = None
    if log and sweep.parent_run_id is not None:
        tracking.log_artifacts(tracking.resolve_store(tracking_uri), sweep.parent_run_id, files, ARTIFACT_PATH)
        logged_to = sweep.parent_run_id
    return Report(sweep, table, published, markdown, files, skipped, logged_to)
