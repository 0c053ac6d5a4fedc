"""Every shell command and Python snippet in the README and docs/ runs, in a smoke-sized form where needed.

A fenced ``bash`` or ``python`` block runs as written, in a fresh folder (the stores follow it) with this
checkout's ``simlab`` on the PATH. A block may be preceded by an HTML comment that the page does not
show:

- ``<!-- smoke: ... -->``: shell lines to run instead, the same commands at a size a test affords (a tiny
  copy of the main job's spec, two training steps). ``$REPO`` is this checkout and ``$SMOKE_SPEC`` a
  one-step copy of ``sweeps/quick.toml`` under the name ``quick``.
- ``<!-- skip: REASON -->``: not runnable here (other machines, an install); the reason must say which
  test or script covers it instead.

Fences with another language (``toml``, ``text``, none) show files or output and are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:<!--\s*(smoke|skip):\s*(.*?)-->\s*\n)?```(bash|python)\n(.*?)```", re.S)
SMOKE_SPEC = """name = "quick"
seeds = [40]
sampler = "grid"
baseline = "normaliser=token"
[base]
preset = "peekread-routes-c100"
recipe = "supo"
[base.overrides]
base.steps = 2
base.episodes = 8
train.prompts = 2
train.steps = 1
eval.episodes = 8
eval.every = 1
eval.single_window = false
[space]
train.normaliser = ["token", "segment"]
[objective]
metric = "eval/compacted/success"
"""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    mark: str | None
    payload: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks() -> list[Block]:
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start(3)) + 1
            out.append(Block(page, line, m.group(3), m.group(4), m.group(1), (m.group(2) or "").strip()))
    return out


ALL = blocks()


def environment(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SIMLAB_HOME", "MLFLOW_TRACKING_URI", "PYTHONPATH")}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["REPO"] = str(REPO)
    spec = tmp / "smoke-quick.toml"
    spec.write_text(SMOKE_SPEC, encoding="utf-8")
    env["SMOKE_SPEC"] = str(spec)
    return env


def test_the_pages_have_runnable_blocks():
    assert len(ALL) >= 15
    assert {b.page.name for b in ALL} >= {"README.md", "credit.md", "training.md", "report-and-audit.md"}


@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_block_runs(block: Block, tmp_path: Path) -> None:
    if block.mark == "skip":
        assert len(block.payload) > 20, f"{block.id}: a skipped block must say what covers it instead"
        pytest.skip(block.payload)
    env = environment(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    if block.lang == "python" and block.mark is None:
        cmd = [sys.executable, "-c", block.code]
    else:
        script = block.payload if block.mark == "smoke" else block.code
        cmd = ["bash", "-euo", "pipefail", "-c", script]
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{block.id} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
