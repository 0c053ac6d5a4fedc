"""Commands that read results: ``audit`` (the published results), ``audit-batch`` (a trainer's dumped
batch), ``report`` (one sweep), ``findings``
(the pre-registered findings) and ``ui`` (the MLflow UI with simlab's saved views).
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from simlab.cli.app import Alpha, Power, app, fail, json_safe
from simlab.errors import ConfigError


@app.command()
def audit(
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON records instead of Markdown.")] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Existing folder to write audit.md, .csv and .parquet into.")
    ] = None,
    data: Annotated[
        Path | None, typer.Option("--data", help="Published-results TOML (default: the packaged one).")
    ] = None,
) -> None:
    """Recompute the published results the seed audits: difference, SE, sigma, like-for-like, verdict."""
    from simlab.analysis.audit.data import load_published
    from simlab.analysis.audit.table import audit as run_audit
    from simlab.analysis.audit.table import to_markdown
    from simlab.analysis.tables import check_output_dir, write_tables

    try:
        if out is not None:
            check_output_dir(out)  # fail before any work, and before anything is written
        frame = run_audit(load_published(data))
        markdown = to_markdown(frame)
        if out is not None:
            write_tables(frame, markdown, out, "audit")
    except ConfigError as exc:  # AuditDataError, OutputDirError
        raise fail(str(exc)) from exc
    typer.echo(frame.write_json() if json_out else markdown)


@app.command("audit-batch")
def audit_batch(
    file: Annotated[Path, typer.Argument(help="A batch dumped from verl: .parquet, .pt or .pkl with the row keys, "
                                              "response mask and rewards (docs/use-in-verl.md).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of Markdown.")] = False,
    success_above: Annotated[
        float, typer.Option("--success-above", help="A session succeeded when its reward is above this.")
    ] = 0.0,
    planned_steps: Annotated[
        int, typer.Option("--planned-steps", help="Steps a learning-rate schedule is planned over, counted in "
                                                  "rollouts: the report says where a per-row clock ends it.")
    ] = 200,
) -> None:
    """Implicit weight per rollout under each aggregation mode, success by session and by row, what applies."""
    from simlab.integrations.batch_audit import audit_batch as run_audit_batch
    from simlab.integrations.batch_audit import to_markdown
    from simlab.integrations.batch_file import read_batch

    try:
        if not math.isfinite(success_above):  # nan would count no session; +-inf every session or none
            raise ConfigError.invalid("--success-above", success_above, "choose a finite reward level")
        if planned_steps < 1:
            raise ConfigError.invalid("--planned-steps", planned_steps, "choose an integer >= 1")
        report = run_audit_batch(read_batch(file), success_above=success_above, planned_steps=planned_steps)
    except ConfigError as exc:  # RowsError
        raise fail(str(exc)) from exc
    typer.echo(json.dumps(json_safe(report), indent=2) if json_out else to_markdown(report, file.name))


@app.command()
def report(
    experiment: Annotated[str, typer.Argument(help="Sweep name (its experiment) or any experiment name or id.")],
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="Variant to difference against, by key path, e.g. "
                                        "train.normaliser=token (default: the spec's baseline, else the first "
                                        "grid cell)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Existing folder for report.md/.csv/.parquet and the figures "
                                   "(default: mlruns/sweeps/<name>/report)."),
    ] = None,
    against_published: Annotated[
        bool, typer.Option("--against-published", help="Add the published ablation deltas for the same choices.")
    ] = False,
    effect: Annotated[
        float, typer.Option("--effect", help="Equivalence margin and effect size in points: a tie is decided by "
                                             "a TOST within +-EFFECT, and undecided rows give the seeds it needs.")
    ] = 5.0,
    alpha: Alpha = 0.05,
    power: Power = 0.8,
    threshold: Annotated[
        float | None,
        typer.Option("--threshold", help="Compacted success (points) whose first RL step the speed table gives."),
    ] = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, "
                                            "else sqlite:///<home>/mlruns/mlflow.db)."),
    ] = None,
) -> None:
    """Every variant's mean and SE over seeds and instances, its difference from a baseline, power, figures."""
    try:
        if out is not None:
            from simlab.analysis.tables import check_output_dir

            check_output_dir(out)  # the options first, as `simlab audit`
        _check_experiment(experiment, tracking_uri)  # before MLflow and the report's own imports (seconds)
        levels = report_levels(effect, alpha, power, threshold)
        from simlab.analysis.report.build import build_report

        made = build_report(
            experiment, baseline=baseline, out=out, against=against_published, tracking_uri=tracking_uri,
            levels=levels, threshold=threshold,
        )
    except ConfigError as exc:  # ReportError, OutputDirError, a malformed --tracking-uri, a bad level
        raise fail(str(exc)) from exc
    typer.echo(made.markdown)
    echo_claims(experiment)
    if baseline is None:  # the parent's summary is the sweep's own report, against its own baseline
        summary_on_parent(made, tracking_uri)
    for why in made.skipped:
        typer.echo(f"figure skipped: {why}", err=True)
    where = f"; logged to parent run {made.logged_to}" if made.logged_to else ""
    typer.echo(f"written: {made.files[0].parent}{where}", err=True)


