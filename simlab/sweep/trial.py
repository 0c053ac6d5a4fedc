"""One trial, in a worker process: claim it, open its MLflow run, train, and end it (every write to
the trial's state goes through :mod:`.lifecycle`).

Workers are processes (joblib/loky) with torch at one thread each: Optuna's ``n_jobs`` is threads.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from simlab import names, tracking
from simlab.errors import BaseGateError
from simlab.sweep import lifecycle, rdb
from simlab.sweep.backend import TrialBackend, limit_threads, load_backend
from simlab.sweep.labels import VARIANT_KEY
from simlab.sweep.queue import TrialQueue, trial_queue
from simlab.sweep.space import Cell
from simlab.sweep.spec import SweepSpec
from simlab.sweep.study import FINAL_FAILURES, make_pruner

CURVE_KEYS = (names.EVAL_COMPACTED_SUCCESS, names.EVAL_SINGLE_WINDOW_SUCCESS, names.EVAL_COMPACTED_COMPACTION_RATE)
"""Drawn in every trial's learning-curve figure beside the objective (when the trainer logs them)."""


# --- one trial, in a worker process ---


@dataclass(frozen=True)
class TrialContext:
    """Everything a worker needs, picklable (workers rebuild clients and storages from it)."""

    spec: SweepSpec
    backend: str
    storage: str
    tracking_uri: str
    artifact_root: str | None
    experiment_id: str
    parent_run_id: str
    coordinator: dict[str, Any]
    store: str
    """Local folder for what trials share (base checkpoints): ``<root>/mlruns``."""
    provenance: dict[str, str] = field(default_factory=dict)
    heartbeat: int = rdb.HEARTBEAT_S
    """Seconds between Optuna heartbeats (database studies); stale after ``rdb.GRACE_FACTOR`` of them."""
    final: tuple[str, ...] = FINAL_FAILURES
    """Failure kinds whose cells are not run again (:data:`FINAL_IN_RUN` once a run is under way)."""

    @property
    def queue(self) -> TrialQueue:
        """The study's trial queue (its storage's kind)."""
        return trial_queue(self.storage, self.heartbeat, self.tracking_uri)


@dataclass(frozen=True)
class TrialOutcome:
    """What the coordinator hears back from one task."""

    number: int | None
    """Optuna trial number (``None``: the queue was empty, another process took the cell)."""
    state: str
    """COMPLETE, FAIL, PRUNED, SKIPPED, or LOST (another process failed it as stale and queued it again)."""
    value: float | None = None
    reason: str = ""
    wall_s: float = 0.0
    tracking_s: float = 0.0
    """Seconds spent writing to MLflow (run creation, params, metrics, figures, close)."""


class TrialLost(RuntimeError):
    """Another process failed this trial as stale and queued its cell again: stop running it."""


class TrialSink(tracking.MlflowSink):
    """The trial's MLflow sink that also reports the objective to Optuna (pruning), and stops an orphaned
    worker and one whose trial was failed as stale (``lost``, set by its :class:`~simlab.sweep.rdb.Beat`)."""

    def __init__(self, client: Any, run_id: str, ctx: TrialContext, trial: optuna.Trial,
                 lost: threading.Event) -> None:
        spec = ctx.spec
        super().__init__(client, run_id, curve_keys=(spec.objective.metric, *CURVE_KEYS))
        self.trial, self.objective, self.prune = trial, spec.objective.metric, spec.pruner.kind != "nop"
        self.coordinator_pid, self.lost, self.last_step = int(ctx.coordinator["pid"]), lost, -1

    def check_coordinator(self) -> None:
        """Leave at once when the coordinator died: a SIGKILLed one cannot stop its loky workers, and they
        must not finish a trial the rerun will mark killed and run again."""
        if os.getpid() != self.coordinator_pid and os.getppid() != self.coordinator_pid:
            os._exit(70)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        """Log, stop if the coordinator died or the trial was lost, and report the objective for pruning."""
        self.check_coordinator()
        if self.lost.is_set():
            raise TrialLost(f"trial {self.trial.number} was failed as stale by another process")
        super().log_metrics(metrics, step)
        self.last_step = max(self.last_step, step)
        value = metrics.get(self.objective)
        if self.prune and value is not None and math.isfinite(value):
            self.trial.report(float(value), step)
            if self.trial.should_prune():
                raise optuna.TrialPruned(f"pruned at step {step} ({self.objective}={value:.4g})")


