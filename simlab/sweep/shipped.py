"""The sweep specs shipped with simlab, found by name (``simlab sweep quick``) as well as by path.

In a checkout (or an editable install) they are the repository's ``sweeps/*.toml``; a regular install
carries the same files as package data in ``simlab/specs/``.
"""

from __future__ import annotations

from pathlib import Path

from simlab.errors import SpecError

_PACKAGE = Path(__file__).resolve().parent.parent  # the installed or checked-out simlab/


def shipped_dir() -> Path | None:
    """The folder of shipped specs: ``simlab/specs`` when installed, the checkout's ``sweeps/`` otherwise."""
    installed = _PACKAGE / "specs"
    checkout = _PACKAGE.parent / "sweeps"
    if installed.is_dir():
        return installed
    if checkout.is_dir() and (_PACKAGE.parent / "pyproject.toml").is_file():
        return checkout
    return None


def shipped_specs() -> dict[str, Path]:
    """Name -> file of every shipped spec."""
    folder = shipped_dir()
    return {} if folder is None else {p.stem: p for p in sorted(folder.glob("*.toml"))}


def locate(spec: str | Path) -> Path:
    """``spec`` as a path when that file exists, else the shipped spec of that name (``quick`` or ``quick.toml``)."""
    path = Path(spec)
    if path.exists() or len(path.parts) > 1:
        return path  # load_spec names a missing or unreadable file itself
    shipped = shipped_specs()
    name = path.name[: -len(".toml")] if path.name.endswith(".toml") else path.name
    if name in shipped:
        return shipped[name]
    names = ", ".join(shipped) or "none found"
    raise SpecError(
        f"sweep spec {str(spec)!r} does not exist; give a spec file's path or the name of a shipped spec: {names}"
    )
