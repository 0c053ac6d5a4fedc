"""The runs behind ``simlab findings``: from the live MLflow store, or from the exports committed beside it.

One sweep's data is a :class:`SpecData`: a per-run table (run_id, variant, seed, the seed settings, and per
metric its final, first and mean value over the logged steps), and where they exist every metric's whole
per-step history and the per-episode evaluation outcomes. ``simlab findings --export`` writes all three
under ``analysis/findings/`` (``<experiment>.csv``, ``.history.parquet``, ``.episodes.parquet``), so a table
rebuilt from the exports has the same statistics as one rebuilt from the store after ``mlruns/`` is gone.
Exports written before histories and outcomes were kept have the CSV alone; their rows are judged from
per-seed values.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from simlab import names
from simlab.errors import FindingsError
from simlab.sweep import labels

EXPORT_DIR = Path(__file__).resolve().parents[1] / "findings"
"""Where the per-sweep exports are committed: ``analysis/findings/``, beside this package."""
REDUCES = ("final", "first", "mean")


@dataclass(frozen=True)
class SpecData:
    """One sweep's finished trial runs."""

    runs: pl.DataFrame
    """run_id, variant, seed, base_seed, eval_seed, and ``<reduce>:<metric>`` per metric and reduce."""
    history: pl.DataFrame | None = None
    """run_id, key, step, value; ``None`` for an export that kept none."""
    episodes: pl.DataFrame | None = None
    """run_id and :data:`simlab.names.EPISODE_COLUMNS`; ``None`` where the runs kept none."""


def column(metric: str, reduce: str) -> str:
    """The per-run table's column for ``metric`` reduced over steps by ``reduce``."""
    return f"{reduce}:{metric}"


def runs_from_histories(runs: Sequence[Mapping[str, Any]], histories: Mapping[str, Mapping[str, list[float]]],
                        metrics: set[str]) -> pl.DataFrame:
    """One row per finished trial: run_id, variant, seed, base_seed, eval_seed, and final / first / mean of
    every metric.

    ``runs``: dicts with run_id, status, variant, seed (and base_seed, eval_seed as logged, when known);
    ``histories``: run_id -> metric -> values in step order (NaN steps dropped). Unfinished runs and runs
    without a variant are left out.
    """
    rows = []
    for run in runs:
        if run.get("status") != "FINISHED" or not run.get("variant"):
            continue
        row: dict[str, Any] = {"run_id": run["run_id"], "variant": run["variant"], "seed": int(run["seed"]),
                               "base_seed": run.get("base_seed"), "eval_seed": run.get("eval_seed"),
                               "start_time": utc_time(run.get("start_time")), "end_time": utc_time(run.get("end_time"))}
        for metric in sorted(metrics):
            values = [v for v in histories.get(run["run_id"], {}).get(metric, []) if not math.isnan(v)]
            row[column(metric, "final")] = values[-1] if values else None
            row[column(metric, "first")] = values[0] if values else None
            row[column(metric, "mean")] = float(np.mean(values)) if values else None
        rows.append(row)
    schema: dict[str, Any] = {"run_id": pl.String, "variant": pl.String, "seed": pl.Int64, "base_seed": pl.String,
                              "eval_seed": pl.String, "start_time": pl.String, "end_time": pl.String}
    schema |= {column(m, r): pl.Float64 for m in sorted(metrics) for r in REDUCES}
    return pl.DataFrame(rows, schema=schema)


def utc_time(ms: int | None) -> str | None:
    """An MLflow time (ms since the epoch) as ISO 8601 UTC, so an export says when each run ran (anyone can
    check that a spec's commit precedes its first run); None where the store has none."""
    if ms is None:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).isoformat(timespec="seconds")


def _histories(table: pl.DataFrame) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for (run_id, key), g in table.sort("run_id", "key", "step").group_by("run_id", "key", maintain_order=True):
        out.setdefault(str(run_id), {})[str(key)] = g.get_column("value").to_list()
    return out


