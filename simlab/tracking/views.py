"""The UI: saved views that open a sweep on its trials, its charts and its summary, their links, and the
per-variant summary logged on a sweep's parent run.

MLflow's UI (3.13+) reads a "saved view" from an experiment tag, ``mlflow.sharedViewState.<id>``, when a
link carries ``viewStateShareKey=<id>``: the runs filter and sort, the table's columns, the chart cards and
sections, the row grouping (its reader: useSharedExperimentViewState.ts and savedViewEnvelope.ts in
mlflow/server/js). The views below are built from what the sweep's runs hold and written as such tags, so
the printed links open on something without a click. They are also listed under the UI's "Views" menu.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlflow.entities import Metric, RunTag
from mlflow.tracking import MlflowClient

from simlab import names
from simlab.names import BASELINE_TAG, CELL_TAG, ROLE_TAG, SEED_TAG, TRIAL_TAG, VARIANT_TAG
from simlab.tracking import MAX_METRICS_PER_BATCH, Store, chunks

VIEW_TAG_PREFIX = "mlflow.sharedViewState."
"""MLflow's tag prefix for a saved view of an experiment page; the rest of the key is the view's id."""
VIEW_TAG_LIMIT = 20_000
"""MLflow's limit on an experiment tag's value."""
VIEW_TRIALS = "simlab-trials"
VIEW_CHARTS = "simlab-charts"
VIEW_SUMMARY = "simlab-summary"
VIEW_NAMES = {VIEW_TRIALS: "simlab: trials", VIEW_CHARTS: "simlab: charts per variant",
              VIEW_SUMMARY: "simlab: summary (parent run)"}
TRIAL_FILTER = f"tags.`{ROLE_TAG}` = 'trial'"
PARENT_FILTER = f"tags.`{ROLE_TAG}` = 'parent'"
CELL_ORDER = f"tags.`{CELL_TAG}`"
"""Sorting by the cell (not by start time) also keeps the UI from fetching the trials' parent run, so
the trial rows stand on their own instead of folding under it."""
SUMMARY_PREFIX = names.SUMMARY
SUMMARY_STATS = ("mean", "se", "diff", "diff_se", "sigma")
RUN_COLOR_TAG = names.RUN_COLOR_TAG
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
"""Okabe and Ito's colour-blind-safe palette, one colour per variant."""
BASELINE_COLOR = "#8C8C8C"
UI_RUN_COLUMNS = ("attributes.`Run Name`", "runDateAndNestInfo", "duration")
"""The runs table's own first columns (Run Name, Created, Duration), by the table's column ids."""

Chart = tuple[str, str | tuple[str, ...]]
"""(kind, metric key), or ("LINES", its metric keys): see :data:`CHART_SECTIONS`."""


def _under(prefix: str, charts: tuple[Chart, ...]) -> tuple[Chart, ...]:
    """The charts of rollout metrics (names without their prefix) under ``prefix``."""
    return tuple((kind, tuple(names.metric(prefix, k) for k in key) if isinstance(key, tuple)
                  else names.metric(prefix, key)) for kind, key in charts)


