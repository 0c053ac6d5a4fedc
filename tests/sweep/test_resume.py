"""SIGKILL a running `simlab sweep`, rerun it: nothing lost, nothing duplicated, nothing left RUNNING."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from simlab import tracking
from simlab.sweep import load_spec
from simlab.sweep.queue import trial_queue
from tests.stores import Stores, write_spec

REPO = Path(__file__).resolve().parents[2]

SPEC = """
name = "killme"
seeds = [0, 1]
[base]
train.steps = 8
train.step_seconds = 0.2
[space]
train.lr = [0.05, 0.1, 0.2]
[objective]
metric = "eval/compacted_success"
"""


def _sweep(spec: Path, stores: Stores, workers: int = 2) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable,
        "-m",
        "simlab.cli",
        "sweep",
        str(spec),
        "--workers",
        str(workers),
        "--no-progress",
        *stores.args(),
    ]
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _trials(stores: Stores) -> list[optuna.trial.FrozenTrial]:
    try:
        study = optuna.load_study(study_name="killme", storage=trial_queue(str(stores.storage)).open())
    except KeyError:  # not created yet
        return []
    return study.get_trials()


def _early_running_run(client: object) -> bool:
    """Is a trial run RUNNING with only its first steps logged (so a kill now surely cuts it off)?"""
    experiment = client.get_experiment_by_name("killme")  # type: ignore[attr-defined]
    if experiment is None:
        return False
    runs = client.search_runs(
        [experiment.experiment_id],
        "attributes.status = 'RUNNING' and "  # type: ignore[attr-defined]
        "tags.`simlab.role` = 'trial'",
    )
    return any(1 <= len(client.get_metric_history(r.info.run_id, "train/loss")) <= 3 for r in runs)  # type: ignore[attr-defined]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return (
        Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]
    )


@pytest.mark.slow  # about 28 s: a real sweep killed mid-trial, then run again
def test_sigkill_then_rerun_completes_every_cell_once(ready_stores: Stores, tmp_path: Path) -> None:
    spec_path = write_spec(tmp_path, SPEC)
    proc = _sweep(spec_path, ready_stores)
    deadline = time.monotonic() + 120
    client = tracking.resolve_store(ready_stores.tracking_uri).client()
    while time.monotonic() < deadline:
        states = Counter(t.state for t in _trials(ready_stores))
        if states[TrialState.COMPLETE] >= 1 and _early_running_run(client):
            break
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.2)
    else:
        proc.kill()
        raise AssertionError(f"the sweep never had a finished and a running trial: {proc.communicate()[0]}")
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    killed = [t for t in _trials(ready_stores) if t.state == TrialState.RUNNING]
    workers = {t.user_attrs["owner"]["worker"] for t in killed if "owner" in t.user_attrs}
    deadline = time.monotonic() + 20
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in workers), "orphaned workers kept running killed trials"

    experiment_id = client.get_experiment_by_name("killme").experiment_id

    def finished() -> dict[str, tuple[object, ...]]:
        out = {}
        for run in client.search_runs(
            [experiment_id], "attributes.status = 'FINISHED' and tags.`simlab.role` = 'trial'"
        ):
            steps = len(client.get_metric_history(run.info.run_id, "train/loss"))
            out[run.info.run_id] = (run.info.end_time, run.data.metrics["eval/compacted_success"], steps)
        return out

    before = finished()
    assert before, "no run finished before the kill"

    rerun = _sweep(spec_path, ready_stores, workers=1)  # resuming with another worker count is fine
    output = rerun.communicate(timeout=300)[0]
    assert rerun.returncode == 0, output
    assert "queued their cells again" in output

    trials = _trials(ready_stores)
    complete = Counter(t.user_attrs["cell"] for t in trials if t.state == TrialState.COMPLETE)
    cells = [c.key for c in load_spec(spec_path).cells()]
    assert sorted(complete) == sorted(cells) and set(complete.values()) == {1}
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    # a trial cut off by the kill is failed as killed and its cell run again; one whose worker was already
    # past its last step may have finished it before noticing the coordinator was gone
    retried = 0
    for t in trials:
        if t.number in {k.number for k in killed}:
            run = client.get_run(t.user_attrs["mlflow_run_id"]) if "mlflow_run_id" in t.user_attrs else None
            if t.state == TrialState.FAIL:
                retried += 1
                assert t.user_attrs["failure"] == "killed"
                assert run is None or (
                    run.info.status == "KILLED" and "killed" in run.data.tags[tracking.REASON_TAG]
                )
            else:
                assert t.state == TrialState.COMPLETE and (run is None or run.info.status == "FINISHED")
    assert retried >= 1

    assert client.search_runs([experiment_id], "attributes.status = 'RUNNING'") == []
    after = finished()
    assert {k: after[k] for k in before} == before  # completed runs untouched
    assert len(after) == len(cells)
