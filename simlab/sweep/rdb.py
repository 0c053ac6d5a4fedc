"""A study in a database, shared by processes on any number of hosts (PostgreSQL; SQLite on one host).

Two pieces, each Optuna's own mechanism or the database's:

- **Optuna's heartbeat** (:class:`optuna.storages.RDBStorage` ``heartbeat_interval``): a worker records a
  heartbeat for its trial every interval (:class:`Beat`). Any process that reaps
  (:meth:`.queue.DatabaseQueue.reap`) fails the RUNNING trials whose last heartbeat is older than the grace
  period, whichever host ran them, and hands each to the storage's ``heartbeat_stale_trial_callback``
  (:class:`RequeueStale`: record why, end the MLflow run, queue the cell again).
- **A lock in the database** around reconcile + enqueue (:func:`study_lock`): a PostgreSQL session
  advisory lock keyed by the study name, so that hosts starting the same spec at once enqueue each cell
  once; PostgreSQL releases it when the holder's connection drops, so a killed holder blocks nobody.

``Study.optimize`` runs Optuna's own beat thread, but the runner claims queued trials itself, so
:class:`Beat` records the heartbeat through the same ``RDBStorage.record_heartbeat``.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.storages import BaseStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState

from simlab import tracking
from simlab.names import ATTR_CELL, ATTR_REPLACES, ATTR_RUN, ATTR_SEED
from simlab.stores import file_lock, sqlite_path
from simlab.sweep.lifecycle import who

HEARTBEAT_S = 10
"""Default seconds between heartbeats."""
GRACE_FACTOR = 3
"""A trial is stale after ``GRACE_FACTOR`` heartbeat intervals without one."""


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Optuna flags the heartbeat API experimental, and warns when it is used outside ``optimize``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with")
        yield


def open_rdb(url: str, *, heartbeat: int = HEARTBEAT_S, on_stale: RequeueStale | None = None) -> RDBStorage:
    """Optuna's RDB storage with its heartbeat on (the URL was checked by :mod:`simlab.stores`)."""
    with quiet():
        return RDBStorage(
            url,
            engine_kwargs={"pool_pre_ping": True},  # a connection the server dropped is replaced, not raised
            heartbeat_interval=heartbeat,
            grace_period=GRACE_FACTOR * heartbeat,
            heartbeat_stale_trial_callback=on_stale,
        )


@functools.cache
def _lock_engine(url: str) -> Any:
    from sqlalchemy import create_engine

    return create_engine(url, pool_size=1, max_overflow=2, pool_pre_ping=True)


@contextlib.contextmanager
def study_lock(url: str, name: str) -> Iterator[None]:
    """Hold the study's lock: a PostgreSQL advisory lock, or a file lock beside a SQLite database."""
    db = sqlite_path(url)
    if db is not None:
        with file_lock(str(db)):
            yield
        return
    from sqlalchemy import text

    # a signed 64-bit advisory-lock key for the study, the same on every host
    key = int.from_bytes(hashlib.sha256(f"simlab-study:{name}".encode()).digest()[:8], "big", signed=True)
    with _lock_engine(url).connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
        conn.commit()
        try:
            yield
        finally:
            with contextlib.suppress(Exception):  # a dropped connection has released the lock already
                conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                conn.commit()


# --- the heartbeat, and what a stale trial becomes ---


class Beat:
    """Records Optuna's heartbeat for one trial while its ``with`` block runs; sets :attr:`lost` once the
    trial is no longer RUNNING (another process failed it as stale: this worker must not finish it)."""

    def __init__(self, storage: BaseStorage, trial_id: int) -> None:
        self.storage = storage
        self.trial_id = trial_id
        self.lost = threading.Event()
        self._stop = threading.Event()
        # a daemon: a worker stopped by Ctrl-C must not stay alive beating for a trial it abandoned
        self._thread = threading.Thread(
            target=self._run,
            args=(storage.get_heartbeat_interval(),),  # type: ignore[attr-defined]
            daemon=True,
            name="simlab-heartbeat",
        )

    def __enter__(self) -> threading.Event:
        """Record a first heartbeat and start the thread that keeps recording them; :attr:`lost`."""
        self.storage.record_heartbeat(self.trial_id)  # type: ignore[attr-defined]
        self._thread.start()
        return self.lost

    def _run(self, interval: int) -> None:
        while not self._stop.wait(interval):
            try:
                self.storage.record_heartbeat(self.trial_id)  # type: ignore[attr-defined]
                if self.storage.get_trial(self.trial_id).state != TrialState.RUNNING:
                    self.lost.set()
                    return
            except Exception:  # a database hiccup: the next beat tries again; the grace period allows it
                continue

    def __exit__(self, *exc: object) -> None:
        """Stop the heartbeat thread."""
        self._stop.set()
        self._thread.join(timeout=5)


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
            kept = {k: trial.user_attrs[k] for k in (ATTR_CELL, ATTR_SEED) if k in trial.user_attrs}
            retry.user_attrs = {**kept, ATTR_REPLACES: trial.number}
            RetryHeartbeatStaleTrialCallback()(study, retry)