def echo_claims(experiment: str) -> None:
    """Print the ledger of ``experiment`` where a shipped spec of that name carries claims (its exports')."""
    from simlab.analysis.ledger import ledger, ledger_lines

    claims = ledger(spec=experiment)
    if claims:
        typer.echo(f"\nPre-registered claims of {experiment}, from its committed exports (the ledger):\n"
                   f"{ledger_lines(claims)}")


def summary_rows(table: Any) -> list[dict[str, Any]]:
    """The per-variant numbers the sweep's parent run logs, from the report's variant table
    (:func:`simlab.analysis.report.build.variant_table`; only these of its columns: evaluation, statistic, variant,
    baseline, mean, se, difference, se_difference, sigma). The baseline has no difference from itself; a
    statistic other than the final value is named after its evaluation (``compacted_auc``)."""
    rows = []
    for r in table.to_dicts():
        stats = {"mean": r.get("mean"), "se": r.get("se")}
        if r.get("variant") != r.get("baseline"):
            stats |= {"diff": r.get("difference"), "diff_se": r.get("se_difference"), "sigma": r.get("sigma")}
        statistic = r.get("statistic")
        evaluation = r.get("evaluation") if statistic in (None, "final") else f"{r.get('evaluation')}_{statistic}"
        rows.append({"evaluation": evaluation, "variant": r.get("variant"), "stats": stats})
    return rows


def summary_on_parent(made: Any, tracking_uri: str | None) -> None:
    """Log the report's per-variant summary on the sweep's parent run and refresh the sweep's UI views, so
    that the parent row alone shows the result; a failure is said, never raised (the report is written)."""
    from simlab import tracking
    from simlab.tracking.views import log_summary, write_views

    if made.logged_to is None:
        return
    try:
        store = tracking.resolve_store(tracking_uri)
        log_summary(store, made.logged_to, summary_rows(made.table))
        write_views(store.client(), made.sweep.experiment_id)
    except Exception as exc:  # the store is MLflow's: its errors are not simlab's to list
        typer.echo(f"summary not logged on the parent run: {type(exc).__name__}: {exc}", err=True)


def _check_experiment(experiment: str, tracking_uri: str | None) -> None:
    """Raise :class:`~simlab.errors.ReportError` when a local store (sqlite) has no active experiment of
    that name or id, naming the ones it has. Reads the file directly: importing MLflow takes seconds.
    An empty database is refused too: MLflow would fill it with its tables. Any other store is left to
    the report's own check."""
    import sqlite3

    from simlab import stores
    from simlab.errors import ReportError

    uri, _ = stores.check_run_store(tracking_uri, stores.home())
    db = stores.sqlite_path(uri)
    if db is None:
        return
    if not db.is_file():  # reading must not create an empty store
        raise ReportError(f"experiment {experiment!r} does not exist in {uri} (no such file); run `simlab sweep` "
                          "first", key="experiment", value=experiment, allowed="run `simlab sweep` first")
    try:
        with contextlib.closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=5)) as conn:
            rows = conn.execute("SELECT experiment_id, name FROM experiments WHERE lifecycle_stage = 'active' "
                                "ORDER BY experiment_id").fetchall()
    except sqlite3.Error:  # an empty database (check_run_store let it pass): reading must not create the store
        raise ReportError(f"experiment {experiment!r} does not exist in {uri} (the file holds no MLflow store yet); "
                          "run `simlab sweep` first", key="experiment", value=experiment,
                          allowed="run `simlab sweep` first") from None
    if any(experiment in (str(eid), name) for eid, name in rows):
        return
    have = ", ".join(repr(name) for _, name in rows) or "none"
    raise ReportError(f"experiment {experiment!r} does not exist in {uri}; choose one of its experiments ({have}) "
                      "or run `simlab sweep` first", key="experiment", value=experiment, allowed=have)


def report_levels(effect: float, alpha: float, power: float, threshold: float | None = None) -> Any:
    """The report's :class:`~simlab.analysis.report.build.Levels`, each flag checked (one line naming it)."""
    from simlab.analysis.report.build import Levels
    from simlab.analysis.statistics.power import SUCCESS_LEVEL, check_levels, success_level_ok

    if not (math.isfinite(effect) and effect > 0):
        raise ConfigError.invalid("--effect", effect, "choose an effect size > 0 points")
    if threshold is not None and not success_level_ok(threshold):
        raise ConfigError.invalid("--threshold", threshold, SUCCESS_LEVEL)
    check_levels(alpha, power)
    return Levels(effect=effect, alpha=alpha, power=power)


