"""A sweep's trial queue, one type per kind of study storage: where the study lives, its lock, how a
worker claims a queued trial and asks for a new one, how it shows it is alive, and how a dead worker's
trials are found. Nothing else in simlab asks which kind of storage a study is in.

- :class:`JournalQueue`: Optuna's ``JournalStorage`` on a file (processes on one host), locked by a file
  lock beside it. The journal has no heartbeat, so each claimed trial records its owner (host, pid and the
  pid's start time, :func:`.lifecycle.this_owner`) and a reap fails the RUNNING trials whose owner died on
  this host.
- :class:`DatabaseQueue`: Optuna's ``RDBStorage`` (PostgreSQL for several hosts, SQLite on one) with its
  heartbeat (:mod:`.rdb`): a claim records the first beat before the trial is RUNNING, a thread keeps
  beating while it runs, and a reap is Optuna's ``fail_stale_trials`` on every host's trials.

Either way, a RUNNING trial that never recorded an owner within :data:`.lifecycle.UNOWNED_GRACE_S` was
killed between its claim and its first record, and is failed too.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import optuna
from optuna.storages import BaseStorage, JournalStorage
from optuna.storages.journal import JournalFileBackend

from simlab import stores
from simlab.sweep import lifecycle, rdb
from simlab.sweep import optuna_private as private


@dataclass(frozen=True)
class JournalQueue:
    """A study in a journal file (safe for processes on one host)."""

    location: str
    """The journal file's path."""
    poll_s: ClassVar[float] = 2.0
    """Seconds a worker waits between looks at trials running in other processes."""

    def open(self) -> BaseStorage:
        """Optuna's journal storage on the file (its folder made)."""
        Path(self.location).parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(self.location))

    @contextlib.contextmanager
    def lock(self, name: str = "") -> Iterator[None]:
        """A file lock beside the journal: serialises reconcile + enqueue between processes."""
        Path(self.location).parent.mkdir(parents=True, exist_ok=True)
        with stores.file_lock(self.location):
            yield

    def claim(self, study: optuna.Study) -> optuna.Trial | None:
        """Move one WAITING trial to RUNNING (a grid cell); ``None`` when none is left."""
        return lifecycle.claim_waiting(study)

    def ask(self, study: optuna.Study) -> optuna.Trial:
        """A new sampled trial (a tpe sweep), RUNNING in this process."""
        return study.ask()

    def beating(self, study: optuna.Study, trial: optuna.Trial) -> contextlib.AbstractContextManager[threading.Event]:
        """No heartbeat: the trial's owner record shows it alive; the event is never set."""
        return contextlib.nullcontext(threading.Event())

    def reap(self, study: optuna.Study) -> list[int]:
        """Fail the RUNNING trials whose owner died on this host, and those never owned; their numbers."""
        return lifecycle.reaped(study, lambda: lifecycle.fail_running(study, lifecycle.unowned, lifecycle.owner_dead))


@dataclass(frozen=True)
class DatabaseQueue:
    """A study in a database (PostgreSQL for several hosts, SQLite on one), with Optuna's heartbeat."""

    location: str
    """The database URL."""
    heartbeat: int = rdb.HEARTBEAT_S
    """Seconds between heartbeats; a trial is stale after ``rdb.GRACE_FACTOR`` of them."""
    tracking_uri: str | None = None
    """Where a stale trial's MLflow run is ended (:class:`.rdb.RequeueStale`)."""

    @property
    def poll_s(self) -> float:
        """Seconds a worker waits between looks at trials running elsewhere: one heartbeat."""
        return float(self.heartbeat)

    def open(self) -> BaseStorage:
        """Optuna's RDB storage with its heartbeat on; stale trials go to :class:`.rdb.RequeueStale`."""
        return rdb.open_rdb(self.location, heartbeat=self.heartbeat, on_stale=rdb.RequeueStale(self.tracking_uri))

    def lock(self, name: str = "") -> contextlib.AbstractContextManager[None]:
        """The database's lock on the study (hosts starting the same spec at once)."""
        return rdb.study_lock(self.location, name)

    def claim(self, study: optuna.Study) -> optuna.Trial | None:
        """Move one WAITING trial to RUNNING, its first heartbeat recorded before the claim (so that no
        claimed trial is ever without one; ``Study.ask`` would claim it first)."""
        storage = private.storage(study)
        return lifecycle.claim_waiting(study, first=storage.record_heartbeat)  # type: ignore[attr-defined]

    def ask(self, study: optuna.Study) -> optuna.Trial:
        """A new sampled trial (a tpe sweep), RUNNING in this process."""
        with rdb.quiet():
            return study.ask()

    def beating(self, study: optuna.Study, trial: optuna.Trial) -> rdb.Beat:
        """Beat for ``trial`` while the block runs; yields the event set when the trial is lost."""
        return rdb.Beat(private.storage(study), private.trial_id(trial))

    def reap(self, study: optuna.Study) -> list[int]:
        """Fail the stale trials of every host (Optuna's heartbeat), and those never owned; their numbers."""

        def fail() -> None:
            with rdb.quiet():
                optuna.storages.fail_stale_trials(study)  # stale trials go to RequeueStale
            lifecycle.fail_running(study, lifecycle.unowned)

        return lifecycle.reaped(study, fail)


TrialQueue = JournalQueue | DatabaseQueue


def trial_queue(location: str, heartbeat: int = rdb.HEARTBEAT_S, tracking_uri: str | None = None) -> TrialQueue:
    """The queue of a study at ``location``: a database URL or a journal file's path (checked by
    :func:`simlab.stores.study_store`)."""
    if stores.scheme_of(location) is None:
        return JournalQueue(location)
    return DatabaseQueue(location, heartbeat, tracking_uri)
