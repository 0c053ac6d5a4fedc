"""The sweep runner: an Optuna study per sweep, explicit enqueueing, crash-safe resume, process workers.

Why the runner does by hand what Optuna could do for it:

- **Grid x seeds are enqueued explicitly**, one waiting trial per missing cell, under a file lock.
  ``GridSampler`` re-samples points after a crash and ``enqueue_trial(skip_if_exists=True)`` also skips
  cells whose only trial FAILED, so neither gives "each cell exactly once".
- **Stale trials are reconciled here**: the journal storage has no heartbeat, so a trial whose process
  was killed stays RUNNING forever. Each claimed trial records its owner (host, coordinator pid and the
  pid's start time); a rerun marks trials of dead owners FAIL, their MLflow runs KILLED, and enqueues
  their cells again. Finished trials and runs are never touched. A database study (:mod:`.rdb`) uses
  Optuna's heartbeat instead, which judges trials on every host.
- **Workers are processes** (joblib/loky) with torch at one thread each: Optuna's ``n_jobs`` is threads.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import optuna
import polars as pl
from optuna.storages import BaseStorage, JournalStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from simlab import names, stores, tracking
from simlab.errors import ConfigError, SpecError
from simlab.names import ATTR_CELL, ATTR_FAILURE, ATTR_OWNER, ATTR_REASON, ATTR_REPLACES, ATTR_RUN, ATTR_SEED
from simlab.sweep import optuna_private as private
from simlab.sweep import rdb
from simlab.sweep.backend import DEFAULT_BACKEND, TrialBackend, load_backend
from simlab.sweep.spec import Cell, SweepSpec, probe_settings

JOURNAL_NAME = stores.JOURNAL_NAME
HOST_ENV = "SIMLAB_HOST"
"""Overrides the host name a trial's owner records (one identity per machine; tests stand in a second)."""
FINAL_FAILURES = ("diverged",)
"""Failure kinds that are results (rerunning the same seed gives the same failure): not retried."""
FINAL_IN_RUN = (*FINAL_FAILURES, "error")
"""Within one run an error is final too (a deterministic one would be retried forever); the next
``simlab sweep`` or ``simlab worker`` start retries it. Only a killed trial's cell runs again at once."""
CURVE_KEYS = (names.EVAL_COMPACTED_SUCCESS, names.EVAL_SINGLE_WINDOW_SUCCESS, names.EVAL_COMPACTED_COMPACTION_RATE)
"""Drawn in every trial's learning-curve figure beside the objective (when the trainer logs them)."""
UNOWNED_GRACE_S = 120.0
"""A RUNNING trial with no owner record older than this was killed between claim and record."""



# --- where things live ---


def storage_location(storage: str | None, root: Path) -> str:
    """``--storage`` as given (RDB URL or journal file path), else ``<root>/mlruns/optuna-journal.log``."""
    return stores.study_store(storage, root).location


def open_storage(
    location: str, heartbeat: int = rdb.HEARTBEAT_S, tracking_uri: str | None = None
) -> BaseStorage:
    """A journal file (safe for processes on one host) or an RDB URL (PostgreSQL for several hosts).

    An RDB storage runs Optuna's heartbeat; its stale trials go to :class:`RequeueStale`, which ends
    their MLflow runs in ``tracking_uri``.
    """
    if "://" in location:
        return rdb.open_rdb(location, heartbeat=heartbeat, on_stale=RequeueStale(tracking_uri))
    Path(location).parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(location))


@contextlib.contextmanager
def storage_lock(location: str, name: str = "") -> Iterator[None]:
    """Serialise reconcile + enqueue between processes sharing a study: a file lock beside a journal
    file, the database's lock for an RDB storage (hosts starting the same spec at once)."""
    if "://" in location:
        with rdb.study_lock(location, name):
            yield
        return
    Path(location).parent.mkdir(parents=True, exist_ok=True)
    with stores.file_lock(location):
        yield


# --- owners and liveness ---


def _process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (so a recycled pid is not mistaken for the owner)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return ""
        return ""  # alive, start time unknown (no /proc)
    return stat.rsplit(")", 1)[1].split()[19]


def host_name() -> str:
    """The identity of this machine in owner records: ``$SIMLAB_HOST``, else the host name."""
    return os.environ.get(HOST_ENV) or socket.gethostname()


def this_owner() -> dict[str, Any]:
    """The owner record of this process: host, pid, the pid's start time and when it started."""
    pid = os.getpid()
    return {"host": host_name(), "pid": pid, "start": _process_start(pid), "since": time.time()}


def owner_alive(owner: dict[str, Any]) -> bool | None:
    """True/False for an owner on this host; ``None`` when it runs elsewhere (cannot tell)."""
    if owner.get("host") != host_name():
        return None
    start = _process_start(int(owner["pid"]))
    return start is not None and (start == "" or start == owner.get("start"))