@app.command()
def findings(
    json_out: Annotated[bool, typer.Option("--json", help="Print the rows as JSON records.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the full Markdown table (mechanisms, what seeds varied).")
    ] = False,
    export: Annotated[
        bool, typer.Option("--export", help="Write each finished sweep's per-run table, histories and per-episode "
                                            "outcomes to analysis/findings/.")
    ] = False,
    source: Annotated[
        str, typer.Option("--source", help="Where runs come from: auto (the store, else the exports), store, exports.")
    ] = "auto",
    specs: Annotated[
        Path | None, typer.Option("--specs", help="Folder of findings specs (default: sweeps/findings).")
    ] = None,
    alpha: Alpha = 0.05,
    power: Power = 0.8,
    figures: Annotated[
        Path | None, typer.Option("--figures", help="Existing folder for one dose-response figure per campaign.")
    ] = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, "
                                            "else sqlite:///<repo>/mlruns/mlflow.db)."),
    ] = None,
) -> None:
    """Each published finding beside simlab's difference, its control and a verdict (a compact table)."""
    from simlab.analysis.replication import table as rows_table
    from simlab.analysis.replication.text import to_compact, to_markdown
    from simlab.analysis.replication.verdicts import Levels
    from simlab.analysis.statistics.power import check_levels
    from simlab.analysis.tables import check_output_dir

    try:
        if source not in ("auto", "store", "exports"):
            raise ConfigError.invalid("--source", source, "choose one of 'auto', 'store', 'exports'")
        if specs is not None and not specs.is_dir():
            raise ConfigError.invalid("--specs", str(specs), "choose an existing folder of findings specs")
        check_levels(alpha, power)
        if figures is not None:
            check_output_dir(figures, "--figures")
        if source != "exports":
            from simlab import stores

            stores.check_run_store(tracking_uri, stores.home())
        rows = rows_table.load_rows(specs or rows_table.SPEC_DIR)
        if export:
            for path in rows_table.export(rows, tracking_uri=tracking_uri):
                typer.echo(f"exported {path}", err=True)
        found = rows_table.gather(rows, tracking_uri=tracking_uri, source=source,  # type: ignore[arg-type]
                                 levels=Levels(alpha, power))
    except ConfigError as exc:  # FindingsError, a malformed --tracking-uri, a bad level
        raise fail(str(exc)) from exc
    for path in rows_table.dose_figures(found, figures) if figures is not None else []:
        typer.echo(f"figure {path}", err=True)
    if json_out:
        typer.echo(json.dumps(json_safe(found.rows), indent=2))
    else:
        typer.echo(to_markdown(found) if markdown else to_compact(found))
        typer.echo(f"\nPre-registered predictions and preconditions (the ledger):\n{ledger_text(markdown)}")


def ledger_text(markdown: bool) -> str:
    """The ledger of every shipped spec that carries claims, as a table or one line per claim."""
    from simlab.analysis.ledger import ledger, ledger_lines, ledger_markdown

    verdicts = ledger()
    return ledger_markdown(verdicts) if markdown else ledger_lines(verdicts)


@app.command()
def ui(
    host: Annotated[str, typer.Option("--host", help="Interface to bind (only this one).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to serve on.")] = 5000,
    tracking_uri: Annotated[
        str | None, typer.Option("--tracking-uri", help="Store to show (default: the local mlruns/ store).")
    ] = None,
    workers: Annotated[int, typer.Option("--workers", help="Server worker processes.")] = 1,
) -> None:
    """Start the MLflow UI on the local store, bound to 127.0.0.1 unless --host says otherwise."""
    import os

    from simlab import stores, tracking
    from simlab.errors import StoreError
    from simlab.rules import check_value, ints
    from simlab.tracking.server import check_listen, ui_command
    from simlab.tracking.views import sweep_links

    try:
        check_value("--port", port, ints(1, 65535))
        check_value("--workers", workers, ints(1, 64))
        store = tracking.Store(*stores.check_run_store(tracking_uri, stores.home()))  # checked as sweep does
        db = stores.sqlite_path(store.tracking_uri)
        if db is not None and db.is_file() and not store.holds_runs:
            raise StoreError.invalid(stores.tracking_option(tracking_uri), store.tracking_uri,
                                     "the file holds no MLflow store yet (the UI would write its tables into it); "
                                     "run `simlab sweep` first, or give a path that is not there")
        check_listen(host, port)  # the name resolves, the address is this machine's, the port is free
    except ConfigError as exc:
        raise fail(exc) from exc
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"warning: the MLflow UI has no authentication and will listen on {host}", err=True)
    tracking.prepare(store)
    cmd = ui_command(store, host, port, workers)
    # the server's job runner (GenAI judges, scheduled scorers) starts ~8 processes simlab never uses
    os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    typer.echo(f"MLflow UI for {store.tracking_uri} at {url}  (Ctrl-C stops it)")
    for links in sweep_links(store, url):
        typer.echo(f"  sweep {links.name}:\n    trials   {links.trials}\n    charts   {links.charts}\n"
                   f"    summary  {links.summary}")
    os.execv(cmd[0], cmd)  # hand the terminal and signals to the server
