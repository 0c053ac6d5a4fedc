"""``simlab worker``: one process that joins a sweep from any host and runs its trials until the grid is done.

Start as many as the machines have cores for, on as many machines as share the study's database and the
MLflow server. Each checks both stores, creates or joins the study (the first one enqueues the grid,
under the database's lock), runs queued trials one after another, and, when none is left, waits while
trials run elsewhere: a worker that dies on any host stops its heartbeat, and whichever worker notices
first fails its trial and queues the cell again. The last one to see every cell finished ends the
sweep's parent run. ``simlab sweep`` stays the one-host entry point (a pool of workers plus the report).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from simlab import stores, tracking
from simlab.sweep import rdb
from simlab.sweep.backend import DEFAULT_BACKEND
from simlab.sweep.runner import SweepResult, drain, open_sweep, prepare_shared
from simlab.sweep.spec import SweepSpec
from simlab.sweep.study import write_trials
from simlab.sweep.trial import TrialOutcome


def run_worker(
    spec: SweepSpec,
    *,
    storage: str | None = None,
    tracking_uri: str | None = None,
    root: Path | None = None,
    backend: str = DEFAULT_BACKEND,
    heartbeat: int = rdb.HEARTBEAT_S,
    echo: Callable[[str], None] = print,
) -> SweepResult:
    """Join (or create) the sweep, run trials until every cell is finished, write the local trials table."""
    start = time.perf_counter()
    sweep = open_sweep(
        spec, storage=storage, tracking_uri=tracking_uri, root=root, backend=backend, heartbeat=heartbeat
    )
    me, todo = sweep.ctx.coordinator, sweep.todo()  # this process's owner record; the trials queued
    echo(
        f"worker {me['host']}:{me['pid']} joined sweep {spec.name!r}: {todo} trial(s) queued; "
        f"study in {sweep.study_store.shown}, runs in {stores.shown(sweep.store.tracking_uri)}"
    )
    sweep.say_resumed(echo)
    prepare_shared(sweep, todo, echo)
    outcomes: list[TrialOutcome] = []

    def record(outcome: TrialOutcome) -> None:
        outcomes.append(outcome)
        why = f": {outcome.reason}" if outcome.reason else ""
        echo(f"trial {outcome.number} {outcome.state} in {outcome.wall_s:.1f} s{why}")

    drain(sweep, echo=echo, on_outcome=record)
    table = write_trials(sweep.study, sweep.store, Path(sweep.ctx.store))
    # every cell is finished: whichever process sees that last ends the parent run (ending it twice is harmless)
    tracking.finish_run(sweep.client, sweep.ctx.parent_run_id, "FINISHED")
    return sweep.result(outcomes, table, start)
