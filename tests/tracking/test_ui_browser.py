"""`simlab ui` in a real headless Chromium (Debian's), the way a user goes: the home page, the sweep's
experiment, its child runs, a child run's compaction-rate chart; and the links `simlab ui` prints.

The browser is Debian's ``/usr/bin/chromium`` driven by Playwright's Python package; no browser is
downloaded. CI installs the package (``.ci/run``); without it the test is skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from simlab import tracking
from simlab.sweep import parse_spec
from tests.services import stop_group
from tests.stores import TOY, Stores

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

SPEC = """
name = "ui-sweep"
seeds = [0, 1]
[base.overrides]
train.steps = 6
[space]
train.lr = [0.1]
[objective]
metric = "eval/compacted_success"
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed (/usr/bin/chromium); "
    "`apt-get install chromium` (CI's .ci/run does)",
)
def test_mlflow_ui_shows_child_runs_and_compaction_rate_chart(ready_stores: Stores, tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    spec = parse_spec(tomllib.loads(SPEC))
    result = ready_stores.sweep(spec, backend=TOY)
    client = tracking.resolve_store(ready_stores.tracking_uri).client()
    children = client.search_runs([result.experiment_id], "tags.`simlab.role` = 'trial'")
    assert len(children) == 2

    port = _free_port()
    links = tracking.sweep_links(tracking.resolve_store(ready_stores.tracking_uri), f"http://127.0.0.1:{port}")
    assert [name for name, _, _ in links] == [spec.name]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simlab.cli",
            "ui",
            "--port",
            str(port),
            "--tracking-uri",
            ready_stores.tracking_uri,
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: uvicorn's workers stop with it
    )
    base = f"http://127.0.0.1:{port}"
    shot = tmp_path / "mlflow-ui-compaction-rate.png"
    try:
        assert tracking.wait_for_server(f"{base}/health", timeout=120, alive=lambda: server.poll() is None), (
            server.communicate(timeout=5)[0]
            if server.poll() is not None
            else "the UI did not answer in 120 s"
        )
        with playwright.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            # where a user starts: the home page. MLflow 3 opens in its GenAI mode, where an experiment shows a
            # traces overview ("Traces 0"); the toggle at the top left switches to model training first
            page.goto(f"{base}/")
            page.get_by_role("button", name="Model training", exact=True).click()
            page.get_by_role("link", name=spec.name, exact=True).click()
            page.wait_for_url(f"**/#/experiments/{result.experiment_id}/runs?*workflowType=machine_learning*")
            runs = f"#/experiments/{result.experiment_id}/runs"
            parent = page.locator(f"a[href='{runs}/{result.parent_run_id}']")
            parent.wait_for()
            # child runs sit under their parent: expand it and see both
            row = page.locator("[role=row]", has=parent)
            row.locator("[col-id='attributes.`Run Name`'] button").first.click()
            for child in children:
                link = page.locator(f"a[href='{runs}/{child.info.run_id}']")
                link.wait_for()
                assert link.inner_text() == child.info.run_name
            # open a child run's metrics and find the compaction-rate chart
            page.locator(f"a[href='{runs}/{children[0].info.run_id}']").click()
            page.get_by_role("tab", name="Model metrics").click()
            page.get_by_placeholder("Search metric charts").fill("compaction_rate")
            card = page.locator("[data-testid=experiment-view-compare-runs-card]").filter(
                has=page.get_by_text("compaction_rate", exact=True)
            )
            card.wait_for()
            trace = card.locator(".js-plotly-plot .scatterlayer .trace path.js-line")
            trace.first.wait_for()
            assert len(trace.first.get_attribute("d") or "") > 10  # a drawn line, not an empty plot
            page.screenshot(path=str(shot), full_page=True)
            # the chart-view link `simlab ui` prints opens the same experiment's runs as charts
            page.goto(links[0][2])
            page.locator("[data-testid=experiment-view-compare-runs-card]").first.wait_for()
            browser.close()
    finally:
        stop_group(server)
    assert shot.stat().st_size > 10_000
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / shot.name)
