"""The sweep runner's coordinator: validate a spec, open (or join) its study and MLflow runs, prepare
what trials share, and drain the queue with a pool of worker processes.

The study's side is :mod:`.study`, one trial's is :mod:`.trial`, and every write to a trial's state is
in :mod:`.lifecycle`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from simlab import names, stores, tracking
from simlab.errors import ConfigError, SpecError
from simlab.rules import check_value, ints
from simlab.sweep import lifecycle, rdb
from simlab.sweep.backend import DEFAULT_BACKEND, TrialBackend, load_backend
from simlab.sweep.queue import TrialQueue, trial_queue
from simlab.sweep.space import Cell
from simlab.sweep.spec import SweepSpec
from simlab.sweep.study import FINAL_FAILURES, FINAL_IN_RUN, make_pruner, reconcile, write_trials
from simlab.sweep.trial import TrialContext, TrialOutcome, open_study, run_one

# --- the coordinator ---


@dataclass(frozen=True)
class SweepResult:
    """What ``simlab sweep`` prints at the end."""

    tracking_uri: str
    parent_run_id: str
    ran: int
    failed: int
    table: Path | None
    """``trials.csv``: every trial's point, seed, state, value and failure (``None`` if it was not written)."""
    wall_s: float
    outcomes: tuple[TrialOutcome, ...]
    workers: int = 1
    """Worker processes this host ran the trials on."""


def validate(spec: SweepSpec, backend: TrialBackend) -> None:
    """Resolve every probe configuration, and check the objective is a metric the backend can return,
    before anything is written (raises :class:`SpecError`)."""
    probes = {json.dumps(spec.settings(point), sort_keys=True, default=str): point for point in spec.plan.probes(spec)}
    for point in probes.values():  # one per distinct configuration
        try:
            cfg = backend.config(spec, Cell(point, spec.seeds[0]))
        except ConfigError as exc:  # TrialBackend.build's contract: a ConfigError names the bad key path
            where = ", ".join(f"{k}={v!r}" for k, v in spec.settings(point).items())
            raise SpecError(f"{exc} (in the configuration {where})") from None
        if backend.check_metric is not None:
            try:
                backend.check_metric("objective.metric", spec.objective.metric, cfg)
            except ConfigError as exc:
                raise SpecError(str(exc), key=exc.key, value=exc.value, allowed=exc.allowed) from None


@dataclass
class OpenSweep:
    """A sweep ready to run trials: its study, MLflow experiment and parent run, and the worker context."""

    study: optuna.Study
    study_store: stores.StudyStore
    store: tracking.Store
    client: Any
    ctx: TrialContext
    reconciled: list[int]

    def todo(self) -> int:
        """Trials still to run, as the plan counts them (waiting cells, or samples ``n_trials`` allows)."""
        return self.ctx.spec.plan.todo(self.study, self.ctx.spec, self.ctx.final)

    def refresh(self) -> list[int]:
        """Reconcile and enqueue what is missing, under the study's lock; the trials it failed."""
        ctx = self.ctx
        with ctx.queue.lock(ctx.spec.name):
            return reconcile(self.study, ctx.spec, ctx.queue, self.client, ctx.experiment_id, ctx.final)

    def say_resumed(self, echo: Callable[[str], None]) -> None:
        """Say how many trials of a killed run opening the sweep failed and queued again, if any."""
        if self.reconciled:
            echo(f"resume: marked {len(self.reconciled)} trial(s) of a killed run failed and queued their cells again")

    def result(self, outcomes: Sequence[TrialOutcome], table: Path | None, start: float,
               workers: int = 1) -> SweepResult:
        """The :class:`SweepResult` of this run's ``outcomes``, played on ``workers`` processes."""
        return SweepResult(
            tracking_uri=self.store.tracking_uri,
            parent_run_id=self.ctx.parent_run_id,
            ran=len(outcomes),  # SKIPPED outcomes (an empty queue) are never recorded
            failed=sum(o.state == "FAIL" for o in outcomes),
            table=table,
            wall_s=time.perf_counter() - start,
            outcomes=tuple(outcomes),
            workers=workers,
        )


