"""MLflow tracking: the store, one experiment and parent run per sweep, a child run per trial, and a
:class:`~simlab.sinks.MetricSink` that writes a run's metrics in batches. The tracking package is the only
place that imports mlflow; its modules:

- this one: the store, the runs' life cycle (experiment, parent, child, finish), :class:`MlflowSink`;
- :mod:`simlab.tracking.reading`: a store's runs, metric histories and episode tables read back for analysis;
- :mod:`simlab.tracking.figures`: the figures a run's sink draws from its metric rows;
- :mod:`simlab.tracking.views`: the UI's saved views of a sweep, its links, the parent run's summary;
- :mod:`simlab.tracking.server`: the ``mlflow ui`` command line, the listen check, waiting for a server.

Runs are always addressed by id through :class:`mlflow.tracking.MlflowClient`: the fluent API keeps the
active run on a thread-local stack that never reaches a worker process, so a child run is linked to its
parent with the ``mlflow.parentRunId`` tag instead.
"""

from __future__ import annotations

import math
import os
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# before mlflow is imported (by this package or any of its modules): see TELEMETRY_ENV
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import polars as pl
from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.tracking import MlflowClient

from simlab import names, stores
from simlab.names import BASELINE_TAG as BASELINE_TAG  # re-exported: the tag names live in simlab.names
from simlab.names import CELL_TAG as CELL_TAG
from simlab.names import GIT_COMMIT_TAG, KIND_TAG, PARENT_TAG, REASON_TAG, ROLE_TAG, SWEEP_TAG, VERSION_TAG
from simlab.names import SEED_TAG as SEED_TAG
from simlab.names import TRIAL_TAG as TRIAL_TAG
from simlab.names import VARIANT_TAG as VARIANT_TAG
from simlab.schema import flatten
from simlab.stores import TRACKING_ENV as TRACKING_ENV  # the store rules live in simlab.stores
from simlab.stores import sqlite_path as sqlite_path
from simlab.tracking.figures import learning_curve_png, segment_histogram_images, segment_histogram_table

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

    @property
    def holds_runs(self) -> bool:
        """Whether there is a store to read: a local sqlite file that exists and holds tables (read-only
        look), or any other store. A command that only reads asks first: MLflow opening a missing or empty
        file writes its tables into it (0 B -> 954 KB)."""
        db = sqlite_path(self.tracking_uri)
        return db is None or (db.is_file() and bool(stores.sqlite_tables(db, self.tracking_uri, "--tracking-uri")))


def repo_root() -> Path:
    """The folder holding the ``simlab`` package (a checkout's root: its git commit is the provenance).

    Never a default store: that is :func:`simlab.stores.home`.
    """
    return Path(__file__).resolve().parents[2]


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


def chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    """``items`` in consecutive slices of at most ``size`` (MLflow's batch limits)."""
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
        for chunk in chunks(flat, MAX_PARAMS_PER_BATCH):
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
        for chunk in chunks(batch, MAX_METRICS_PER_BATCH):
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
        asking MLflow for each metric's history (:func:`~simlab.tracking.reading.history_table`)."""
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