# --- Optuna parameter encoding (categoricals hold scalars only) ---


def _encode(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, list) else value


def _decode(value: Any, grid: Sequence[Any] | None) -> Any:
    if isinstance(value, str) and grid is not None and any(isinstance(g, list) for g in grid):
        with contextlib.suppress(json.JSONDecodeError):
            return json.loads(value)
    return value


def cell_params(cell: Cell) -> dict[str, Any]:
    """A cell's point as Optuna parameters, list values JSON-encoded (categoricals hold scalars only). The
    seed is no parameter: it goes in the trial's user attributes (:func:`cell_attrs`), so that Optuna's
    parameter importance ranks the searched axes only."""
    return {k: _encode(v) for k, v in cell.params.items()}


def cell_attrs(cell: Cell) -> dict[str, Any]:
    """The user attributes a queued cell starts with: its identity and its seed."""
    return {ATTR_CELL: cell.key, ATTR_SEED: cell.seed}


def trial_seed(trial: optuna.Trial | FrozenTrial, spec: SweepSpec) -> int:
    """A trial's seed: its cell's (grid; a study from before the seed left the parameters recorded it
    there too), else the seeds in turn over the trial numbers (tpe)."""
    cell = trial.user_attrs.get(ATTR_CELL)
    if cell is not None:
        return int(json.loads(cell)["seed"])
    return spec.seeds[trial.number % len(spec.seeds)]


# --- study setup, reconcile, enqueue ---


def make_sampler(spec: SweepSpec, seed: int | None = None) -> optuna.samplers.BaseSampler:
    """TPE for a tpe spec; a random sampler for a grid, whose trials all come from the queue with fixed params."""
    if spec.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    # grid trials all come from the queue with fixed params; the sampler never chooses a value
    return optuna.samplers.RandomSampler(seed=seed)


def make_pruner(spec: SweepSpec) -> optuna.pruners.BasePruner:
    """The spec's pruner (median, percentile, or none)."""
    p = spec.pruner
    if p.kind == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=p.n_startup_trials, n_warmup_steps=p.n_warmup_steps
        )
    if p.kind == "percentile":
        return optuna.pruners.PercentilePruner(
            p.percentile, n_startup_trials=p.n_startup_trials, n_warmup_steps=p.n_warmup_steps
        )
    return optuna.pruners.NopPruner()


def _done_or_busy(t: FrozenTrial, final: Sequence[str] = FINAL_FAILURES) -> bool:
    """Does this trial account for its cell (so the cell must not be enqueued again)?"""
    if t.state in (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED):
        return True
    return t.state == TrialState.FAIL and t.user_attrs.get(ATTR_FAILURE) in final


def reconcile(study: optuna.Study, client: Any, experiment_id: str) -> list[int]:
    """Mark trials whose worker died FAIL (kind ``killed``) and every orphaned RUNNING MLflow run ended.

    A journal study judges the owners on this host; a database study asks Optuna's heartbeat, which
    judges every host. Returns the numbers of the trials it failed.
    """
    before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    beats = rdb.heartbeat_on(private.storage(study))
    if beats:
        rdb.fail_stale(study)  # stale trials go to RequeueStale
    fail_dead_owners(study, by_owner=not beats)
    close_orphan_runs(study, client, experiment_id)
    # a worker records its failure kind before telling; only the heartbeat check fails without one
    return [
        t.number
        for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
        if t.number in before and t.user_attrs.get(ATTR_FAILURE, "killed") == "killed"
    ]


def _mark_killed(storage: BaseStorage, trial: FrozenTrial, reason: str) -> None:
    storage.set_trial_user_attr(private.trial_id(trial), ATTR_FAILURE, "killed")
    storage.set_trial_user_attr(private.trial_id(trial), ATTR_REASON, reason)


def _who(trial: FrozenTrial) -> str:
    owner = trial.user_attrs.get(ATTR_OWNER)
    return f"pid {owner.get('worker', owner['pid'])} on {owner['host']}" if owner else "an unrecorded process"


def fail_dead_owners(study: optuna.Study, *, by_owner: bool = True) -> None:
    """FAIL the RUNNING trials whose owner died on this host (``by_owner``), and those that never
    recorded an owner within :data:`UNOWNED_GRACE_S` (killed between claim and record)."""
    storage, now = private.storage(study), time.time()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.user_attrs.get(ATTR_OWNER)
        if owner is None:
            started = t.datetime_start.timestamp() if t.datetime_start else now
            stale = now - started > UNOWNED_GRACE_S
        else:
            stale = by_owner and owner_alive(owner) is False
        if not stale:
            continue
        with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
            _mark_killed(storage, t, f"killed: the process running trial {t.number} ({_who(t)}) died; "
                         "its cell is run again")
            storage.set_trial_state_values(private.trial_id(t), TrialState.FAIL)