CHART_SECTIONS: tuple[tuple[str, str, tuple[Chart, ...]], ...] = (
    ("simlab-success", "Held-out success per variant (final, then over training)", (
        ("BAR", names.EVAL_COMPACTED_SUCCESS), ("BAR", names.EVAL_SINGLE_WINDOW_SUCCESS),
        ("LINE", names.EVAL_COMPACTED_SUCCESS), ("LINE", names.EVAL_SINGLE_WINDOW_SUCCESS),
    )),
    ("simlab-segments", "Segments per rollout: held-out, training, rollouts by count", (
        ("BAR", names.metric(names.EVAL_COMPACTED, names.SEGMENTS_MEAN)), ("LINE", names.health(names.SEG_MEAN)),
        ("COUNTS", names.health(names.SEG_COUNT)),
    )),
    ("simlab-health", "Compaction health", tuple(("LINE", key) for key in (
        names.health(names.HEALTH_COMPACTION_RATE), names.EVAL_COMPACTED_COMPACTION_RATE,
        names.metric(names.EVAL_COMPACTED, names.OVERLONG_RATE),
        names.metric(names.EVAL_SINGLE_WINDOW, names.OVERLONG_RATE),
        names.metric(names.EVAL_COMPACTED, names.SUMMARY_HOLDS_ANSWER), names.health(names.WITHIN_GROUP_SD),
        names.health(names.WITHIN_GROUP_CORR), names.health(names.LONGER_LOSS_SHARE),
        names.health(names.LONGER_TOKEN_SHARE), names.health(names.BASELINE_SHIFT_MEAN),
    ))),
    ("simlab-summaries", "Summaries: length, content, and the stall pair (compaction rate, compacted success)", (
        ("BAR", names.metric(names.EVAL_COMPACTED, names.SUMMARY_HOLDS_CUED)),
        *(chart for prefix in (names.EVAL_COMPACTED, names.TRAIN) for chart in _under(prefix, (
            ("LINES", (names.SUMMARY_LENGTH, *names.SUMMARY_LENGTH_QUANTILES)), ("LINE", names.SUMMARY_HOLDS_ANSWER),
            ("LINES", (names.SUMMARY_HOLDS_CUED, names.SUMMARY_HOLDS_UNCUED)), ("LINE", names.SUMMARY_CUT)))),
        ("LINE", names.TRAIN_COMPACTION_RATE), ("LINE", names.TRAIN_SUMMARISED_SUCCESS),
        ("LINE", names.health(names.STALL)),
    )),
    ("simlab-training", "Training health: tied groups, rewards, compaction by index", (
        *_under(names.TRAIN, (("LINES", names.GROUPS),)),
        *(chart for prefix in (names.TRAIN, names.EVAL_COMPACTED) for chart in _under(prefix, (
            ("LINES", (names.RETURN, names.RETURN_PER_ROW)), ("LINES", names.SUMMARY_LENGTH_BY_INDEX),
            ("LINES", (names.CONTEXT_BEFORE_COMPACTION, names.CONTEXT_AFTER_COMPACTION))))),
    )),
)
"""(section id, title, its charts as (kind, metric key)): BAR draws each variant's final value, LINE its
course over training steps, COUNTS one LINE per ``<prefix><k>`` key present (a segment count k), LINES one
chart of several keys' courses (those logged; MLflow titles it ``a vs b``), so that quantities read side by
side share an axis and a saved view stays within MLflow's tag limit."""


@dataclass(frozen=True)
class SweepContents:
    """What a sweep's views show, read from its runs."""

    objective: str
    params: tuple[str, ...]
    """The params whose values differ between the trials (the swept axes), seed and cell label aside."""
    metrics: frozenset[str]
    """Every metric key the trial runs logged."""
    summary: tuple[str, ...]
    """The parent run's summary tags (one per evaluation and variant), in table order."""
    colors: Mapping[str, str] = field(default_factory=dict)
    """Run id -> the colour of its variant (:func:`variant_colors`), for runs not already drawn in it."""


def sweep_contents(client: MlflowClient, experiment_id: str) -> SweepContents | None:
    """The contents of a sweep's experiment, or ``None`` when no sweep made it (no parent run)."""
    parents = client.search_runs([experiment_id], filter_string=PARENT_FILTER, max_results=1)
    if not parents:
        return None
    parent = parents[0].data
    trials = client.search_runs([experiment_id], filter_string=TRIAL_FILTER, max_results=1000)
    values: dict[str, set[str]] = {}
    for run in trials:
        for key, value in run.data.params.items():
            values.setdefault(key, set()).add(value)
    ignored = {"seed", names.CELL_PARAM}
    params = tuple(sorted(k for k, v in values.items() if len(v) > 1 and k not in ignored))
    metrics = frozenset(k for run in trials for k in run.data.metrics)
    summary = _summary_order([k for k in parent.tags if k.startswith(SUMMARY_PREFIX)],
                             parent.tags.get(BASELINE_TAG, ""))
    baseline = parent.tags.get(BASELINE_TAG)
    colors = {run_id: color for run_id, color in variant_colors(trials, baseline).items()
              if next(r for r in trials if r.info.run_id == run_id).data.tags.get(RUN_COLOR_TAG) != color}
    objective = parent.tags.get(names.OBJECTIVE_TAG, names.EVAL_COMPACTED_SUCCESS)
    return SweepContents(objective, params, metrics, summary, colors)


