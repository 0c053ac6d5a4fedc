"""The sweep runner: an Optuna study per sweep, explicit enqueueing, crash-safe resume, process workers.

Why the runner does by hand what Optuna could do for it:

- **Grid x seeds are enqueued explicitly**, one waiting trial per missing cell, under a file lock.
  ``GridSampler`` re-samples points after a crash and ``enqueue_trial(skip_if_exists=True)`` also skips
  cells whose only trial FAILED, so neither gives "each cell exactly once".
- **Stale trials are reconciled here**: the journal storage has no heartbeat, so a trial whose process
  was killed stays RUNNING forever. Each claimed trial records its owner (host, coordinator pid and the
  pid's start time); a rerun marks trials of dead owners FAIL, their MLflow runs KILLED, and enqueues
  their cells again. Finished trials and runs are never touched.
- **Workers are processes** (joblib/loky) with torch at one thread each: Optuna's ``n_jobs`` is threads.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import optuna
from optuna.storages import BaseStorage, JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from simlab import tracking
from simlab.sweep.backend import DEFAULT_BACKEND, TrialBackend, load_backend
from simlab.sweep.spec import Cell, SpecError, SweepSpec, probe_settings

JOURNAL_NAME = "optuna-journal.log"
FINAL_FAILURES = ("diverged",)
"""Failure kinds that are results (rerunning the same seed gives the same failure): not retried."""
CURVE_KEYS = ("eval/compacted/success", "eval/single_window/success", "eval/compacted/compaction_rate")
"""Drawn in every trial's learning-curve figure beside the objective (when the trainer logs them)."""
UNOWNED_GRACE_S = 120.0
"""A RUNNING trial with no owner record older than this was killed between claim and record."""

# what a trial records in its Optuna user attrs
ATTR_CELL, ATTR_OWNER, ATTR_RUN, ATTR_FAILURE, ATTR_REASON = (
    "cell",
    "owner",
    "mlflow_run_id",
    "failure",
    "reason",
)


# --- where things live ---


def storage_location(storage: str | None, root: Path) -> str:
    """``--storage`` as given (RDB URL or journal file path), else ``<root>/mlruns/optuna-journal.log``."""
    if storage:
        return storage if "://" in storage else str(Path(storage).resolve())
    return str((root / "mlruns" / JOURNAL_NAME).resolve())


def open_storage(location: str) -> BaseStorage:
    """A journal file (safe for processes on one host) or an RDB URL (PostgreSQL for several hosts)."""
    if "://" in location:
        return optuna.storages.RDBStorage(location)
    Path(location).parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(location))