def _failure_kind(exc: BaseException) -> str:
    classes = {cls.__name__ for cls in type(exc).__mro__}
    return "diverged" if classes & {"TrainingDiverged", "FloatingPointError"} else "error"


def open_study(ctx: TrialContext) -> optuna.Study:
    """The sweep's study as a worker sees it (the coordinator created it)."""
    spec = ctx.spec
    return optuna.load_study(
        study_name=spec.name, storage=ctx.queue.open(), sampler=spec.plan.sampler(), pruner=make_pruner(spec)
    )


def run_one(ctx: TrialContext, study: optuna.Study | None = None) -> TrialOutcome:
    """Claim one trial (grid: the next waiting cell; tpe: a new sample) and run it to an end state.

    ``study``: reuse an open study (a worker running trial after trial) instead of opening one.
    """
    start = time.perf_counter()
    limit_threads()
    study = study or open_study(ctx)
    trial = ctx.spec.plan.claim(study, ctx.queue, ctx.spec, ctx.final)
    if trial is None:
        return TrialOutcome(None, "SKIPPED", wall_s=time.perf_counter() - start)
    with ctx.queue.beating(study, trial) as lost:
        return run_trial(ctx, study, trial, lost, start)


@dataclass
class _ClaimedTrial:
    """A claimed trial with its MLflow run: how it ends (finished, failed or pruned, or lost to another
    process that failed it as stale). Every end tells Optuna before closing the run: see reconcile."""

    study: optuna.Study
    trial: optuna.Trial
    sink: TrialSink
    start: float
    """``perf_counter`` when the trial was claimed."""
    create_s: float
    """Seconds it took to create the MLflow run."""

    def outcome(self, state: str, *, value: float | None = None, reason: str = "") -> TrialOutcome:
        return TrialOutcome(self.trial.number, state, value=value, reason=reason,
                            wall_s=time.perf_counter() - self.start,
                            tracking_s=self.create_s + self.sink.write_seconds)

    def gone(self) -> TrialOutcome:
        """Another process failed the trial as stale and queued its cell again: end the run KILLED."""
        reason = (
            f"lost: another process failed trial {self.trial.number} as stale (no heartbeat within the grace "
            "period) and queued its cell again"
        )
        self.sink.figures = False
        with contextlib.suppress(Exception):
            self.sink.close("KILLED", reason)
        return self.outcome("LOST", reason=reason)

    def fail(self, kind: str, reason: str, state: TrialState = TrialState.FAIL, status: str = "FAILED") -> TrialOutcome:
        """Record why (``kind``: diverged, error, pruned), tell Optuna ``state``, end the run ``status``."""
        if not lifecycle.fail(self.study, self.trial, kind, reason, state):
            return self.gone()
        self.sink.set_tags({names.FAILURE_TAG: kind})
        self.sink.close(status, reason)
        return self.outcome(state.name, reason=reason)

    def stopped(self, reason: str) -> TrialOutcome:
        """The seed's base missed the base-quality gate: tell Optuna FAIL (kind ``base_gate``, not retried)
        and delete the run, so nothing of the seed stays in the store but the trial's reason."""
        if not lifecycle.fail(self.study, self.trial, lifecycle.BASE_GATE, reason):
            return self.gone()
        self.sink.figures = False
        self.sink.close("FAILED", reason)
        self.sink.client.delete_run(self.sink.run_id)
        return self.outcome(TrialState.FAIL.name, reason=reason)

    def finish(self, result: dict[str, float], objective: str) -> TrialOutcome:
        """Tell Optuna the objective from ``result`` and end the run FINISHED (or fail it without one)."""
        value = result.get(objective)
        if value is None or not math.isfinite(float(value)):
            got = ", ".join(sorted(result)) or "nothing"
            return self.fail("error", f"objective {objective!r} is {value!r}; the trial returned {got}")
        self.sink.check_coordinator()
        # the trainer logs its final evaluation itself; record only what it returned without logging (to
        # MLflow alone: pruning is over)
        logged = self.sink.rows[-1] if self.sink.rows else {}
        unlogged = {k: float(v) for k, v in result.items() if isinstance(v, int | float) and k not in logged}
        if unlogged:
            tracking.MlflowSink.log_metrics(self.sink, unlogged, max(self.sink.last_step, 0))
        if not lifecycle.finish(self.study, self.trial, float(value)):
            return self.gone()
        self.sink.close("FINISHED")
        return self.outcome("COMPLETE", value=float(value))