def variant_colors(trials: Sequence[Any], baseline: str | None) -> dict[str, str]:
    """Run id -> a colour per variant: grey for the baseline, then :data:`PALETTE` in the order the
    variants' first trials ran. MLflow colours a run by its ``mlflow.runColor`` tag, so every chart draws
    a variant's seeds in one colour (it would hash each run, or each group, to a colour of its own)."""
    order: dict[str, int] = {}
    for run in sorted(trials, key=lambda r: int(r.data.tags.get(TRIAL_TAG, "0") or 0)):
        variant = run.data.tags.get(VARIANT_TAG, "")
        if variant != baseline:
            order.setdefault(variant, len(order))
    return {r.info.run_id: BASELINE_COLOR if r.data.tags.get(VARIANT_TAG, "") == baseline
            else PALETTE[order[r.data.tags.get(VARIANT_TAG, "")] % len(PALETTE)] for r in trials}


def _summary_order(keys: Iterable[str], baseline: str) -> tuple[str, ...]:
    """``summary/<evaluation>/<variant>`` keys by evaluation, the baseline before the other variants."""
    base = metric_label(baseline)

    def order(key: str) -> tuple[str, bool, str]:
        _, evaluation, variant = key.split("/", 2)
        return evaluation, variant != base, variant

    return tuple(sorted((k for k in keys if k.count("/") == 2), key=order))


def _column_widths(columns: Iterable[str], least: int = 110) -> dict[str, int]:
    """Wide enough for each header (``metrics.`eval/compacted/success``` shows its key in full), and at
    least ``least`` pixels."""
    out = {}
    for column in columns:
        label = column.split("`")[1] if "`" in column else column
        out[column] = max(least, 8 * len(label) + 48)
    return out


def trials_view(contents: SweepContents) -> dict[str, Any]:
    """One row per trial (never folded under the parent): the swept params, the seed, the objective's
    final value and the other evaluation's success and segment count beside it."""
    wanted = [contents.objective, names.EVAL_COMPACTED_SUCCESS, names.EVAL_SINGLE_WINDOW_SUCCESS,
              names.metric(names.EVAL_COMPACTED, names.SEGMENTS_MEAN)]
    metrics = [k for k in dict.fromkeys(wanted) if k in contents.metrics or k == contents.objective]
    columns = [*(f"params.`{p}`" for p in contents.params), f"tags.`{SEED_TAG}`", *(f"metrics.`{m}`" for m in metrics)]
    return {
        "searchFilter": TRIAL_FILTER, "orderByKey": CELL_ORDER, "orderByAsc": True,
        "selectedColumns": columns, "columnOrder": [*UI_RUN_COLUMNS, *columns], "columnWidths": _column_widths(columns),
    }


def charts_view(contents: SweepContents) -> dict[str, Any]:
    """The trials in their variant's colour (:func:`variant_colors`): success, segment counts and compaction
    health in named sections first, every other metric in folded sections after."""
    cards: list[dict[str, Any]] = []
    sections = []
    for section, title, charts in CHART_SECTIONS:
        present = _present(charts, contents)
        picked = [_card(kind, section, keys, len(cards) + i) for i, (kind, keys) in enumerate(present)]
        if picked:
            cards += picked
            sections.append({"uuid": section, "name": title, "display": True, "isReordered": True, "columns": 2})
    shown = {key for c in cards for key in c.get("selectedMetricKeys", [c["metricKey"]])}
    rest = sorted({k.rsplit("/", 1)[0] if "/" in k else "Model metrics" for k in contents.metrics - shown})
    sections += [{"uuid": f"simlab-other-{i}", "name": name, "display": False, "isReordered": False}
                 for i, name in enumerate(rest)]
    return {
        "searchFilter": TRIAL_FILTER, "orderByKey": CELL_ORDER, "orderByAsc": True,
        "compareRunCharts": cards, "compareRunSections": sections, "isAccordionReordered": True,
        "hideEmptyCharts": True, "runsHiddenMode": "SHOW_ALL",
    }