@contextlib.contextmanager
def storage_lock(location: str) -> Iterator[None]:
    """Serialise reconcile + enqueue between ``simlab sweep`` processes sharing a journal file.

    RDB storages (several hosts) get no lock here: start one coordinator per study there.
    """
    if "://" in location:
        yield
        return
    with open(f"{location}.simlab-lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


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


def this_owner() -> dict[str, Any]:
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start": _process_start(pid), "since": time.time()}


def owner_alive(owner: dict[str, Any]) -> bool | None:
    """True/False for an owner on this host; ``None`` when it runs elsewhere (cannot tell)."""
    if owner.get("host") != socket.gethostname():
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
    return {**{k: _encode(v) for k, v in cell.params.items()}, "seed": cell.seed}


# --- study setup, reconcile, enqueue ---


def make_sampler(spec: SweepSpec, seed: int | None = None) -> optuna.samplers.BaseSampler:
    if spec.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    # grid trials all come from the queue with fixed params; the sampler never chooses a value
    return optuna.samplers.RandomSampler(seed=seed)


def make_pruner(spec: SweepSpec) -> optuna.pruners.BasePruner:
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


def _done_or_busy(t: FrozenTrial) -> bool:
    """Does this trial account for its cell (so the cell must not be enqueued again)?"""
    if t.state in (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED):
        return True
    return t.state == TrialState.FAIL and t.user_attrs.get(ATTR_FAILURE) in FINAL_FAILURES


def reconcile(study: optuna.Study, client: Any, experiment_id: str) -> list[int]:
    """Mark trials of dead owners FAIL (kind ``killed``) and every orphaned RUNNING MLflow run KILLED.

    Returns the numbers of the trials it failed.
    """
    storage, failed = study._storage, []
    live: set[str] = set()
    now = time.time()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.user_attrs.get(ATTR_OWNER)
        if owner is None:
            started = t.datetime_start.timestamp() if t.datetime_start else now
            stale = now - started > UNOWNED_GRACE_S
        else:
            stale = owner_alive(owner) is False
        if not stale:
            live.add(str(t.number))
            continue
        who = f"pid {owner['pid']} on {owner['host']}" if owner else "an unrecorded process"
        reason = f"killed: the process running trial {t.number} ({who}) died; its cell is run again"
        storage.set_trial_user_attr(t._trial_id, ATTR_FAILURE, "killed")
        storage.set_trial_user_attr(t._trial_id, ATTR_REASON, reason)
        with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
            storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        failed.append(t.number)
    # MLflow runs still RUNNING whose trial is not live: a worker died between Optuna's tell and closing
    # the run (end it as the trial ended), or before either (KILLED)
    ended = {str(t.number): t for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
    as_status = {TrialState.COMPLETE: "FINISHED", TrialState.FAIL: "FAILED", TrialState.PRUNED: "KILLED"}
    for run_id, tags in tracking.running_child_runs(client, experiment_id):
        number = tags.get(tracking.TRIAL_TAG)
        if tags.get(tracking.SWEEP_TAG) != study.study_name or number in live:
            continue
        trial = ended.get(str(number))
        if trial is not None and trial.user_attrs.get(ATTR_FAILURE) != "killed":
            status = as_status.get(trial.state, "KILLED")
            tracking.finish_run(client, run_id, status, trial.user_attrs.get(ATTR_REASON, ""))
        else:
            tracking.finish_run(
                client, run_id, "KILLED", f"killed: trial {number}'s process died before it finished"
            )
    return failed


def enqueue_missing(study: optuna.Study, spec: SweepSpec) -> int:
    """Enqueue every grid cell that no trial accounts for; returns how many were enqueued."""
    have = {t.user_attrs.get(ATTR_CELL) for t in study.get_trials(deepcopy=False) if _done_or_busy(t)}
    added = 0
    for cell in spec.cells():
        if cell.key not in have:
            study.enqueue_trial(cell_params(cell), user_attrs={ATTR_CELL: cell.key})
            added += 1
    return added


def tpe_remaining(study: optuna.Study, spec: SweepSpec) -> int:
    assert spec.n_trials is not None
    return max(0, spec.n_trials - sum(_done_or_busy(t) for t in study.get_trials(deepcopy=False)))


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


@dataclass(frozen=True)
class TrialOutcome:
    """What the coordinator hears back from one task."""

    number: int | None
    """Optuna trial number (``None``: the queue was empty, another process took the cell)."""
    state: str
    """COMPLETE, FAIL, PRUNED or SKIPPED."""
    value: float | None = None
    reason: str = ""
    wall_s: float = 0.0
    tracking_s: float = 0.0
    """Seconds spent writing to MLflow (run creation, params, metrics, figures, close)."""


def claim_waiting(study: optuna.Study) -> int | None:
    """Atomically move one WAITING trial to RUNNING; its id, or ``None`` when none is left."""
    storage = study._storage
    for t in storage.get_all_trials(study._study_id, deepcopy=False, states=(TrialState.WAITING,)):
        try:
            if storage.set_trial_state_values(t._trial_id, state=TrialState.RUNNING):
                return int(t._trial_id)
        except optuna.exceptions.UpdateFinishedTrialError:
            continue
    return None


class TrialSink:
    """Forwards to the MLflow sink; reports the objective to Optuna (pruning); stops an orphaned worker."""

    def __init__(
        self,
        inner: tracking.MlflowSink,
        trial: optuna.Trial,
        objective: str,
        prune: bool,
        coordinator_pid: int,
    ) -> None:
        self.inner, self.trial, self.objective, self.prune = inner, trial, objective, prune
        self.coordinator_pid = coordinator_pid
        self.last_step = -1

    def _check_coordinator(self) -> None:
        # a SIGKILLed coordinator cannot stop its loky workers; they must not finish a trial the rerun
        # will mark killed and run again, so they leave at the next step
        if os.getpid() != self.coordinator_pid and os.getppid() != self.coordinator_pid:
            os._exit(70)

    def log_params(self, params: dict[str, Any]) -> None:
        self.inner.log_params(params)

    def set_tags(self, tags: dict[str, str]) -> None:
        self.inner.set_tags(tags)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self._check_coordinator()
        self.inner.log_metrics(metrics, step)
        self.last_step = max(self.last_step, step)
        value = metrics.get(self.objective)
        if self.prune and value is not None and math.isfinite(value):
            self.trial.report(float(value), step)
            if self.trial.should_prune():
                raise optuna.TrialPruned(f"pruned at step {step} ({self.objective}={value:.4g})")

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        self.inner.log_artifact(path, artifact_path)

    def close(self, status: str = "FINISHED", reason: str = "") -> None:
        self.inner.close(status, reason)


def _failure_kind(exc: BaseException) -> str:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return "diverged" if names & {"TrainingDiverged", "FloatingPointError"} else "error"


def _limit_threads() -> None:
    # one thread per worker: the env vars cover a torch imported later by the trainer (read at import),
    # set_num_threads one already imported; importing torch here would cost every worker seconds
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def run_one(ctx: TrialContext) -> TrialOutcome:
    """Claim one trial (grid: the next waiting cell; tpe: a new sample) and run it to an end state."""
    start = time.perf_counter()
    _limit_threads()
    spec = ctx.spec
    backend: TrialBackend = load_backend(ctx.backend)
    storage = open_storage(ctx.storage)
    study = optuna.load_study(
        study_name=spec.name, storage=storage, sampler=make_sampler(spec), pruner=make_pruner(spec)
    )
    if spec.sampler == "grid":
        trial_id = claim_waiting(study)
        if trial_id is None:
            return TrialOutcome(None, "SKIPPED", wall_s=time.perf_counter() - start)
        trial = optuna.Trial(study, trial_id)
    else:
        trial = study.ask()
    storage.set_trial_user_attr(trial._trial_id, ATTR_OWNER, {**ctx.coordinator, "worker": os.getpid()})

    params = _suggest(trial, spec)
    seed = int(params.pop("seed"))
    settings = spec.settings(params)
    cell = Cell(params, seed)
    if spec.sampler == "tpe":
        storage.set_trial_user_attr(trial._trial_id, ATTR_CELL, cell.key)

    t0 = time.perf_counter()
    client = tracking.Store(ctx.tracking_uri, ctx.artifact_root).client()
    cfg = None
    try:
        cfg = backend.build(settings, seed)
        config_tags = backend.tags(cfg)
    except Exception as exc:  # validated up front, but a sampled value can still be out of range
        config_tags = {}
        build_error: Exception | None = exc
    else:
        build_error = None
    tags = {
        tracking.SWEEP_TAG: spec.name,
        tracking.TRIAL_TAG: str(trial.number),
        tracking.CELL_TAG: cell.label,
        tracking.VARIANT_TAG: cell.variant,  # the grid cell with its seeds pooled, as `simlab report` groups it
        tracking.SEED_TAG: str(seed),
        **ctx.provenance,
        **config_tags,
    }
    run_id = tracking.child_run(
        client, ctx.experiment_id, ctx.parent_run_id, f"{trial.number}:{cell.label}", tags
    )
    storage.set_trial_user_attr(trial._trial_id, ATTR_RUN, run_id)
    sink = tracking.MlflowSink(client, run_id, curve_keys=(spec.objective.metric, *CURVE_KEYS))
    create_s = time.perf_counter() - t0
    tsink = TrialSink(
        sink, trial, spec.objective.metric, spec.pruner.kind != "nop", int(ctx.coordinator["pid"])
    )

    def fail(
        kind: str, reason: str, state: TrialState = TrialState.FAIL, status: str = "FAILED"
    ) -> TrialOutcome:
        storage.set_trial_user_attr(trial._trial_id, ATTR_FAILURE, kind)
        storage.set_trial_user_attr(trial._trial_id, ATTR_REASON, reason)
        sink.set_tags({"simlab.failure": kind})
        study.tell(trial, state=state)  # before closing the run: see reconcile for a death in between
        sink.close(status, reason)
        return TrialOutcome(
            trial.number,
            state.name,
            reason=reason,
            wall_s=time.perf_counter() - start,
            tracking_s=create_s + sink.write_seconds,
        )

    if build_error is not None or cfg is None:
        return fail("error", f"config: {build_error}")
    sink.log_params({**backend.flatten(cfg), "sweep.cell": cell.label})
    try:
        result = backend.train(cfg, tsink, Path(ctx.store))
    except optuna.TrialPruned as exc:
        return fail("pruned", str(exc), TrialState.PRUNED, "KILLED")
    except Exception as exc:
        return fail(_failure_kind(exc), f"{type(exc).__name__}: {exc}")
    value = result.get(spec.objective.metric)
    if value is None or not math.isfinite(float(value)):
        got = ", ".join(sorted(result)) or "nothing"
        return fail("error", f"objective {spec.objective.metric!r} is {value!r}; the trial returned {got}")
    tsink._check_coordinator()
    # the trainer logs its final evaluation itself; record only what it returned without logging
    logged = sink.rows[-1] if sink.rows else {}
    unlogged = {k: float(v) for k, v in result.items() if isinstance(v, int | float) and k not in logged}
    if unlogged:
        sink.log_metrics(unlogged, max(tsink.last_step, 0))
    study.tell(trial, float(value))  # before closing the run: see reconcile for a death in between
    sink.close("FINISHED")
    return TrialOutcome(
        trial.number,
        "COMPLETE",
        value=float(value),
        wall_s=time.perf_counter() - start,
        tracking_s=create_s + sink.write_seconds,
    )


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
    if spec.sampler == "grid":
        # an int range, not a categorical: Optuna refuses a categorical whose choices change, and a rerun
        # with added seeds widens the range (the queued value is returned as it was enqueued)
        out["seed"] = trial.suggest_int("seed", min(spec.seeds), max(spec.seeds))
    else:  # seeds cycle over the trials; the sampler does not search over them
        out["seed"] = spec.seeds[trial.number % len(spec.seeds)]
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
    wall_s: float
    outcomes: tuple[TrialOutcome, ...]


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
        except ValueError as exc:
            where = ", ".join(f"{k}={v!r}" for k, v in settings.items() if k != "preset")
            raise SpecError(f"{exc} (in the configuration {where})") from None


def run_sweep(
    spec: SweepSpec,
    *,
    workers: int = 1,
    storage: str | None = None,
    tracking_uri: str | None = None,
    root: Path | None = None,
    backend: str = DEFAULT_BACKEND,
    progress: bool = True,
    echo: Callable[[str], None] = print,
) -> SweepResult:
    """Validate, reconcile, enqueue what is missing, run it on ``workers`` processes, write the summary."""
    from joblib import Parallel, delayed
    from tqdm import tqdm

    start = time.perf_counter()
    if workers < 1:
        raise SpecError(f"`workers={workers}` is invalid; choose an integer >= 1")
    root = (root or tracking.repo_root()).resolve()
    validate(spec, load_backend(backend))
    store = tracking.resolve_store(tracking_uri, root)
    location = storage_location(storage, root)

    # first writes: the study (a changed spec under the same name is refused before MLflow is touched)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    direction: Literal["minimize", "maximize"] = (
        "minimize" if spec.objective.direction == "minimize" else "maximize"
    )
    study = optuna.create_study(
        study_name=spec.name,
        storage=open_storage(location),
        load_if_exists=True,
        direction=direction,
        sampler=make_sampler(spec),
        pruner=make_pruner(spec),
    )
    known = study.user_attrs.get("simlab.fingerprint")
    if known is not None and known != spec.fingerprint():
        raise SpecError(
            f"study {spec.name!r} in {location} was made from a different spec; give this sweep "
            "a new `name` or another --storage (resuming it would mix two sweeps)"
        )
    study.set_user_attr("simlab.fingerprint", spec.fingerprint())
    client = tracking.prepare(store)
    experiment_id = tracking.ensure_experiment(client, spec.name, store)
    provenance = tracking.provenance_tags()
    parent_tags = {
        "simlab.sampler": spec.sampler,
        "simlab.objective": spec.objective.metric,
        "simlab.storage": location,
        "mlflow.note.content": spec.description,
        **({tracking.BASELINE_TAG: spec.baseline} if spec.baseline else {}),
        **provenance,
    }
    parent_run_id = tracking.parent_run(client, experiment_id, spec.name, parent_tags)

    with storage_lock(location):
        reconciled = reconcile(study, client, experiment_id)
        if spec.sampler == "grid":
            enqueue_missing(study, spec)
            todo = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
        else:
            todo = tpe_remaining(study, spec)
    if reconciled:
        echo(f"resume: marked {len(reconciled)} trial(s) of a killed run failed and queued their cells again")
    total = len(spec.cells()) if spec.sampler == "grid" else int(spec.n_trials or 0)
    echo(
        f"sweep {spec.name!r}: {todo} of {total} trial(s) to run on {workers} worker(s); "
        f"study in {location}, runs in {store.tracking_uri}"
    )

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
    )
    outcomes: list[TrialOutcome] = []
    status, reason = "FINISHED", ""
    try:
        trial_backend = load_backend(backend)
        if todo and trial_backend.prepare is not None:
            echo("preparing what the trials share (cached base checkpoints) ...")
            cfgs = [trial_backend.build(settings, spec.seeds[0]) for settings in probe_settings(spec)]
            trial_backend.prepare(cfgs, root / "mlruns")
        if todo:
            jobs = Parallel(n_jobs=min(workers, todo), backend="loky", return_as="generator_unordered")(
                delayed(run_one)(ctx) for _ in range(todo)
            )
            bar = tqdm(jobs, total=todo, unit="trial", disable=not progress, dynamic_ncols=True)
            for outcome in bar:
                outcomes.append(outcome)
                failed = sum(o.state == "FAIL" for o in outcomes)
                bar.set_postfix(failed=failed)
                if outcome.state == "FAIL":
                    bar.write(f"trial {outcome.number} failed: {outcome.reason}")
    except BaseException as exc:
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        table = None
        with contextlib.suppress(Exception):
            table = write_summary(study, spec, results_dir(store, root, spec.name))
            client.log_artifact(parent_run_id, str(table), "summary")
            client.log_artifact(parent_run_id, str(table.with_suffix(".md")), "summary")
        tracking.finish_run(client, parent_run_id, status, reason)
    return SweepResult(
        study=spec.name,
        storage=location,
        tracking_uri=store.tracking_uri,
        experiment_id=experiment_id,
        parent_run_id=parent_run_id,
        ran=sum(o.state != "SKIPPED" for o in outcomes),
        failed=sum(o.state == "FAIL" for o in outcomes),
        reconciled=tuple(reconciled),
        table=table,
        wall_s=time.perf_counter() - start,
        outcomes=tuple(outcomes),
    )


