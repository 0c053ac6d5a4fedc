"""Reading a store back: an experiment's runs, their metric histories and their per-episode tables, for
the analysis layer (whatever the store: the MLflow client reads a server as it reads the sqlite default).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from simlab import names
from simlab.tracking import METRICS_TABLE, Store


def fetch_runs(store: Store, experiment: str) -> tuple[str, list[dict[str, Any]]] | None:
    """(experiment id, every active run of it as plain dicts), or ``None`` when no such experiment exists.

    For stores the analysis layer cannot read as a database (a tracking server): ``search_runs`` pages
    through the whole experiment, never one request per run. ``experiment`` is a name, else an id.
    Each dict: run_id, run_name, status, start_time and end_time (ms since the epoch), artifact_uri, tags,
    params, metrics (the latest value per key).
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
                    "end_time": r.info.end_time,
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
        # diagonal: runs logged before a column existed (names.EPISODE_SUMMARY_COLUMNS) get nulls in it
        return pl.concat(list(pool.map(read, kept)), how="diagonal_relaxed")
