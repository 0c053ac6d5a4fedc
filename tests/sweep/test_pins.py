"""Same-seed regression pins of sweeps: what a short sweep on simlab's own trainer logs, per cell, in both
samplers (grid and tpe) on both kinds of study storage (an Optuna journal file and a SQLite database).

One table pins every cell (``normaliser=...,seed=...``): the grid runs all four cells; the tpe sweep
samples the normaliser from a categorical over the same two names, draws the pinned cells (:data:`TPE_DRAWN`:
its trials are seeded) and must log exactly what the grid's did (the sampler chooses the cell, never what the
cell computes). Each cell pins:

- ``value``: the trial's objective in the study, exactly (a success rate, a count over episodes);
- ``keys``: a hash of the (metric, step) pairs its MLflow run holds (timings left out);
- ``counts``: a hash of the metrics that are counts over episodes or tokens (``eval/``, ``train/``,
  ``health/segments/``, token counts), exactly, and of where the other values are undefined (NaN);
- ``sum`` and ``weighted``: checksums of every other value (a plain sum and a position-weighted one),
  to a relative 1e-6, as the rollout pins do: a value that moved or two that swapped places count,
  while last-bit noise of a matmul on another CPU does not.

A change that moves a pin changes what a seed computes through a sweep. That is allowed only on purpose:
re-record (``python -m tests.sweep.test_pins``) and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import tomllib
from pathlib import Path
from typing import Any

import optuna
import pytest

from simlab import names, tracking
from simlab.sweep import parse_spec
from simlab.sweep.queue import trial_queue
from tests.stores import TINY

SAMPLERS = {
    "grid": '[space]\ntrain.normaliser = ["token", "segment"]\n',
    "tpe": 'sampler = "tpe"\nn_trials = 2\n[space]\n'
           'train.normaliser = {type = "categorical", choices = ["token", "segment"]}\n',
}
STORAGES = ("journal", "sqlite")
COUNTED = ("eval/", "train/", "health/segments/", "perf/optimised_tokens", "perf/rollout_tokens",
           "perf/update_tokens")

PINNED: dict[str, dict[str, Any]] = {
    "train.normaliser=segment,seed=0": {"value": 0.125, "keys": "da6d48aa1e110342", "counts": "f391aa97a6658d2b",
                                        "sum": 272.29673165708687, "weighted": 11800.403576003684},
    "train.normaliser=segment,seed=1": {"value": 0.0, "keys": "da6d48aa1e110342", "counts": "592377fe852fc69c",
                                        "sum": 270.168722499157, "weighted": 11740.389027515832},
    "train.normaliser=token,seed=0": {"value": 0.125, "keys": "da6d48aa1e110342", "counts": "f391aa97a6658d2b",
                                      "sum": 272.41582154236033, "weighted": 11813.96250399608},
    "train.normaliser=token,seed=1": {"value": 0.0, "keys": "da6d48aa1e110342", "counts": "592377fe852fc69c",
                                      "sum": 270.15292449950977, "weighted": 11738.356409285976},
}


TPE_DRAWN = ["train.normaliser=segment,seed=0", "train.normaliser=token,seed=1"]
"""The cells the tpe sweep draws: its trials are seeded by the study's name and number (plan.trial_seed)."""


def _timing(key: str) -> bool:
    return key.startswith("perf/") and (key.endswith("_s") or key.endswith("_per_s"))


def _digest(history: dict[str, list[tuple[int, float]]], value: float) -> dict[str, Any]:
    """One cell's pin from its MLflow metric histories (key -> [(step, value)])."""
    pairs = sorted((k, s, v) for k, steps in history.items() if not _timing(k) for s, v in steps)
    counted = [(k, s, v) for k, s, v in pairs if k.startswith(COUNTED)]
    rest = [v for k, _, v in pairs if not k.startswith(COUNTED)]
    gaps = [i for i, v in enumerate(rest) if not math.isfinite(v)]  # a statistic undefined at a step (NaN)
    rest = [v if math.isfinite(v) else 0.0 for v in rest]
    return {
        "value": value,
        "keys": hashlib.sha256(json.dumps([(k, s) for k, s, _ in pairs]).encode()).hexdigest()[:16],
        "counts": hashlib.sha256(json.dumps([counted, gaps]).encode()).hexdigest()[:16],
        "sum": math.fsum(rest),
        "weighted": math.fsum((i + 1) * v for i, v in enumerate(rest)),
    }


def _storage(kind: str, folder: Path) -> str:
    return str(folder / "journal.log") if kind == "journal" else f"sqlite:///{folder / 'optuna.db'}"


def run_cells(sampler: str, storage: str, root: Path, tracking_uri: str) -> dict[str, dict[str, Any]]:
    """Run the pinned sweep on one worker; cell label -> its pin."""
    from simlab.sweep.runner import run_sweep

    name = f"pins-{sampler}-{storage}"
    spec = parse_spec(tomllib.loads(f'name = "{name}"\nseeds = [0, 1]\n{SAMPLERS[sampler]}{TINY}'))
    location = _storage(storage, root)
    result = run_sweep(spec, workers=1, storage=location, tracking_uri=tracking_uri, root=root,
                       progress=False, echo=lambda _: None)
    assert [o.state for o in result.outcomes] == ["COMPLETE"] * len(result.outcomes), result.outcomes
    study = optuna.load_study(study_name=name, storage=trial_queue(location).open())
    client = tracking.resolve_store(tracking_uri).client()
    cells = {}
    for trial in study.get_trials():
        run = client.get_run(trial.user_attrs[names.ATTR_RUN])
        history = {
            key: [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, key)]
            for key in run.data.metrics
        }
        cells[run.data.tags[names.CELL_TAG]] = _digest(history, float(trial.value))
    return cells


def _check(cells: dict[str, dict[str, Any]]) -> None:
    for label, got in cells.items():
        want = PINNED[label]
        exact = ("value", "keys", "counts")
        assert {k: got[k] for k in exact} == {k: want[k] for k in exact}, label
        assert got["sum"] == pytest.approx(want["sum"], rel=1e-6, abs=1e-9), label
        assert got["weighted"] == pytest.approx(want["weighted"], rel=1e-6, abs=1e-9), label


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_a_sweep_logs_the_pinned_metrics(ready_stores: Any, tmp_path: Path, sampler: str, storage: str) -> None:
    cells = run_cells(sampler, storage, tmp_path, ready_stores.tracking_uri)
    assert sorted(cells) == (sorted(PINNED) if sampler == "grid" else TPE_DRAWN)
    _check(cells)


def _record() -> None:  # pragma: no cover - run by hand to re-record
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        uri = f"sqlite:///{root / 'mlflow.db'}"
        print("PINNED: dict[str, dict[str, Any]] = {")
        for label, pin in sorted(run_cells("grid", "journal", root, uri).items()):
            print(f"    {label!r}: {pin!r},")
        print("}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_record())