def close_orphan_runs(study: optuna.Study, client: Any, experiment_id: str) -> None:
    """End the MLflow runs still RUNNING whose trial is not: a worker died between Optuna's tell and
    closing the run (end it as the trial ended), or before either (KILLED)."""
    # the runs first: a run that exists now belongs to a trial already claimed, so reading the trials
    # second cannot mistake a trial claimed in between for a dead one
    running = tracking.running_child_runs(client, experiment_id)
    trials = {str(t.number): t for t in study.get_trials(deepcopy=False)}
    as_status = {TrialState.COMPLETE: "FINISHED", TrialState.FAIL: "FAILED", TrialState.PRUNED: "KILLED"}
    for run_id, tags in running:
        number = tags.get(names.TRIAL_TAG)
        trial = trials.get(str(number))
        if tags.get(names.SWEEP_TAG) != study.study_name or (trial and trial.state == TrialState.RUNNING):
            continue
        if trial is not None and trial.state.is_finished() and trial.user_attrs.get(ATTR_FAILURE) != "killed":
            status = as_status.get(trial.state, "KILLED")
            tracking.finish_run(client, run_id, status, trial.user_attrs.get(ATTR_REASON, ""))
        else:
            tracking.finish_run(
                client, run_id, "KILLED", f"killed: trial {number}'s process died before it finished"
            )


class RequeueStale:
    """Optuna's ``heartbeat_stale_trial_callback`` for a database study: a trial's worker stopped its
    heartbeat (killed, or its host lost), whichever host it ran on.

    Records why on the trial, ends its MLflow run KILLED and, for a grid cell, queues the cell again
    with Optuna's ``RetryHeartbeatStaleTrialCallback`` (the new trial keeps the cell's fixed parameters
    and the retry history). A tpe trial is not replayed: a new sample takes its place.
    """

    def __init__(self, tracking_uri: str | None) -> None:
        self.tracking_uri = tracking_uri

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Record why the stale trial ended, end its MLflow run, and queue its cell again."""
        # Optuna has already made the trial FAIL, so its attrs are frozen: the reason goes to its MLflow
        # run and to the retry (trial_table reads it back from there)
        reason = f"killed: trial {trial.number}'s worker ({_who(trial)}) stopped its heartbeat; its cell is run again"
        run_id = trial.user_attrs.get(ATTR_RUN)
        if run_id and self.tracking_uri:
            with contextlib.suppress(Exception):  # the orphan sweep in reconcile ends it otherwise
                tracking.finish_run(tracking.Store(self.tracking_uri, None).client(), run_id, "KILLED", reason)
        if "fixed_params" in trial.system_attrs and ATTR_CELL in trial.user_attrs:
            retry = copy.deepcopy(trial)
            # the cell, not the dead worker's owner and run
            retry.user_attrs = {ATTR_CELL: trial.user_attrs[ATTR_CELL], ATTR_REPLACES: trial.number}
            if ATTR_SEED in trial.user_attrs:
                retry.user_attrs[ATTR_SEED] = trial.user_attrs[ATTR_SEED]
            RetryHeartbeatStaleTrialCallback()(study, retry)


def enqueue_missing(study: optuna.Study, spec: SweepSpec, final: Sequence[str] = FINAL_FAILURES) -> int:
    """Enqueue every grid cell that no trial accounts for; returns how many were enqueued."""
    have = {t.user_attrs.get(ATTR_CELL) for t in study.get_trials(deepcopy=False) if _done_or_busy(t, final)}
    added = 0
    for cell in spec.cells():
        if cell.key not in have:
            study.enqueue_trial(cell_params(cell), user_attrs=cell_attrs(cell))
            added += 1
    return added


def tpe_remaining(study: optuna.Study, spec: SweepSpec, final: Sequence[str] = FINAL_FAILURES) -> int:
    """Trials a tpe sweep still needs: ``n_trials`` minus those already done or under way."""
    assert spec.n_trials is not None
    return max(0, spec.n_trials - sum(_done_or_busy(t, final) for t in study.get_trials(deepcopy=False)))


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


def claim_waiting(study: optuna.Study) -> int | None:
    """Atomically move one WAITING trial to RUNNING; its id, or ``None`` when none is left."""
    storage = private.storage(study)
    beats = rdb.heartbeat_on(storage)
    for t in private.waiting_trials(study):
        try:
            if beats:  # before the claim, so that no claimed trial is ever without a heartbeat
                storage.record_heartbeat(private.trial_id(t))  # type: ignore[attr-defined]
            if storage.set_trial_state_values(private.trial_id(t), state=TrialState.RUNNING):
                return private.trial_id(t)
        except optuna.exceptions.UpdateFinishedTrialError:
            continue
    return None


class TrialLost(RuntimeError):
    """Another process failed this trial as stale and queued its cell again: stop running it."""


class TrialSink:
    """Forwards to the MLflow sink; reports the objective to Optuna (pruning); stops an orphaned worker,
    and one whose trial was failed as stale (``lost``, set by its :class:`~simlab.sweep.rdb.Beat`)."""

    def __init__(
        self,
        inner: tracking.MlflowSink,
        trial: optuna.Trial,
        objective: str,
        prune: bool,
        coordinator_pid: int,
        lost: threading.Event | None = None,
    ) -> None:
        self.inner, self.trial, self.objective, self.prune = inner, trial, objective, prune
        self.coordinator_pid = coordinator_pid
        self.lost = lost
        self.last_step = -1

    def _check_coordinator(self) -> None:
        # a SIGKILLed coordinator cannot stop its loky workers; they must not finish a trial the rerun
        # will mark killed and run again, so they leave at the next step
        if os.getpid() != self.coordinator_pid and os.getppid() != self.coordinator_pid:
            os._exit(70)

    def log_params(self, params: dict[str, Any]) -> None:
        """Forward to the MLflow sink."""
        self.inner.log_params(params)

    def set_tags(self, tags: dict[str, str]) -> None:
        """Forward to the MLflow sink."""
        self.inner.set_tags(tags)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        """Forward, stop if the coordinator died or the trial was lost, and report the objective for pruning."""
        self._check_coordinator()
        if self.lost is not None and self.lost.is_set():
            raise TrialLost(f"trial {self.trial.number} was failed as stale by another process")
        self.inner.log_metrics(metrics, step)
        self.last_step = max(self.last_step, step)
        value = metrics.get(self.objective)
        if self.prune and value is not None and math.isfinite(value):
            self.trial.report(float(value), step)
            if self.trial.should_prune():
                raise optuna.TrialPruned(f"pruned at step {step} ({self.objective}={value:.4g})")

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        """Forward to the MLflow sink."""
        self.inner.log_artifact(path, artifact_path)

    def close(self, status: str = "FINISHED", reason: str = "") -> None:
        """Forward to the MLflow sink."""
        self.inner.close(status, reason)


def _failure_kind(exc: BaseException) -> str:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return "diverged" if names & {"TrainingDiverged", "FloatingPointError"} else "error"


def limit_threads() -> None:
    """One thread per worker process (trials and base builds run side by side)."""
    # one thread per worker: the env vars cover a torch imported later by the trainer (read at import),
    # set_num_threads one already imported; importing torch here would cost every worker seconds
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def open_study(ctx: TrialContext) -> optuna.Study:
    """The sweep's study as a worker sees it (the coordinator created it)."""
    storage = open_storage(ctx.storage, ctx.heartbeat, ctx.tracking_uri)
    spec = ctx.spec
    return optuna.load_study(
        study_name=spec.name, storage=storage, sampler=make_sampler(spec), pruner=make_pruner(spec)
    )