def results_dir(store: tracking.Store, root: Path, name: str) -> Path:
    base = store.local_folder or (root / "mlruns")
    return base / "sweeps" / name


def write_summary(study: optuna.Study, spec: SweepSpec, folder: Path) -> Path:
    """Per-trial CSV and a per-point summary (mean, SE over seeds) as CSV and Markdown; the CSV's path."""
    import polars as pl

    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.WAITING:
            continue
        cell = json.loads(t.user_attrs[ATTR_CELL]) if ATTR_CELL in t.user_attrs else {"params": t.params}
        point = ",".join(f"{k}={v}" for k, v in sorted(cell.get("params", {}).items()) if k != "seed")
        rows.append(
            {
                "trial": t.number,
                "point": point or "-",
                "seed": cell.get("seed"),
                "state": t.state.name,
                "value": t.value,
                "failure": t.user_attrs.get(ATTR_FAILURE, ""),
                "reason": t.user_attrs.get(ATTR_REASON, ""),
                "mlflow_run_id": t.user_attrs.get(ATTR_RUN, ""),
            }
        )
    trials = pl.DataFrame(
        rows,
        schema={
            "trial": pl.Int64,
            "point": pl.Utf8,
            "seed": pl.Int64,
            "state": pl.Utf8,
            "value": pl.Float64,
            "failure": pl.Utf8,
            "reason": pl.Utf8,
            "mlflow_run_id": pl.Utf8,
        },
    )
    trials.write_csv(folder / "trials.csv")
    done = pl.col("state") == "COMPLETE"
    summary = (
        trials.group_by("point")
        .agg(
            done.sum().alias("n"),
            pl.col("value").filter(done).mean().alias("mean"),
            (pl.col("value").filter(done).std() / done.sum().cast(pl.Float64).sqrt()).alias("se"),
            (pl.col("failure") == "diverged").sum().alias("diverged"),
            (pl.col("state") == "FAIL").sum().alias("failed"),
        )
        .sort("mean", descending=spec.objective.direction == "maximize", nulls_last=True)
    )
    path = folder / "summary.csv"
    summary.write_csv(path)
    lines = [
        f"# sweep {spec.name}: {spec.objective.metric} ({spec.objective.direction})",
        "",
        "| point | n | mean | se | diverged | failed (incl. killed, retried) |",
        "|---|---|---|---|---|---|",
    ]
    for r in summary.iter_rows(named=True):
        mean = "-" if r["mean"] is None else f"{r['mean']:.4f}"
        se = "-" if r["se"] is None or not math.isfinite(r["se"]) else f"{r['se']:.4f}"
        lines.append(f"| {r['point']} | {r['n']} | {mean} | {se} | {r['diverged']} | {r['failed']} |")
    path.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
