"""Measure against a named baseline commit in the same run, alternating the two sides.

A benchmark that says "x times faster" must measure both sides on the same machine under the same load.
:func:`tree` extracts the baseline commit's files once (``git archive``) into a cache folder;
:func:`side` runs the calling script again in a subprocess whose ``simlab`` is that tree's (or this
one's), so the measuring code is the same on both sides and only the package differs; :func:`alternate`
runs the sides in turn, swapping which goes first each round, so that load from other jobs falls on both
alike. Only ratios of figures measured this way are meant to be compared across machines.

The scripts import this module as a sibling (``import baseline``): the script's folder is on the path on
both sides, and the baseline's own tree may predate this file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BASELINE = "7ee6af2"
"""The commit before issue 21's work (the update padded to 256-row mini-batches, one-pass behaviour cloning)."""
SIDE_FLAG = "--side"
"""The hidden option a script's subprocess is started with: it then measures once and prints JSON."""


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True).stdout.strip()


def tree(rev: str) -> Path:
    """The files of commit ``rev``, extracted once into ``<tmp>/simlab-baseline-<sha>``."""
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    folder = Path(tempfile.gettempdir()) / f"simlab-baseline-{sha[:12]}"
    if (folder / "simlab" / "__init__.py").is_file():
        return folder
    partial = Path(tempfile.mkdtemp(prefix=folder.name + "-", dir=folder.parent))
    archive = subprocess.run(["git", "-C", str(REPO), "archive", sha], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
    try:
        partial.rename(folder)  # whole or not at all: a concurrent extraction may have won
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def label(rev: str) -> str:
    return f"baseline {git('rev-parse', '--short', rev)}"


def this_tree() -> str:
    """This working tree's commit, with '+changes' when it has uncommitted ones."""
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return f"this tree {git('rev-parse', '--short', 'HEAD')}{'+changes' if dirty else ''}"


def side(root: Path, script: Path, args: list[str], timeout: float | None = None) -> dict[str, Any]:
    """Run ``script SIDE_FLAG args`` with ``root``'s simlab on the path and return its last line as JSON."""
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(script), SIDE_FLAG, *args], env=env, capture_output=True, text=True,
                         timeout=timeout, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{script.name} {' '.join(args)} failed under {root}:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def alternate(sides: dict[str, Path], rounds: int, measure: Callable[[str, Path, int], dict[str, Any]],
              echo: Callable[[str], None] = print) -> dict[str, list[dict[str, Any]]]:
    """``rounds`` rounds of ``measure(name, root, round)`` on every side, the first side of a round rotating."""
    names = list(sides)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            results[name].append(measure(name, sides[name], r))
            echo(f"   round {r + 1}/{rounds}: {name} done")
    return results


def both(rev: str) -> dict[str, Path]:
    """The two sides, baseline first: ``{label: tree}``."""
    return {label(rev): tree(rev), this_tree(): REPO}