def claim(study: optuna.Study, ctx: TrialContext) -> optuna.Trial | None:
    """The next trial to run (grid: a waiting cell; tpe: a new sample while ``n_trials`` allows), or ``None``."""
    if ctx.spec.sampler == "grid":
        trial_id = claim_waiting(study)
        return None if trial_id is None else private.running_trial(study, trial_id)
    with storage_lock(ctx.storage, ctx.spec.name):  # n_trials bounds every process together
        if tpe_remaining(study, ctx.spec, ctx.final) < 1:
            return None
        with rdb.quiet():
            return study.ask()


def run_one(ctx: TrialContext, study: optuna.Study | None = None) -> TrialOutcome:
    """Claim one trial (grid: the next waiting cell; tpe: a new sample) and run it to an end state.

    ``study``: reuse an open study (a worker running trial after trial) instead of opening one.
    """
    start = time.perf_counter()
    limit_threads()
    study = study or open_study(ctx)
    trial = claim(study, ctx)
    if trial is None:
        return TrialOutcome(None, "SKIPPED", wall_s=time.perf_counter() - start)
    beat = rdb.Beat(private.storage(study), private.trial_id(trial)).start()
    try:
        return run_trial(ctx, study, trial, beat.lost, start)
    finally:
        beat.stop()


def _tell(study: optuna.Study, trial: optuna.Trial, **how: Any) -> bool:
    """``study.tell``; False when the trial had already ended (failed as stale by another process)."""
    try:
        study.tell(trial, **how)
    except optuna.exceptions.UpdateFinishedTrialError:
        return False
    except ValueError:  # "Cannot tell a FAIL trial."
        if private.storage(study).get_trial(private.trial_id(trial)).state.is_finished():
            return False
        raise
    return True


