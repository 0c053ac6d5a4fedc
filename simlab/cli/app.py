"""The ``simlab`` application object, its help style, and what every command shares: the bad-input
exit (:func:`fail`), the statistics options, and how to name simlab in a hint (:func:`command_name`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.models import CommandFunctionType


class _PlainFlags:
    """``--help`` shows flags plainly (``--json``, not ``--json <bool>``), the help flag included."""

    params: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            _plain_metavar(param)

    def get_help_option(self, ctx: Any) -> Any:
        """The ``--help`` flag, shown without a type like every other flag."""
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            _plain_metavar(option)
        return option


class PlainHelpGroup(_PlainFlags, TyperGroup):
    """The app's own ``--help`` (``--version``, ``--help``) in the commands' style."""


class PlainHelpCommand(_PlainFlags, TyperCommand):
    """A command whose ``--help`` shows its flags plainly and its arguments as ``SPEC`` / ``[CONFIG]``
    in the usage line (typer 0.29 writes ``{spec}``)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """``[OPTIONS] SPEC``: a required argument bare, an optional one in brackets."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = param.display_name_raw + ("..." if param.nargs != 1 else "")
                pieces.append(name if param.required else f"[{name}]")
        return pieces


def _plain_metavar(param: Any) -> None:
    if isinstance(param, TyperOption) and param.is_flag and not param.count:
        param.metavar = ""  # a flag takes no value: no type column
    elif isinstance(param, TyperArgument) and param.metavar is None:
        param.metavar = (param.name or "").upper()


class _Typer(typer.Typer):
    """Every command of the app is a :class:`PlainHelpCommand`."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[CommandFunctionType], CommandFunctionType]:
        kwargs.setdefault("cls", PlainHelpCommand)
        return super().command(*args, **kwargs)


app = _Typer(
    cls=PlainHelpGroup,
    name="simlab",
    help="Simulate compaction-aware RL: credit assignment across compaction boundaries.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(given: bool) -> None:
    if given:
        from importlib.metadata import version

        typer.echo(f"simlab {version('simlab')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="Print simlab's version and exit.")] = False,
) -> None:
    """simlab: segmented rollouts, every published credit-assignment choice, sweeps and analysis."""


Alpha = Annotated[float, typer.Option("--alpha", help="Two-sided significance level (each TOST test: one-sided).")]


Power = Annotated[float, typer.Option("--power", help="Power at which detectable effects and seed counts are stated.")]


def fail(message: str | Exception) -> typer.Exit:
    """Print a bad-input message (one line) and return the exit-2 exception to raise."""
    typer.echo(f"error: {' '.join(str(message).split())}", err=True)
    return typer.Exit(code=2)


def command_name() -> str:
    """How to run simlab again from the user's shell: ``simlab`` when that name on the PATH is this
    install, else the path of this install's script (``.venv/bin/simlab`` when it lies under the working
    folder): a fresh setup never activates its venv, so a bare ``simlab`` in a hint would not be found."""
    import os
    import shutil

    script = Path(sys.argv[0])
    if script.name != "simlab" or not script.is_file():  # python -m simlab.cli, or a test runner
        script = Path(sys.executable).parent / "simlab"
    if not script.is_file():
        return "simlab"
    found = shutil.which("simlab")
    if found is not None and Path(found).resolve() == script.resolve():
        return "simlab"
    where = script.absolute()
    cwd = Path.cwd()
    return os.path.relpath(where, cwd) if where.is_relative_to(cwd) else str(where)


def json_safe(value: Any) -> Any:
    """NaN and infinities as null, at any depth: JSON has neither, and a reader must not have to know
    Python's spelling."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
