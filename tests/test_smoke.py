"""SIMLAB_SMOKE, the one size knob: caps a run's sizes and a sweep's seeds, and changes nothing when off."""

from __future__ import annotations

import pytest

from simlab import smoke
from simlab.config import resolve
from simlab.sweep import load_spec
from simlab.sweep.shipped import locate

RUN = {"task": {"preset": "keyrecall-mini"}, "base": {"steps": 300, "episodes": 4},
       "train": {"steps": 40, "prompts": 16}, "eval": {"episodes": 256, "every": 5}}


@pytest.mark.parametrize("value", ["", "0"])
def test_off_changes_nothing(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(smoke.ENV, value)
    cfg = resolve(RUN)
    assert (cfg.base.steps, cfg.base.episodes, cfg.train.steps, cfg.train.prompts) == (300, 4, 40, 16)
    assert (cfg.eval.episodes, cfg.eval.every) == (256, 5)
    spec = load_spec(locate("quick"))
    assert spec.at_smoke_size() is spec


def test_on_caps_each_size_and_keeps_smaller_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(smoke.ENV, "1")
    cfg = resolve(RUN)
    # each capped setting is min(given, cap): base.episodes was already below its cap of 8
    assert (cfg.base.steps, cfg.base.episodes, cfg.train.steps, cfg.train.prompts) == (2, 4, 1, 2)
    assert (cfg.eval.episodes, cfg.eval.every) == (8, 1)
    assert cfg.train.lr == resolve({"task": {"preset": "keyrecall-mini"}}).train.lr  # what is not a size stays


def test_on_keeps_the_first_seed_and_every_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_spec(locate("quick"))
    monkeypatch.setenv(smoke.ENV, "yes")
    small = spec.at_smoke_size()
    assert spec.seeds == (40, 41, 42, 43) and small.seeds == (40,)
    assert small.grid_points() == spec.grid_points() and small.n_trials is None