@dataclass
class _ClaimedTrial:
    """A claimed trial with its MLflow run: how it ends (finished, failed or pruned, or lost to another
    process that failed it as stale). Every end tells Optuna before closing the run: see reconcile."""

    study: optuna.Study
    trial: optuna.Trial
    sink: tracking.MlflowSink
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
        return TrialOutcome(self.trial.number, "LOST", reason=reason, wall_s=time.perf_counter() - self.start)

    def fail(self, kind: str, reason: str, state: TrialState = TrialState.FAIL, status: str = "FAILED") -> TrialOutcome:
        """Record why (``kind``: diverged, error, pruned), tell Optuna ``state``, end the run ``status``."""
        try:
            self.trial.set_user_attr(ATTR_FAILURE, kind)
            self.trial.set_user_attr(ATTR_REASON, reason)
            told = _tell(self.study, self.trial, state=state)
        except optuna.exceptions.UpdateFinishedTrialError:
            told = False
        if not told:
            return self.gone()
        self.sink.set_tags({names.FAILURE_TAG: kind})
        self.sink.close(status, reason)
        return self.outcome(state.name, reason=reason)

    def finish(self, result: dict[str, float], objective: str, tsink: TrialSink) -> TrialOutcome:
        """Tell Optuna the objective from ``result`` and end the run FINISHED (or fail it without one)."""
        value = result.get(objective)
        if value is None or not math.isfinite(float(value)):
            got = ", ".join(sorted(result)) or "nothing"
            return self.fail("error", f"objective {objective!r} is {value!r}; the trial returned {got}")
        tsink._check_coordinator()
        # the trainer logs its final evaluation itself; record only what it returned without logging
        logged = self.sink.rows[-1] if self.sink.rows else {}
        unlogged = {k: float(v) for k, v in result.items() if isinstance(v, int | float) and k not in logged}
        if unlogged:
            self.sink.log_metrics(unlogged, max(tsink.last_step, 0))
        if not _tell(self.study, self.trial, values=float(value)):
            return self.gone()
        self.sink.close("FINISHED")
        return self.outcome("COMPLETE", value=float(value))


def _build(backend: TrialBackend, settings: dict[str, Any], seed: int) -> tuple[Any, dict[str, str], Exception | None]:
    """(config, its tags, None), or (None, {}, the error): validated up front, but a sampled value can
    still be out of range, and that fails the trial, not the sweep."""
    try:
        cfg = backend.build(settings, seed)
        return cfg, backend.tags(cfg), None
    except Exception as exc:
        return None, {}, exc


def _open_run(ctx: TrialContext, trial: optuna.Trial, cell: Cell, config_tags: dict[str, str]) -> tracking.MlflowSink:
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
    trial.set_user_attr(ATTR_RUN, run_id)
    return tracking.MlflowSink(client, run_id, curve_keys=(ctx.spec.objective.metric, *CURVE_KEYS))


def run_trial(
    ctx: TrialContext, study: optuna.Study, trial: optuna.Trial, lost: threading.Event, start: float
) -> TrialOutcome:
    """Run a claimed trial to an end state: its MLflow run, training, then tell and close."""
    spec = ctx.spec
    backend: TrialBackend = load_backend(ctx.backend)
    trial.set_user_attr(ATTR_OWNER, {**ctx.coordinator, "worker": os.getpid()})
    params = _suggest(trial, spec)
    cell = Cell(params, trial_seed(trial, spec))
    if spec.sampler == "tpe":
        for key, value in cell_attrs(cell).items():
            trial.set_user_attr(key, value)

    t0 = time.perf_counter()
    cfg, config_tags, build_error = _build(backend, spec.settings(params), cell.seed)
    run = _ClaimedTrial(study, trial, _open_run(ctx, trial, cell, config_tags), start, 0.0)
    run.create_s = time.perf_counter() - t0
    if build_error is not None:
        return run.fail("error", f"config: {build_error}")
    run.sink.log_params({**backend.flatten(cfg), names.CELL_PARAM: cell.label})
    tsink = TrialSink(run.sink, trial, spec.objective.metric, spec.pruner.kind != "nop",
                      int(ctx.coordinator["pid"]), lost)
    try:
        result = backend.train(cfg, tsink, Path(ctx.store))
    except optuna.TrialPruned as exc:
        return run.fail("pruned", str(exc), TrialState.PRUNED, "KILLED")
    except Exception as exc:
        return run.fail(_failure_kind(exc), f"{type(exc).__name__}: {exc}")
    return run.finish(result, spec.objective.metric, tsink)


