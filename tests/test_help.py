"""`--help` reads plainly: flags without a type, arguments as SPEC in the usage line (issue 18)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from simlab.cli import app

COMMANDS = ["demo", "audit", "inspect", "train", "sweep", "worker", "report", "findings", "ui"]


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_flags_and_arguments_plainly(command: str) -> None:
    text = _help(command)
    assert "<bool>" not in text
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage
    assert re.search(r"--help\s+Show this message", text), text


def test_the_usage_lines_name_the_arguments() -> None:
    assert "Usage: simlab sweep [OPTIONS] SPEC" in _help("sweep")
    assert "Usage: simlab train [OPTIONS] [CONFIG]" in _help("train")
    assert "Usage: simlab report [OPTIONS] EXPERIMENT" in _help("report")
    text = _help("train")
    assert re.search(r"--set\s+KEY=VALUE", text), text
    assert re.search(r"--progress\s+--no-progress\s+Show the progress bar", _help("sweep")), _help("sweep")


def test_a_missing_argument_is_named_as_shown() -> None:
    result = CliRunner().invoke(app, ["sweep"])
    assert result.exit_code == 2 and "SPEC" in result.output
