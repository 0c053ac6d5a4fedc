"""A sweep validates each cell's whole run config once: the check before the sweep, the shared base
checkpoints and the trial share it (issue 44)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from simlab.config import RunConfig
from simlab.sweep import parse_spec
from tests.stores import TINY


def test_each_cell_is_validated_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from simlab.sweep import backend
    from simlab.sweep.runner import run_sweep

    backend._resolved.cache_clear()
    checked: list[tuple[str, int]] = []
    own = RunConfig.check

    def counted(self: RunConfig) -> None:
        checked.append((self.train.normaliser, self.seed))
        own(self)

    monkeypatch.setattr(RunConfig, "check", counted)
    text = f'name = "once"\nseeds = [0, 1]\n[space]\ntrain.normaliser = ["token", "segment"]\n{TINY}'
    spec = parse_spec(tomllib.loads(text))
    result = run_sweep(spec, workers=1, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", root=tmp_path,
                       progress=False, echo=lambda _: None)
    assert [o.state for o in result.outcomes] == ["COMPLETE"] * 4
    cells: Any = sorted(checked)
    assert cells == sorted((n, s) for n in ("token", "segment") for s in (0, 1)), checked


def test_a_refusal_names_the_spec_layer_that_set_the_value() -> None:
    """A cell's settings are layers ([base] < the variant < the axes' point), so a value that clashes with
    the preset is named with the part of the spec that set it, and a value the point set with the point."""
    from simlab.errors import ConfigError
    from simlab.sweep.backend import SIMLAB
    from simlab.sweep.space import Cell

    text = """name = "layers"
seeds = [0]
[base]
task.preset = "keyrecall-tiny"
[[variants]]
name = "long"
set = { harness.summary_tokens = 90 }
[space]
train.lr = [0.001, -1.0]
[objective]
metric = "eval/compacted/success"
direction = "maximize"
"""
    spec = parse_spec(tomllib.loads(text))
    said = []
    for point in spec.grid_points():
        with pytest.raises(ConfigError) as err:
            SIMLAB.config(spec, Cell(point, 0))
        said.append(str(err.value))
    assert said[0].startswith("`harness.summary_tokens=90` is invalid; ") and said[0].endswith(
        "change harness.summary_tokens (set in the sweep spec's variant 'long') or set harness.window yourself"), said
    assert said[1].startswith("`train.lr=-1.0` is invalid; choose a finite value > 0"), said
    assert [label for label, _ in spec.layers(spec.grid_points()[0])] == [
        "the sweep spec's [base]", "the sweep spec's variant 'long'", "the sweep spec's point"]