def _suggest(trial: optuna.Trial, spec: SweepSpec) -> dict[str, Any]:
    """The trial's parameters; for queued trials Optuna returns the enqueued (fixed) values."""
    out: dict[str, Any] = {}
    for axis in spec.axes:
        if axis.grid is not None:
            raw = trial.suggest_categorical(axis.key, [_encode(v) for v in axis.grid])
            out[axis.key] = _decode(raw, axis.grid)
            continue
        d = axis.dist
        assert d is not None
        if d.kind == "float":
            out[axis.key] = trial.suggest_float(
                axis.key,
                float(d.low),
                float(d.high),
                log=d.log,
                step=None if d.step is None else float(d.step),
            )
        elif d.kind == "int":
            out[axis.key] = trial.suggest_int(
                axis.key,
                int(d.low),
                int(d.high),
                log=d.log,
                step=1 if d.step is None else int(d.step),
            )
        else:
            out[axis.key] = trial.suggest_categorical(axis.key, list(d.choices))
    if spec.variants:
        out["variant"] = trial.suggest_categorical("variant", [v.name for v in spec.variants])
    return out


# --- the coordinator ---


@dataclass(frozen=True)
class SweepResult:
    """What ``simlab sweep`` prints at the end."""

    study: str
    storage: str
    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    ran: int
    failed: int
    reconciled: tuple[int, ...]
    table: Path | None
    """``trials.csv``: every trial's point, seed, state, value and failure (``None`` if it was not written)."""
    wall_s: float
    outcomes: tuple[TrialOutcome, ...]
    workers: int = 1
    """Worker processes this host ran the trials on."""


def validate(spec: SweepSpec, backend: TrialBackend) -> None:
    """Resolve every probe configuration before anything is written (raises :class:`SpecError`)."""
    seen: set[str] = set()
    for settings in probe_settings(spec):
        key = json.dumps(settings, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        try:
            backend.build(settings, spec.seeds[0])
        except ConfigError as exc:  # TrialBackend.build's contract: a ConfigError names the bad key path
            where = ", ".join(f"{k}={v!r}" for k, v in settings.items() if k != "preset")
            raise SpecError(f"{exc} (in the configuration {where})") from None


@dataclass
class OpenSweep:
    """A sweep ready to run trials: its study, MLflow experiment and parent run, and the worker context."""

    spec: SweepSpec
    study: optuna.Study
    study_store: stores.StudyStore
    store: tracking.Store
    client: Any
    root: Path
    ctx: TrialContext
    reconciled: list[int]

    def todo(self) -> int:
        """Trials still to run: waiting grid cells, or the tpe trials ``n_trials`` still allows."""
        if self.spec.sampler == "grid":
            return len(self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
        return tpe_remaining(self.study, self.spec, self.ctx.final)

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """The study's lock (a file lock beside a journal, the database's for an RDB study)."""
        return storage_lock(self.study_store.location, self.spec.name)

    def refresh(self) -> list[int]:
        """Reconcile and enqueue what is missing, under the study's lock; the trials it failed."""
        with self.lock():
            failed = reconcile(self.study, self.client, self.ctx.experiment_id)
            if self.spec.sampler == "grid":
                enqueue_missing(self.study, self.spec, self.ctx.final)
        return failed

    def result(self, outcomes: Sequence[TrialOutcome], table: Path | None, start: float,
               workers: int = 1) -> SweepResult:
        """The :class:`SweepResult` of this run's ``outcomes``, played on ``workers`` processes."""
        return SweepResult(
            study=self.spec.name,
            storage=self.study_store.location,
            tracking_uri=self.store.tracking_uri,
            experiment_id=self.ctx.experiment_id,
            parent_run_id=self.ctx.parent_run_id,
            ran=sum(o.state != "SKIPPED" for o in outcomes),
            failed=sum(o.state == "FAIL" for o in outcomes),
            reconciled=tuple(self.reconciled),
            table=table,
            wall_s=time.perf_counter() - start,
            outcomes=tuple(outcomes),
            workers=workers,
        )

    def done(self) -> bool:
        """Every cell accounted for by a finished trial: nothing waiting, nothing running anywhere."""
        busy = self.study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING))
        return not busy and self.todo() == 0


