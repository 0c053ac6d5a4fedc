"""No test writes to the user's own store (issue 18: the tests wrote a base checkpoint into ./mlruns/base).

``tests/conftest.py`` gives the session its own ``$SIMLAB_HOME`` and compares the user's store before and
after the session; these tests show both halves at work.
"""

from __future__ import annotations

import os
from pathlib import Path

from simlab import stores
from tests.conftest import REPO, changes, snapshot, user_store_paths
from tests.stores import TOY, run_cli, write_spec


def test_the_default_stores_of_the_session_are_its_own(user_store_untouched: Path) -> None:
    assert os.environ["SIMLAB_HOME"] == str(user_store_untouched)
    assert "MLFLOW_TRACKING_URI" not in os.environ
    assert stores.home() == user_store_untouched.resolve()
    assert not user_store_untouched.resolve().is_relative_to(REPO)
    assert (REPO / "mlruns").resolve() in user_store_paths(Path.cwd(), {})


def test_a_sweep_on_the_default_stores_leaves_the_users_store_untouched(
    user_store_untouched: Path, tmp_path: Path
) -> None:
    watched = user_store_paths(Path.cwd(), {})
    before = {p: snapshot(p) for p in watched}
    spec = write_spec(tmp_path, 'name = "user-store-guard"\nseeds = [0]\n[space]\ntrain.lr = [0.1]\n'
                                '[objective]\nmetric = "eval/compacted_success"\n')
    result = run_cli(["sweep", str(spec), "--trial", TOY, "--no-progress"])  # both stores left to default
    assert result.exit_code == 0, result.output
    assert (user_store_untouched / "mlruns" / "optuna-journal.log").is_file()
    assert (user_store_untouched / "mlruns" / "mlflow.db").is_file()
    assert changes(before) == []


def test_the_guard_sees_a_file_written_into_a_watched_store(tmp_path: Path) -> None:
    store = tmp_path / "mlruns"
    (store / "base").mkdir(parents=True)
    before = {store: snapshot(store), tmp_path / "mlflow.db": snapshot(tmp_path / "mlflow.db")}
    assert changes(before) == []
    (store / "base" / "peekread-pos-0123.pt").write_bytes(b"weights")
    (tmp_path / "mlflow.db").write_bytes(b"")
    assert changes(before) == [f"{store}: base/peekread-pos-0123.pt", f"{tmp_path / 'mlflow.db'}: created"]
