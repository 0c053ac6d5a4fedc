"""``simlab sweep`` runs one worker per core unless told otherwise, and says how many it used."""

from __future__ import annotations

from pathlib import Path

import pytest

from simlab.sweep.runner import machine_cores
from tests.stores import Stores, run_cli, write_spec

SPEC = """
name = "cores"
seeds = [0, 1]
[space]
train.lr = [0.1]
[objective]
metric = "eval/compacted_success"
"""


def test_machine_cores_is_the_cores_this_process_may_use() -> None:
    import os

    want = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert machine_cores() == want >= 1


@pytest.mark.parametrize(("args", "workers"), [([], machine_cores()), (["--workers", "1"], 1)])
def test_sweep_reports_the_workers_it_ran_on(ready_stores: Stores, tmp_path: Path, args, workers) -> None:
    spec = write_spec(tmp_path, SPEC)
    result = run_cli(["sweep", str(spec), *ready_stores.args(), "--no-progress", *args])
    assert result.exit_code == 0, result.output
    assert f"to run on {workers} worker(s)" in result.output
    assert "done: 2 trial(s) run, 0 failed, in " in result.output
    assert result.output.split("done: ", 1)[1].splitlines()[0].endswith(f"on {workers} worker(s)")
