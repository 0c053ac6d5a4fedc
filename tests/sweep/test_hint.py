"""The sweep's closing hint names a command the user's shell can run (issue 18: the setup never activates
the venv, so a bare `simlab ui` was not found)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from simlab.cli.app import command_name
from tests.stores import Stores, write_spec

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "simlab"
SPEC = 'name = "hint"\nseeds = [0]\n[space]\ntrain.lr = [0.1]\n[objective]\nmetric = "eval/compacted_success"\n'
needs_script = pytest.mark.skipif(not SCRIPT.is_file(), reason=f"no console script beside {sys.executable}")


def _path_without(folder: Path) -> str:
    return os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if Path(p).resolve() != folder)


@needs_script
def test_the_hint_gives_the_scripts_path_when_simlab_is_not_on_the_path(ready_stores: Stores, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SPEC)
    env = {**os.environ, "PATH": _path_without(SCRIPT.parent.resolve()), "PYTHONPATH": str(REPO)}
    cmd = [str(SCRIPT), "sweep", str(spec), "--no-progress", *ready_stores.args()]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shown = os.path.relpath(SCRIPT, REPO) if SCRIPT.is_relative_to(REPO) else str(SCRIPT)
    hint = next(line for line in proc.stdout.splitlines() if line.startswith("browse the runs with:"))
    assert hint == f"browse the runs with: {shown} ui --tracking-uri {ready_stores.tracking_uri}"
    # as the README's setup leaves it (.venv in the checkout): a path the shell runs from this folder
    ran = subprocess.run([*hint.split(": ", 1)[1].split()[:1], "--help"], cwd=REPO, env=env, capture_output=True)
    assert ran.returncode == 0


@needs_script
def test_the_hint_is_the_bare_name_when_simlab_on_the_path_is_this_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [str(SCRIPT)])
    monkeypatch.setenv("PATH", f"{SCRIPT.parent}{os.pathsep}{_path_without(SCRIPT.parent.resolve())}")
    assert command_name() == "simlab"
    monkeypatch.setenv("PATH", _path_without(SCRIPT.parent.resolve()))
    assert command_name() in (os.path.relpath(SCRIPT), str(SCRIPT))
