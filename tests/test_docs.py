"""Every shell command and Python snippet in the README and docs/ runs as the page shows it, and prints
what the page says it prints.

A fenced ``bash`` or ``python`` block runs as written, in a fresh copy of this checkout (so the paths a
page names exist; ``.venv`` there is this environment), with ``SIMLAB_SMOKE=1``: the one size knob
(:mod:`simlab.smoke`) that makes every run, sweep and benchmark finish in seconds. HTML comments just
before a block, which the page does not show, say how to check it:

- ``<!-- expect: ... -->``: lines that must appear in the output (stdout or stderr), one per line.
  Every block that runs has one.
- ``<!-- after: ... -->``: shell lines the reader has run before, as the page's text says (the sweep a
  report reads, a folder an option needs).
- ``<!-- instead: WHY ... -->``: a block that cannot run inside a test (a server that runs until stopped,
  the test suite itself); WHY says so and names what covers it, and the lines after it run instead.
- ``<!-- skip: REASON -->``: not runnable here (other machines); the reason names what covers it.

Fences with another language (``toml``, ``text``, none) show files or output and are not run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.docs  # a tier of its own: `pytest -m docs`, or `-m "not docs"` to leave it out

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"```(bash|python)\n(.*?)```", re.S)
COMMENT = re.compile(r"<!--\s*(expect|after|instead|skip):\s*(.*?)-->\s*$", re.S)
KINDS = ("expect", "after", "instead", "skip")
COPY_SKIP = shutil.ignore_patterns(".git", ".venv", "mlruns", "__pycache__", ".mypy_cache", ".ruff_cache",
                                   "build", "*.egg-info", ".hypothesis", ".pytest_cache")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    marks: dict[str, str]

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def _marks(before: str) -> dict[str, str]:
    """The HTML comments directly above a fence (only blank space between them and it)."""
    marks: dict[str, str] = {}
    text = before.rstrip()
    while text.endswith("-->"):
        start = text.rfind("<!--")
        m = COMMENT.match(text[start:])
        if m is None:
            break
        marks[m.group(1)] = m.group(2).strip()
        text = text[:start].rstrip()
    return marks


def blocks() -> list[Block]:
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 2
            out.append(Block(page, line, m.group(1), m.group(2), _marks(text[: m.start()])))
    return out


ALL = blocks()


def workspace(tmp: Path, like: Path | None = None) -> Path:
    """A copy of the checkout (or of the workspace ``like``) with this environment as its ``.venv``."""
    work = tmp / "checkout"
    shutil.copytree(like or REPO, work, symlinks=True, ignore=COPY_SKIP if like is None else None)
    if like is None:
        (work / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    return work


_AFTER: dict[str, Path] = {}
"""``after`` script -> a workspace it ran in: blocks that share one (the sweep a report reads) copy it."""


def prepared(block: Block, tmp: Path, tmp_factory: pytest.TempPathFactory) -> Path:
    """The block's workspace, with what the page says the reader ran first already run."""
    script = block.marks.get("after")
    if script is None:
        return workspace(tmp)
    if script not in _AFTER:
        done = workspace(tmp_factory.mktemp("after"))
        _run(["bash", "-euo", "pipefail", "-c", script], done, environment(), f"{block.id} (after)")
        _AFTER[script] = done
    return workspace(tmp, like=_AFTER[script])


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SIMLAB_HOME", "MLFLOW_TRACKING_URI", "PYTHONPATH")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["REPO"] = str(REPO)
    env["SIMLAB_SMOKE"] = "1"
    return env


def _run(cmd: list[str], work: Path, env: dict[str, str], what: str) -> str:
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{what} failed ({proc.returncode}):\n{output[-6000:]}"
    return output


def test_the_pages_have_runnable_blocks():
    assert len(ALL) >= 15
    assert {b.page.name for b in ALL} >= {"README.md", "credit.md", "training.md", "report-and-audit.md"}


def test_every_mark_is_known():
    """A misspelt mark would silently not apply."""
    for page in PAGES:
        for kind in re.findall(r"<!--\s*([a-z-]+):", page.read_text(encoding="utf-8")):
            assert kind in (*KINDS, "split-gradient", "timings"), f"{page.name}: unknown mark {kind!r}"


