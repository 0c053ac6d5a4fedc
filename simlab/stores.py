"""Where a sweep's two stores live, and whether they can be used: checked before anything is written.

- The **study store** (Optuna) is a journal file (any number of processes on one host), a PostgreSQL
  database (any number of hosts) or a SQLite database (one host).
- The **run store** (MLflow) is a ``sqlite:///`` file, a tracking server (``http(s)://``) or a
  PostgreSQL database.

Both default to ``<home>/mlruns``, where home is ``$SIMLAB_HOME`` when set and the working directory
otherwise: never the folder simlab is installed in. Every check raises :class:`StoreError` (exit 2 in
the CLI) naming the option, the value, what is allowed and what fixes it, and none of them writes
anything. This module imports neither optuna nor mlflow, so a bad store fails within seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote

from simlab.errors import StoreError

HOME_ENV = "SIMLAB_HOME"
TRACKING_ENV = "MLFLOW_TRACKING_URI"
STORE_DIR = "mlruns"
JOURNAL_NAME = "optuna-journal.log"
TRACKING_DB = "mlflow.db"
PROBE_TIMEOUT_S = 3
"""Seconds a database or server gets to answer before the store counts as unreachable."""
POSTGRES_EXTRA = "pip install 'simlab[postgres]'"
POSTGRES_SCHEMES = ("postgresql", "postgresql+psycopg", "postgresql+psycopg2")
STUDY_SCHEMES = (*POSTGRES_SCHEMES, "sqlite")
TRACKING_SCHEMES = ("sqlite", "http", "https", *POSTGRES_SCHEMES)
STUDY_ALLOWED = (
    "give a journal file path (one host), postgresql://USER:PASSWORD@HOST:PORT/DATABASE (several hosts; "
    f"{POSTGRES_EXTRA}) or sqlite:////ABS/PATH/optuna.db (one host)"
)
TRACKING_ALLOWED = (
    "give sqlite:////ABS/PATH/mlflow.db (local), http://HOST:PORT (an MLflow tracking server) or "
    "postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
)


def home() -> Path:
    """``$SIMLAB_HOME`` when set, else the working directory: the folder the default stores go under."""
    raw = os.environ.get(HOME_ENV)
    if not raw:
        return Path.cwd().resolve()
    path = Path(raw).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise StoreError(
            f"`{HOME_ENV}={raw!r}` is invalid; it is a file. Give a folder (created when first written), "
            "or unset it to use the working directory"
        )
    return path


def local_store() -> Path:
    """``<home>/mlruns``: the local store's folder (base checkpoints, run folders, the default journal)."""
    return home() / STORE_DIR


def shown(url: str) -> str:
    """A URL fit to print or log: the password replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in creds:
        return url
    return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"


def scheme_of(url: str) -> str | None:
    """The lower-cased scheme of a URL (``postgresql``), or ``None`` for a plain path."""
    return url.split("://", 1)[0].lower() if "://" in url else None


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else ``None``."""
    if not uri.startswith("sqlite:///"):
        return None
    # sqlite:///relative/path or sqlite:////absolute/path (SQLAlchemy), optionally with ?query
    return Path(unquote(uri[len("sqlite:///") :].split("?", 1)[0]))


# --- the study store ---


@dataclass(frozen=True)
class StudyStore:
    """Where the Optuna study lives."""

    location: str
    """The journal file's absolute path, or the database URL."""
    kind: Literal["journal", "postgresql", "sqlite"]

    @property
    def shown(self) -> str:
        """The location fit to print (the password replaced)."""
        return shown(self.location)


