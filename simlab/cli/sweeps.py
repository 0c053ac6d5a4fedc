"""Commands that run sweeps: ``sweep`` (one host: a pool of workers, then the summary and the report)
and ``worker`` (join a sweep from any host).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from simlab.cli.app import app, command_name, fail
from simlab.errors import ConfigError

SpecArg = Annotated[
    str, typer.Argument(help="Sweep spec: a TOML file, or the name of a shipped spec (quick, recipes, ...).")
]


StorageOpt = Annotated[
    str | None,
    typer.Option("--storage", help="Optuna storage: a journal file path (one host) or a database URL, "
                                   "postgresql://... for several hosts (default: mlruns/optuna-journal.log)."),
]


TrackingOpt = Annotated[
    str | None,
    typer.Option("--tracking-uri", help="MLflow tracking URI: http://HOST:PORT for a server (default: "
                                        "$MLFLOW_TRACKING_URI, else sqlite:///<home>/mlruns/mlflow.db)."),
]


TrialOpt = Annotated[str, typer.Option("--trial", hidden=True, help="Trial backend as module:attribute.")]


HeartbeatOpt = Annotated[
    int, typer.Option("--heartbeat", help="Seconds between heartbeats of a database study; a trial without "
                                          "one for 3 intervals is failed and its cell run again.")
]


def _open_spec(spec: str, storage: str | None, tracking_uri: str | None) -> Any:
    """The spec (at smoke size under ``$SIMLAB_SMOKE``), with both stores checked before the heavy imports
    (a bad store exits 2 within seconds)."""
    from simlab import stores
    from simlab.sweep import load_spec
    from simlab.sweep.shipped import locate

    parsed = load_spec(locate(spec)).at_smoke_size()
    stores.preflight(storage, tracking_uri, stores.home())
    return parsed


@app.command()
def sweep(
    spec: SpecArg,
    workers: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option("--workers", help="Worker processes, 1 torch thread each (default: the machine's cores)."),
    ] = None,
    storage: StorageOpt = None,
    tracking_uri: TrackingOpt = None,
    trial: TrialOpt = "simlab.sweep.backend:SIMLAB",
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show the progress bar.")] = True,
    heartbeat: HeartbeatOpt = 10,
) -> None:
    """Run (or resume) a sweep: every missing grid cell x seed, trials in worker processes, runs in MLflow."""
    try:
        parsed = _open_spec(spec, storage, tracking_uri)
        from simlab.sweep.runner import run_sweep

        result = run_sweep(parsed, workers=workers, storage=storage, tracking_uri=tracking_uri, backend=trial,
                           progress=progress, echo=typer.echo, heartbeat=heartbeat)
    except ConfigError as exc:  # a bad spec, store or trial backend: nothing was written
        raise fail(exc) from exc
    typer.echo(f"done: {result.ran} trial(s) run, {result.failed} failed, in {result.wall_s:.1f} s "
               f"on {result.workers} worker(s)")
    table = _write_summary(parsed, result)
    if table is not None:
        typer.echo(f"results table: {table} (and {table.with_suffix('.md')})")
    _print_report(parsed.name, result.tracking_uri)
    ui_hint = f" --tracking-uri {tracking_uri}" if tracking_uri else ""
    typer.echo(f"browse the runs with: {command_name()} ui{ui_hint}")


@app.command()
def worker(
    spec: SpecArg,
    storage: StorageOpt = None,
    tracking_uri: TrackingOpt = None,
    trial: TrialOpt = "simlab.sweep.backend:SIMLAB",
    heartbeat: HeartbeatOpt = 10,
) -> None:
    """Join a sweep from any machine (creating it if new) and run its trials until every cell is finished."""
    try:
        parsed = _open_spec(spec, storage, tracking_uri)
        from simlab.sweep.worker import run_worker

        result = run_worker(parsed, storage=storage, tracking_uri=tracking_uri, backend=trial,
                            heartbeat=heartbeat, echo=typer.echo)
    except ConfigError as exc:  # a bad spec, store or trial backend: nothing was written
        raise fail(exc) from exc
    _write_summary(parsed, result)
    typer.echo(f"done: the grid is finished; this worker ran {result.ran} trial(s) in {result.wall_s:.1f} s")
    hint = f" --tracking-uri {tracking_uri}" if tracking_uri else ""
    typer.echo(f"report: {command_name()} report {parsed.name}{hint}")


def _write_summary(spec: Any, result: Any) -> Path | None:
    """``summary.csv``/``.md`` beside the runner's ``trials.csv``, attached to the parent run; a failure
    to write them is said, never raised (the trials are done and stored)."""
    from simlab import tracking
    from simlab.analysis.summary import write_summary

    if result.table is None:
        return None
    try:
        path = write_summary(result.table, sweep=spec.name, metric=spec.objective.metric,
                             direction=spec.objective.direction)
        store = tracking.Store(result.tracking_uri, None)
        tracking.log_artifacts(store, result.parent_run_id, [path, path.with_suffix(".md")], "summary")
    except (OSError, ValueError, ConfigError) as exc:
        typer.echo(f"summary not written: {type(exc).__name__}: {exc}", err=True)
        return None
    return path


def _print_report(experiment: str, tracking_uri: str) -> None:
    """The report at the end of a sweep; a sweep with nothing to report says why instead of failing."""
    from simlab.analysis.report.build import build_report
    from simlab.cli.analysis import summary_on_parent  # here: the report's commands follow the sweep's in --help
    from simlab.errors import ReportError

    try:
        made = build_report(experiment, tracking_uri=tracking_uri)
    except ReportError as exc:
        typer.echo(f"no report: {exc}")
        return
    except (ConfigError, ValueError, OSError) as exc:  # the trials are stored: a report failure must not hide that
        typer.echo(f"report failed: {type(exc).__name__}: {exc}; rerun it with `{command_name()} report {experiment}`")
        return
    typer.echo(made.markdown)
    typer.echo(f"report files: {made.files[0].parent} (also artifacts of the parent run {made.logged_to})")
    summary_on_parent(made, tracking_uri)