def _build(backend: TrialBackend, spec: SweepSpec, cell: Cell) -> tuple[Any, dict[str, str], Exception | None]:
    """(config, its tags, None), or (None, {}, the error): validated up front, but a sampled value can
    still be out of range, and that fails the trial, not the sweep."""
    try:
        cfg = backend.config(spec, cell)
        return cfg, backend.tags(cfg), None
    except Exception as exc:
        return None, {}, exc


def _open_run(ctx: TrialContext, trial: optuna.Trial, cell: Cell, config_tags: dict[str, str],
              lost: threading.Event) -> TrialSink:
    """The trial's MLflow run (nested under the sweep's parent), recorded on the trial."""
    client = tracking.Store(ctx.tracking_uri, ctx.artifact_root).client()
    tags = {
        names.SWEEP_TAG: ctx.spec.name,
        names.TRIAL_TAG: str(trial.number),
        names.CELL_TAG: cell.label,
        names.VARIANT_TAG: cell.variant,  # the grid cell with its seeds pooled, as `simlab report` groups it
        names.SEED_TAG: str(cell.seed),
        **ctx.provenance,
        **config_tags,
    }
    run_id = tracking.child_run(client, ctx.experiment_id, ctx.parent_run_id, f"{trial.number}:{cell.label}", tags)
    lifecycle.record(trial, {names.ATTR_RUN: run_id})
    return TrialSink(client, run_id, ctx, trial, lost)


def run_trial(
    ctx: TrialContext, study: optuna.Study, trial: optuna.Trial, lost: threading.Event, start: float
) -> TrialOutcome:
    """Run a claimed trial to an end state: its MLflow run, training, then tell and close."""
    spec = ctx.spec
    backend: TrialBackend = load_backend(ctx.backend)
    lifecycle.record(trial, {names.ATTR_OWNER: {**ctx.coordinator, "worker": os.getpid()}})
    cell = spec.plan.cell(trial, spec, _suggest(trial, spec))
    cfg, config_tags, build_error = _build(backend, spec, cell)
    t0 = time.perf_counter()
    sink = _open_run(ctx, trial, cell, config_tags, lost)
    run = _ClaimedTrial(study, trial, sink, start, time.perf_counter() - t0)
    if build_error is not None:
        return run.fail("error", f"config: {build_error}")
    run.sink.log_params({**backend.flatten(cfg), names.CELL_PARAM: cell.label})
    try:
        result = backend.train(cfg, run.sink, Path(ctx.store))
    except optuna.TrialPruned as exc:
        return run.fail("pruned", str(exc), TrialState.PRUNED, "KILLED")
    except BaseGateError as exc:
        return run.stopped(str(exc))
    except Exception as exc:
        return run.fail(_failure_kind(exc), f"{type(exc).__name__}: {exc}")
    return run.finish(result, spec.objective.metric)


def _suggest(trial: optuna.Trial, spec: SweepSpec) -> dict[str, Any]:
    """The trial's parameters; for queued trials Optuna returns the enqueued (fixed) values."""
    out = {axis.key: axis.suggest(trial) for axis in spec.axes}
    if spec.variants:
        out[VARIANT_KEY] = trial.suggest_categorical(VARIANT_KEY, [v.name for v in spec.variants])
    return out
