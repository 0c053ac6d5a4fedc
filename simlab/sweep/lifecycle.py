"""A trial's life, and every write to a trial's state: queue, claim, record, end, and fail the dead.

Nothing else in simlab changes a trial: the plans (:mod:`.plan`), the queues (:mod:`.queue`), the runner
and the worker call these functions. Where Optuna has a public call (``enqueue_trial``, ``ask``, ``tell``,
``Trial.set_user_attr``) it is used; the rest goes through :mod:`.optuna_private`.

Every claimed trial records its owner (host, pid and the pid's start time, :func:`this_owner`): a
journal study judges liveness by it, and either kind of study fails a RUNNING trial that never recorded
one within :data:`UNOWNED_GRACE_S` (killed between its claim and its first record).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from simlab.names import ATTR_FAILURE, ATTR_OWNER, ATTR_REASON
from simlab.sweep import optuna_private as private

HOST_ENV = "SIMLAB_HOST"
"""Overrides the host name a trial's owner records (one identity per machine; tests stand in a second)."""
UNOWNED_GRACE_S = 120.0
"""A RUNNING trial with no owner record older than this was killed between claim and record."""
KILLED = "killed"
"""The failure kind of a trial whose process died: its cell runs again."""
BASE_GATE = "base_gate"
"""The failure kind of a trial whose seed's base model missed ``base.min_gain``: its run is deleted, and the
cell is not run again (the same base misses the same gate)."""


# --- owners (a journal study's liveness) ---


def _process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (so a recycled pid is not mistaken for the owner), in clock ticks
    since boot: psutil's ``create_time`` adds the wall clock's boot time, which moves when NTP corrects the
    clock (psutil issues 2526, 2541), and a moved start would make a live owner look dead."""
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


def who(trial: FrozenTrial) -> str:
    """The process a trial's owner record names, for a message."""
    owner = trial.user_attrs.get(ATTR_OWNER)
    return f"pid {owner.get('worker', owner['pid'])} on {owner['host']}" if owner else "an unrecorded process"


# --- queue and claim ---


def queue(study: optuna.Study, params: dict[str, Any], attrs: dict[str, Any]) -> None:
    """Add a WAITING trial with fixed ``params`` and user ``attrs`` (a grid cell)."""
    study.enqueue_trial(params, user_attrs=attrs)


def claim_waiting(study: optuna.Study, first: Callable[[int], None] | None = None) -> optuna.Trial | None:
    """Atomically move one WAITING trial to RUNNING and return it; ``None`` when none is left.

    ``first``: called with the trial's storage id before the claim (a database queue's first heartbeat).
    """
    storage = private.storage(study)
    for t in private.waiting_trials(study):
        try:
            if first is not None:
                first(private.trial_id(t))
            if storage.set_trial_state_values(private.trial_id(t), state=TrialState.RUNNING):
                return private.running_trial(study, private.trial_id(t))
        except optuna.exceptions.UpdateFinishedTrialError:
            continue
    return None


def record(trial: optuna.Trial, attrs: dict[str, Any]) -> None:
    """Record user attrs on a trial this process runs (its owner, its MLflow run, its cell)."""
    for key, value in attrs.items():
        trial.set_user_attr(key, value)


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


def unowned(trial: FrozenTrial, now: float) -> bool:
    """A RUNNING trial with no owner record for :data:`UNOWNED_GRACE_S`: killed between claim and record."""
    if ATTR_OWNER in trial.user_attrs:
        return False
    started = trial.datetime_start.timestamp() if trial.datetime_start else now
    return now - started > UNOWNED_GRACE_S


def owner_dead(trial: FrozenTrial, now: float) -> bool:
    """A RUNNING trial whose owner died on this host (an owner on another host cannot be told from here):
    its pid is gone, or is now another process (its start time differs)."""
    owner = trial.user_attrs.get(ATTR_OWNER)
    if owner is None or owner.get("host") != host_name():
        return False
    start = _process_start(int(owner["pid"]))
    return start is None or (start != "" and start != owner.get("start"))  # "": alive, start unknown


def fail_running(study: optuna.Study, *dead: Callable[[FrozenTrial, float], bool]) -> None:
    """FAIL every RUNNING trial that one of the ``dead`` tests finds dead (a reap)."""
    now = time.time()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if any(test(t, now) for test in dead):
            _fail_dead(study, t)


def reaped(study: optuna.Study, fail: Callable[[], None]) -> list[int]:
    """Run a reap (``fail``: a queue's) and return the numbers of the trials it failed.

    A worker records its failure kind before telling, so a FAIL trial without one was failed by a reap.
    """
    before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    fail()
    return [
        t.number
        for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
        if t.number in before and t.user_attrs.get(ATTR_FAILURE, KILLED) == KILLED
    ]