def _create_study(
    spec: SweepSpec, study_store: stores.StudyStore, heartbeat: int, tracking_uri: str
) -> optuna.Study:
    """Create or load the sweep's study; a changed spec under the same name is refused before MLflow is
    touched (its fingerprint is stored on the study)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    direction: Literal["minimize", "maximize"] = "minimize" if spec.objective.direction == "minimize" else "maximize"
    study = optuna.create_study(
        study_name=spec.name,
        storage=open_storage(study_store.location, heartbeat, tracking_uri),
        load_if_exists=True,
        direction=direction,
        sampler=make_sampler(spec),
        pruner=make_pruner(spec),
    )
    known = study.user_attrs.get(names.STUDY_FINGERPRINT)
    if known is not None and known != spec.fingerprint():
        raise SpecError(
            f"study {spec.name!r} in {study_store.shown} was made from a different spec; give this sweep "
            "a new `name` or another --storage (resuming it would mix two sweeps)"
        )
    study.set_user_attr(names.STUDY_FINGERPRINT, spec.fingerprint())
    return study


def _open_runs(
    spec: SweepSpec, store: tracking.Store, study_store: stores.StudyStore
) -> tuple[Any, str, str, dict[str, str]]:
    """(client, experiment id, parent run id, provenance tags): the sweep's experiment and its one parent
    run, whichever host comes first (the caller holds the study's lock, so search-then-create is atomic)."""
    client = tracking.prepare(store)
    experiment_id = tracking.ensure_experiment(client, spec.name, store)
    provenance = tracking.provenance_tags()
    parent_tags = {
        names.SAMPLER_TAG: spec.sampler,
        names.OBJECTIVE_TAG: spec.objective.metric,
        names.STORAGE_TAG: study_store.shown,
        names.NOTE_TAG: spec.description,
        **({names.BASELINE_TAG: spec.baseline} if spec.baseline else {}),
        **provenance,
    }
    return client, experiment_id, tracking.parent_run(client, experiment_id, spec.name, parent_tags), provenance


def open_sweep(
    spec: SweepSpec,
    *,
    storage: str | None = None,
    tracking_uri: str | None = None,
    root: Path | None = None,
    backend: str = DEFAULT_BACKEND,
    heartbeat: int = rdb.HEARTBEAT_S,
) -> OpenSweep:
    """Check, create or join the study, the experiment and the parent run; reconcile and enqueue.

    Everything a bad spec or a bad store can fail on is checked before the first write. The setup runs
    under the study's lock, so processes on several hosts may open the same sweep at once.
    """
    root = (root or stores.home()).resolve()
    if isinstance(heartbeat, bool) or not isinstance(heartbeat, int) or not 1 <= heartbeat <= 86_400:
        raise SpecError.invalid("--heartbeat", heartbeat, "choose an integer number of seconds in [1, 86400]")
    study_store, uri, artifact_root = stores.preflight(storage, tracking_uri, root)
    validate(spec, load_backend(backend))
    store = tracking.Store(uri, artifact_root)
    location = study_store.location

    with storage_lock(location, spec.name):  # hosts starting at once: one creates the tables, the study
        study = _create_study(spec, study_store, heartbeat, store.tracking_uri)  # the first write
        client, experiment_id, parent_run_id, provenance = _open_runs(spec, store, study_store)
        reconciled = reconcile(study, client, experiment_id)
        if spec.sampler == "grid":
            enqueue_missing(study, spec)
    ctx = TrialContext(
        spec=spec,
        backend=backend,
        storage=location,
        tracking_uri=store.tracking_uri,
        artifact_root=store.artifact_root,
        experiment_id=experiment_id,
        parent_run_id=parent_run_id,
        coordinator=this_owner(),
        store=str(root / "mlruns"),
        provenance=provenance,
        heartbeat=heartbeat,
    )
    return OpenSweep(spec, study, study_store, store, client, root, ctx, reconciled)


def prepare_shared(sweep: OpenSweep, echo: Callable[[str], None], workers: int = 1) -> None:
    """Build what the trials share (cached base checkpoints, one per seed when seeds vary the base model)
    on up to ``workers`` processes, before any trial."""
    trial_backend = load_backend(sweep.ctx.backend)
    if trial_backend.prepare is None:
        return
    echo("preparing what the trials share (cached base checkpoints) ...")
    points = probe_settings(sweep.spec)
    cfgs = [trial_backend.build(settings, seed) for seed in sweep.spec.seeds for settings in points]
    trial_backend.prepare(cfgs, sweep.root / "mlruns", workers)


def drain(
    sweep: OpenSweep, *, echo: Callable[[str], None], on_outcome: Callable[[TrialOutcome], None]
) -> None:
    """Run trials in this process until the grid is done: cells queued again after a worker died, and
    waiting while other processes (any host) finish theirs, so that a dead one's cells are not left."""
    sweep = dataclasses.replace(sweep, ctx=dataclasses.replace(sweep.ctx, final=FINAL_IN_RUN))
    study = open_study(sweep.ctx)
    waiting_said = False
    while True:
        outcome = run_one(sweep.ctx, study)
        if outcome.state != "SKIPPED":
            on_outcome(outcome)
            continue
        failed = sweep.refresh()
        if failed:
            echo(f"marked {len(failed)} trial(s) of a dead worker failed and queued their cells again")
        if sweep.done():
            return
        if sweep.todo() == 0:
            if not waiting_said:
                running = len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
                echo(f"waiting for {running} trial(s) running in other processes ...")
                waiting_said = True
            time.sleep(sweep.ctx.heartbeat if sweep.study_store.is_rdb else 2.0)


def machine_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS says), the default worker count:
    each worker runs torch on one thread, so one per core fills the machine without oversubscribing it."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def run_sweep(
    spec: SweepSpec,
    *,
    workers: int | None = None,
    storage: str | None = None,
    tracking_uri: str | None = None,
    root: Path | None = None,
    backend: str = DEFAULT_BACKEND,
    progress: bool = True,
    echo: Callable[[str], None] = print,
    heartbeat: int = rdb.HEARTBEAT_S,
) -> SweepResult:
    """Validate, reconcile, enqueue what is missing, run it on ``workers`` processes (default: one per
    core, :func:`machine_cores`), write trials.csv."""
    start = time.perf_counter()
    workers = machine_cores() if workers is None else workers
    if workers < 1:
        raise SpecError(f"`workers={workers}` is invalid; choose an integer >= 1")
    sweep = open_sweep(
        spec, storage=storage, tracking_uri=tracking_uri, root=root, backend=backend, heartbeat=heartbeat
    )
    study, client, ctx, store = sweep.study, sweep.client, sweep.ctx, sweep.store
    todo = sweep.todo()
    if sweep.reconciled:
        echo(f"resume: marked {len(sweep.reconciled)} trial(s) of a killed run failed and queued their cells again")
    total = len(spec.cells()) if spec.sampler == "grid" else int(spec.n_trials or 0)
    echo(
        f"sweep {spec.name!r}: {todo} of {total} trial(s) to run on {workers} worker(s); "
        f"study in {sweep.study_store.shown}, runs in {stores.shown(store.tracking_uri)}"
    )

    outcomes: list[TrialOutcome] = []
    status, reason = "FINISHED", ""
    try:
        if todo:
            prepare_shared(sweep, echo, workers)
        _run_pool(sweep, workers, todo, progress, outcomes)
    except BaseException as exc:
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        table = None
        with contextlib.suppress(Exception):
            table = write_trials(study, results_dir(store, sweep.root, spec.name))
            client.log_artifact(ctx.parent_run_id, str(table), "summary")
        tracking.finish_run(client, ctx.parent_run_id, status, reason)
    return sweep.result(outcomes, table, start, workers)


