"""A regular (non-editable) install: what it holds, and a sweep run from another folder writes only there.

The install is real (a wheel built by setuptools from pyproject.toml, installed by pip into a fresh
venv); the dependencies are not downloaded again: the venv sees this environment's site-packages
through a ``.pth`` line, which adds the folder without running the editable install's hook there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

from tests.sweep.test_simlab_backend import TINY

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "simlab", "tasks", "analysis", "sweeps")


def _config() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_every_package_folder_is_listed() -> None:
    """The package list is explicit (for package-dir); a new subpackage must be added to it."""
    config = _config()
    mapped = {folder: name for name, folder in config.get("package-dir", {}).items()}
    found = set()
    for init in REPO.glob("*/**/__init__.py"):
        folder = init.parent.relative_to(REPO)
        top = folder.parts[0]
        if top in ("tests", "benchmarks", "build") or top.startswith("."):
            continue
        name = mapped.get(top, top)
        found.add(".".join((name, *folder.parts[1:])))
    missing = sorted(found - set(config["packages"]))
    assert not missing, f"add to [tool.setuptools] packages: {missing}"


def _links_and_caches(folder: str, entries: list[str]) -> list[str]:
    return [e for e in entries if e == "__pycache__" or Path(folder, e).is_symlink()]


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_regular_install_then_a_sweep_from_another_folder(tmp_path: Path) -> None:
    src, dist, venv, work = (tmp_path / d for d in ("src", "dist", "venv", "work"))
    src.mkdir()
    for name in SOURCES:  # a clean copy: building in the checkout would leave build/ and *.egg-info there
        item = REPO / name
        if item.is_dir():  # without the links simlab/tasks and simlab/analysis: only mypy needs them
            shutil.copytree(item, src / name, ignore=_links_and_caches)
        else:
            shutil.copy2(item, src / name)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)])
    (wheel,) = dist.glob("simlab-*.whl")

    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "_simlab_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)])
    installed = sorted(p.name for p in site.iterdir())
    assert "simlab" in installed and "tasks" not in installed and "analysis" not in installed

    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SIMLAB_HOME", "MLFLOW_TRACKING_URI")}
    probe = _run([str(python), "-c", "import simlab; from simlab.sweep.shipped import locate; print(simlab.__file__);"
                  " print(locate('quick')); print(locate('findings/trajectory-group'))"],
                 cwd=work, env=env).stdout.split()  # fmt: skip
    assert all(Path(p).is_relative_to(site) for p in probe), probe  # the installed copy, its shipped specs
    shipped = site / "simlab"
    for folder in ("findings", "questions", "summaries"):  # the findings specs, the field's questions, issue 42's
        assert sorted(p.name for p in (shipped / "specs" / folder).glob("*.toml")) == sorted(
            p.name for p in (REPO / "sweeps" / folder).glob("*.toml")), folder
    assert sorted(p.name for p in (shipped / "analysis" / "findings").glob("*.*")) == sorted(
        p.name for p in (REPO / "analysis" / "findings").glob("*.*"))  # per-run CSVs, histories, episodes
    from simlab.analysis.replication.data import export_paths
    from simlab.analysis.replication.table import load_rows

    rows = json.loads(_run([str(venv / "bin" / "simlab"), "findings", "--source", "exports", "--json"],
                           cwd=work, env=env).stdout)
    repo_rows = load_rows(REPO / "sweeps" / "findings")
    assert [r["id"] for r in rows] == [r.id for r in repo_rows]  # read from the installed specs
    exported = {r.id for r in repo_rows if export_paths(r.spec, REPO / "analysis" / "findings")["runs"].is_file()}
    assert {r["id"] for r in rows if r["verdict"] != "not run"} == exported  # and the installed exports
    assert list(work.iterdir()) == []  # reading the findings wrote nothing
    before = {p for p in venv.rglob("*") if "__pycache__" not in p.parts}

    (work / "tiny.toml").write_text('name = "tiny"\nseeds = [0]\n[space]\ntrain.normaliser = ["token"]\n' + TINY)
    result = _run([str(venv / "bin" / "simlab"), "sweep", "tiny.toml", "--no-progress"], cwd=work, env=env)
    assert "done: 1 trial(s) run, 0 failed" in result.stdout, result.stdout
    assert sorted(p.name for p in work.iterdir()) == ["mlruns", "tiny.toml"]
    store = work / "mlruns"
    assert {"mlflow.db", "optuna-journal.log", "base", "sweeps", "artifacts"} <= {p.name for p in store.iterdir()}
    after = {p for p in venv.rglob("*") if "__pycache__" not in p.parts}
    assert after == before, f"the sweep wrote into the install: {sorted(after - before)}"
