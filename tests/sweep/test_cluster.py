"""Sweeps across machines, for real: one PostgreSQL study, one MLflow server, worker processes, a SIGKILL.

Each worker runs in its own working folder (its machine's local store); the one killed has another
``SIMLAB_HOST`` identity, so no other worker can judge its process: only Optuna's heartbeat can.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import optuna
import polars as pl
import pytest
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.engine import make_url

from simlab import tracking
from simlab.sweep import load_spec
from tests.stores import TOY, run_cli, write_spec

REPO = Path(__file__).resolve().parents[2]
HEARTBEAT = "2"  # seconds; a trial is stale after 3 intervals without a beat

SPEC = """
name = "{name}"
seeds = [0, 1]
[base]
train.steps = 6
train.step_seconds = {step_seconds}
[space]
train.lr = [0.05, 0.1, 0.2]
train.overlong_mask = [true, false]
[objective]
metric = "eval/compacted_success"
"""


def _worker(spec: Path, storage: str, server: str, cwd: Path, host: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SIMLAB_HOME", None)
    if host:
        env["SIMLAB_HOST"] = host
    cwd.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-m", "simlab.cli", "worker", str(spec),
        "--storage", storage, "--tracking-uri", server, "--trial", TOY, "--heartbeat", HEARTBEAT,
    ]  # fmt: skip
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _trials(name: str, storage: str) -> list[FrozenTrial]:
    try:
        return optuna.load_study(study_name=name, storage=storage).get_trials()
    except KeyError:  # not created yet
        return []


def _mid_trial(trials: list[FrozenTrial], pid: int, client: object) -> FrozenTrial | None:
    """The trial ``pid`` runs, once it has logged its first steps (so a kill now cuts it off)."""
    for t in trials:
        owner = t.user_attrs.get("owner") or {}
        if t.state == TrialState.RUNNING and owner.get("worker") == pid and "mlflow_run_id" in t.user_attrs:
            steps = client.get_metric_history(t.user_attrs["mlflow_run_id"], "train/loss")  # type: ignore[attr-defined]
            if 1 <= len(steps) <= 3:
                return t
    return None


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_three_workers_one_killed_on_another_host(optuna_db: str, mlflow_server: str, tmp_path: Path) -> None:
    name = "cluster"
    spec_path = write_spec(tmp_path, SPEC.format(name=name, step_seconds=0.4))
    cells = [c.key for c in load_spec(spec_path).cells()]
    assert len(cells) == 12

    # three machines start the same spec at once; the third stands for a second host
    workers = [
        _worker(spec_path, optuna_db, mlflow_server, tmp_path / "host-a-1"),
        _worker(spec_path, optuna_db, mlflow_server, tmp_path / "host-a-2"),
        _worker(spec_path, optuna_db, mlflow_server, tmp_path / "host-b", host="host-b"),
    ]
    victim = workers[2]
    client = tracking.Store(mlflow_server, None).client()
    deadline = time.monotonic() + 180
    killed: FrozenTrial | None = None
    while time.monotonic() < deadline and killed is None:
        assert victim.poll() is None, victim.communicate()[0]
        killed = _mid_trial(_trials(name, optuna_db), victim.pid, client)
        time.sleep(0.2)
    if killed is None:
        for w in workers:
            w.kill()
        pytest.fail("the host-b worker never ran a trial: " + workers[2].communicate()[0])
    victim.send_signal(signal.SIGKILL)
    assert victim.wait() == -signal.SIGKILL

    outputs = []
    for w in workers[:2]:
        out = w.communicate(timeout=240)[0]
        outputs.append(out)
        assert w.returncode == 0, out
        assert "the grid is finished" in out
    assert any("queued their cells again" in out for out in outputs), "\n---\n".join(outputs)

    trials = _trials(name, optuna_db)
    # every cell complete exactly once; nothing left waiting or running
    complete = Counter(t.user_attrs["cell"] for t in trials if t.state == TrialState.COMPLETE)
    assert sorted(complete) == sorted(cells) and set(complete.values()) == {1}
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    # the grid was enqueued once although three processes started it together; only retries came later
    originals = [t for t in trials if RetryHeartbeatStaleTrialCallback.retried_trial_number(t) is None]
    assert len(originals) == len(cells)
    # the killed trial: failed by another host's heartbeat check, its cell retried and completed there
    dead = next(t for t in trials if t.number == killed.number)
    assert dead.state == TrialState.FAIL and dead.user_attrs["owner"]["host"] == "host-b"
    retry = next(
        t for t in trials
        if RetryHeartbeatStaleTrialCallback.retried_trial_number(t) == killed.number and t.state == TrialState.COMPLETE
    )  # fmt: skip
    assert retry.user_attrs["cell"] == dead.user_attrs["cell"] and retry.user_attrs["replaces"] == dead.number
    assert retry.user_attrs["owner"]["host"] != "host-b"

    # MLflow: nothing RUNNING, one parent FINISHED, one FINISHED child per cell, the killed run KILLED
    experiment = client.get_experiment_by_name(name)
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    assert [r.info.run_id for r in runs if r.info.status == "RUNNING"] == []
    parents = [r for r in runs if r.data.tags.get(tracking.ROLE_TAG) == "parent"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get(tracking.ROLE_TAG) == "trial"]
    finished = Counter(r.data.tags[tracking.CELL_TAG] for r in children if r.info.status == "FINISHED")
    assert len(finished) == len(cells) and set(finished.values()) == {1}
    not_finished = [r for r in children if r.info.status != "FINISHED"]
    assert all(r.info.status == "KILLED" for r in not_finished)
    dead_run = client.get_run(dead.user_attrs["mlflow_run_id"])
    assert dead_run.info.status == "KILLED"
    why = dead_run.data.tags[tracking.REASON_TAG]
    assert "host-b" in why and "heartbeat" in why
    assert {r.data.tags[tracking.PARENT_TAG] for r in children} == {parents[0].info.run_id}
    # each machine's local store holds only its copy of the results table (runs are on the server)
    for folder in ("host-a-1", "host-a-2"):
        local = tmp_path / folder / "mlruns"
        assert not (local / "mlflow.db").exists()
        rows = pl.read_csv(local / "sweeps" / name / "trials.csv").filter(pl.col("trial") == dead.number)
        assert rows["failure"].to_list() == ["killed"]
        assert f"ran again as trial {retry.number}" in rows["reason"][0]


def _open_together(spec: Path, storage: str, server: str, n: int) -> list[subprocess.Popen[str]]:
    """``n`` processes that each open the sweep once all of them are ready (within milliseconds)."""
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from simlab.sweep import load_spec\n"
        "from simlab.sweep.runner import open_sweep\n"
        "spec, go = load_spec(sys.argv[1]), Path(sys.argv[4])\n"
        "Path(sys.argv[5]).touch()\n"
        "while not go.exists():\n"
        "    time.sleep(0.005)\n"
        f"open_sweep(spec, storage=sys.argv[2], tracking_uri=sys.argv[3], backend={TOY!r})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    go = spec.parent / "go"
    procs = []
    for i in range(n):
        args = [sys.executable, "-c", code, str(spec), storage, server, str(go), str(spec.parent / f"ready-{i}")]
        out = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
        procs.append(subprocess.Popen(args, cwd=spec.parent, env=env, **out))
    deadline = time.monotonic() + 120
    while len(list(spec.parent.glob("ready-*"))) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    go.touch()
    return procs


def test_hosts_opening_one_sweep_at_once_enqueue_each_cell_once(
    optuna_db: str, mlflow_server: str, tmp_path: Path
) -> None:
    spec_path = write_spec(tmp_path, SPEC.format(name="together", step_seconds=0.0))
    for p in _open_together(spec_path, optuna_db, mlflow_server, 4):
        out = p.communicate(timeout=120)[0]
        assert p.returncode == 0, out
    trials = _trials("together", optuna_db)
    assert sorted(t.user_attrs["cell"] for t in trials) == sorted(c.key for c in load_spec(spec_path).cells())
    client = tracking.Store(mlflow_server, None).client()
    experiment = client.get_experiment_by_name("together")
    parents = client.search_runs([experiment.experiment_id], f"tags.`{tracking.ROLE_TAG}` = 'parent'")
    assert len(parents) == 1


def test_enqueue_under_the_database_lock_is_idempotent(optuna_db: str) -> None:
    """Eight connections enqueue the same grid at the same instant; the lock lets each cell in once."""
    import tomllib

    from simlab.sweep import parse_spec
    from simlab.sweep.plan import GridPlan
    from simlab.sweep.queue import trial_queue
    from simlab.sweep.rdb import open_rdb
    from simlab.sweep.study import FINAL_FAILURES

    spec = parse_spec(tomllib.loads(SPEC.format(name="racing", step_seconds=0.0)))
    optuna.create_study(study_name=spec.name, storage=optuna_db)
    studies = [optuna.load_study(study_name=spec.name, storage=open_rdb(optuna_db)) for _ in range(8)]
    start = threading.Barrier(len(studies))

    def enqueue(study: optuna.Study) -> int:
        start.wait()
        with trial_queue(optuna_db).lock(spec.name):
            return GridPlan().enqueue(study, spec, FINAL_FAILURES)

    with ThreadPoolExecutor(len(studies)) as pool:
        added = list(pool.map(enqueue, studies))
    assert sorted(added) == [0] * 7 + [len(spec.cells())]
    trials = _trials(spec.name, optuna_db)
    assert sorted(t.user_attrs["cell"] for t in trials) == sorted(c.key for c in spec.cells())


def test_sweep_on_postgres_and_a_tracking_server(optuna_db: str, mlflow_server: str, tmp_path: Path) -> None:
    """``simlab sweep`` itself (a pool of two workers and the report) against the shared stores."""
    text = SPEC.format(name="onehost", step_seconds=0.0).replace("train.lr = [0.05, 0.1, 0.2]", "train.lr = [0.1]")
    spec_path = write_spec(tmp_path, text)
    args = ["--storage", optuna_db, "--tracking-uri", mlflow_server, "--trial", TOY, "--no-progress"]
    result = run_cli(["sweep", str(spec_path), "--workers", "2", *args])
    assert result.exit_code == 0, result.output
    assert "done: 4 trial(s) run, 0 failed" in result.output and "## simlab report: onehost" in result.output
    password = make_url(optuna_db).password
    assert not password or f":{password}@" not in result.output  # printed as ***
    again = run_cli(["sweep", str(spec_path), *args])
    assert again.exit_code == 0 and "0 of 4 trial(s) to run" in again.output