def _present(charts: Sequence[Chart], contents: SweepContents) -> list[tuple[str, tuple[str, ...]]]:
    """The charts as (MLflow's kind, their keys) with the keys the runs logged, a chart without one left out:
    COUNTS becomes one LINE per ``<prefix><k>`` key, in order of k; LINES one LINE of several keys."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for kind, key in charts:
        if isinstance(key, tuple):
            out.append(("LINE", tuple(k for k in key if k in contents.metrics)))
        elif kind == "COUNTS":
            ks = sorted(int(m[len(key):]) for m in contents.metrics if m.startswith(key) and m[len(key):].isdigit())
            out += [("LINE", (f"{key}{k}",)) for k in ks]
        else:
            out.append((kind, (key,) if key in contents.metrics else ()))
    return [(kind, keys) for kind, keys in out if keys]


def _card(kind: str, section: str, keys: tuple[str, ...], number: int) -> dict[str, Any]:
    card = {"type": kind, "uuid": f"simlab-chart-{number}", "metricSectionId": section, "metricKey": keys[0],
            "isGenerated": False, "deleted": False, "runsCountToCompare": 100}
    if kind == "LINE":
        card |= {"selectedMetricKeys": list(keys), "xAxisKey": "step", "scaleType": "linear", "lineSmoothness": 0,
                 "useGlobalXaxisKey": False, "useGlobalLineSmoothing": False}
    return card


def summary_view(contents: SweepContents) -> dict[str, Any]:
    """The parent run alone, its per-variant summary as columns (:func:`log_summary`)."""
    stats = [f"tags.`{k}`" for k in contents.summary]
    columns = [f"tags.`{BASELINE_TAG}`", *stats]
    return {
        "searchFilter": PARENT_FILTER, "orderByKey": CELL_ORDER, "orderByAsc": True,
        "selectedColumns": columns, "columnOrder": [*UI_RUN_COLUMNS, *columns],
        "columnWidths": _column_widths(columns) | _column_widths(stats, least=300),
    }


def write_views(client: MlflowClient, experiment_id: str) -> bool:
    """Write (or refresh) the sweep's saved views as experiment tags; False when no sweep made it."""
    contents = sweep_contents(client, experiment_id)
    if contents is None:
        return False
    built = {VIEW_TRIALS: trials_view(contents), VIEW_CHARTS: charts_view(contents),
             VIEW_SUMMARY: summary_view(contents)}
    for run_id, color in contents.colors.items():
        client.set_tag(run_id, RUN_COLOR_TAG, color)
    created = int(time.time() * 1000)
    for view, state in built.items():
        value = fitted_envelope(VIEW_NAMES[view], created, state)
        client.set_experiment_tag(experiment_id, VIEW_TAG_PREFIX + view, value)
    return True


def fitted_envelope(name: str, created: int, state: Mapping[str, Any]) -> str:
    """The view's envelope within :data:`VIEW_TAG_LIMIT`: a sweep with very many metric families loses the
    folded sections first, then (very many segment counts) its last named sections with their charts."""
    value = _envelope(name, created, state)
    sections = list(state.get("compareRunSections", []))
    if len(value) > VIEW_TAG_LIMIT:
        sections = [s for s in sections if s["display"]]
        value = _envelope(name, created, {**state, "compareRunSections": sections})
    while len(value) > VIEW_TAG_LIMIT and len(sections) > 1:
        sections = sections[:-1]
        kept = {s["uuid"] for s in sections}
        value = _envelope(name, created, {**state, "compareRunSections": sections, "compareRunCharts": [
            c for c in state["compareRunCharts"] if c["metricSectionId"] in kept]})
    return value


