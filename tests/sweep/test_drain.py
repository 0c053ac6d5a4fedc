"""A sweep runs until its grid is done, but a trial that fails with an error is final within one run
(a deterministic error would otherwise be retried forever); the next start retries it."""

from __future__ import annotations

import tomllib

from simlab.names import ATTR_OWNER
from simlab.sweep import SweepSpec, parse_spec
from tests.stores import TOY, Stores

BROKEN = """
name = "{name}"
seeds = [0]
sampler = "{sampler}"
{n_trials}
[base]
train.steps = 2
[space]
train.lr = {lr}
[objective]
metric = "not/logged"
"""


def _spec(sampler: str) -> SweepSpec:
    grid = sampler == "grid"
    lr = "[0.1, 0.2]" if grid else '{type = "float", low = 0.05, high = 0.2}'
    text = BROKEN.format(name=f"broken-{sampler}", sampler=sampler, lr=lr, n_trials="" if grid else "n_trials = 3")
    return parse_spec(tomllib.loads(text))


def test_erroring_grid_ends_and_a_rerun_retries_it(ready_stores: Stores) -> None:
    spec = _spec("grid")
    first = ready_stores.sweep(spec, backend=TOY)
    assert (first.ran, first.failed) == (2, 2)
    assert all("objective 'not/logged' is None" in o.reason for o in first.outcomes)
    again = ready_stores.sweep(spec, backend=TOY)
    assert (again.ran, again.failed) == (2, 2)


def test_erroring_tpe_sweep_ends_after_n_trials(ready_stores: Stores) -> None:
    result = ready_stores.sweep(_spec("tpe"), backend=TOY, workers=2)
    assert (result.ran, result.failed) == (3, 3)


WORKS = """
name = "dead-owner"
seeds = [0]
[base]
train.steps = 2
[space]
train.lr = [0.1, 0.2]
[objective]
metric = "eval/compacted_success"
"""


def test_a_worker_says_it_failed_a_dead_trial_and_runs_its_cell(ready_stores: Stores) -> None:
    """`simlab worker` joining a study with a trial whose process died says so, as `simlab sweep` does
    (it was silent), and runs that cell again."""
    from simlab.sweep import lifecycle
    from simlab.sweep.runner import open_sweep
    from simlab.sweep.worker import run_worker

    spec = parse_spec(tomllib.loads(WORKS))
    stores = {"storage": str(ready_stores.storage), "tracking_uri": ready_stores.tracking_uri, "backend": TOY}
    sweep = open_sweep(spec, **stores)  # creates the study and queues both cells
    trial = lifecycle.claim_waiting(sweep.study)
    assert trial is not None
    # this host's pid with another start time: a recycled pid, so its owner is dead
    lifecycle.record(trial, {ATTR_OWNER: {**lifecycle.this_owner(), "start": "another start"}})

    said: list[str] = []
    result = run_worker(spec, echo=said.append, **stores)
    assert any(line.startswith("resume: marked 1 trial(s)") for line in said), said
    assert (result.ran, result.failed) == (2, 0)
