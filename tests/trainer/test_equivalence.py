"""Issue 21's equivalence checks, read from the committed per-seed tables of ``benchmarks/equivalence.py``.

The experiments themselves take tens of minutes (several seeds, two arms each), so they run as a script
and commit their tables; these tests assert the decision rule on those tables, and rerun one seed of
one arm to catch a table that no longer describes the code (rerun the experiments whenever the code
they cover changes: the update, behaviour cloning, the policy, the harness or the tasks).
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


def _experiments():
    spec = importlib.util.spec_from_file_location("equivalence", REPO / "benchmarks" / "equivalence.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["equivalence"] = module  # a dataclass looks its module up by name
    spec.loader.exec_module(module)
    return module


eq = _experiments()


@pytest.mark.parametrize("experiment", ["update", "base"])
def test_the_committed_table_shows_equivalence_within_two_points(experiment):
    path = eq.TABLES[experiment]
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# command: python benchmarks/equivalence.py " + experiment)
    assert lines[1].startswith("# commit: ")
    old, new = eq.paired(eq.read_table(path), experiment)
    assert old.size >= 8  # seeds with both arms
    result = eq.tost(old, new)
    assert result.test.equivalent, eq.describe(experiment, old, new, result)
    assert -eq.MARGIN < result.test.low <= result.test.high < eq.MARGIN


def test_tost_decides_equivalence_and_its_absence():
    old = np.array([0.50, 0.52, 0.48, 0.51, 0.49, 0.50, 0.53, 0.47])
    assert eq.tost(old, old + np.array([0.001, -0.002, 0.0, 0.002, -0.001, 0.0, 0.001, -0.001])).test.equivalent
    assert not eq.tost(old, old + 0.03).test.equivalent  # a real shift past the margin
    assert not eq.tost(old, old + np.array([0.05, -0.05] * 4)).test.equivalent  # too noisy to decide
    same = eq.tost(old, old)
    assert same.test.equivalent and same.se == 0.0


@pytest.mark.slow
def test_one_seed_of_the_update_table_reproduces():
    """Seed 0 of the bucketed arm, rerun: the same command gives the table's success (exactly on the machine
    that recorded it; other machines round differently, hence the tolerance of about 4 binomial SEs)."""
    rows = {(int(r["seed"]), r["arm"]): float(r["success"]) for r in eq.read_table(eq.TABLES["update"])}
    with tempfile.TemporaryDirectory() as store:
        row = eq.one_run("update", "buckets", 0, Path(store))
    assert abs(row["success"] - rows[0, "buckets"]) <= 0.09, (row, rows[0, "buckets"])
