"""The ``simlab`` command as a user runs it."""

from __future__ import annotations

import subprocess
import sys


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