def study_store(storage: str | None, root: Path) -> StudyStore:
    """``--storage`` parsed and checked without touching the network (the default: the journal under root)."""
    if not storage or scheme_of(storage) is None:
        path = (Path(storage).expanduser() if storage else root / STORE_DIR / JOURNAL_NAME).resolve()
        check_file_target(path, "--storage", storage or str(path), JOURNAL_NAME)
        if path.is_file():
            check_journal(path, storage or str(path))
        return StudyStore(str(path), "journal")
    scheme = scheme_of(storage) or ""
    if scheme not in STUDY_SCHEMES:
        raise StoreError(
            f"`--storage={shown(storage)!r}` is invalid; {_scheme_hint(scheme)}{STUDY_ALLOWED}"
        )
    if scheme == "sqlite":
        db = sqlite_path(storage)
        if db is None or not db.is_absolute():
            raise StoreError(f"`--storage={storage!r}` is invalid; {STUDY_ALLOWED}")
        check_file_target(db, "--storage", storage, "optuna.db")
        if db.is_file():
            check_sqlite_store(db, storage, "--storage", OPTUNA_TABLES, "an Optuna study database", OPTUNA_FIX)
        return StudyStore(storage, "sqlite")
    return StudyStore(storage, "postgresql")


def check_study_store(store: StudyStore) -> None:
    """The driver is installed and the database answers (a PostgreSQL study); nothing is written."""
    if store.kind == "postgresql":
        check_database(store.location, "--storage")


# --- the run store ---


def tracking_uri(given: str | None, root: Path) -> tuple[str, str | None]:
    """(tracking URI, artifact root) from ``--tracking-uri``, else ``$MLFLOW_TRACKING_URI``, else the default.

    The default is ``sqlite:///<root>/mlruns/mlflow.db`` with artifacts in ``<root>/mlruns/artifacts``,
    always absolute: MLflow's own default lands in whatever directory the command started from.
    Checked without touching the network; :func:`check_tracking` does the rest.
    """
    option = tracking_option(given)
    uri = given or os.environ.get(TRACKING_ENV) or None
    if uri is None:
        uri = f"sqlite:///{(root / STORE_DIR / TRACKING_DB).resolve()}"
    scheme = scheme_of(uri)
    if scheme is None:
        raise StoreError(f"`{option}={uri!r}` is invalid; {TRACKING_ALLOWED} (MLflow 3.13+ refuses a plain file store)")
    if scheme == "file":
        raise StoreError(
            f"`{option}={uri!r}` is invalid; MLflow 3.13+ refuses a plain file store. {TRACKING_ALLOWED}"
        )
    if scheme not in TRACKING_SCHEMES:
        raise StoreError(f"`{option}={shown(uri)!r}` is invalid; {_scheme_hint(scheme)}{TRACKING_ALLOWED}")
    db = sqlite_path(uri)
    if db is not None:
        check_file_target(db, option, uri, TRACKING_DB)
        if db.is_file():
            check_mlflow_sqlite(db, uri, option)
    artifact_root = (db.resolve().parent / "artifacts").as_uri() if db is not None else None
    return uri, artifact_root


def tracking_option(given: str | None) -> str:
    """How to name the tracking URI in a message: the flag, or the environment variable it came from."""
    return TRACKING_ENV if not given and os.environ.get(TRACKING_ENV) else "--tracking-uri"


def check_tracking(uri: str, option: str = "--tracking-uri") -> None:
    """A tracking server answers (``http(s)``), or the database does (PostgreSQL); nothing is written."""
    scheme = scheme_of(uri)
    if scheme in ("http", "https"):
        check_server(uri, option)
    elif scheme in POSTGRES_SCHEMES:
        check_database(uri, option)


def check_run_store(tracking: str | None, root: Path) -> tuple[str, str | None]:
    """(tracking URI, artifact root), checked the one way every command that reads or writes runs checks
    it: a well-formed URI with a local file, where one exists, that is an MLflow store
    (:func:`tracking_uri`), and a server or database that answers (:func:`check_tracking`). Writes nothing."""
    uri, artifact_root = tracking_uri(tracking, root)
    check_tracking(uri, tracking_option(tracking))
    return uri, artifact_root


def preflight(storage: str | None, tracking: str | None, root: Path) -> tuple[StudyStore, str, str | None]:
    """Both stores checked, cheapest first: (study store, tracking URI, artifact root). Writes nothing."""
    study = study_store(storage, root)
    tracking_uri(tracking, root)  # a malformed URI before any database is asked
    check_study_store(study)
    uri, artifact_root = check_run_store(tracking, root)
    return study, uri, artifact_root


# --- the checks themselves ---


