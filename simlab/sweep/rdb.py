"""A study in a database, shared by processes on any number of hosts (PostgreSQL; SQLite on one host).

Two pieces, each Optuna's own mechanism or the database's:

- **Optuna's heartbeat** (:class:`optuna.storages.RDBStorage` ``heartbeat_interval``): a worker records a
  heartbeat for its trial every interval (:class:`.lifecycle.Beat`). Any process that reaps
  (:func:`.lifecycle.reap`) fails the RUNNING trials whose last heartbeat is older than the grace period,
  whichever host ran them, and hands each to the storage's ``heartbeat_stale_trial_callback``
  (:class:`.lifecycle.RequeueStale`: record why, end the MLflow run, queue the cell again).
- **A lock in the database** around reconcile + enqueue (:func:`study_lock`): a PostgreSQL session
  advisory lock keyed by the study name, so that hosts starting the same spec at once enqueue each cell
  once; PostgreSQL releases it when the holder's connection drops, so a killed holder blocks nobody.

``Study.optimize`` runs Optuna's own beat thread, but the runner claims queued trials itself, so
:class:`.lifecycle.Beat` records the heartbeat through the same ``RDBStorage.record_heartbeat``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.storages import BaseStorage, RDBStorage
from optuna.trial import FrozenTrial

from simlab.stores import file_lock, sqlite_path

HEARTBEAT_S = 10
"""Default seconds between heartbeats."""
GRACE_FACTOR = 3
"""A trial is stale after ``GRACE_FACTOR`` heartbeat intervals without one."""

StaleCallback = Callable[[optuna.Study, FrozenTrial], None]


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Optuna flags the heartbeat API experimental, and warns when it is used outside ``optimize``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with")
        yield


def open_rdb(url: str, *, heartbeat: int = HEARTBEAT_S, on_stale: StaleCallback | None = None) -> RDBStorage:
    """Optuna's RDB storage with its heartbeat on (the URL was checked by :mod:`simlab.stores`)."""
    with quiet():
        return RDBStorage(
            url,
            engine_kwargs={"pool_pre_ping": True},  # a connection the server dropped is replaced, not raised
            heartbeat_interval=heartbeat,
            grace_period=GRACE_FACTOR * heartbeat,
            heartbeat_stale_trial_callback=on_stale,
        )


def heartbeat_on(storage: BaseStorage) -> bool:
    """Does ``storage`` (an RDB storage, or the cache Optuna wraps one in) run Optuna's heartbeat?"""
    interval = getattr(storage, "get_heartbeat_interval", None)
    return interval is not None and interval() is not None


def _lock_key(name: str) -> int:
    """A signed 64-bit advisory-lock key for the study (the same on every host)."""
    return int.from_bytes(hashlib.sha256(f"simlab-study:{name}".encode()).digest()[:8], "big", signed=True)


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

    key = _lock_key(name)
    with _lock_engine(url).connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
        conn.commit()
        try:
            yield
        finally:
            with contextlib.suppress(Exception):  # a dropped connection has released the lock already
                conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                conn.commit()
