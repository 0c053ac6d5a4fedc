"""A path that exists but is not a checkpoint (issue 30): given as ``train.summariser_checkpoint`` (a run,
a sweep) or to ``simlab inspect --checkpoint``, it is refused at the input layer in one line that names the
option, the path and what the file is not, with exit code 2; nothing is written (no store, no run folder)
and the file itself is unchanged.

What the option means: the weights of a frozen summariser policy, which plays the run's own task (its token
ids are the task's vocabulary) inside the run's window. So a TOML file, an empty file, a torch file of
something else, a policy of another task's vocabulary and a policy too short for the window are all not it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from simlab.config import resolve
from simlab.errors import ConfigError
from simlab.policy.checkpoint import save_checkpoint
from simlab.policy.config import PolicyConfig
from simlab.policy.model import Policy
from tests.stores import run_cli, write_spec

KEY = "train.summariser_checkpoint"
FROZEN = {"harness": {"summariser": "frozen"}}


def policy_file(folder: Path, preset: str = "keyrecall-tiny", max_len: int | None = None) -> Path:
    """A small untrained policy of ``preset``'s vocabulary (holding its window, or ``max_len`` tokens),
    saved as simlab saves one."""
    cfg = resolve({"task": {"preset": preset}})
    shape = PolicyConfig(vocab_size=cfg.policy.vocab_size, n_layer=1, d_model=16, n_head=2,
                         max_len=max_len or cfg.policy.max_len)
    path = folder / f"{preset}-{shape.max_len}.pt"
    save_checkpoint(path, Policy(shape), meta={"v_sum": cfg.harness.v_sum})
    return path


def _toml(folder: Path) -> Path:
    path = folder / "run.toml"
    path.write_text('[train]\nlr = 0.001\n', encoding="utf-8")
    return path


def _empty(folder: Path) -> Path:
    path = folder / "empty.pt"
    path.touch()
    return path


def _tensors(folder: Path) -> Path:
    path = folder / "weights.pt"
    torch.save({"weights": torch.zeros(3)}, path)
    return path


def _binary(folder: Path) -> Path:
    path = folder / "noise.pt"
    path.write_bytes(bytes(range(256)) * 8)
    return path


# (case, make the file, what the error must say the file is)
FOREIGN: list[tuple[str, Callable[[Path], Path], str]] = [
    ("a TOML file", _toml, "it is not a torch checkpoint (a text file"),
    ("an empty file", _empty, "it is an empty file, not a torch checkpoint"),
    ("a torch file of other tensors", _tensors, "it is a torch file but not a simlab policy checkpoint"),
    ("a binary file", _binary, "it is not a torch checkpoint (a binary file"),
    ("another task's vocabulary", lambda f: policy_file(f, "peekread-routes-c0"),
     "its policy reads vocab_size=34, another task's vocabulary; this run's task has vocab_size=48"),
    ("a policy shorter than the window", lambda f: policy_file(f, max_len=64),
     "its policy holds 64 tokens, fewer than this run's window plus the summary cue (112)"),
]


def _one_line(output: str, key: str, path: Path, says: str) -> None:
    line = output.strip()
    assert "\n" not in line and "Traceback" not in line and "Aborted" not in line, output
    assert line.startswith(f"error: `{key}='{path}'` is invalid; {says}"), line


@pytest.mark.parametrize(("case", "make", "says"), FOREIGN, ids=[c[0] for c in FOREIGN])
def test_train_refuses_a_summariser_checkpoint_that_is_not_one(
    tmp_path: Path, case: str, make: Callable[[Path], Path], says: str
) -> None:
    path = make(tmp_path)
    data, store = path.read_bytes(), tmp_path / "store"
    result = run_cli(["train", "--set", f"{KEY}='{path}'", "--set", "harness.summariser='frozen'",
                      "--store", str(store)])
    assert result.exit_code == 2, result.output
    _one_line(result.output, KEY, path, says)
    assert "; give a " in result.output or ": give a " in result.output  # and what it must be
    assert not store.exists() and path.read_bytes() == data


def test_a_checkpoint_of_the_task_passes_and_is_read_once_per_version(tmp_path: Path) -> None:
    path = policy_file(tmp_path)
    cfg = resolve({**FROZEN, "train": {"summariser_checkpoint": str(path)}})
    assert cfg.train.summariser_checkpoint == str(path)
    _empty(tmp_path)
    path.write_bytes(b"")  # the same path, now another file: read again, not answered from the cache
    with pytest.raises(ConfigError, match="it is an empty file"):
        resolve({**FROZEN, "train": {"summariser_checkpoint": str(path)}})


def test_a_sweep_refuses_it_before_either_store(tmp_path: Path) -> None:
    bad = _toml(tmp_path)
    spec = write_spec(tmp_path, f'seeds = [0]\n[base]\n"{KEY}" = "{bad}"\n[space]\ntrain.lr = [0.1]\n'
                                '[objective]\nmetric = "eval/compacted/success"\n')
    store = tmp_path / "store"
    result = run_cli(["sweep", str(spec), "--storage", str(store / "journal.log"),
                      "--tracking-uri", f"sqlite:///{store / 'mlflow.db'}", "--trial", "simlab.sweep.backend:SIMLAB"])
    assert result.exit_code == 2, result.output
    assert f"`{KEY}='{bad}'` is invalid; it is not a torch checkpoint" in result.output, result.output
    assert not store.exists()


INSPECT = [c for c in FOREIGN if c[0] != "a policy shorter than the window"]
"""inspect plays a checkpoint under the harness it was trained with, so its length is checked as the
window's (tests/harness/test_cli_inspect.py), not as the file's."""


@pytest.mark.parametrize(("case", "make", "says"), INSPECT, ids=[c[0] for c in INSPECT])
def test_inspect_refuses_a_checkpoint_that_is_not_one(
    tmp_path: Path, case: str, make: Callable[[Path], Path], says: str
) -> None:
    path = make(tmp_path)
    data = path.read_bytes()
    result = run_cli(["inspect", "--task", "keyrecall-tiny", "--checkpoint", str(path), "--episodes", "4"])
    assert result.exit_code == 2, result.output
    _one_line(result.output, "checkpoint", path, says)
    assert path.read_bytes() == data and sorted(p.name for p in tmp_path.iterdir()) == [path.name]


