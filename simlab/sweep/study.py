"""A sweep's study: its pruner, reconcile, and the trials table (where it lives and its lock are its
queue's, :mod:`.queue`; which trials it runs and how they are enqueued, its plan's, :mod:`.plan`).

- **Grid x seeds are enqueued explicitly** (:meth:`.plan.GridPlan.enqueue`), one waiting trial per
  missing cell, under the study's lock. ``GridSampler`` re-samples points after a crash and
  ``enqueue_trial(skip_if_exists=True)`` also skips cells whose only trial FAILED, so neither gives
  "each cell exactly once".
- **Stale trials are reconciled here**: a rerun fails the trials whose worker died (found by
  its queue: Optuna's heartbeat for a database study, the owner's process for a journal, which has
  none), ends their MLflow runs KILLED, and enqueues their cells again. Finished trials and runs are
  never touched.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
import polars as pl
from optuna.trial import TrialState

from simlab import names, tracking
from simlab.names import ATTR_CELL, ATTR_FAILURE, ATTR_REASON, ATTR_REPLACES, ATTR_RUN
from simlab.sweep import lifecycle
from simlab.sweep.queue import TrialQueue
from simlab.sweep.spec import SweepSpec

FINAL_FAILURES = ("diverged", lifecycle.BASE_GATE)
"""Failure kinds that are results (rerunning the same seed gives the same failure): not retried."""
FINAL_IN_RUN = (*FINAL_FAILURES, "error")
"""Within one run an error is final too (a deterministic one would be retried forever); the next
``simlab sweep`` or ``simlab worker`` start retries it. Only a killed trial's cell runs again at once."""


# --- the pruner, reconcile ---


def make_pruner(spec: SweepSpec) -> optuna.pruners.BasePruner:
    """The spec's pruner (median, percentile, or none)."""
    p = spec.pruner
    patience = {"n_startup_trials": p.n_startup_trials, "n_warmup_steps": p.n_warmup_steps}
    if p.kind == "median":
        return optuna.pruners.MedianPruner(**patience)
    if p.kind == "percentile":
        return optuna.pruners.PercentilePruner(p.percentile, **patience)
    return optuna.pruners.NopPruner()


def reconcile(study: optuna.Study, spec: SweepSpec, queue: TrialQueue, client: Any, experiment_id: str,
              final: Sequence[str]) -> list[int]:
    """Mark trials whose worker died FAIL (kind ``killed``, found by the ``queue``'s reap), end every
    orphaned RUNNING MLflow run, and enqueue the cells no trial accounts for (the plan's, with ``final``);
    the caller holds the study's lock. Returns the numbers of the trials it failed."""
    failed = queue.reap(study)
    close_orphan_runs(study, client, experiment_id)
    spec.plan.enqueue(study, spec, final)
    return failed


def close_orphan_runs(study: optuna.Study, client: Any, experiment_id: str) -> None:
    """End the MLflow runs still RUNNING whose trial is not: a worker died between Optuna's tell and
    closing the run (end it as the trial ended), or before either (KILLED)."""
    # the runs first: a run that exists now belongs to a trial already claimed, so reading the trials
    # second cannot mistake a trial claimed in between for a dead one
    running = tracking.running_child_runs(client, experiment_id)
    trials = {str(t.number): t for t in study.get_trials(deepcopy=False)}
    # a finished trial is COMPLETE, FAIL or PRUNED
    as_status = {TrialState.COMPLETE: "FINISHED", TrialState.FAIL: "FAILED", TrialState.PRUNED: "KILLED"}
    for run_id, tags in running:
        number = tags.get(names.TRIAL_TAG)
        trial = trials.get(str(number))
        if tags.get(names.SWEEP_TAG) != study.study_name or (trial and trial.state == TrialState.RUNNING):
            continue
        if trial is not None and trial.state.is_finished() and trial.user_attrs.get(ATTR_FAILURE) != lifecycle.KILLED:
            tracking.finish_run(client, run_id, as_status[trial.state], trial.user_attrs.get(ATTR_REASON, ""))
        else:
            tracking.finish_run(
                client, run_id, "KILLED", f"killed: trial {number}'s process died before it finished"
            )


# --- the results table ---


TRIAL_SCHEMA = {
    "trial": pl.Int64, "point": pl.Utf8, "seed": pl.Int64, "state": pl.Utf8, "value": pl.Float64,
    "failure": pl.Utf8, "reason": pl.Utf8, "mlflow_run_id": pl.Utf8,
}
"""The columns of ``trials.csv``: one row per trial that left the queue."""


def trial_table(study: optuna.Study) -> pl.DataFrame:
    """One row per trial that left the queue: its grid point, seed, state, value and why it failed."""
    rows = []
    everything = study.get_trials(deepcopy=False)
    replaced = {t.user_attrs[ATTR_REPLACES]: t for t in everything if ATTR_REPLACES in t.user_attrs}
    for t in everything:
        if t.state == TrialState.WAITING:
            continue
        cell = json.loads(t.user_attrs[ATTR_CELL]) if ATTR_CELL in t.user_attrs else {"params": t.params}
        point = ",".join(f"{k}={v}" for k, v in sorted(cell.get("params", {}).items()) if k != "seed")
        failure, reason = t.user_attrs.get(ATTR_FAILURE, ""), t.user_attrs.get(ATTR_REASON, "")
        if t.state == TrialState.FAIL and not failure:  # failed by the heartbeat check (attrs are frozen then)
            failure, reason = lifecycle.KILLED, "its worker stopped its heartbeat"
            if t.number in replaced:
                reason += f"; its cell ran again as trial {replaced[t.number].number}"
        rows.append({"trial": t.number, "point": point or "-", "seed": cell.get("seed"), "state": t.state.name,
                     "value": t.value, "failure": failure, "reason": reason,
                     "mlflow_run_id": t.user_attrs.get(ATTR_RUN, "")})
    return pl.DataFrame(rows, schema=TRIAL_SCHEMA)


def write_trials(study: optuna.Study, store: tracking.Store, mlruns: Path) -> Path:
    """``trials.csv`` (:func:`trial_table`) where the sweep's local tables go, ``<store folder>/sweeps/<name>``
    (the tracking store's local folder, else ``mlruns``); its path. The per-point summary over seeds is
    the analysis layer's (:func:`simlab.analysis.summary.write_summary`)."""
    folder = (store.local_folder or mlruns) / "sweeps" / study.study_name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "trials.csv"
    trial_table(study).write_csv(path)
    return path