def _scheme_hint(scheme: str) -> str:
    if scheme == "postgres":
        return "write the scheme as 'postgresql' (SQLAlchemy does not accept 'postgres'); "
    if scheme.startswith("postgresql+"):
        return f"the driver {scheme.split('+', 1)[1]!r} is not supported; "
    return f"the scheme {scheme!r} is not supported; "


def check_file_target(path: Path, option: str, value: str, example: str) -> None:
    """``path`` can become a file: it is not a folder, and its nearest existing folder is writable."""
    head = f"`{option}={value!r}` is invalid;"
    if path.is_dir():
        other = ", or a database URL: postgresql://USER:PASSWORD@HOST:PORT/DATABASE" if option == "--storage" else ""
        raise StoreError(f"{head} {path} is a folder. Give a file path, e.g. {path / example}{other}")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise StoreError(f"{head} {parent} is a file, so {path} cannot be created")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StoreError(f"{head} {parent} is not writable")


def check_folder_target(path: Path, option: str, value: str | None = None) -> None:
    """``path`` is a folder, or can become one: no file stands at it or above it, and the nearest
    existing folder is writable. Writes nothing."""
    shown_value = str(path) if value is None else value
    head = f"`{option}={shown_value!r}` is invalid;"
    if path.exists() and not path.is_dir():
        raise StoreError(f"{head} {path} is a file; give a folder", key=option, value=shown_value,
                         allowed="give a folder")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise StoreError(f"{head} {parent} is a file, so {path} cannot be created", key=option, value=shown_value,
                         allowed="give a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StoreError(f"{head} {parent} is not writable", key=option, value=shown_value,
                         allowed="give a writable folder")


@contextlib.contextmanager
def file_lock(path: str | Path, suffix: str = ".simlab-lock") -> Iterator[None]:
    """An exclusive lock on ``<path><suffix>`` between processes on one host (``filelock``: ``flock`` on
    Unix, so processes of earlier simlab versions, which called ``flock`` on the same files, still agree).

    simlab's one locking mechanism: the sweep's reconcile-and-enqueue beside a journal or SQLite study,
    and building a cached base checkpoint (``<checkpoint>.lock``). The lock file stays (``filelock``
    removes none on Unix), so every process locks the same inode.
    """
    from filelock import FileLock

    with FileLock(f"{path}{suffix}"):
        yield


def check_journal(path: Path, value: str, option: str = "--storage") -> None:
    """The existing file ``path`` is an Optuna journal: empty, or each complete line one JSON record
    ``{"op_code": N, "worker_id": "...", ...}`` (``optuna.storages.journal.JournalFileBackend``: one
    ``json.dumps`` per line, newline-terminated). An unterminated last line is another process's append in
    flight, as Optuna's reader treats it, when it reads as the start of a record (``{"op_code"``); any other
    (a note without a final newline) is not a journal's. Read only: Optuna would append to any file it is
    given."""
    with path.open("rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.endswith(b"\n") and line.replace(b" ", b"").startswith(JOURNAL_START):
                return
            if not _journal_record(line):
                raise StoreError(
                    f"`{option}={value!r}` is invalid; {path} is not an Optuna journal (line {number} is not a "
                    "journal record). Give the journal a sweep wrote, a path that does not exist yet, or a "
                    f"database URL: {STUDY_ALLOWED}", key=option, value=value,
                    allowed="give an Optuna journal or a new path",
                )


JOURNAL_START = b'{"op_code"'
"""How every record of an Optuna journal begins (its first key), spaces aside."""


def _journal_record(line: bytes) -> bool:
    try:
        record = json.loads(line)
    except ValueError:  # not JSON, or not UTF-8
        return False
    op_code = record.get("op_code") if isinstance(record, dict) else None
    return isinstance(op_code, int) and not isinstance(op_code, bool) and op_code >= 0 and "worker_id" in record


def check_server(uri: str, option: str) -> None:
    """An MLflow tracking server answers ``GET /health`` within the probe timeout."""
    url = uri.rstrip("/") + "/health"
    fix = (
        "start one there (mlflow server --backend-store-uri postgresql://... --host HOST --port PORT) "
        "or leave --tracking-uri out to use the local store"
    )
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as resp:
            status = resp.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError | socket.timeout):
            reason = f"no answer within {PROBE_TIMEOUT_S} s"
        raise StoreError(f"`{option}={shown(uri)!r}`: no MLflow server answers there ({reason}); {fix}") from None
    if status in (401, 403):  # an authenticating server: reachable; the client sends its credentials
        return
    if status != 200:
        raise StoreError(
            f"`{option}={shown(uri)!r}`: GET /health answered HTTP {status}, so this is not an MLflow tracking "
            f"server; {fix}"
        )


