"""The ``simlab`` command line.

Bad input exits with code 2 and a message that names the field, the bad value and what is allowed.
"""

from __future__ import annotations

import sys

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


def main() -> None:
    try:
        app()
    except ValueError as exc:  # bad input that escaped a command's own handling
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
