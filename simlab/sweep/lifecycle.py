"""A trial's life, and every write to a trial's state: queue, claim, beat, record, end, reap.

Nothing else in simlab changes a trial: the runner and the worker call these functions. Where Optuna
has a public call (``enqueue_trial``, ``ask``, ``tell``, ``Trial.set_user_attr``, ``fail_stale_trials``,
``RetryHeartbeatStaleTrialCallback``) it is used; the rest goes through :mod:`.optuna_private`.

How a dead trial is found depends on what the storage offers, one way each:

- **a database study** (:mod:`.rdb`): Optuna's heartbeat. :class:`Beat` records it for the claimed
  trial; :func:`reap` calls Optuna's ``fail_stale_trials``, which judges trials on every host and hands
  each stale one to :class:`RequeueStale`.
- **a journal study**: Optuna's journal storage has no heartbeat, so each claimed trial records its
  owner (host, pid and the pid's start time, :func:`this_owner`) and :func:`reap` fails the RUNNING
  trials whose owner died on this host.

Either way, a RUNNING trial that never recorded an owner within :data:`UNOWNED_GRACE_S` was killed
between its claim and its first record, and is failed too.
"""

from __future__ import annotations

import contextlib
import copy
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState

from simlab import tracking
from simlab.names import ATTR_CELL, ATTR_FAILURE, ATTR_OWNER, ATTR_REASON, ATTR_REPLACES, ATTR_RUN, ATTR_SEED
from simlab.sweep import optuna_private as private
from simlab.sweep import rdb

HOST_ENV = "SIMLAB_HOST"
"""Overrides the host name a trial's owner records (one identity per machine; tests stand in a second)."""
UNOWNED_GRACE_S = 120.0
"""A RUNNING trial with no owner record older than this was killed between claim and record."""
KILLED = "killed"
"""The failure kind of a trial whose process died: its cell runs again."""


# --- owners (a journal study's liveness) ---


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


def who(trial: FrozenTrial) -> str:
    """The process a trial's owner record names, for a message."""
    owner = trial.user_attrs.get(ATTR_OWNER)
    return f"pid {owner.get('worker', owner['pid'])} on {owner['host']}" if owner else "an unrecorded process"


# --- queue and claim ---


def queue(study: optuna.Study, params: dict[str, Any], attrs: dict[str, Any]) -> None:
    """Add a WAITING trial with fixed ``params`` and user ``attrs`` (a grid cell)."""
    study.enqueue_trial(params, user_attrs=attrs)


def claim_waiting(study: optuna.Study) -> optuna.Trial | None:
    """Atomically move one WAITING trial to RUNNING and return it; ``None`` when none is left.

    A database study records the trial's first heartbeat before the claim, so that no claimed trial is
    ever without one (``Study.ask`` would claim it first).
    """
    storage = private.storage(study)
    beats = rdb.heartbeat_on(storage)
    for t in private.waiting_trials(study):
        try:
            if beats:
                storage.record_heartbeat(private.trial_id(t))  # type: ignore[attr-defined]
            if storage.set_trial_state_values(private.trial_id(t), state=TrialState.RUNNING):
                return private.running_trial(study, private.trial_id(t))
        except optuna.exceptions.UpdateFinishedTrialError:
            continue
    return None


def ask(study: optuna.Study) -> optuna.Trial:
    """A new sampled trial (a tpe sweep), RUNNING in this process."""
    with rdb.quiet():
        return study.ask()


def record(trial: optuna.Trial, attrs: dict[str, Any]) -> None:
    """Record user attrs on a trial this process runs (its owner, its MLflow run, its cell)."""
    for key, value in attrs.items():
        trial.set_user_attr(key, value)


# --- the heartbeat (a database study) ---


