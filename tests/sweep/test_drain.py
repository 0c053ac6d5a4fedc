"""A sweep runs until its grid is done, but a trial that fails with an error is final within one run
(a deterministic error would otherwise be retried forever); the next start retries it."""

from __future__ import annotations

import tomllib

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
