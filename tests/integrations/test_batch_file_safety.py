"""``simlab audit-batch`` loads data, never code (issue 51): a ``.pt`` or ``.pkl`` that names a function to call
while it loads is refused in one line (exit 2) and the function never runs; verl's batches, ``write_batch``'s
files and plainly pickled tensors still load; ``--success-above`` must be finite."""

from __future__ import annotations

import importlib.util
import io
import os
import pickle
import shlex
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from simlab.cli.app import app  # importing simlab.cli registers the commands
from simlab.integrations.batch_file import read_batch, write_batch
from tests.services import missing

KEYS = ["p_0_0", "p_0_1", "p_1_0", "q_0_0", "q_0_1", "q_0_2", "q_1_0"]
MASK = np.array([[1, 1, 0], [1, 0, 1], [1, 1, 1], [1, 0, 0], [1, 1, 0], [0, 1, 1], [1, 1, 1]])
REWARDS = np.zeros(MASK.shape)
REWARDS[[0, 1, 6], 1] = 1.0
SUMMARY = "7 rows, 4 sessions in 2 prompt groups; sessions by rows K: K = 1: 2, K = 2: 1, K = 3: 1."


def _run(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["audit-batch", *map(str, args)])
    return result.exit_code, result.output


class _System:
    """Pickles as ``os.system("touch MARKER")``: loading it with ``pickle.load`` creates the marker."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[str]]:
        return os.system, (f"touch {shlex.quote(str(self.marker))}",)


class _Exec(_System):
    """Pickles as ``exec("open(MARKER, 'w').close()")``."""

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[str]]:
        return exec, (f"open({str(self.marker)!r}, 'w').close()",)


PAYLOADS = {"system": (_System, "system"), "exec": (_Exec, "exec")}


def _save(path: Path, obj: object) -> Path:
    if path.suffix == ".pkl":
        path.write_bytes(pickle.dumps(obj))
    else:
        torch.save(obj, path)
    return path


def _load_unsafely(path: Path) -> None:
    """How the file loaded before issue 51 (and how verl's ``DataProto.load_from_disk`` loads it)."""
    if path.suffix == ".pkl":
        with path.open("rb") as f:
            pickle.load(f)
    else:
        torch.load(path, weights_only=False)


def _assert_refused(path: Path, marker: Path, refused: str) -> None:
    code, out = _run(path)
    assert code == 2, out
    assert out.startswith("error: ") and out.count("\n") == 1, out
    assert path.name in out and refused in out and "never code" in out, out
    assert not marker.exists(), "audit-batch ran the file's code"
    _load_unsafely(path)  # the file was armed: the plain loader runs its code
    assert marker.exists()


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
@pytest.mark.parametrize("suffix", [".pkl", ".pt"])
def test_a_file_that_would_run_code_is_refused_and_nothing_runs(tmp_path: Path, suffix: str, payload: str) -> None:
    make, refused = PAYLOADS[payload]
    marker = tmp_path / "marker"
    rows = {"keys": KEYS, "response_mask": MASK, "rewards": make(marker)}
    _assert_refused(_save(tmp_path / f"batch{suffix}", rows), marker, refused)


def _proto_state(marker: Path) -> tuple[bytes, dict[str, Any], dict[str, Any]]:
    """A ``DataProto``'s pickled state whose packed batch runs ``os.system`` when verl unpacks it."""
    buffer = io.BytesIO()
    torch.save({"response_mask": torch.as_tensor(MASK), "token_level_rewards": _System(marker)}, buffer)
    return buffer.getvalue(), {"key": np.array(KEYS, dtype=object)}, {}


@pytest.mark.parametrize("suffix", [".pkl", ".pt"])
def test_a_dataproto_whose_batch_would_run_code_is_refused(tmp_path: Path, suffix: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # verl's DataProto.__setstate__ unpacks its batch with torch.load(weights_only=False): the file names
    # only verl.protocol.DataProto at its top, and the code waits inside the packed batch
    marker = tmp_path / "marker"
    state = _proto_state(marker)
    path = tmp_path / f"batch{suffix}"
    if suffix == ".pkl":  # what DataProto.save_to_disk writes: NEWOBJ of the class, then BUILD with the state
        path.write_bytes(b"\x80\x02cverl.protocol\nDataProto\n)\x81" + pickle.dumps(state, 2)[2:-1] + b"b.")
    else:  # torch.save(data_proto): a stand-in registered under verl's name, so that verl need not be here
        fake = type("DataProto", (), {"__module__": "verl.protocol", "__getstate__": lambda self: state})
        verl, protocol = types.ModuleType("verl"), types.ModuleType("verl.protocol")
        verl.protocol, protocol.DataProto = protocol, fake  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "verl", verl)
        monkeypatch.setitem(sys.modules, "verl.protocol", protocol)
        torch.save(fake(), path)
        monkeypatch.undo()
    code, out = _run(path)
    assert code == 2 and out.count("\n") == 1 and "posix.system" in out and path.name in out, out
    assert not marker.exists(), "audit-batch ran the file's code"
    if suffix == ".pkl" and importlib.util.find_spec("verl") is not None:
        from verl.protocol import DataProto

        DataProto.load_from_disk(path)  # the file was armed: verl's own loader runs its code
        assert marker.exists()


@pytest.mark.parametrize("method", ["torch", "numpy"])
@pytest.mark.parametrize("suffix", [".pkl", ".pt"])
def test_verls_dataproto_still_audits(tmp_path: Path, suffix: str, method: str,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("verl") is None:
        missing("verl is not installed: pip install -e '.[verl]'")
    from verl.protocol import DataProto

    if method == "numpy":  # verl packs the batch as raw bytes per tensor instead of a torch archive
        monkeypatch.setenv("VERL_DATAPROTO_SERIALIZATION_METHOD", "numpy")
    data = DataProto.from_dict(tensors={"token_level_rewards": torch.as_tensor(REWARDS),
                                        "response_mask": torch.as_tensor(MASK)},
                               non_tensors={"uid": np.array([k[0] for k in KEYS], dtype=object),
                                            "key": np.array(KEYS, dtype=object)},
                               meta_info={"global_steps": 3, "temperature": np.float64(1.0)})
    path = tmp_path / f"batch{suffix}"
    if suffix == ".pkl":
        data.save_to_disk(path)
    else:
        torch.save(data, path)
    monkeypatch.delenv("VERL_DATAPROTO_SERIALIZATION_METHOD", raising=False)
    code, out = _run(path)
    assert code == 0, out
    assert SUMMARY in out and "Success by session 50.0%, by row 42.9%" in out


@pytest.mark.parametrize("how", ["write_batch", "pickle", "pickle-2"])
def test_plain_batch_files_still_load(tmp_path: Path, how: str) -> None:
    if how == "write_batch":
        path = write_batch(tmp_path / "batch.pt", KEYS, MASK, REWARDS, finished=[True] * len(KEYS))
    else:
        path = tmp_path / "batch.pkl"
        rows = {"keys": KEYS, "response_mask": torch.as_tensor(MASK), "rewards": torch.as_tensor(REWARDS)}
        path.write_bytes(pickle.dumps(rows, protocol=2 if how == "pickle-2" else pickle.DEFAULT_PROTOCOL))
    batch = read_batch(path)
    assert batch.keys == KEYS
    assert np.array_equal(batch.response_mask, MASK) and np.array_equal(batch.rewards, REWARDS)
    code, out = _run(path)
    assert code == 0 and SUMMARY in out, out


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_success_above_must_be_finite(tmp_path: Path, value: str) -> None:
    # refused before the file is read: the file does not exist, and the message is about the option
    code, out = _run(tmp_path / "absent.parquet", "--success-above", value)
    assert code == 2 and out.count("\n") == 1, out
    assert f"`--success-above={float(value)!r}` is invalid; choose a finite reward level" in out, out