def live_data(experiment: str, wanted: Callable[[str], bool], tracking_uri: str | None = None) -> SpecData | None:
    """A sweep's finished runs from the MLflow store, with the histories of every metric ``wanted`` accepts;
    ``None`` when the store has no such experiment or no finished trial of it."""
    from simlab import tracking
    from simlab.tracking.reading import episodes_table, fetch_runs, history_table

    store = tracking.resolve_store(tracking_uri)
    if not store.holds_runs:  # reading must not create the store
        return None
    fetched = fetch_runs(store, experiment)
    if fetched is None:
        return None
    trials = [r for r in fetched[1] if r["tags"].get(names.ROLE_TAG) == "trial"]
    finished = [r for r in trials if r["status"] == "FINISHED"]
    if not finished:
        return None
    runs = [{"run_id": r["run_id"], "status": r["status"], "variant": labels.stored_variant(r["tags"], r["params"]),
             "seed": r["tags"].get(names.SEED_TAG), "base_seed": r["params"].get(names.PARAM_BASE_SEED),
             "eval_seed": r["params"].get(names.PARAM_EVAL_SEED), "start_time": r.get("start_time"),
             "end_time": r.get("end_time")} for r in trials]
    history = history_table(store, finished, wanted)
    metrics = set(history.get_column("key").unique().to_list())
    table = runs_from_histories(runs, _histories(history), metrics)
    return SpecData(table, history, episodes_table(store, finished))


def export_paths(experiment: str, folder: Path = EXPORT_DIR) -> dict[str, Path]:
    """The committed exports of ``experiment``: the per-run CSV, the histories and the per-episode outcomes."""
    return {"runs": folder / f"{experiment}.csv", "history": folder / f"{experiment}.history.parquet",
            "episodes": folder / f"{experiment}.episodes.parquet"}


def read_export(experiment: str, folder: Path = EXPORT_DIR) -> SpecData | None:
    """A sweep's committed exports; ``None`` when there is no per-run CSV. :class:`FindingsError` when a file
    cannot be read or lacks the per-run columns."""
    paths = export_paths(experiment, folder)
    if not paths["runs"].is_file():
        return None
    try:
        runs = pl.read_csv(paths["runs"], infer_schema_length=None)
        history = pl.read_parquet(paths["history"]) if paths["history"].is_file() else None
        episodes = pl.read_parquet(paths["episodes"]) if paths["episodes"].is_file() else None
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise FindingsError(f"{paths['runs'].parent}: cannot read the exports of {experiment} ({exc})") from None
    missing = [c for c in ("run_id", "variant", "seed") if c not in runs.columns]
    if missing:
        raise FindingsError(f"{paths['runs']}: the export lacks the columns {missing}; rewrite it with --export")
    for name in ("base_seed", "eval_seed"):
        runs = runs.with_columns(pl.col(name).cast(pl.String) if name in runs.columns else pl.lit(None, pl.String)
                                 .alias(name))
    return SpecData(runs, history, episodes)


def by_key_path(data: SpecData, keys: Iterable[str]) -> SpecData:
    """``data`` with variant labels read by key path against the spec's label ``keys``: an export written
    before labels used key paths carries leaf keys (``normaliser=token``); a key-path label is left as it is."""
    known: dict[str, str | None] = dict.fromkeys(keys)
    read = {v: labels.canonical_label(v, known) for v in data.runs.get_column("variant").unique().to_list()}
    return replace(data, runs=data.runs.with_columns(pl.col("variant").replace(read)))


def write_export(experiment: str, data: SpecData, folder: Path = EXPORT_DIR) -> list[Path]:
    """Write a sweep's exports (CSV, zstd parquet), each all-or-nothing."""
    paths = export_paths(experiment, folder)
    written = [_replace(paths["runs"], data.runs.sort("variant", "seed"))]
    for name, frame in (("history", data.history), ("episodes", data.episodes)):
        if frame is not None and frame.height:
            written.append(_replace(paths[name], frame))
    return written


def _replace(path: Path, frame: pl.DataFrame) -> Path:
    """Write ``frame`` to ``path`` (CSV or zstd parquet, by suffix) through a temporary name."""
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".csv":
        frame.write_csv(tmp)
    else:
        frame.write_parquet(tmp, compression="zstd", compression_level=19)
    tmp.replace(path)
    return path
