"""The sweep specs shipped with simlab, found by name (``simlab sweep quick``) as well as by path.

The findings campaign's specs are named by their folder: ``simlab sweep findings/trajectory-group``.

They are the package ``simlab.specs`` (the repository's ``sweeps/``, mapped by ``package-dir`` in
pyproject.toml), read through :mod:`importlib.resources`: the same call finds them in a regular install
and in an editable one, with no path probing.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from simlab.errors import SpecError

PACKAGE = "simlab.specs"
"""The package the shipped specs are installed as."""


def shipped_dir() -> Path:
    """The folder of shipped specs (a folder on disk: simlab is not installed zipped)."""
    root = files(PACKAGE)
    if not isinstance(root, Path):
        raise RuntimeError(f"{PACKAGE} is not a folder on disk ({root!r}); install simlab unzipped")
    return root


def shipped_specs() -> dict[str, Path]:
    """Name -> file of every shipped spec: ``quick`` for a top-level one, ``findings/<stem>`` in a subfolder."""
    folder = shipped_dir()
    found = {p.relative_to(folder).with_suffix("").as_posix(): p for p in folder.glob("**/*.toml")}
    return {name: found[name] for name in sorted(found, key=lambda n: ("/" in n, n))}  # top-level names first


def locate(spec: str | Path) -> Path:
    """``spec`` as a path when that file exists, else the shipped spec of that name (``quick`` or ``quick.toml``)."""
    path = Path(spec)
    if path.exists():
        return path
    shipped = shipped_specs()
    name = path.as_posix().removesuffix(".toml")
    if name in shipped:
        return shipped[name]
    nested = len(path.parts) > 1
    candidates = [n for n in shipped if n.startswith(f"{path.parent.as_posix()}/")] if nested else list(shipped)
    if nested and (path.parent.exists() or not candidates):
        return path  # a path outside the shipped folders: load_spec names a missing or unreadable file itself
    names = ", ".join(candidates) or "none found"
    raise SpecError(
        f"sweep spec {str(spec)!r} does not exist; give a spec file's path or the name of a shipped spec: {names}"
    )
