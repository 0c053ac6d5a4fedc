"""The ``simlab`` command line.

Bad input exits with code 2 and a message that names the field, the bad value and what is allowed; any
other exception is a bug, and says so under its traceback, with exit code 1. The commands live in
:mod:`.play` (demo, inspect, train, base), :mod:`.probes` (lookup), :mod:`.sweeps` (sweep, worker) and
:mod:`.analysis` (audit, report, findings, ui); importing them registers them on :data:`~simlab.cli.app.app`,
in that order.
"""

from __future__ import annotations

import importlib
import sys
import traceback

import typer

from simlab.cli.app import app
from simlab.errors import ConfigError

COMMAND_MODULES = ("play", "probes", "sweeps", "analysis")
"""The modules that hold the commands: importing them registers their commands on ``app``, in this
order, which is the order ``simlab --help`` lists them in."""
for _name in COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}")

BUG_EXIT = 1
"""Exit code of an internal error (a bug), as against 2 for bad input."""


def main() -> None:
    """The ``simlab`` console script: bad input (a :class:`ConfigError`) is one line and exit 2; any other
    exception is simlab's fault, not the user's, and says so under its traceback, with exit 1."""
    try:
        app()
    except ConfigError as exc:  # bad input that escaped a command's own handling
        typer.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(2)
    except Exception:
        traceback.print_exc()
        typer.echo("error: an internal error in simlab (a bug, not your input); the traceback above says where",
                   err=True)
        sys.exit(BUG_EXIT)


if __name__ == "__main__":
    main()