def _create_study(spec: SweepSpec, study_store: stores.StudyStore, queue: TrialQueue) -> optuna.Study:
    """Create or load the sweep's study; a changed spec under the same name is refused before MLflow is
    touched (its fingerprint is stored on the study)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=spec.name,
        storage=queue.open(),
        load_if_exists=True,
        direction=spec.objective.direction,
        sampler=spec.plan.sampler(),
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
    queue = trial_queue(study_store.location, heartbeat, store.tracking_uri)

    with queue.lock(spec.name):  # hosts starting at once: one creates the tables, the study
        study = _create_study(spec, study_store, queue)  # the first write
        client, experiment_id, parent_run_id, provenance = _open_runs(spec, store, study_store)
        reconciled = reconcile(study, spec, queue, client, experiment_id, FINAL_FAILURES)
    ctx = TrialContext(
        spec=spec,
        backend=backend,
        storage=study_store.location,
        tracking_uri=store.tracking_uri,
        artifact_root=store.artifact_root,
        experiment_id=experiment_id,
        parent_run_id=parent_run_id,
        coordinator=lifecycle.this_owner(),
        store=str(root / "mlruns"),
        provenance=provenance,
        heartbeat=heartbeat,
    )
    return OpenSweep(study, study_store, store, client, ctx, reconciled)


def prepare_shared(sweep: OpenSweep, todo: int, echo: Callable[[str], None], workers: int = 1) -> None:
    """Build what the trials share (cached base checkpoints, one per seed when seeds vary the base model)
    on up to ``workers`` processes, before any trial; nothing when no trial is left to run (``todo``, as
    :meth:`OpenSweep.todo` counted it: the caller has counted already)."""
    trial_backend = load_backend(sweep.ctx.backend)
    spec = sweep.ctx.spec
    if trial_backend.prepare is None or todo == 0:
        return
    echo("preparing what the trials share (cached base checkpoints) ...")
    points = spec.plan.probes(spec)
    cfgs = [trial_backend.config(spec, Cell(point, seed)) for seed in spec.seeds for point in points]
    trial_backend.prepare(cfgs, Path(sweep.ctx.store), workers)


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
        if sweep.todo() == 0:
            if not study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING)):
                return  # every cell accounted for by a finished trial: nothing waiting or running anywhere
            if not waiting_said:
                running = len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
                echo(f"waiting for {running} trial(s) running in other processes ...")
                waiting_said = True
            time.sleep(sweep.ctx.queue.poll_s)


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
    workers = check_value("workers", machine_cores() if workers is None else workers, ints(1, 1024), SpecError)
    sweep = open_sweep(
        spec, storage=storage, tracking_uri=tracking_uri, root=root, backend=backend, heartbeat=heartbeat
    )
    todo = sweep.todo()
    sweep.say_resumed(echo)
    echo(
        f"sweep {spec.name!r}: {todo} of {spec.plan.total(spec)} trial(s) to run on {workers} worker(s); "
        f"study in {sweep.study_store.shown}, runs in {stores.shown(sweep.store.tracking_uri)}"
    )

    outcomes: list[TrialOutcome] = []
    status, reason = "FINISHED", ""
    try:
        prepare_shared(sweep, todo, echo, workers)
        _run_pool(sweep, workers, todo, progress, outcomes)
    except BaseException as exc:
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        table = None
        with contextlib.suppress(Exception):
            table = write_trials(sweep.study, sweep.store, Path(sweep.ctx.store))
            sweep.client.log_artifact(sweep.ctx.parent_run_id, str(table), "summary")
        tracking.finish_run(sweep.client, sweep.ctx.parent_run_id, status, reason)
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