def _readme_block(needle: str) -> str:
    return next(b.code.strip() for b in ALL if b.page.name == "README.md" and needle in b.code)


def test_ci_runs_the_readme_commands():
    """.ci/run runs the README's test command as shown (read from README.md), and the main job's setup is
    the same install without the test extras: what the two `instead` marks on the README rely on."""
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert 'next(b for b in blocks if "-m pytest" in b)' in ci
    # the command split in two, setup then suite, with lint and types between them (fail fast)
    assert 'readme_setup=${readme_test%% && .venv/bin/python -m pytest*}' in ci
    assert 'readme_suite=${readme_test#"$readme_setup && "}' in ci
    setup_at = ci.index('bash -euo pipefail -c "$readme_setup"')
    suite_at = ci.index('bash -euo pipefail -c "$readme_suite"')
    assert setup_at < ci.index(".venv/bin/ruff check") < ci.index(".venv/bin/mypy") < suite_at
    setup_main, _, main_job = _readme_block("simlab sweep sweeps/quick.toml").partition(" && .venv/bin/simlab ")
    setup_test, _, _ = _readme_block("-m pytest").partition(" && .venv/bin/python -m pytest")
    assert main_job and setup_test == setup_main.replace("-e .", "-e '.[dev]'")


@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_block_runs_as_shown(block: Block, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    if "skip" in block.marks:
        assert len(block.marks["skip"]) > 20, f"{block.id}: a skipped block must say what covers it instead"
        pytest.skip(block.marks["skip"])
    assert "expect" in block.marks, f"{block.id}: give <!-- expect: ... --> lines its output must hold"
    work, env = prepared(block, tmp_path, tmp_path_factory), environment()
    if "instead" in block.marks:
        why, _, script = block.marks["instead"].partition("\n")
        assert len(why) > 20 and script.strip(), f"{block.id}: `instead` says why on its first line, then runs"
        cmd = ["bash", "-euo", "pipefail", "-c", script]
    elif block.lang == "python":
        cmd = [sys.executable, "-c", block.code]
    else:
        cmd = ["bash", "-euo", "pipefail", "-c", block.code]
    output = _run(cmd, work, env, block.id)
    missing = [line for line in block.marks["expect"].splitlines() if line.strip() and line.strip() not in output]
    assert not missing, f"{block.id}: the output lacks {missing}:\n{output[-6000:]}"


# ------------------------------------------------------------------------------- generated timings
def test_the_timings_table_is_the_rendering_of_its_records() -> None:
    from benchmarks import timings

    text = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    start, end = text.index(timings.BEGIN), text.index(timings.END) + len(timings.END)
    assert text[start:end] == timings.render(timings.load()), "run `python benchmarks/timings.py render`"
    assert {r["id"] for r in timings.load()} >= set(timings.COMMANDS)
    assert "torch==2.13.0" in timings.INSTALL and "-m pytest" in timings.readme_test_command()


def test_a_suite_figure_is_read_from_pytests_summary() -> None:
    from benchmarks.timings import suite_figure

    out = "....\n==== 1,768 passed, 8 skipped, 2 warnings in 477.31s (0:07:57) ====\n"
    assert suite_figure(out, 619.4) == "1,768 passed, 8 skipped, 2 warnings in 477 s (wall 619 s)"
    with pytest.raises(ValueError, match="no pytest summary"):
        suite_figure("error: collection failed", 3.0)


def test_the_docs_cite_no_issue_of_this_project() -> None:
    """A user cannot open this project's issue tracker: the docs name the spec, the campaign or the date
    instead. Another project's issue stays, named as its (``its issue 593``, ``ROLL issue 407``)."""
    import re

    ours = re.compile(r"(?<!its )(?<!ROLL )(?<!agent-lightning )\b[Ii]ssues? \d+")
    found = [f"{page.name}:{n}: {m.group(0)}" for page in PAGES
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
             for m in ours.finditer(line)]
    assert found == []