def _envelope(name: str, created: int, state: Mapping[str, Any]) -> str:
    """A saved view as MLflow stores it: name and creation time in the clear, the state as JSON text."""
    compact = (",", ":")
    return json.dumps({"name": name, "createdAt": created, "state": json.dumps(state, separators=compact)},
                      separators=compact)


@dataclass(frozen=True)
class SweepLinks:
    """The UI links of one sweep."""

    name: str
    trials: str
    """One row per trial, with the swept params and the objective as columns."""
    charts: str
    """Charts grouped by variant: success, segment counts, compaction health."""
    summary: str
    """The parent run alone with its per-variant summary."""


def view_url(base_url: str, experiment_id: str, view: str) -> str:
    """The link that opens ``view`` of an experiment (``#/experiments/ID/runs?viewStateShareKey=...``)."""
    mode = "CHART" if view == VIEW_CHARTS else "TABLE"
    return (f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs?viewStateShareKey={view}"
            f"&workflowType=machine_learning&compareRunsMode={mode}")


def sweep_links(store: Store, base_url: str) -> list[SweepLinks]:
    """The links of every sweep in the store, its saved views written first (from the runs as they are now)."""
    client = store.client()
    out = []
    for exp in client.search_experiments():
        if write_views(client, str(exp.experiment_id)):
            eid = str(exp.experiment_id)
            out.append(SweepLinks(exp.name, *(view_url(base_url, eid, v) for v in (VIEW_TRIALS, VIEW_CHARTS,
                                                                                    VIEW_SUMMARY))))
    return out


def metric_label(variant: str) -> str:
    """A variant's label as a metric-key part (MLflow allows letters, digits, ``_-. :/``):
    ``train.steps=10`` becomes ``train.steps:10``, a comma between settings a space, a slash an underscore."""
    text = variant.replace("=", ":").replace(",", " ").replace("/", "_")
    return "".join(c if c.isalnum() or c in "_-. :" else "_" for c in text)


def log_summary(store: Store, run_id: str, rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Log a sweep's per-variant summary on its parent run, so that the parent row alone shows the result.

    ``rows``: one per evaluation and variant, with keys ``evaluation``, ``variant`` and ``stats`` (a mapping
    of :data:`SUMMARY_STATS` names to numbers, in points; the baseline has no ``diff``). Each finite number
    becomes a metric ``summary/<evaluation>/<variant>/<stat>``, and each row a tag
    ``summary/<evaluation>/<variant>`` that reads ``74.7 ± 1.6, diff +24.3 ± 0.5 (+51.9σ)``: the column
    the summary view shows. Returns the metric keys logged."""
    stamp = int(time.time() * 1000)
    metrics, tags = [], []
    for row in rows:
        key = f"{SUMMARY_PREFIX}{row['evaluation']}/{metric_label(str(row['variant']))}"
        stats = {k: float(v) for k, v in row["stats"].items() if isinstance(v, int | float) and math.isfinite(v)}
        metrics += [Metric(f"{key}/{stat}", round(value, 3), stamp, 0) for stat, value in stats.items()]
        tags.append(RunTag(key, summary_text(stats)))
    client = store.client()
    for chunk in chunks(metrics, MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=list(chunk))
    client.log_batch(run_id, tags=tags)
    return [m.key for m in metrics]


def summary_text(stats: Mapping[str, float]) -> str:
    """``74.7 ± 1.6, diff +24.3 ± 0.5 (+51.9σ)`` (``(baseline)`` when there is no difference)."""

    def num(stat: str, fmt: str) -> str:
        return format(stats[stat], fmt) if stat in stats else "n/a"

    text = f"{num('mean', '.1f')} ± {num('se', '.1f')}"
    if "diff" not in stats:
        return f"{text} (baseline)"
    return f"{text}, diff {num('diff', '+.1f')} ± {num('diff_se', '.1f')} ({num('sigma', '+.1f')}σ)"
