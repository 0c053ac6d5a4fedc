"""`simlab ui` in a real headless Chromium (Debian's), as a user meets it: a real sweep on simlab's own
trainer, `simlab ui` started as a process, and the links it prints opened with no click.

- the trials link shows one row per trial, with the swept param, the seed and the objective as columns;
- the charts link shows the trials, each variant in one colour, with an eval-success and a segment-count chart,
  and the training-health section with the reward per rollout beside per row (one chart of two metrics);
- the summary link shows the parent run alone, its per-variant summary as columns.

The browser is Debian's ``/usr/bin/chromium`` driven by Playwright's Python package; no browser is
downloaded. CI installs the package (``.ci/run``); without it the test is skipped, saying why.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from simlab import names, tracking
from simlab.sweep import parse_spec
from simlab.tracking.views import CHART_SECTIONS, TRIAL_FILTER
from tests.stores import TINY, Stores, run_cli, write_spec
from tests.tracking.ui_server import CHROMIUM, open_view, screenshot, simlab_ui

SPEC = 'name = "ui-sweep"\nseeds = [0, 1]\nbaseline = "train.steps=1"\n[space]\ntrain.steps = [1, 2]\n' + TINY.replace(
    "train.steps = 2\n", "")
CARD = "[data-testid=experiment-view-compare-runs-card]"


@pytest.fixture
def swept(ready_stores: Stores, tmp_path: Path) -> tuple[Stores, Any]:
    """The sweep above, run as a user runs it (`simlab sweep`: trials, report, the parent's summary)."""
    spec = write_spec(tmp_path, SPEC)
    result = run_cli(["sweep", str(spec), "--no-progress", "--workers", "2",
                      "--tracking-uri", ready_stores.tracking_uri, "--storage", str(ready_stores.storage)])
    assert result.exit_code == 0, result.output
    client = tracking.resolve_store(ready_stores.tracking_uri).client()
    experiment = client.get_experiment_by_name(parse_spec(tomllib.loads(SPEC)).name)
    trials = client.search_runs([experiment.experiment_id], TRIAL_FILTER)
    assert len(trials) == 4 and all(r.info.status == "FINISHED" for r in trials)
    return ready_stores, trials


@pytest.mark.slow  # about 50 s with its sweep: a real browser on a real MLflow server
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (/usr/bin/chromium); "
                    "`apt-get install chromium` (CI's .ci/run does)")
def test_the_printed_links_open_on_the_trials_the_charts_and_the_summary(
    swept: tuple[Stores, Any], tmp_path: Path
) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    stores, trials = swept
    with simlab_ui(stores.tracking_uri) as ui, playwright.sync_playwright() as pw:
        links = ui.links()
        assert set(links) == {"trials", "charts", "summary"}, ui.printed()
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])

        # the trials: every trial a row of its own, no click (nothing folded under the parent run)
        page = open_view(browser, links["trials"])
        for run in trials:
            page.locator(f"a[href$='/runs/{run.info.run_id}']").wait_for()
        assert page.locator("a[href*='/runs/']").filter(has_text="train.steps=").count() >= 2
        columns = page.eval_on_selector_all(".ag-header-cell[col-id]", "cs => cs.map(c => c.getAttribute('col-id'))")
        wanted = {"params.`train.steps`", f"tags.`{names.SEED_TAG}`", f"metrics.`{names.EVAL_COMPACTED_SUCCESS}`"}
        assert wanted <= set(columns), columns
        # the grid pins the run name left: a row is two elements that share their row index
        link = page.locator(f"a[href$='/runs/{trials[0].info.run_id}']")
        index = page.locator("[role=row]", has=link).first.get_attribute("row-index")
        cell = page.locator(f"[role=row][row-index='{index}'] [col-id='metrics.`{names.EVAL_COMPACTED_SUCCESS}`']")
        objective = cell.first.inner_text()
        assert float(objective) == pytest.approx(trials[0].data.metrics[names.EVAL_COMPACTED_SUCCESS], abs=1e-3)
        screenshot(page, tmp_path / "ui-trials.png")

        # the charts: every trial listed beside them, an eval-success chart, a segment-count chart and the
        # training-health section's reward per rollout beside per row (MLflow titles a chart of two "a vs b"), drawn
        page = open_view(browser, links["charts"], height=2400)
        for run in trials:
            page.locator(f"a[href$='/runs/{run.info.run_id}']").wait_for()
        counts = sorted(k for k in trials[0].data.metrics if k.startswith(names.health(names.SEG_COUNT)))
        assert counts, sorted(trials[0].data.metrics)
        training = next(title for section, title, _ in CHART_SECTIONS if section == "simlab-training")
        rewards = " vs ".join(names.metric(names.TRAIN, k) for k in (names.RETURN, names.RETURN_PER_ROW))
        for title in (names.EVAL_COMPACTED_SUCCESS, counts[0], rewards):
            if title == rewards:  # MLflow draws a section's cards once the section is in view
                page.get_by_text(training, exact=True).first.scroll_into_view_if_needed()
            card = page.locator(CARD).filter(has=page.get_by_text(title, exact=True)).first
            card.scroll_into_view_if_needed()
            paths = card.locator(".js-plotly-plot .barlayer path, .js-plotly-plot .scatterlayer path.js-line")
            paths.first.wait_for(state="attached")
            assert max(len(d or "") for d in paths.evaluate_all("ps => ps.map(p => p.getAttribute('d'))")) > 10
        screenshot(page, tmp_path / "ui-charts.png")

        # the summary: the parent run alone, the difference and its sigma readable in its row
        page = open_view(browser, links["summary"])
        cell = page.locator("[col-id='tags.`summary/compacted/train.steps:2`']").filter(has_text="diff").first
        cell.wait_for()
        assert "σ" in cell.inner_text() and page.get_by_text("1 matching run").count() == 1
        browser.close()
    assert (tmp_path / "ui-trials.png").stat().st_size > 10_000 and (tmp_path / "ui-charts.png").stat().st_size > 10_000
