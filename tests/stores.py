"""Shared by the sweep and tracking tests: a sweep's two stores in a tmp folder, the toy backend, the CLI."""

from __future__ import annotations

import functools
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from simlab.cli import app

TOY = "tests.sweep.toy:BACKEND"
TINY = """
[base]
task.preset = "keyrecall-tiny"
train.recipe = "supo"
task.num_facts = 3
task.horizon = [8, 10]
task.vocab_size = 32
harness.window = 40
harness.summary_tokens = 4
harness.max_compactions = 6
policy.n_layer = 1
policy.d_model = 32
policy.n_head = 2
base.steps = 2
base.episodes = 8
train.steps = 2
train.prompts = 2
train.group_size = 4
train.minibatch_segments = 16
eval.every = 1
eval.episodes = 8
[objective]
metric = "eval/compacted/success"
"""
"""The trainer tests' tiny run as sweep overrides: a real trial of simlab's own trainer in seconds."""


@dataclass(frozen=True)
class Stores:
    folder: Path
    tracking_uri: str
    storage: Path

    def args(self) -> list[str]:
        return ["--tracking-uri", self.tracking_uri, "--storage", str(self.storage), "--trial", TOY]

    def written(self) -> list[Path]:
        return sorted(p for p in self.folder.rglob("*"))

    def sweep(self, spec: Any, **options: Any) -> Any:
        """Run ``spec`` in-process on these stores, silently (no progress bar, no echo)."""
        from simlab.sweep.runner import run_sweep

        return run_sweep(spec, storage=str(self.storage), tracking_uri=self.tracking_uri, progress=False,
                         echo=lambda _: None, **options)


@pytest.fixture
def stores(tmp_path: Path) -> Stores:
    """An empty folder for both stores (bad-spec tests check that it stays empty)."""
    folder = tmp_path / "store"
    folder.mkdir()
    return Stores(folder, f"sqlite:///{folder / 'mlflow.db'}", folder / "journal.log")


@functools.cache
def _template_db() -> Path:
    # one per test process, however many conftests import the fixture below
    from simlab import tracking

    folder = Path(tempfile.mkdtemp(prefix="simlab-mlflow-template-"))
    tracking.prepare(tracking.resolve_store(f"sqlite:///{folder / 'mlflow.db'}")).search_experiments()
    return folder / "mlflow.db"


@pytest.fixture(scope="session")
def empty_mlflow_db() -> Path:
    """An initialised, empty MLflow sqlite store (creating the tables takes seconds; copy this instead)."""
    return _template_db()


@pytest.fixture
def ready_stores(stores: Stores, empty_mlflow_db: Path) -> Stores:
    """Like ``stores``, with the MLflow tables already created."""
    shutil.copy(empty_mlflow_db, stores.folder / "mlflow.db")
    return stores


def run_cli(args: list[str]):
    return CliRunner().invoke(app, args)


def write_spec(folder: Path, text: str, name: str = "spec.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path
