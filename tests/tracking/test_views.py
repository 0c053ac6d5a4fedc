"""The saved views `simlab ui` links to, and the parent run's summary, on a real sqlite MLflow store.

What the browser makes of them is ``test_ui_browser.py``; here, what is written: the envelope MLflow's UI
reads (``savedViewEnvelope.ts``), the filters, columns and charts, the colours, the summary's keys and text.
"""

from __future__ import annotations

import json
import math
from typing import Any

import polars as pl
import pytest

from simlab import names, tracking
from simlab.cli.analysis import summary_rows
from simlab.tracking.views import (
    BASELINE_COLOR,
    PALETTE,
    UI_RUN_COLUMNS,
    VIEW_CHARTS,
    VIEW_SUMMARY,
    VIEW_TAG_LIMIT,
    VIEW_TAG_PREFIX,
    VIEW_TRIALS,
    SweepContents,
    charts_view,
    fitted_envelope,
    log_summary,
    metric_label,
    summary_text,
    sweep_links,
    trials_view,
    write_views,
)
from tests.stores import Stores

SEGMENTS = names.health(names.SEG_COUNT)


def _contents(**over: Any) -> SweepContents:
    metrics = {names.EVAL_COMPACTED_SUCCESS, names.EVAL_SINGLE_WINDOW_SUCCESS, f"{SEGMENTS}3", f"{SEGMENTS}1",
               names.health(names.HEALTH_COMPACTION_RATE), "loss/entropy", "perf/rollout_s", "plain"}
    base: dict[str, Any] = dict(objective=names.EVAL_COMPACTED_SUCCESS, params=("train.steps",),
                                metrics=frozenset(metrics), summary=())
    return SweepContents(**(base | over))


def test_metric_labels_and_summary_text() -> None:
    assert metric_label("steps=10") == "steps:10"
    assert metric_label("estimator=gae_concat,normaliser=token") == "estimator:gae_concat normaliser:token"
    assert metric_label("harness.summariser=ckpt/a b") == "harness.summariser:ckpt_a b"
    assert summary_text({"mean": 50.42, "se": 1.81}) == "50.4 ± 1.8 (baseline)"
    stats = {"mean": 74.7, "se": 1.6, "diff": 24.3, "diff_se": 0.47, "sigma": 51.9}
    assert summary_text(stats) == "74.7 ± 1.6, diff +24.3 ± 0.5 (+51.9σ)"
    assert summary_text({"mean": 0.0, "se": 0.0, "diff": 0.0, "diff_se": 0.0}) == (
        "0.0 ± 0.0, diff +0.0 ± 0.0 (n/aσ)")


def test_the_trials_view_shows_one_row_per_trial_with_its_point_seed_and_objective() -> None:
    view = trials_view(_contents())
    assert view["searchFilter"] == "tags.`simlab.role` = 'trial'"
    # sorted by cell, not start time: MLflow then does not fetch the parent and fold the trials under it
    assert view["orderByKey"] == "tags.`simlab.cell`" and view["orderByAsc"] is True
    assert view["selectedColumns"] == ["params.`train.steps`", "tags.`simlab.seed`",
                                       "metrics.`eval/compacted/success`", "metrics.`eval/single_window/success`"]
    assert view["columnOrder"][:3] == list(UI_RUN_COLUMNS)
    assert view["columnWidths"]["metrics.`eval/single_window/success`"] >= 8 * len("eval/single_window/success")


