"""MLflow tracking: the store, one experiment and parent run per sweep, a child run per trial, and a
:class:`~simlab.sinks.MetricSink` that writes a run's metrics in batches. The only module that imports mlflow.

Runs are always addressed by id through :class:`mlflow.tracking.MlflowClient`: the fluent API keeps the
active run on a thread-local stack that never reaches a worker process, so a child run is linked to its
parent with the ``mlflow.parentRunId`` tag instead.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: figures are rendered in workers and in CI
# before mlflow is imported: see TELEMETRY_ENV
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import matplotlib.pyplot as plt
import polars as pl
from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from simlab import names, stores
from simlab.errors import ConfigError
from simlab.names import BASELINE_TAG as BASELINE_TAG  # re-exported: the tag names live in simlab.names
from simlab.names import CELL_TAG as CELL_TAG
from simlab.names import GIT_COMMIT_TAG, KIND_TAG, PARENT_TAG, REASON_TAG, ROLE_TAG, SEG_COUNT, SWEEP_TAG, VERSION_TAG
from simlab.names import SEED_TAG as SEED_TAG
from simlab.names import TRIAL_TAG as TRIAL_TAG
from simlab.names import VARIANT_TAG as VARIANT_TAG
from simlab.schema import flatten
from simlab.stores import TRACKING_ENV as TRACKING_ENV  # the store rules live in simlab.stores
from simlab.stores import sqlite_path as sqlite_path

TELEMETRY_ENV = "MLFLOW_DISABLE_TELEMETRY"
"""MLflow's usage telemetry is off in every simlab process and in the UI server ``simlab ui`` starts (they
inherit the environment this module sets on import), unless the user set the variable themselves:
``MLFLOW_DISABLE_TELEMETRY=false simlab ui`` opts in."""
MAX_METRICS_PER_BATCH = 1000
"""MLflow's limit on metrics in one ``log_batch`` call."""
MAX_PARAMS_PER_BATCH = 100
"""MLflow's limit on params in one ``log_batch`` call."""
MAX_PARAM_CHARS = 6000
"""MLflow's limit on one param value."""
METRICS_TABLE = "tables/metrics.parquet"
"""The documented export of a run's metrics: columns step, key, value, one row per logged value."""
MAX_TAG_CHARS = 5000
"""Kept under MLflow's tag-value limit (8000) with room for multi-byte characters."""

EXPERIMENT_TAGS = {KIND_TAG: "custom_model_development"}
"""MLflow 3's UI opens an untyped experiment on its GenAI (traces) overview; this selects the runs view."""


@dataclass(frozen=True)
class Store:
    """Where runs and artifacts go."""

    tracking_uri: str
    """MLflow tracking URI: ``sqlite:///ABS/mlflow.db`` by default, or a server's ``http(s)://`` URL."""
    artifact_root: str | None
    """Artifact location for new experiments (a ``file://`` URI); ``None`` lets a server decide."""

    def client(self) -> MlflowClient:
        """A client for this store."""
        return MlflowClient(tracking_uri=self.tracking_uri)

    @property
    def local_folder(self) -> Path | None:
        """The folder holding a local sqlite store (created before first use), else ``None``."""
        db = sqlite_path(self.tracking_uri)
        return db.parent if db is not None else None


def repo_root() -> Path:
    """The folder holding the ``simlab`` package (a checkout's root: its git commit is the provenance).

    Never a default store: that is :func:`simlab.stores.home`.
    """
    return Path(__file__).resolve().parent.parent


def resolve_store(tracking_uri: str | None = None, root: Path | None = None) -> Store:
    """The store to use: ``tracking_uri`` if given, else ``$MLFLOW_TRACKING_URI``, else the embedded default.

    The default is ``sqlite:///<root>/mlruns/mlflow.db`` with artifacts in ``<root>/mlruns/artifacts``;
    ``root`` defaults to :func:`simlab.stores.home` (``$SIMLAB_HOME``, else the working directory).
    Raises :class:`~simlab.stores.StoreError` for a URI MLflow cannot use (no network check here).
    """
    uri, artifact_root = stores.tracking_uri(tracking_uri, root or stores.home())
    return Store(tracking_uri=uri, artifact_root=artifact_root)


