"""``simlab audit-batch``: the committed example, a file made by verl's own DataProto, bad input (issue 31)."""

from __future__ import annotations

import importlib.util
import json
import runpy
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from simlab.cli import app
from simlab.integrations.batch_file import read_batch, write_batch
from tests.services import missing

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "benchmarks" / "example-batch.parquet"


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["audit-batch", *map(str, args)])
    return result.exit_code, result.output


def test_the_committed_example_is_what_its_script_writes(tmp_path: Path) -> None:
    build = runpy.run_path(str(ROOT / "benchmarks" / "example_batch.py"))["build"]
    fresh = read_batch(write_batch(tmp_path / "fresh.parquet", *build()))
    committed = read_batch(EXAMPLE)
    assert fresh.keys == committed.keys
    assert np.array_equal(fresh.response_mask, committed.response_mask)
    assert np.array_equal(fresh.rewards, committed.rewards)


def test_the_example_reports_weights_success_ess_and_what_applies() -> None:
    code, out = _run(EXAMPLE)
    assert code == 0, out
    assert "62 rows, 32 sessions in 8 prompt groups; sessions by rows K: K = 1: 8, K = 2: 18, K = 3: 6." in out
    assert "| seq-mean-token-mean | none | 0.52 | 1.03 | 1.55 | 87.1% / 86.6% | 28.7 of 32 |" in out
    assert "| seq-mean-token-mean | inverse_k | 1.00 | 1.00 | 1.00 | 75.0% / 86.6% | 32.0 of 32 |" in out
    assert "Success by session 46.9%, by row 38.7%: a gap of -8.2 points" in out
    assert "question 1, the row weight under seq-mean-token-mean" in out and "-10.6 +- 2.2" in out
    assert "finding 1, trajectory-group statistics" in out


def test_a_row_counted_schedule_ends_rows_per_rollout_times_early() -> None:
    # 62 rows over 32 rollouts: 1.94 rows each, so 200 planned steps end at ceil(200 / 1.9375) = 104;
    # ROLL issue 407's 123 of 200 is 1.63 rows per rollout
    code, out = _run(EXAMPLE, "--planned-steps", "200")
    assert code == 0 and "Rows per rollout: 1.94." in out and "reaches its end at step 104" in out
    report = json.loads(_run(EXAMPLE, "--planned-steps", "31", "--json")[1])
    assert report["schedule"] == {"rows_per_rollout": 62 / 32, "planned_steps": 31, "ends_at_step": 16}
    code, out = _run(EXAMPLE, "--planned-steps", "0")
    assert code == 2 and "`--planned-steps=0` is invalid; choose an integer >= 1" in out and out.count("\n") == 1


def test_json_holds_the_same_numbers() -> None:
    code, out = _run(EXAMPLE, "--json")
    report = json.loads(out)
    assert code == 0 and report["sessions"] == 32 and report["rows_per_session"] == {"1": 8, "2": 18, "3": 6}
    assert report["success"]["gap"] == pytest.approx(-8.2, abs=0.05)


@pytest.mark.parametrize("suffix", [".pkl", ".pt"])
def test_a_batch_made_by_verls_dataproto(tmp_path: Path, suffix: str) -> None:
    if importlib.util.find_spec("verl") is None:
        missing("verl is not installed: pip install -e '.[verl]'")
    import torch
    from verl.protocol import DataProto

    keys = ["p_0_0", "p_0_1", "p_1_0", "q_0_0", "q_0_1", "q_0_2", "q_1_0"]
    mask = torch.tensor([[1, 1, 0], [1, 0, 1], [1, 1, 1], [1, 0, 0], [1, 1, 0], [0, 1, 1], [1, 1, 1]])
    rewards = torch.zeros(mask.shape)
    rewards[[0, 1, 6], 1] = 1.0
    data = DataProto.from_dict(tensors={"token_level_rewards": rewards, "response_mask": mask},
                               non_tensors={"uid": np.array([k[0] for k in keys], dtype=object),
                                            "key": np.array(keys, dtype=object)})
    path = tmp_path / f"batch{suffix}"
    if suffix == ".pkl":
        data.save_to_disk(path)
    else:
        torch.save(data, path)
    code, out = _run(path)
    assert code == 0, out
    assert "7 rows, 4 sessions in 2 prompt groups; sessions by rows K: K = 1: 2, K = 2: 1, K = 3: 1." in out
    assert "Success by session 50.0%, by row 42.9%" in out


def _parquet(path: Path, **columns: object) -> Path:
    import polars as pl

    pl.DataFrame(columns).write_parquet(path)
    return path


def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    text = tmp / "notes.parquet"
    text.write_text("not a batch")
    rows = {"keys": ["p_0_0", "p_1_0"], "response_mask": [[1, 1], [1, 0]]}
    return {
        "missing file": (tmp / "absent.parquet", "no such file"),
        "suffix": (tmp / "batch.csv", "give a batch file ending in one of"),
        "not parquet": (text, "it is not a parquet file"),
        "no rewards": (_parquet(tmp / "norewards.parquet", **rows), "it has no rewards"),
        "one-row sessions": (_parquet(tmp / "single.parquet", **rows, rewards=[1.0, 0.0]),
                             "audit-batch reads batches whose sessions span several rows"),
        "bad key": (_parquet(tmp / "key.parquet", keys=["p0", "p_1_0"], response_mask=[[1], [1]], rewards=[1.0, 0.0]),
                    "`keys[0]='p0'` is invalid"),
    }


@pytest.mark.parametrize("case", ["missing file", "suffix", "not parquet", "no rewards", "one-row sessions", "bad key"])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    path, message = _bad_inputs(tmp_path)[case]
    code, out = _run(path)
    assert code == 2, out
    assert out.startswith("error: ") and message in out and out.count("\n") == 1, out