def test_the_charts_view_puts_success_segments_and_health_first_and_folds_the_rest() -> None:
    view = charts_view(_contents())
    cards = view["compareRunCharts"]
    assert [(c["type"], c["metricKey"]) for c in cards] == [
        ("BAR", names.EVAL_COMPACTED_SUCCESS), ("BAR", names.EVAL_SINGLE_WINDOW_SUCCESS),
        ("LINE", names.EVAL_COMPACTED_SUCCESS), ("LINE", names.EVAL_SINGLE_WINDOW_SUCCESS),
        ("LINE", f"{SEGMENTS}1"), ("LINE", f"{SEGMENTS}3"),  # one chart per segment count logged, in order
        ("LINE", names.health(names.HEALTH_COMPACTION_RATE)),
    ]
    assert len({c["uuid"] for c in cards}) == len(cards)
    sections = view["compareRunSections"]
    assert [s["display"] for s in sections] == [True, True, True, False, False, False]
    assert [s["name"] for s in sections[3:]] == ["Model metrics", "loss", "perf"]
    assert {c["metricSectionId"] for c in cards} == {s["uuid"] for s in sections[:3]}
    assert view["isAccordionReordered"] is True and view["runsHiddenMode"] == "SHOW_ALL"
    assert all(len(s["name"]) <= 60 for s in sections[:3])  # a section title is not cut at 1400 px
    # a section with nothing to draw is left out
    bare = charts_view(_contents(metrics=frozenset({names.EVAL_COMPACTED_SUCCESS})))
    assert [s["uuid"] for s in bare["compareRunSections"]] == ["simlab-success"]


def test_the_training_health_charts_draw_several_keys_each_and_only_those_logged() -> None:
    train = [names.metric(names.TRAIN, k) for k in (*names.GROUPS, names.RETURN, names.RETURN_PER_ROW,
                                                      *names.SUMMARY_LENGTH_BY_INDEX[:2])]
    view = charts_view(_contents(metrics=frozenset({names.EVAL_COMPACTED_SUCCESS, *train})))
    cards = [c for c in view["compareRunCharts"] if c["metricSectionId"] == "simlab-training"]
    assert [c["selectedMetricKeys"] for c in cards] == [
        ["train/group_all_fail_rate", "train/group_all_success_rate", "train/group_no_gradient_rate"],
        ["train/return", "train/return_per_row"],  # the reward per rollout beside per row, one axis
        ["train/summary_length_at1", "train/summary_length_at2"],  # the index buckets logged; no context chart
    ]
    assert all(c["metricKey"] == c["selectedMetricKeys"][0] and c["type"] == "LINE" for c in cards)
    named = [s for s in view["compareRunSections"] if s["display"]]
    assert [s["uuid"] for s in named] == ["simlab-success", "simlab-training"] and len(named[1]["name"]) <= 60
    assert not [s for s in view["compareRunSections"] if s["name"] == "train"]  # nothing of it folded again


def test_a_view_of_very_many_segment_counts_drops_its_last_sections_to_fit() -> None:
    metrics = frozenset({*names.STEP_METRICS, *(f"{SEGMENTS}{k}" for k in range(1, 80))})
    state = charts_view(_contents(metrics=metrics))
    assert len(json.dumps(state)) > VIEW_TAG_LIMIT
    fitted = json.loads(json.loads(fitted_envelope("charts", 0, state))["state"])
    assert len(fitted_envelope("charts", 0, state)) <= VIEW_TAG_LIMIT
    kept = [s["uuid"] for s in fitted["compareRunSections"]]
    assert kept == [s["uuid"] for s in state["compareRunSections"][:len(kept)]] and "simlab-success" in kept
    assert {c["metricSectionId"] for c in fitted["compareRunCharts"]} == set(kept)


def _sweep(client: Any, experiment_id: str) -> tuple[str, list[str]]:
    parent = tracking.parent_run(client, experiment_id, "views", {names.BASELINE_TAG: "steps=0",
                                                                 names.OBJECTIVE_TAG: names.EVAL_COMPACTED_SUCCESS})
    trials = []
    for number, (steps, seed) in enumerate([(0, 0), (0, 1), (10, 0), (10, 1)]):
        variant = f"steps={steps}"
        run_id = tracking.child_run(client, experiment_id, parent, f"{number}:{variant},seed={seed}", {
            names.TRIAL_TAG: str(number), names.VARIANT_TAG: variant, names.CELL_TAG: f"{variant},seed={seed}",
            names.SEED_TAG: str(seed)})
        sink = tracking.MlflowSink(client, run_id, figures=False)
        sink.log_params({"train": {"steps": steps}, "seed": seed, "sweep": {"cell": f"{variant},seed={seed}"},
                         "task": {"preset": "peekread-pos"}})
        sink.log_metrics({names.EVAL_COMPACTED_SUCCESS: 0.5 + 0.025 * steps, f"{SEGMENTS}1": 3.0}, step=0)
        sink.close()
        trials.append(run_id)
    return parent, trials