def _run_pool(sweep: OpenSweep, workers: int, todo: int, progress: bool, outcomes: list[TrialOutcome]) -> None:
    """Run the ``todo`` trials on ``workers`` loky processes, then what other processes left (retries,
    their trials) in this one; every outcome goes into ``outcomes`` as it arrives, behind a progress bar."""
    from joblib import Parallel, delayed
    from tqdm import tqdm

    bar = tqdm(total=todo, unit="trial", disable=not progress, dynamic_ncols=True)

    def record(outcome: TrialOutcome) -> None:
        outcomes.append(outcome)
        bar.update(1)
        bar.set_postfix(failed=sum(o.state == "FAIL" for o in outcomes))
        if outcome.state == "FAIL":
            bar.write(f"trial {outcome.number} failed: {outcome.reason}")

    if todo:
        jobs = Parallel(n_jobs=min(workers, todo), backend="loky", return_as="generator_unordered")(
            delayed(run_one)(sweep.ctx) for _ in range(todo)
        )
        for outcome in jobs:
            if outcome.state != "SKIPPED":
                record(outcome)
    drain(sweep, echo=bar.write, on_outcome=record)
    bar.close()


def results_dir(store: tracking.Store, root: Path, name: str) -> Path:
    """Where the sweep's local tables go: ``<store folder>/sweeps/<name>``."""
    base = store.local_folder or (root / "mlruns")
    return base / "sweeps" / name


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
            failure, reason = "killed", "its worker stopped its heartbeat"
            if t.number in replaced:
                reason += f"; its cell ran again as trial {replaced[t.number].number}"
        rows.append({"trial": t.number, "point": point or "-", "seed": cell.get("seed"), "state": t.state.name,
                     "value": t.value, "failure": failure, "reason": reason,
                     "mlflow_run_id": t.user_attrs.get(ATTR_RUN, "")})
    return pl.DataFrame(rows, schema=TRIAL_SCHEMA)


def write_trials(study: optuna.Study, folder: Path) -> Path:
    """``trials.csv`` (:func:`trial_table`) in ``folder``; its path. The per-point summary over seeds is
    the analysis layer's (:func:`simlab.analysis.summary.write_summary`)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "trials.csv"
    trial_table(study).write_csv(path)
    return path
