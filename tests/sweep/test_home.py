"""The default stores follow the user ($SIMLAB_HOME, else the working folder); shipped specs go by name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from simlab.sweep import SpecError
from simlab.sweep.shipped import locate, shipped_specs
from tests.stores import TOY, run_cli, write_spec

SPEC = """
name = "home"
seeds = [0]
[base]
train.steps = 2
[space]
train.lr = [0.1]
[objective]
metric = "eval/compacted_success"
"""


def _default_sweep(tmp_path: Path, empty_mlflow_db: Path, root: Path) -> None:
    (root / "mlruns").mkdir(parents=True)
    shutil.copy(empty_mlflow_db, root / "mlruns" / "mlflow.db")  # tables made: seconds saved, nothing else
    spec = write_spec(tmp_path, SPEC)
    result = run_cli(["sweep", str(spec), "--trial", TOY, "--no-progress"])
    assert result.exit_code == 0, result.output
    assert f"runs in sqlite:///{root.resolve()}/mlruns/mlflow.db" in result.output


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("SIMLAB_HOME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return monkeypatch


def test_default_stores_are_under_the_working_folder(tmp_path: Path, empty_mlflow_db: Path, no_env) -> None:
    work = tmp_path / "work"
    work.mkdir()
    no_env.chdir(work)
    _default_sweep(tmp_path, empty_mlflow_db, work)
    assert sorted(p.name for p in (work / "mlruns").iterdir()) == [
        "artifacts", "mlflow.db", "optuna-journal.log", "optuna-journal.log.simlab-lock", "sweeps",
    ]  # fmt: skip
    assert sorted(p.name for p in work.iterdir()) == ["mlruns"]


def test_simlab_home_wins_over_the_working_folder(tmp_path: Path, empty_mlflow_db: Path, no_env) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    no_env.chdir(work)
    no_env.setenv("SIMLAB_HOME", str(home))
    _default_sweep(tmp_path, empty_mlflow_db, home)
    assert (home / "mlruns" / "optuna-journal.log").exists() and list(work.iterdir()) == []


def test_shipped_specs_are_found_by_name() -> None:
    assert {"quick", "recipes", "lambda"} <= set(shipped_specs())
    assert locate("quick") == shipped_specs()["quick"] == locate("quick.toml")
    with pytest.raises(SpecError, match=r"name of a shipped spec: .*quick"):
        locate("quik")


def test_findings_specs_are_found_by_folder_and_name(tmp_path: Path, no_env) -> None:
    no_env.chdir(tmp_path)  # away from the checkout, as a user of an installed simlab
    found = locate("findings/trajectory-group")
    assert found == shipped_specs()["findings/trajectory-group"] == locate("findings/trajectory-group.toml")
    assert found.parent.name == "findings" and found.is_file()
    assert locate("sweeps/findings/nope.toml") == Path("sweeps/findings/nope.toml")  # load_spec names it
    with pytest.raises(SpecError, match=r"'findings/nope' does not exist; .*spec: findings/credit-slow, ") as bad:
        locate("findings/nope")
    assert "quick" not in str(bad.value)  # only the names in that folder


def test_unknown_spec_name_exits_2_listing_the_shipped_ones(tmp_path: Path, no_env) -> None:
    no_env.chdir(tmp_path)
    result = run_cli(["sweep", "quik"])
    assert result.exit_code == 2 and "'quik' does not exist" in result.output and "quick" in result.output
    assert list(tmp_path.iterdir()) == []
