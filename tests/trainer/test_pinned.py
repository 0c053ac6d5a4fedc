"""Same-seed regression pins: a few short runs' metrics, recorded on the CPU and asserted exactly.

A change that moves any of these numbers changes what a seed computes. That is allowed only on purpose:
re-record them (``python -m tests.trainer.test_pinned``) and say why in the commit. Success rates and
returns are counts over episodes, compared exactly; gradient norms and losses to a relative 1e-5.

Recorded after the prompt stream became a pure function of (seed, step) and the base model got its own
seed (``base.seed``); re-recorded when the update and behaviour cloning began to cut their batches into
length buckets and rollouts got a sampling stream of their own (issue 21).
"""

from __future__ import annotations

import copy
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from simlab.config import resolve
from simlab.sinks import JsonlSink, read_metrics
from simlab.train import train

SMALL: dict[str, Any] = {
    "task": {"preset": "keyrecall-mini"},
    "base": {"steps": 12, "episodes": 16},
    "train": {"steps": 3, "prompts": 4, "group_size": 4, "minibatch_segments": 64},
    "eval": {"every": 3, "episodes": 32},
}
RUNS: dict[str, dict[str, Any]] = {
    "supo": {"train": {"recipe": "supo"}},
    "compactionrl": {
        "train": {"recipe": "compactionrl", "value_pretrain_steps": 1, "group_size": 1, "prompts": 8},
        "harness": {"window": 64},
    },
    "autocompact-run-seed": {
        "train": {"recipe": "autocompact", "estimator": "trajectory_group", "normaliser": "segment"},
        "base": {"seed": "run"},
        "seed": 3,
    },
}
KEYS = ("eval/compacted/success", "eval/single_window/success", "train/return", "loss/grad_norm",
        "health/segments/mean", "loss/value")
EXACT = ("eval/compacted/success", "eval/single_window/success", "train/return", "health/segments/mean")

PINNED: dict[str, dict[str, float]] = {
    "supo": {
        "0:eval/compacted/success": 0.21875, "0:eval/single_window/success": 0.0, "0:train/return": 0.25,
        "0:loss/grad_norm": 0.3961966633796692, "0:health/segments/mean": 3.25, "1:train/return": 0.125,
        "1:loss/grad_norm": 0.3230551481246948, "1:health/segments/mean": 3.0, "2:train/return": 0.1875,
        "2:loss/grad_norm": 0.3944668173789978, "2:health/segments/mean": 3.0, "3:eval/compacted/success": 0.1875,
        "3:eval/single_window/success": 0.0,
    },
    "compactionrl": {
        "1:eval/compacted/success": 0.15625, "1:eval/single_window/success": 0.125, "1:train/return": 0.125,
        "1:loss/grad_norm": 0.14712265133857727, "1:health/segments/mean": 2.0, "1:loss/value": 0.05603131651878357,
        "2:train/return": 0.125, "2:loss/grad_norm": 0.17871136963367462, "2:health/segments/mean": 2.0,
        "2:loss/value": 0.03842801973223686, "3:train/return": 0.0, "3:loss/grad_norm": 0.19645358622074127,
        "3:health/segments/mean": 1.875, "3:loss/value": 0.009655740112066269, "4:eval/compacted/success": 0.1875,
        "4:eval/single_window/success": 0.125,
    },
    "autocompact-run-seed": {
        "0:eval/compacted/success": 0.21875, "0:eval/single_window/success": 0.0, "0:train/return": 0.1875,
        "0:loss/grad_norm": 0.2283819168806076, "0:health/segments/mean": 4.5625, "1:train/return": 0.1875,
        "1:loss/grad_norm": 0.5185922980308533, "1:health/segments/mean": 4.875, "2:train/return": 0.5,
        "2:loss/grad_norm": 0.5961709022521973, "2:health/segments/mean": 5.9375,
        "3:eval/compacted/success": 0.3125, "3:eval/single_window/success": 0.0,
    },
}


def nested(name: str) -> dict[str, Any]:
    out = copy.deepcopy(SMALL)
    for key, value in RUNS[name].items():
        if isinstance(value, dict):
            out.setdefault(key, {}).update(value)
        else:
            out[key] = value
    return out


def record(name: str, folder: Path) -> dict[str, float]:
    """Train run ``name`` into ``folder`` and return its pinned metrics as ``{"row:key": value}``."""
    sink = JsonlSink(folder / "run")
    train(resolve(nested(name)), sink, store=folder / "store")
    sink.close()
    rows = read_metrics(folder / "run")
    return {f"{i}:{k}": r[k] for i, r in enumerate(rows) for k in KEYS if k in r}


@pytest.mark.parametrize("name", list(RUNS))
def test_same_seed_metrics_are_pinned(tmp_path, name):
    got = record(name, tmp_path)
    want = PINNED[name]
    assert set(got) == set(want)
    for key, value in want.items():
        if key.split(":", 1)[1] in EXACT:
            assert got[key] == value, key
        else:
            assert math.isclose(got[key], value, rel_tol=1e-5), (key, got[key], value)


if __name__ == "__main__":  # re-record: python -m tests.trainer.test_pinned
    import tempfile

    import torch

    torch.set_num_threads(1)
    for run_name in RUNS:
        with tempfile.TemporaryDirectory() as tmp:
            json.dump({run_name: record(run_name, Path(tmp))}, sys.stdout)
            print()