class Beat:
    """Records Optuna's heartbeat for one trial until stopped; sets :attr:`lost` once the trial is no
    longer RUNNING (another process failed it as stale: this worker must not finish it)."""

    def __init__(self, storage: BaseStorage, trial_id: int) -> None:
        self.storage = storage
        self.trial_id = trial_id
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Beat:
        """Record a first heartbeat and start the thread that keeps recording them (a database study only)."""
        if not rdb.heartbeat_on(self.storage):
            return self
        self.storage.record_heartbeat(self.trial_id)  # type: ignore[attr-defined]
        # a daemon: a worker stopped by Ctrl-C must not stay alive beating for a trial it abandoned
        self._thread = threading.Thread(
            target=self._run,
            args=(self.storage.get_heartbeat_interval(),),  # type: ignore[attr-defined]
            daemon=True,
            name="simlab-heartbeat",
        )
        self._thread.start()
        return self

    def _run(self, interval: int) -> None:
        while not self._stop.wait(interval):
            try:
                self.storage.record_heartbeat(self.trial_id)  # type: ignore[attr-defined]
                if self.storage.get_trial(self.trial_id).state != TrialState.RUNNING:
                    self.lost.set()
                    return
            except Exception:  # a database hiccup: the next beat tries again; the grace period allows it
                continue

    def stop(self) -> None:
        """Stop the heartbeat thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


@contextlib.contextmanager
def beating(study: optuna.Study, trial: optuna.Trial) -> Iterator[threading.Event]:
    """Beat for ``trial`` while the block runs; yields the event set when the trial is lost."""
    beat = Beat(private.storage(study), private.trial_id(trial)).start()
    try:
        yield beat.lost
    finally:
        beat.stop()


# --- the end of a trial ---


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


def finish(study: optuna.Study, trial: optuna.Trial, value: float) -> bool:
    """Tell Optuna the trial COMPLETE with ``value``; False when it was lost to another process."""
    return _tell(study, trial, values=value)


def fail(study: optuna.Study, trial: optuna.Trial, kind: str, reason: str,
         state: TrialState = TrialState.FAIL) -> bool:
    """Record why (``kind``: diverged, error, pruned, killed) and tell Optuna ``state``; False when lost."""
    try:
        record(trial, {ATTR_FAILURE: kind, ATTR_REASON: reason})
        return _tell(study, trial, state=state)
    except optuna.exceptions.UpdateFinishedTrialError:
        return False


# --- dead trials ---


def _fail_dead(study: optuna.Study, trial: FrozenTrial) -> None:
    """FAIL a RUNNING trial of another process that died, recording why (its attrs first: see reap)."""
    storage, tid = private.storage(study), private.trial_id(trial)
    reason = f"killed: the process running trial {trial.number} ({who(trial)}) died; its cell is run again"
    with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
        storage.set_trial_user_attr(tid, ATTR_FAILURE, KILLED)
        storage.set_trial_user_attr(tid, ATTR_REASON, reason)
        storage.set_trial_state_values(tid, TrialState.FAIL)


def _fail_dead_owners(study: optuna.Study, *, by_owner: bool = True) -> None:
    """FAIL the RUNNING trials whose owner died on this host (``by_owner``), and those that never
    recorded an owner within :data:`UNOWNED_GRACE_S` (killed between claim and record)."""
    now = time.time()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.user_attrs.get(ATTR_OWNER)
        if owner is None:
            started = t.datetime_start.timestamp() if t.datetime_start else now
            stale = now - started > UNOWNED_GRACE_S
        else:
            stale = by_owner and owner_alive(owner) is False
        if stale:
            _fail_dead(study, t)


def reap(study: optuna.Study) -> list[int]:
    """Fail the trials whose worker died (database: Optuna's heartbeat; journal: the owner's process).

    Returns the numbers of the trials it failed. A worker records its failure kind before telling, so a
    FAIL trial without one was failed by the heartbeat check.
    """
    before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    beats = rdb.heartbeat_on(private.storage(study))
    if beats:
        with rdb.quiet():
            optuna.storages.fail_stale_trials(study)  # stale trials go to RequeueStale
    _fail_dead_owners(study, by_owner=not beats)
    return [
        t.number
        for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
        if t.number in before and t.user_attrs.get(ATTR_FAILURE, KILLED) == KILLED
    ]


class RequeueStale:
    """Optuna's ``heartbeat_stale_trial_callback`` for a database study: a trial's worker stopped its
    heartbeat (killed, or its host lost), whichever host it ran on.

    Records why on the trial's MLflow run, ends the run KILLED and, for a grid cell, queues the cell
    again with Optuna's ``RetryHeartbeatStaleTrialCallback`` (the new trial keeps the cell's fixed
    parameters and the retry history). A tpe trial is not replayed: a new sample takes its place.
    """

    def __init__(self, tracking_uri: str | None) -> None:
        self.tracking_uri = tracking_uri

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Record why the stale trial ended, end its MLflow run, and queue its cell again."""
        # Optuna has already made the trial FAIL, so its attrs are frozen: the reason goes to its MLflow
        # run and to the retry (trial_table reads it back from there)
        reason = f"killed: trial {trial.number}'s worker ({who(trial)}) stopped its heartbeat; its cell is run again"
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