def test_the_parent_logs_the_summary_and_the_views_are_written_as_mlflow_reads_them(ready_stores: Stores) -> None:
    store = tracking.resolve_store(ready_stores.tracking_uri)
    client = store.client()
    experiment_id = tracking.ensure_experiment(client, "views", store)
    parent, trials = _sweep(client, experiment_id)
    table = pl.DataFrame({  # the columns of simlab.analysis.report.build.variant_table that the summary reads
        "evaluation": ["compacted", "compacted"], "statistic": ["final", "final"], "variant": ["steps=0", "steps=10"],
        "baseline": ["steps=0", "steps=0"], "mean": [50.41, 74.72], "se": [1.81, 1.62],
        "difference": [0.0, 24.31], "se_difference": [0.0, 0.47], "sigma": [math.nan, 51.86],
    })
    keys = log_summary(store, parent, summary_rows(table))
    assert keys == ["summary/compacted/steps:0/mean", "summary/compacted/steps:0/se",
                    *(f"summary/compacted/steps:10/{s}" for s in ("mean", "se", "diff", "diff_se", "sigma"))]
    logged = client.get_run(parent).data
    assert logged.metrics["summary/compacted/steps:10/diff"] == 24.31
    assert logged.tags["summary/compacted/steps:10"] == "74.7 ± 1.6, diff +24.3 ± 0.5 (+51.9σ)"
    assert logged.tags["summary/compacted/steps:0"] == "50.4 ± 1.8 (baseline)"

    assert write_views(client, experiment_id)
    tags = client.get_experiment(experiment_id).tags
    views = {}
    for view in (VIEW_TRIALS, VIEW_CHARTS, VIEW_SUMMARY):
        envelope = json.loads(tags[VIEW_TAG_PREFIX + view])
        assert isinstance(envelope["name"], str) and isinstance(envelope["createdAt"], int)
        views[view] = json.loads(envelope["state"])
        assert len(tags[VIEW_TAG_PREFIX + view]) <= VIEW_TAG_LIMIT
    # the swept param is the one that differs between trials; the seed and the cell label are not params shown
    assert views[VIEW_TRIALS]["selectedColumns"][0] == "params.`train.steps`"
    assert "params.`seed`" not in views[VIEW_TRIALS]["selectedColumns"]
    assert views[VIEW_SUMMARY]["selectedColumns"] == [
        "tags.`simlab.baseline`", "tags.`summary/compacted/steps:0`", "tags.`summary/compacted/steps:10`"]
    # every variant's trials in one colour, the baseline grey
    colors = [client.get_run(r).data.tags[names.RUN_COLOR_TAG] for r in trials]
    assert colors == [BASELINE_COLOR] * 2 + [PALETTE[0]] * 2

    links = sweep_links(store, "http://127.0.0.1:5000/")
    assert [link.name for link in links] == ["views"]  # experiments without a sweep get no links
    assert links[0].trials == (f"http://127.0.0.1:5000/#/experiments/{experiment_id}/runs?viewStateShareKey="
                               "simlab-trials&workflowType=machine_learning&compareRunsMode=TABLE")
    assert links[0].charts.endswith("viewStateShareKey=simlab-charts&workflowType=machine_learning"
                                    "&compareRunsMode=CHART")


@pytest.mark.parametrize("families", [5, 400])
def test_a_view_stays_within_mlflows_tag_limit(ready_stores: Stores, families: int) -> None:
    store = tracking.resolve_store(ready_stores.tracking_uri)
    client = store.client()
    experiment_id = tracking.ensure_experiment(client, "views", store)
    _, trials = _sweep(client, experiment_id)
    client.log_batch(trials[0], metrics=[tracking.Metric(f"family{i}/x", 1.0, 0, 0) for i in range(families)])
    assert write_views(client, experiment_id)
    value = client.get_experiment(experiment_id).tags[VIEW_TAG_PREFIX + VIEW_CHARTS]
    assert len(value) <= VIEW_TAG_LIMIT
    folded = [s for s in json.loads(json.loads(value)["state"])["compareRunSections"] if not s["display"]]
    assert len(folded) == (families if families < 100 else 0)  # past the limit, the folded sections go
