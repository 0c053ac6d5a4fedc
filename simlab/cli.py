"""The ``simlab`` command line.

Bad input exits with code 2 and a message that names the field, the bad value and what is allowed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="simlab",
    help="Simulate compaction-aware RL: credit assignment across compaction boundaries.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """simlab: segmented rollouts, every published credit-assignment choice, sweeps and analysis."""


def fail(message: str) -> typer.Exit:
    """Print a bad-input message and return the exit-2 exception to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=2)


@app.command()
def demo() -> None:
    """Show what a compaction boundary does to credit: the seed's Blocks 1 and 2 on simlab's estimators."""
    from simlab.demo import run_demo

    run_demo()


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
    from analysis.audit import AuditDataError, load_published, to_markdown
    from analysis.audit import audit as run_audit
    from analysis.tables import OutputDirError, check_output_dir, write_tables

    try:
        if out is not None:
            check_output_dir(out)  # fail before any work, and before anything is written
        frame = run_audit(load_published(data))
        markdown = to_markdown(frame)
        if out is not None:
            write_tables(frame, markdown, out, "audit")
    except (AuditDataError, OutputDirError) as exc:
        raise fail(str(exc)) from exc
    typer.echo(frame.write_json() if json_out else markdown)


def main() -> None:
    try:
        app()
    except ValueError as exc:  # bad input that escaped a command's own handling
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
