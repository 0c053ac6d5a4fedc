"""Reading a sweep's trial runs out of the MLflow store: one row per run, metric histories, episodes.

Reading goes through the MLflow client, whatever the store (:mod:`simlab.tracking`, the only module that
imports mlflow): one paged ``search_runs`` gives every run's tags, params and latest metrics; each
finished run's metric history comes from its export (``tables/metrics.parquet``, written when the run
closes; a run logged before the export existed is read one metric at a time), and its per-episode
evaluation outcomes from ``tables/episodes.parquet`` where it kept them. Nothing reads MLflow's database
schema. ``simlab report`` and the figures read :class:`SweepRuns`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import polars as pl

from simlab import names
from simlab.errors import ReportError
from simlab.harness.config import effective_horizon
from simlab.sweep import labels

EVALUATIONS = {name: names.metric(prefix, names.SUCCESS) for name, prefix in names.EVALUATIONS.items()}
"""The two evaluation configurations every run is scored in: its own harness, and compaction disabled."""
HEALTH_KEYS = (names.TRAIN_COMPACTION_RATE, names.TRAIN_SUMMARISED_SUCCESS)
EVAL_HEALTH = {
    "overlong": ("overlong rate (%)", names.OVERLONG_RATE, 100.0),
    "segments": ("segments per episode", names.SEGMENTS_MEAN, 1.0),
    "holds_answer": ("summaries holding the answer (%)", names.SUMMARY_HOLDS_ANSWER, 100.0),
    "holds_cued": ("summaries holding the cued fact (%)", names.SUMMARY_HOLDS_CUED, 100.0),
    "summary_length": ("summary tokens", names.SUMMARY_LENGTH, 1.0),
}
"""What each evaluation saw besides success: name -> (label, metric suffix under eval/<evaluation>/, scale).
The mechanisms that success alone hides (a policy that now overflows the single window) show here."""
STAGES = {"training": names.TRAIN, **names.EVALUATIONS}
"""Where the rollout-health tables read a quantity: the training steps (their mean) and each evaluation (its
final value), by the name the report prints, to the metric prefix."""
GROUP_HEALTH = {
    "all_fail": ("all-fail groups (%)", names.GROUP_ALL_FAIL, 100.0),
    "all_success": ("all-success groups (%)", names.GROUP_ALL_SUCCESS, 100.0),
    "no_gradient": ("no-gradient groups (%)", names.GROUP_NO_GRADIENT, 100.0),
    "reward_rollout": ("reward per rollout", names.RETURN, 1.0),
    "reward_row": ("reward per row", names.RETURN_PER_ROW, 1.0),
}
"""Prompt groups that carry no GRPO gradient, and the reward per rollout beside per row: name -> (label, metric
suffix under each of :data:`STAGES`, scale)."""
INDEX_HEALTH = {
    "context_before": ("context before", names.CONTEXT_BEFORE_COMPACTION, 1.0),
    "context_after": ("context after", names.CONTEXT_AFTER_COMPACTION, 1.0),
    **{f"summary_{label}": (f"summary {label.replace('plus', '+')}", key, 1.0)
       for label, key in zip(names.SUMMARY_INDEX_LABELS, names.SUMMARY_LENGTH_BY_INDEX, strict=True)},
}
"""The context around a compaction and summary length by compaction index, in tokens: as :data:`GROUP_HEALTH`."""
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
    names.PARAM_BASE_SEED: "base_seed",
    names.PARAM_EVAL_SEED: "eval_seed",
}
"""Run params the report reads (flattened run config): the evaluation size, the harness geometry, and
what the seeds vary (``base.seed`` and ``eval.seed``: ``run`` or a fixed integer)."""
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
RUN_COLUMNS = ["run_id", "status", "trial", "variant", "seed", "episodes", "horizon_compacted",
               "horizon_single_window", "base_seed", "eval_seed", *EVALUATIONS]

_RUN_SCHEMA = {"run_id": pl.String, "run_name": pl.String, "status": pl.String, "start_time": pl.Int64}
_ROW_SCHEMA = {
    **_RUN_SCHEMA,
    **{column: pl.String for column in [*TAGS.values(), "tag_run_name", *PARAMS.values()]},
    **{name: pl.Float64 for name in EVALUATIONS},
}


@dataclass(frozen=True)
class SweepRuns:
    """One experiment's trial runs, one row each, their metric histories and per-episode outcomes."""

    experiment: str
    experiment_id: str
    parent_run_id: str | None
    """The sweep's parent run (artifacts go there); ``None`` for an experiment no sweep made."""
    baseline_hint: str | None
    """The parent run's ``simlab.baseline`` tag, if the sweep named a baseline."""
    runs: pl.DataFrame
    """:data:`RUN_COLUMNS`: run_id, status, trial, variant, seed, episodes, both horizons, base_seed and
    eval_seed (as logged), and one rate column per evaluation (fractions, null when not logged)."""
    history: pl.DataFrame | None
    """run_id, key, step, value, variant, seed, episodes (finished runs); ``None`` when the store gave none."""
    episodes: pl.DataFrame | None = None
    """run_id, variant, seed and :data:`simlab.names.EPISODE_COLUMNS` of the finished runs that kept their
    per-episode outcomes; ``None`` when none did."""

    @property
    def variants(self) -> list[str]:
        """Variant names in grid order (the order the sweep ran its cells)."""
        return self.runs.get_column("variant").unique(maintain_order=True).to_list()

    def seeds_vary(self) -> str:
        """What differs between the seeds, for the report's preamble: the base model when ``base.seed`` is
        ``run``, the held-out set when ``eval.seed`` is; the RL sampling always."""
        vary, fixed = [], []
        for column, what in (("base_seed", "base model"), ("eval_seed", "held-out set")):
            values = set(self.runs.get_column(column).drop_nulls().to_list())
            if values == {"run"}:
                vary.append(what)
            elif values:
                fixed.append(f"{what} ({column.replace('_', '.')} = {', '.join(sorted(map(str, values)))})")
            else:
                fixed.append(f"{what} (not logged: assumed shared)")
        text = "seeds vary: " + ", ".join([*vary, "RL sampling"])
        return text + ("; held fixed: " + ", ".join(fixed) if fixed else "")