MLFLOW_TABLES = frozenset({"experiments", "runs"})
"""Tables that make an SQLite file an MLflow store: MLflow creates its initial tables in one go, then
stamps its migration record (``alembic_version``, which an Optuna database also has: it alone says nothing)."""
OPTUNA_TABLES = frozenset({"studies", "trials"})
"""Tables that make an SQLite file an Optuna study database (Optuna creates all of its tables in one go)."""
MLFLOW_FIX = "Give the mlflow.db a sweep wrote, a path that does not exist yet, or leave --tracking-uri out to use " \
             "the local store"
OPTUNA_FIX = "Give the optuna.db a sweep wrote, a path that does not exist yet, or a journal file path"


def check_mlflow_sqlite(db: Path, uri: str, option: str) -> None:
    """The existing file ``db`` (of ``uri``) is an MLflow store, or an SQLite database with no tables yet
    (nothing in it to lose), read-only: MLflow would otherwise write its tables into someone's database."""
    check_sqlite_store(db, uri, option, MLFLOW_TABLES, "an MLflow store", MLFLOW_FIX)


def check_sqlite_store(db: Path, uri: str, option: str, marks: frozenset[str], what: str, fix: str) -> None:
    """The existing file ``db`` (of ``uri``, given as ``option``) is an SQLite database that holds the
    tables ``marks`` (it is ``what``), or none at all; read-only. The store's library would otherwise write
    its own tables into someone else's database, or migrate another library's."""
    tables = sqlite_tables(db, uri, option, fix)
    if tables and not marks <= tables:
        held = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise StoreError(
            f"`{option}={shown(uri)!r}` is invalid; {db} is an SQLite database but not {what} (its tables: "
            f"{held}). {fix}", key=option, value=uri, allowed=fix,
        )


def sqlite_tables(db: Path, uri: str, option: str, fix: str = MLFLOW_FIX) -> set[str]:
    """The table names of the file ``db`` (of ``uri``), opened read-only as an SQLite database."""
    try:
        with contextlib.closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=5)) as conn:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            return {str(name) for (name,) in rows if not str(name).startswith("sqlite_")}
    except sqlite3.OperationalError as exc:  # locked past the timeout, unreadable: a database, not usable now
        raise StoreError(
            f"`{option}={shown(uri)!r}`: cannot read {db} ({exc}); check its permissions, or wait for the "
            "process that holds it"
        ) from None
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"`{option}={shown(uri)!r}`: {db} is not an SQLite database ({exc}); {fix[0].lower()}{fix[1:]}"
        ) from None


def check_database(url: str, option: str) -> None:
    """The SQLAlchemy driver of ``url`` is installed and the database accepts a connection (``SELECT 1``)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError
    from sqlalchemy.pool import NullPool

    try:
        parsed = make_url(url)
        dialect = parsed.get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise StoreError(f"`{option}={shown(url)!r}` is invalid ({exc}); {STUDY_ALLOWED}") from None
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        fix = POSTGRES_EXTRA if dialect.driver == "psycopg" else f"pip install {dialect.driver}"
        raise StoreError(
            f"`{option}={shown(url)!r}` needs the database driver {dialect.driver!r}, which is not installed "
            f"({exc}); install it with: {fix}"
        ) from None
    engine = create_engine(parsed, poolclass=NullPool, connect_args={"connect_timeout": PROBE_TIMEOUT_S})
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise StoreError(
            f"`{option}={shown(url)!r}`: cannot connect to the database ({detail}); start PostgreSQL there or "
            "correct the host, port, user, password or database name"
        ) from None
    finally:
        engine.dispose()
