"""The ``simlab`` command as a user runs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from simlab import cli
from simlab.errors import ConfigError


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simlab.cli", *args], capture_output=True, text=True, timeout=300
    )


def test_demo_prints_the_seed_numbers():
    out = run("demo")
    assert out.returncode == 0, out.stderr
    assert "trajectory_group  advantages [-2.0, -2.0, 0.5, 0.5]" in out.stdout
    assert "80.0% of the weight, 65.8% of the tokens" in out.stdout
    assert "x1.441 of the reference" in out.stdout
    assert "first-segment weight 0.0534" in out.stdout


def test_unknown_command_exits_2():
    out = run("no-such-command")
    assert out.returncode == 2


@pytest.mark.parametrize(("raised", "code", "line"), [
    (ConfigError.invalid("train.lr", "abc", "choose a number > 0"), 2, "error: `train.lr='abc'` is invalid"),
    (ValueError("operands could not be broadcast together"), 1, "an internal error in simlab (a bug, not your input)"),
    (KeyError("segments"), 1, "an internal error in simlab (a bug, not your input)"),
])
def test_bad_input_exits_2_and_an_internal_error_exits_1(monkeypatch, capsys, raised, code, line):
    """Only a ConfigError is the user's input; a numpy shape error is simlab's bug, shown with its traceback."""
    def boom() -> None:
        raise raised

    monkeypatch.setattr(cli, "app", boom)
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    err = capsys.readouterr().err
    assert exit_info.value.code == code and line in err
    assert ("Traceback" in err) == (code == 1)