def shared_held_out(runs: pl.DataFrame) -> bool:
    """Whether every seed of ``runs`` played one held-out set (``eval.seed`` not ``run``, or not logged)."""
    return set(runs.get_column("eval_seed").drop_nulls().to_list()) != {"run"}


def load_runs(experiment: str, tracking_uri: str | None = None) -> SweepRuns:
    """Read an experiment's runs through the MLflow client: one paged ``search_runs`` for every run's
    tags, params and latest metrics, then the finished runs' metric histories and per-episode outcomes.

    Raises :class:`ReportError` for an unknown experiment or one without a finished trial run.
    """
    from simlab import tracking
    from simlab.tracking.reading import episodes_table, fetch_runs, history_table

    store = tracking.resolve_store(tracking_uri)
    if not store.holds_runs:  # reading must not create the store, nor fill an empty file
        raise unknown_experiment(experiment, f"{store.tracking_uri} (no MLflow store there)")
    fetched = fetch_runs(store, experiment)
    if fetched is None:
        raise unknown_experiment(experiment, store.tracking_uri)
    eid, records = fetched
    frame = pl.DataFrame([_run_row(r) for r in records], schema=_ROW_SCHEMA)
    finished = [r for r in records if r["status"] == "FINISHED" and r["tags"].get(names.ROLE_TAG) != "parent"]
    history = history_table(store, finished, wanted_history)
    episodes = episodes_table(store, finished)
    return _assemble(experiment, eid, frame, history, episodes)


TOKENS_KEY = names.metric(names.EVAL_COMPACTED, names.TOKENS_PER_EPISODE)
"""What the policy processed per compacted evaluation episode: the context a variant used."""


