"""`simlab report NOSUCH` fails at once (issue 18: it took 6 s): one line naming the experiment and the
store's own experiments, exit 2, before MLflow or the analysis layer is imported."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

from simlab import tracking
from tests.stores import Stores

REPO = Path(__file__).resolve().parents[2]
PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('imported:', 'mlflow' in sys.modules, 'simlab.analysis' in sys.modules,"
    " file=sys.stderr))\n"
    "sys.argv = ['simlab', *sys.argv[1:]]\n"
    "from simlab.cli import main\n"
    "main()\n"
)


def _report(args: list[str], home: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"} | {
        "SIMLAB_HOME": str(home), "PYTHONPATH": str(REPO)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", PROBE, "report", *args], cwd=home, env=env, capture_output=True,
                          text=True, timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def test_a_missing_experiment_fails_at_once_naming_the_stores_experiments(ready_stores: Stores) -> None:
    store = tracking.resolve_store(ready_stores.tracking_uri)
    tracking.ensure_experiment(store.client(), "quick", store)
    proc, cpu_s = _report(["NOSUCH", "--tracking-uri", ready_stores.tracking_uri], ready_stores.folder)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("imported:")]
    assert len(lines) == 1 and lines[0].startswith("error: experiment 'NOSUCH' does not exist in sqlite:///")
    assert "'quick'" in lines[0] and "simlab sweep" in lines[0]
    assert "imported: False False" in proc.stderr  # neither MLflow nor the analysis layer was loaded
    assert cpu_s < 2.0, f"{cpu_s:.2f} s of CPU"


def test_a_missing_store_fails_at_once_and_creates_nothing(tmp_path: Path) -> None:
    proc, cpu_s = _report(["NOSUCH"], tmp_path)
    assert proc.returncode == 2 and "(no such file)" in proc.stderr
    assert "imported: False False" in proc.stderr and cpu_s < 2.0
    assert list(tmp_path.iterdir()) == []