def prepare(store: Store) -> MlflowClient:
    """Create the local store's folder and return a client (first write to either store happens here)."""
    if store.local_folder is not None:
        store.local_folder.mkdir(parents=True, exist_ok=True)
    return store.client()


def ensure_experiment(client: MlflowClient, name: str, store: Store) -> str:
    """The id of experiment ``name``, created (with the store's artifact root) if missing."""
    found = client.get_experiment_by_name(name)
    if found is None:
        location = f"{store.artifact_root}/{name}" if store.artifact_root else None
        try:
            experiment_id = str(
                client.create_experiment(name, artifact_location=location, tags=EXPERIMENT_TAGS)
            )
        except Exception:  # another process created it first
            found = client.get_experiment_by_name(name)
            if found is None:
                raise
    if found is not None:
        experiment_id = str(found.experiment_id)
        if found.tags.get(KIND_TAG) != EXPERIMENT_TAGS[KIND_TAG]:
            client.set_experiment_tag(experiment_id, KIND_TAG, EXPERIMENT_TAGS[KIND_TAG])
    return experiment_id


def provenance_tags() -> dict[str, str]:
    """The git commit (``+dirty`` when the tree has changes) and the simlab version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        simlab_version = version("simlab")
    except PackageNotFoundError:
        simlab_version = "unknown"
    commit = "unknown"
    try:
        root = repo_root()
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        commit += "+dirty" if dirty else ""
    except (OSError, subprocess.SubprocessError):
        pass
    return {GIT_COMMIT_TAG: commit, VERSION_TAG: simlab_version}


def parent_run(client: MlflowClient, experiment_id: str, sweep: str, tags: Mapping[str, str]) -> str:
    """The sweep's parent run, reused (and set RUNNING again) when the sweep is resumed."""
    found = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{ROLE_TAG}` = 'parent' and tags.`{SWEEP_TAG}` = '{sweep}'",
        max_results=1,
        order_by=["attributes.start_time ASC"],
    )
    if found:
        run_id = str(found[0].info.run_id)
        client.update_run(run_id, status="RUNNING")
    else:
        run = client.create_run(experiment_id, run_name=sweep, tags={ROLE_TAG: "parent", SWEEP_TAG: sweep})
        run_id = str(run.info.run_id)
    client.log_batch(run_id, tags=[RunTag(k, _clip(v, MAX_TAG_CHARS)) for k, v in tags.items()])
    return run_id


def child_run(
    client: MlflowClient, experiment_id: str, parent_run_id: str, run_name: str, tags: Mapping[str, str]
) -> str:
    """A new trial run nested under ``parent_run_id``."""
    all_tags = {ROLE_TAG: "trial", PARENT_TAG: parent_run_id, **tags}
    run = client.create_run(experiment_id, run_name=run_name, tags=all_tags)
    return str(run.info.run_id)


def finish_run(client: MlflowClient, run_id: str, status: str = "FINISHED", reason: str = "") -> None:
    """End a run with ``status`` (FINISHED, FAILED or KILLED), recording why when it did not finish."""
    RunStatus.from_string(status)  # rejects a misspelt status before anything is written
    if reason:
        client.set_tag(run_id, REASON_TAG, _clip(reason, MAX_TAG_CHARS))
    client.set_terminated(run_id, status=status)


def running_child_runs(client: MlflowClient, experiment_id: str) -> list[tuple[str, dict[str, str]]]:
    """(run id, tags) of every trial run still marked RUNNING in the experiment."""
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"attributes.status = 'RUNNING' and tags.`{ROLE_TAG}` = 'trial'",
        max_results=10_000,
    )
    return [(str(r.info.run_id), dict(r.data.tags)) for r in runs]


def fetch_runs(store: Store, experiment: str) -> tuple[str, list[dict[str, Any]]] | None:
    """(experiment id, every active run of it as plain dicts), or ``None`` when no such experiment exists.

    For stores the analysis layer cannot read as a database (a tracking server): ``search_runs`` pages
    through the whole experiment, never one request per run. ``experiment`` is a name, else an id.
    Each dict: run_id, run_name, status, start_time, artifact_uri, tags, params, metrics (the latest
    value per key).
    """
    client = store.client()
    found = client.get_experiment_by_name(experiment)
    if found is None and experiment.isdigit():
        with contextlib.suppress(MlflowException):  # an unknown id raises instead of returning None
            found = client.get_experiment(experiment)
    if found is None or found.lifecycle_stage != "active":
        return None
    runs: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = client.search_runs([found.experiment_id], max_results=1000, page_token=token)
        for r in page:
            runs.append(
                {
                    "run_id": r.info.run_id,
                    "run_name": r.info.run_name,
                    "status": r.info.status,
                    "start_time": r.info.start_time,
                    "artifact_uri": r.info.artifact_uri,
                    "tags": dict(r.data.tags),
                    "params": dict(r.data.params),
                    "metrics": dict(r.data.metrics),
                }
            )
        token = page.token
        if not token:
            return str(found.experiment_id), runs


HISTORY_SCHEMA = pl.Schema({"run_id": pl.String, "key": pl.String, "step": pl.Int64, "value": pl.Float64})
"""A metric-history table: one row per run, metric and step (the last write of a step wins)."""
HISTORY_THREADS = 8
"""Requests in flight while reading histories one key at a time (runs logged without the export)."""


def history_table(
    store: Store, runs: Sequence[Mapping[str, Any]], wanted: Callable[[str], bool]
) -> pl.DataFrame:
    """The metric histories of ``runs`` (records from :func:`fetch_runs`) for every key ``wanted`` accepts.

    A run that carries the export (:data:`METRICS_TABLE`, tagged :data:`~simlab.names.METRICS_TABLE_TAG`)
    costs one artifact download, whatever its number of metrics; a run logged before the export existed
    costs one ``get_metric_history`` per wanted key it has (its latest metrics say which), several in
    flight at once. Never one request per metric per run for runs with the export.
    """
    from concurrent.futures import ThreadPoolExecutor

    client = store.client()
    jobs = []
    for run in runs:
        if run["tags"].get(names.METRICS_TABLE_TAG) == METRICS_TABLE:
            jobs.append((run["run_id"], None, run.get("artifact_uri")))
        else:
            jobs.extend((run["run_id"], key, None) for key in run["metrics"] if wanted(key))

    def read(job: tuple[str, str | None, str | None]) -> pl.DataFrame:
        run_id, key, artifact_uri = job
        if key is None:
            frame = _read_export(client, run_id, artifact_uri)
            keep = [k for k in frame.get_column("key").unique().to_list() if wanted(k)]
            return frame.filter(pl.col("key").is_in(keep))
        history = client.get_metric_history(run_id, key)
        rows = [(run_id, key, int(m.step), float(m.value), int(m.timestamp)) for m in history]
        frame = pl.DataFrame(rows, schema={**HISTORY_SCHEMA, "timestamp": pl.Int64}, orient="row")
        return frame.sort("timestamp").select(list(HISTORY_SCHEMA))

    # downloads through the client would draw one progress bar per run; set once, before the threads start
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with ThreadPoolExecutor(HISTORY_THREADS) as pool:
        frames = list(pool.map(read, jobs))
    if not frames:
        return pl.DataFrame(schema=HISTORY_SCHEMA)
    # a step logged twice keeps its last write, as MLflow's own latest metrics do
    return pl.concat(frames).unique(["run_id", "key", "step"], keep="last", maintain_order=True)


def _read_export(client: MlflowClient, run_id: str, artifact_uri: str | None) -> pl.DataFrame:
    """A run's metrics export, as a history table."""
    frame = _read_table(client, run_id, artifact_uri, METRICS_TABLE)
    return frame.with_columns(pl.lit(run_id).alias("run_id")).select(list(HISTORY_SCHEMA)).cast(HISTORY_SCHEMA)


def _read_table(client: MlflowClient, run_id: str, artifact_uri: str | None, artifact: str) -> pl.DataFrame:
    """A parquet artifact of a run: read in place when its artifacts are local files (the default store),
    else downloaded through the client."""
    if artifact_uri and artifact_uri.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return pl.read_parquet(Path(unquote(urlparse(artifact_uri).path)) / artifact)
    with tempfile.TemporaryDirectory(prefix="simlab-table-") as tmp:
        return pl.read_parquet(client.download_artifacts(run_id, artifact, tmp))


def episodes_table(store: Store, runs: Sequence[Mapping[str, Any]]) -> pl.DataFrame | None:
    """The per-episode outcomes (:data:`~simlab.names.EPISODES_TABLE`) of the ``runs`` that kept them, with a
    run_id column; ``None`` when none did (runs logged before outcomes were kept)."""
    from concurrent.futures import ThreadPoolExecutor

    client = store.client()
    kept = [r for r in runs if r["tags"].get(names.EPISODES_TABLE_TAG) == names.EPISODES_TABLE]
    if not kept:
        return None

    def read(run: Mapping[str, Any]) -> pl.DataFrame:
        frame = _read_table(client, run["run_id"], run.get("artifact_uri"), names.EPISODES_TABLE)
        return frame.with_columns(pl.lit(run["run_id"]).alias("run_id"))

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with ThreadPoolExecutor(HISTORY_THREADS) as pool:
        return pl.concat(list(pool.map(read, kept)))


def log_artifacts(store: Store, run_id: str, paths: Iterable[Path], artifact_path: str) -> None:
    """Attach files (a report's tables and figures) to an existing run, e.g. a sweep's parent run."""
    client = store.client()
    for path in paths:
        client.log_artifact(run_id, str(path), artifact_path)


def list_artifacts(store: Store, run_id: str, artifact_path: str | None = None) -> list[str]:
    """Paths of the artifacts directly under ``artifact_path`` of a run."""
    return [f.path for f in store.client().list_artifacts(run_id, artifact_path)]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 15] + "...[truncated]"


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class MlflowSink:
    """A :class:`~simlab.sinks.MetricSink` writing to one MLflow run, every write a ``log_batch``.

    Each training step's metrics go out in one call (chunks of at most 1000). The rows are also kept so
    that ``close`` can draw the learning curve and the segment-count histogram over training.
    """

    def __init__(
        self, client: MlflowClient, run_id: str, *, curve_keys: Sequence[str] = (), figures: bool = True
    ) -> None:
        self.client = client
        self.run_id = run_id
        self.curve_keys = tuple(curve_keys)
        self.figures = figures
        self.rows: list[dict[str, float]] = []
        self.write_seconds = 0.0
        """Wall time spent writing to MLflow (the benchmark reports it as tracking overhead)."""
        self.closed = False

    def log_params(self, params: dict[str, Any]) -> None:
        """Log the params (flattened to key paths) in batches of at most 100."""
        flat = [Param(k, _clip(_param_text(v), MAX_PARAM_CHARS)) for k, v in sorted(flatten(params).items())]
        start = time.perf_counter()
        for chunk in _chunks(flat, MAX_PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=list(chunk))
        self.write_seconds += time.perf_counter() - start

    def set_tags(self, tags: dict[str, str]) -> None:
        """Set tags in one batch."""
        start = time.perf_counter()
        self.client.log_batch(
            self.run_id, tags=[RunTag(k, _clip(str(v), MAX_TAG_CHARS)) for k, v in tags.items()]
        )
        self.write_seconds += time.perf_counter() - start

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        """Log one step's metrics in batches of at most 1000, and keep them for the figures."""
        start = time.perf_counter()
        stamp = int(time.time() * 1000)
        batch = [Metric(k, float(v), stamp, int(step)) for k, v in metrics.items()]
        for chunk in _chunks(batch, MAX_METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=list(chunk))
        self.rows.append({"step": float(step), **{k: float(v) for k, v in metrics.items()}})
        self.write_seconds += time.perf_counter() - start

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        """Attach a file to the run."""
        start = time.perf_counter()
        self.client.log_artifact(self.run_id, str(path), artifact_path)
        self.write_seconds += time.perf_counter() - start

    def log_figures(self) -> None:
        """Learning curve (PNG), segment-count histogram over training (step-indexed images + parquet)."""
        if not self.rows:
            return
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="simlab-fig-") as tmp:
            folder = Path(tmp)
            curve = learning_curve_png(self.rows, folder / "learning_curve.png", keys=self.curve_keys)
            if curve is not None:
                self.client.log_artifact(self.run_id, str(curve), "figures")
            table = segment_histogram_table(self.rows)
            if table.height:
                table.write_parquet(folder / "segment_histogram.parquet")
                self.client.log_artifact(self.run_id, str(folder / "segment_histogram.parquet"), "tables")
                for step, image in segment_histogram_images(table):
                    self.client.log_image(self.run_id, image, key="segment_histogram", step=step)
        self.write_seconds += time.perf_counter() - start

    def log_history(self) -> None:
        """Every metric row as one long table (:data:`METRICS_TABLE`): the export readers use instead of
        asking MLflow for each metric's history (:func:`history_table`)."""
        if not self.rows:
            return
        start = time.perf_counter()
        records = [(int(row["step"]), k, float(v)) for row in self.rows for k, v in row.items() if k != "step"]
        table = pl.DataFrame(records, schema={"step": pl.Int64, "key": pl.String, "value": pl.Float64}, orient="row")
        with tempfile.TemporaryDirectory(prefix="simlab-history-") as tmp:
            path = Path(tmp) / Path(METRICS_TABLE).name
            table.write_parquet(path)
            self.client.log_artifact(self.run_id, str(path), str(Path(METRICS_TABLE).parent))
        self.client.set_tag(self.run_id, names.METRICS_TABLE_TAG, METRICS_TABLE)
        self.write_seconds += time.perf_counter() - start

    def close(self, status: str = "FINISHED", reason: str = "") -> None:
        """Write the history export and (``figures``) the figures, then end the run with ``status``."""
        if self.closed:
            return
        self.closed = True
        try:
            self.log_history()
            if self.figures:
                self.log_figures()
        finally:
            finish_run(self.client, self.run_id, status, reason)


def _param_text(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return str(value)


# --- figures: pure functions of the metric rows, so they can be tested and redrawn from a store ---


def learning_curve_png(
    rows: Sequence[Mapping[str, float]], path: Path, *, keys: Sequence[str] = ()
) -> Path | None:
    """Plot ``keys`` (default: every success, return and compaction-rate metric) against step."""
    present = sorted({k for row in rows for k in row if k != "step"})
    wanted = [k for k in keys if k in present] or [
        k
        for k in present
        if k.rsplit("/", 1)[-1] in {names.SUCCESS, names.RETURN, names.COMPACTION_RATE}
    ]
    if not wanted:
        return None
    fig = plt.figure(figsize=(6.4, 3.6), dpi=100)
    ax = fig.add_axes((0.1, 0.14, 0.86, 0.8))
    for key in wanted:
        pts = [(row["step"], row[key]) for row in rows if key in row and math.isfinite(row[key])]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=key)
    ax.set_xlabel("training step")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.savefig(path)
    plt.close(fig)
    return path


def _segment_bucket(key: str) -> int | None:
    # the credit layer's health summary writes counts as ``segments/count_<k>`` (optionally prefixed)
    head, sep, tail = key.rpartition(SEG_COUNT)
    if not sep or (head and not head.endswith("/")) or not tail.isdigit():
        return None
    return int(tail)


def segment_histogram_table(rows: Sequence[Mapping[str, float]]) -> pl.DataFrame:
    """Long table (step, segments, rollouts, share): the segment-count distribution at every step."""
    records: list[tuple[int, int, float]] = []
    for row in rows:
        for key, value in row.items():
            bucket = _segment_bucket(key)
            if bucket is not None and math.isfinite(value):
                records.append((int(row["step"]), bucket, float(value)))
    frame = pl.DataFrame(
        records, schema={"step": pl.Int64, "segments": pl.Int64, "rollouts": pl.Float64}, orient="row"
    )
    if frame.height == 0:
        return frame.with_columns(pl.lit(0.0).alias("share"))
    frame = frame.group_by("step", "segments").agg(pl.col("rollouts").sum()).sort("step", "segments")
    return frame.with_columns((pl.col("rollouts") / pl.col("rollouts").sum().over("step")).alias("share"))


def segment_histogram_images(table: pl.DataFrame, snapshots: int = 6) -> list[tuple[int, Any]]:
    """(step, PIL image) at up to ``snapshots`` evenly spaced steps, for MLflow's step slider.

    Drawn with PIL rather than matplotlib: a bar chart needs no layout engine, and figures are drawn
    in every trial, where matplotlib's ~0.2 s per figure would count against the tracking overhead.
    """
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=13)

    steps = table.get_column("step").unique().sort().to_list()
    if not steps:
        return []
    picks = sorted({steps[round(i * (len(steps) - 1) / max(snapshots - 1, 1))] for i in range(snapshots)})
    top = int(table.get_column("segments").max())  # type: ignore[arg-type]
    width, height, left, bottom, pad = 400, 260, 44, 34, 26
    slot = (width - left - pad) / max(top, 1)
    out: list[tuple[int, Any]] = []
    for step in picks:
        at = table.filter(pl.col("step") == step)
        image = Image.new("RGB", (width, height), "white")
        draw = ImageDraw.Draw(image)
        y0, y1 = height - bottom, pad
        draw.line([(left, y1), (left, y0), (width - pad, y0)], fill="black")
        for frac in (0.0, 0.5, 1.0):
            y = y0 - frac * (y0 - y1)
            draw.text((6, y - 7), f"{frac:.1f}", fill="black", font=font)
        for segs, share in zip(
            at.get_column("segments").to_list(), at.get_column("share").to_list(), strict=True
        ):
            x = left + (segs - 1) * slot
            draw.rectangle(
                [x + 0.15 * slot, y0 - share * (y0 - y1), x + 0.85 * slot, y0], fill=(31, 119, 180)
            )
            draw.text((x + 0.45 * slot, y0 + 8), str(segs), fill="black", font=font)
        draw.text(
            (left, 4), f"share of rollouts by segments per rollout, step {step}", fill="black", font=font
        )
        out.append((int(step), image))
    return out


# --- the UI: saved views that open a sweep on its trials, its charts and its summary ---
#
# MLflow's UI (3.13+) reads a "saved view" from an experiment tag, ``mlflow.sharedViewState.<id>``, when a
# link carries ``viewStateShareKey=<id>``: the runs filter and sort, the table's columns, the chart cards and
# sections, the row grouping (its reader: useSharedExperimentViewState.ts and savedViewEnvelope.ts in
# mlflow/server/js). The views below are built from what the sweep's runs hold and written as such tags, so
# the printed links open on something without a click. They are also listed under the UI's "Views" menu.

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

CHART_SECTIONS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
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
)
"""(section id, title, its charts as (kind, metric key)): BAR draws each variant's final value, LINE its
course over training steps, COUNTS one LINE per ``<prefix><k>`` key present (a segment count k)."""


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
        present = [(kind, key) for kind, key in _expand(charts, contents) if key in contents.metrics]
        picked = [_card(kind, section, key, len(cards) + i) for i, (kind, key) in enumerate(present)]
        if picked:
            cards += picked
            sections.append({"uuid": section, "name": title, "display": True, "isReordered": True, "columns": 2})
    shown = {c["metricKey"] for c in cards}
    rest = sorted({k.rsplit("/", 1)[0] if "/" in k else "Model metrics" for k in contents.metrics - shown})
    sections += [{"uuid": f"simlab-other-{i}", "name": name, "display": False, "isReordered": False}
                 for i, name in enumerate(rest)]
    return {
        "searchFilter": TRIAL_FILTER, "orderByKey": CELL_ORDER, "orderByAsc": True,
        "compareRunCharts": cards, "compareRunSections": sections, "isAccordionReordered": True,
        "hideEmptyCharts": True, "runsHiddenMode": "SHOW_ALL",
    }


def _expand(charts: Sequence[tuple[str, str]], contents: SweepContents) -> list[tuple[str, str]]:
    """COUNTS entries become one LINE per ``<prefix><k>`` key the runs logged, in order of k."""
    out = []
    for kind, key in charts:
        if kind != "COUNTS":
            out.append((kind, key))
            continue
        ks = sorted(int(m[len(key):]) for m in contents.metrics if m.startswith(key) and m[len(key):].isdigit())
        out += [("LINE", f"{key}{k}") for k in ks]
    return out


def _card(kind: str, section: str, key: str, number: int) -> dict[str, Any]:
    card = {"type": kind, "uuid": f"simlab-chart-{number}", "metricSectionId": section, "metricKey": key,
            "isGenerated": False, "deleted": False, "runsCountToCompare": 100}
    if kind == "LINE":
        card |= {"selectedMetricKeys": [key], "xAxisKey": "step", "scaleType": "linear", "lineSmoothness": 0,
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
        value = _envelope(VIEW_NAMES[view], created, state)
        if len(value) > VIEW_TAG_LIMIT:  # a sweep with very many metric families: drop the folded sections
            value = _envelope(VIEW_NAMES[view], created, {**state, "compareRunSections": [
                s for s in state.get("compareRunSections", []) if s["display"]]})
        client.set_experiment_tag(experiment_id, VIEW_TAG_PREFIX + view, value)
    return True


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
    """A variant's label as a metric-key part (MLflow allows letters, digits, ``_-. :/``): ``steps=10``
    becomes ``steps:10``, a comma between settings a space, a slash an underscore."""
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
    for chunk in _chunks(metrics, MAX_METRICS_PER_BATCH):
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


def ui_command(store: Store, host: str = "127.0.0.1", port: int = 5000, workers: int = 1) -> list[str]:
    """The ``mlflow ui`` command line for ``store``, bound to ``host`` only."""
    import sys

    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        store.tracking_uri,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    if store.artifact_root:
        cmd += ["--default-artifact-root", store.artifact_root]
    return cmd


def check_listen(host: str, port: int) -> None:
    """Raise ``ConfigError`` unless a server could listen on ``host:port``: the name resolves (IPv4 or
    IPv6), the address belongs to this machine, and nothing listens on the port. Binds nothing for good."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise ConfigError.invalid("--host", host, f"the name does not resolve ({reason}); give an address or "
                                  "a name of this machine, e.g. 127.0.0.1") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: TIME_WAIT is no clash
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError.invalid("--port", port, f"something already listens on {host}:{port}; "
                                          "choose another") from None
            raise ConfigError.invalid("--host", host, f"cannot listen there ({exc.strerror}); give an address "
                                      "of this machine, e.g. 127.0.0.1") from None


def wait_for_server(url: str, timeout: float = 60.0, alive: Callable[[], bool] = lambda: True) -> bool:
    """Poll ``url`` until it answers 200 (True) or ``timeout`` passes or ``alive()`` turns False."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.3)
    return False