def wanted_history(key: str) -> bool:
    """The metric histories the report's tables and figures read."""
    keys = {*EVALUATIONS.values(), *HEALTH_KEYS, *CREDIT_KEYS.values(), *eval_health_keys(), *stage_keys(),
            *(names.metric(p, names.EPISODES) for p in names.EVALUATIONS.values()), TOKENS_KEY}
    return key in keys or key.startswith((SEGMENT_KEY, names.BASE_HELDOUT))  # the base's measurement: step 0


def eval_health_keys() -> list[str]:
    """``eval/<evaluation>/<suffix>`` of every :data:`EVAL_HEALTH` quantity in both evaluations."""
    suffixes = [suffix for _, suffix, _ in EVAL_HEALTH.values()]
    return [names.metric(prefix, suffix) for prefix in names.EVALUATIONS.values() for suffix in suffixes]


def stage_keys() -> list[str]:
    """``<stage prefix>/<suffix>`` of every :data:`GROUP_HEALTH` and :data:`INDEX_HEALTH` quantity."""
    suffixes = [suffix for table in (GROUP_HEALTH, INDEX_HEALTH) for _, suffix, _ in table.values()]
    return [names.metric(prefix, suffix) for prefix in STAGES.values() for suffix in suffixes]


def unknown_experiment(experiment: str, where: str) -> ReportError:
    """The error for an experiment the store does not hold."""
    return ReportError(f"experiment {experiment!r} does not exist in {where}; run `simlab sweep` first",
                       key="experiment", value=experiment, allowed="run `simlab sweep` first")


def _run_row(record: dict[str, Any]) -> dict[str, Any]:
    """One run as a row of :data:`_ROW_SCHEMA`: its tags and params as logged (absent ones null), and each
    evaluation's latest rate, the runner's final/ copy where it exists (NaN as null)."""
    tags, params, metrics = record["tags"], record["params"], record["metrics"]
    rates = {name: metrics.get(FINAL_PREFIX + key, metrics.get(key)) for name, key in EVALUATIONS.items()}
    return {
        **{k: record[k] for k in _RUN_SCHEMA},
        **{column: tags.get(tag) for tag, column in TAGS.items()},
        "variant": labels.stored_variant(tags, params),
        "tag_run_name": tags.get(names.RUN_NAME_TAG),
        **{column: params.get(param) for param, column in PARAMS.items()},
        **{name: None if v is None or math.isnan(v) else float(v) for name, v in rates.items()},
    }


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
    frame: pl.DataFrame,
    history: pl.DataFrame | None,
    episodes: pl.DataFrame | None,
) -> SweepRuns:
    """One row per trial run (:data:`RUN_COLUMNS`) in grid order, the parent run, and the finished runs'
    histories (joined with their variant, seed and episodes) and per-episode outcomes (variant and seed)."""
    parents = frame.filter(pl.col("role") == "parent").sort("start_time")
    trials = _trial_rows(frame.filter(pl.col("role").is_null() | (pl.col("role") != "parent")))
    finished = trials.filter(pl.col("status") == "FINISHED").select("run_id", "variant", "seed", "episodes")
    if finished.height == 0:
        statuses = trials.get_column("status").value_counts(sort=True).rows()
        got = ", ".join(f"{n} {s}" for s, n in statuses) or "no trial runs at all"
        raise ReportError(f"experiment {experiment!r} has no finished runs ({got}); nothing to report")
    parent = parents.row(0, named=True) if parents.height else None
    played = None if episodes is None else episodes.join(finished.drop("episodes"), on="run_id")
    return SweepRuns(
        experiment=experiment,
        experiment_id=eid,
        parent_run_id=None if parent is None else parent["run_id"],
        baseline_hint=None if parent is None else parent["baseline"],
        runs=trials.select(RUN_COLUMNS),
        history=None if history is None else history.join(finished, on="run_id"),
        episodes=played if played is not None and played.height else None,
    )


def _trial_rows(trials: pl.DataFrame) -> pl.DataFrame:
    """The trial runs with their variant, typed columns and horizons, in grid order (the runner enqueues
    cells in spec order, so trial numbers follow it)."""
    trials = trials.with_columns(
        pl.coalesce(
            "variant",
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
