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
