"""Session-wide: no test writes to the user's own store.

The default stores are ``<home>/mlruns`` (home: ``$SIMLAB_HOME``, else the working folder) and, for MLflow
itself, ``mlflow.db`` in the working folder. For the whole session ``$SIMLAB_HOME`` points at a temporary
folder and ``$MLFLOW_TRACKING_URI`` is unset, so a test that forgets to pass its own store writes there;
and the user's store is compared before and after the session: a change fails the session
(``tests/test_user_store.py`` shows the guard at work).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
Snapshot = dict[str, tuple[int, int]] | tuple[int, int] | None


def user_store_paths(cwd: Path, environ: dict[str, str]) -> list[Path]:
    """Where the user's own runs live: the default stores of the working folder, of this checkout and of
    ``$SIMLAB_HOME``, and the file of a ``sqlite:///`` tracking URI in the environment."""
    homes = [cwd, REPO, *([Path(environ["SIMLAB_HOME"]).expanduser()] if environ.get("SIMLAB_HOME") else [])]
    paths = [p for home in homes for p in (home / "mlruns", home / "mlflow.db")]
    uri = environ.get("MLFLOW_TRACKING_URI", "")
    if uri.startswith("sqlite:///"):
        paths.append(Path(uri[len("sqlite:///") :].split("?", 1)[0]))
    return sorted({p.resolve() for p in paths})


def snapshot(path: Path) -> Snapshot:
    """Every file under ``path`` (or ``path`` itself) with its size and modification time; ``None`` if absent."""
    if path.is_file():
        st = path.stat()
        return (st.st_size, st.st_mtime_ns)
    if not path.is_dir():
        return None
    out = {}
    for p in sorted(path.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(path))] = (st.st_size, st.st_mtime_ns)
    return out


def changes(before: dict[Path, Snapshot]) -> list[str]:
    """The watched paths whose contents differ from ``before``, with what changed."""
    out = []
    for path, was in before.items():
        now = snapshot(path)
        if now == was:
            continue
        if isinstance(was, dict) and isinstance(now, dict):
            touched = sorted(k for k in was.keys() | now.keys() if was.get(k) != now.get(k))
            out.append(f"{path}: {', '.join(touched[:10])}")
        else:
            out.append(f"{path}: {'created' if was is None else 'removed' if now is None else 'changed'}")
    return out


@pytest.fixture(scope="session", autouse=True)
def user_store_untouched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's own ``$SIMLAB_HOME``; fails the session if the user's store changed during it."""
    watched = user_store_paths(Path.cwd(), dict(os.environ))
    before = {p: snapshot(p) for p in watched}
    home = tmp_path_factory.mktemp("simlab-home")
    patch = pytest.MonkeyPatch()
    patch.setenv("SIMLAB_HOME", str(home))
    patch.delenv("MLFLOW_TRACKING_URI", raising=False)
    try:
        yield home
    finally:
        patch.undo()
    changed = changes(before)
    assert not changed, f"the tests wrote to the user's store: {'; '.join(changed)}"
