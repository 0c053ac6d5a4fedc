"""`--help` reads plainly: flags without a type, arguments as SPEC in the usage line (issue 18)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simlab.cli import app

COMMANDS = ["demo", "audit", "audit-batch", "inspect", "train", "base", "lookup", "sweep", "worker", "report",
            "findings", "ui"]


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_shows_flags_and_arguments_plainly(command: str) -> None:
    text = _help(*([command] if command else []))
    assert "<bool>" not in text
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage
    assert re.search(r"--help\s+Show this message", text), text


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output == f"simlab {version('simlab')}\n", result.output
    assert "--version" in _help()


def test_the_usage_lines_name_the_arguments() -> None:
    assert "Usage: simlab sweep [OPTIONS] SPEC" in _help("sweep")
    assert "Usage: simlab train [OPTIONS] [CONFIG]" in _help("train")
    assert "Usage: simlab report [OPTIONS] EXPERIMENT" in _help("report")
    assert "Usage: simlab audit-batch [OPTIONS] FILE" in _help("audit-batch")
    text = _help("train")
    assert re.search(r"--set\s+KEY=VALUE", text), text
    assert re.search(r"--progress\s+--no-progress\s+Show the progress bar", _help("sweep")), _help("sweep")


def test_a_missing_argument_is_named_as_shown() -> None:
    result = CliRunner().invoke(app, ["sweep"])
    assert result.exit_code == 2 and "SPEC" in result.output


_HEAVY = ("torch", "mlflow", "optuna")
"""Imports that take seconds: `--help` and a refused value must not need them (issue 19's fast CLI)."""


@pytest.mark.parametrize("argv", [["--help"], ["train", "--set", "train.lr=abc"], ["train", "--set", "train.ratio=x"]])
def test_help_and_bad_input_do_not_import_the_heavy_stack(argv: list[str], tmp_path: Path) -> None:
    probe = ("import sys\nfrom simlab.cli import main\nsys.argv = ['simlab', *sys.argv[1:]]\n"
             "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
             f"print('LOADED', sorted(m for m in {_HEAVY!r} if m in sys.modules), 'EXIT', code)")
    out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "SIMLAB_HOME": str(tmp_path)}, timeout=120)
    last = out.stdout.strip().splitlines()[-1]
    expected = 0 if argv == ["--help"] else 2
    heavy = ["torch"] if "train.ratio=x" in argv else []  # the ratio's registry runs torch code
    assert last == f"LOADED {heavy} EXIT {expected}", out.stdout + out.stderr
    assert not any(tmp_path.iterdir()), "a refused value wrote files"
