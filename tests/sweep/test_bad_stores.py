"""Bad stores: each exits 2 within 10 s with one clear line (what was given, what is allowed, the fix),
and nothing is written to either store."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.stores import TOY, Stores, run_cli, write_spec

REPO = Path(__file__).resolve().parents[2]
BOUND_S = 10.0  # the bound

SPEC = """
name = "stores"
seeds = [0]
[space]
train.lr = [0.1]
[objective]
metric = "eval/compacted_success"
"""


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket is closed


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A port that accepts connections and never answers (a hung server)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


# (id, extra CLI args given the stores, words the message must contain)
Case = tuple[str, Callable[[Stores], list[str]], list[str]]
CASES: list[Case] = [
    (
        "tracking server unreachable",
        lambda s: ["--storage", str(s.storage), "--tracking-uri", f"http://127.0.0.1:{closed_port()}"],
        ["`--tracking-uri='http://127.0.0.1:", "no MLflow server answers there", "mlflow server --backend-store-uri"],
    ),
    (
        "file:// tracking URI",
        lambda s: ["--storage", str(s.storage), "--tracking-uri", f"file://{s.folder}/mlruns"],
        ["`--tracking-uri='file://", "refuses a plain file store", "sqlite:////ABS/PATH/mlflow.db"],
    ),
    (
        "unknown tracking scheme",
        lambda s: ["--storage", str(s.storage), "--tracking-uri", "databricks://workspace"],
        ["`--tracking-uri='databricks://workspace'`", "scheme 'databricks' is not supported", "http://HOST:PORT"],
    ),
    (
        "tracking database is a folder",
        lambda s: ["--storage", str(s.storage), "--tracking-uri", f"sqlite:///{s.folder}"],
        ["is a folder", "mlflow.db"],
    ),
    (
        "tracking database is not a database",
        lambda s: ["--storage", str(s.storage), "--tracking-uri", f"sqlite:///{s.folder}/spec.toml"],
        ["spec.toml is not an SQLite database", "leave --tracking-uri out"],
    ),
    (
        "storage is a folder",
        lambda s: ["--storage", str(s.folder), "--tracking-uri", s.tracking_uri],
        [f"`--storage='{'{folder}'}'`", "is a folder", "optuna-journal.log", "postgresql://"],
    ),
    (
        "storage under a file",
        lambda s: ["--storage", str(s.folder / "spec.toml" / "journal.log"), "--tracking-uri", s.tracking_uri],
        ["is a file, so", "cannot be created"],
    ),
    (
        "unknown storage scheme",
        lambda s: ["--storage", "redis://127.0.0.1:6379/0", "--tracking-uri", s.tracking_uri],
        ["`--storage='redis://127.0.0.1:6379/0'`", "scheme 'redis' is not supported", "postgresql://USER"],
    ),
    (
        "postgres:// spelling",
        lambda s: ["--storage", "postgres://u@127.0.0.1/db", "--tracking-uri", s.tracking_uri],
        ["write the scheme as 'postgresql'"],
    ),
    (
        "database unreachable",
        lambda s: ["--storage", f"postgresql://u:secret@127.0.0.1:{closed_port()}/db", *s.args()[:2]],
        ["`--storage='postgresql://u:***@127.0.0.1:", "cannot connect to the database", "start PostgreSQL"],
    ),
]


def _sweep(stores: Stores, spec: Path, args: list[str], command: str = "sweep") -> tuple[int, str, float]:
    start = time.perf_counter()
    result = run_cli([command, str(spec), "--trial", TOY, *args])
    return result.exit_code, result.output, time.perf_counter() - start


@pytest.mark.parametrize(("case", "make_args", "words"), CASES, ids=[c[0] for c in CASES])
def test_bad_store_exits_2_fast_and_writes_nothing(
    stores: Stores, tmp_path: Path, case: str, make_args: Callable[[Stores], list[str]], words: list[str]
) -> None:
    spec = write_spec(tmp_path, SPEC)
    (stores.folder / "spec.toml").write_text("a file where a folder is expected")  # for "storage under a file"
    before = stores.written()
    code, output, seconds = _sweep(stores, spec, make_args(stores))
    assert code == 2, (case, output)
    for word in words:
        assert word.replace("{folder}", str(stores.folder)) in output, (case, word, output)
    assert "Traceback" not in output and "secret" not in output
    assert stores.written() == before, f"{case}: wrote {set(stores.written()) - set(before)}"
    assert seconds < BOUND_S, (case, seconds)


def test_hung_tracking_server_times_out_within_the_bound(stores: Stores, tmp_path: Path, silent_server: str) -> None:
    spec = write_spec(tmp_path, SPEC)
    code, output, seconds = _sweep(stores, spec, ["--storage", str(stores.storage), "--tracking-uri", silent_server])
    assert code == 2 and "no answer within 3 s" in output, output
    assert stores.written() == [] and seconds < BOUND_S


def test_missing_driver_names_the_extra(stores: Stores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as on a machine without the postgres extra
    spec = write_spec(tmp_path, SPEC)
    code, output, _ = _sweep(stores, spec, ["--storage", "postgresql://u@127.0.0.1/db", *stores.args()[:2]])
    assert code == 2, output
    assert "needs the database driver 'psycopg'" in output and "pip install 'simlab[postgres]'" in output
    assert stores.written() == []


def test_worker_checks_its_stores_too(stores: Stores, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SPEC)
    code, output, _ = _sweep(stores, spec, ["--storage", "redis://x", *stores.args()[:2]], command="worker")
    assert code == 2 and "scheme 'redis' is not supported" in output
    assert stores.written() == []


def test_simlab_home_that_is_a_file(stores: Stores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("SIMLAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    code, output, _ = _sweep(stores, write_spec(tmp_path, SPEC), [])
    assert code == 2 and f"`SIMLAB_HOME='{home}'` is invalid; it is a file" in output


def test_postgres_study_untouched_when_the_tracking_server_is_down(optuna_db: str, tmp_path: Path) -> None:
    """The issue's case: the study used to be written before the dead server was noticed."""
    from sqlalchemy import create_engine, text

    spec = write_spec(tmp_path, SPEC.replace('name = "stores"', 'name = "untouched"'))
    args = ["--storage", optuna_db, "--tracking-uri", f"http://127.0.0.1:{closed_port()}"]
    start = time.perf_counter()
    result = run_cli(["sweep", str(spec), "--trial", TOY, *args])
    assert result.exit_code == 2 and "no MLflow server answers" in result.output
    assert time.perf_counter() - start < BOUND_S
    engine = create_engine(optuna_db)
    with engine.connect() as conn:
        if conn.execute(text("SELECT to_regclass('studies')")).scalar() is not None:
            assert conn.execute(text("SELECT count(*) FROM studies WHERE study_name = 'untouched'")).scalar() == 0
    engine.dispose()


def test_the_command_line_exits_within_the_bound(tmp_path: Path) -> None:
    """As a user runs it: a fresh process, the default stores under the working folder, a dead server."""
    spec = write_spec(tmp_path, SPEC)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SIMLAB_HOME", None)
    cmd = [sys.executable, "-m", "simlab.cli", "sweep", str(spec), "--tracking-uri", f"http://127.0.0.1:{closed_port()}"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    seconds = time.perf_counter() - start
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: `--tracking-uri=")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]
    assert seconds < BOUND_S, seconds


READERS = [["report", "quick"], ["findings"], ["ui", "--port", "1"]]
"""Commands that read the run store: each checks it as `simlab sweep` does (issue 19). The ui's port is
checked after the store, so a privileged one is never bound."""


@pytest.mark.parametrize("command", READERS, ids=[c[0] for c in READERS])
@pytest.mark.parametrize("kind", ["dead server", "not a database"])
def test_every_reader_checks_its_store(stores: Stores, tmp_path: Path, command: list[str], kind: str) -> None:
    junk = stores.folder / "junk.db"
    junk.write_text("not an SQLite file")
    uri = f"http://127.0.0.1:{closed_port()}" if kind == "dead server" else f"sqlite:///{junk}"
    before = stores.written()
    result = run_cli([*command, "--tracking-uri", uri])
    assert result.exit_code == 2, result.output
    expected = "no MLflow server answers there" if kind == "dead server" else "junk.db is not an SQLite database"
    assert expected in result.output and "Traceback" not in result.output, result.output
    assert stores.written() == before and junk.read_text() == "not an SQLite file"


def _user_database(path: Path) -> bytes:
    """A real SQLite database of someone's own (one table, one row): what --tracking-uri must not migrate."""
    import contextlib
    import sqlite3

    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE measurements (id INTEGER PRIMARY KEY, value REAL)")
        conn.execute("INSERT INTO measurements (value) VALUES (1.5)")
        conn.commit()
    return path.read_bytes()


@pytest.mark.parametrize("command", [*READERS, ["sweep", "{spec}", "--trial", TOY, "--storage", "{storage}"]],
                         ids=[*(c[0] for c in READERS), "sweep"])
def test_an_sqlite_database_that_is_not_an_mlflow_store_is_refused_unchanged(
    stores: Stores, tmp_path: Path, command: list[str]
) -> None:
    """Issue 30: MLflow used to write its tables into the user's database (8 KB -> 958 KB) before failing."""
    own = tmp_path / "own.db"
    data = _user_database(own)
    spec = write_spec(tmp_path, SPEC)
    args = [a.replace("{spec}", str(spec)).replace("{storage}", str(stores.storage)) for a in command]
    uri = f"sqlite:///{own}"
    result = run_cli([*args, "--tracking-uri", uri])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and f"`--tracking-uri='{uri}'` is invalid" in line, line
    assert "is an SQLite database but not an MLflow store" in line and "measurements" in line, line
    assert "a path that does not exist yet" in line, line
    assert own.read_bytes() == data and sorted(p.name for p in tmp_path.iterdir()) == ["own.db", "spec.toml", "store"]
    assert stores.written() == []


def test_a_new_or_empty_tracking_database_is_still_created(tmp_path: Path) -> None:
    """The default store is created on first use: a path that does not exist, or an SQLite file with no
    tables, is MLflow's to initialise."""
    from simlab import stores as st

    fresh = tmp_path / "new" / "mlflow.db"
    assert st.check_run_store(f"sqlite:///{fresh}", tmp_path)[0] == f"sqlite:///{fresh}"
    empty = tmp_path / "empty.db"
    empty.touch()
    st.check_run_store(f"sqlite:///{empty}", tmp_path)
    assert not fresh.exists() and empty.read_bytes() == b""


@pytest.mark.parametrize("command", ["sweep", "worker"])
@pytest.mark.parametrize("text", ["notes about the sweep\nsecond line\n", '{"op_code": "x"}\n', "[1, 2]\n"],
                         ids=["prose", "json without an op code", "json list"])
def test_a_text_file_given_as_storage_is_refused_unchanged(
    stores: Stores, tmp_path: Path, command: str, text: str
) -> None:
    """Issue 30: Optuna used to append a journal line to the user's file before failing."""
    notes = tmp_path / "notes.txt"
    notes.write_text(text)
    spec = write_spec(tmp_path, SPEC)
    args = ["--storage", str(notes), "--tracking-uri", stores.tracking_uri]
    result = run_cli([command, str(spec), "--trial", TOY, *args])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and f"`--storage='{notes}'` is invalid" in line, line
    assert "is not an Optuna journal (line 1 is not a journal record)" in line and "postgresql://" in line, line
    assert notes.read_text() == text and stores.written() == []


def test_a_journal_optuna_wrote_is_accepted(tmp_path: Path) -> None:
    """A real journal (a study, a finished trial) and one whose last append is still in flight pass."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from simlab import stores as st

    journal = tmp_path / "journal.log"
    study = optuna.create_study(storage=JournalStorage(JournalFileBackend(str(journal))), study_name="s")
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=1)
    assert st.study_store(str(journal), tmp_path).kind == "journal"
    with journal.open("ab") as f:
        f.write(b'{"op_code": 4, "worker')  # another process mid-append
    st.study_store(str(journal), tmp_path)
    (tmp_path / "empty.log").touch()
    st.study_store(str(tmp_path / "empty.log"), tmp_path)


def test_a_note_without_a_final_newline_is_not_a_journal_in_flight(stores: Stores, tmp_path: Path) -> None:
    """An unterminated last line is an append in flight only when it starts as a record does; a one-line
    note without its newline would otherwise get Optuna's first record glued to it."""
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my notes, no newline")
    result = run_cli(["worker", str(write_spec(tmp_path, SPEC)), "--trial", TOY, "--storage", str(notes),
                      "--tracking-uri", stores.tracking_uri])
    assert result.exit_code == 2 and "is not an Optuna journal (line 1" in result.output, result.output
    assert notes.read_bytes() == b"my notes, no newline" and stores.written() == []


def _optuna_database(path: Path) -> bytes:
    import optuna

    optuna.create_study(storage=f"sqlite:///{path}", study_name="theirs")
    return path.read_bytes()


@pytest.mark.parametrize("command", ["sweep", "worker"])
@pytest.mark.parametrize("kind", ["own database", "an MLflow store"])
def test_an_sqlite_study_storage_that_is_not_optuna_s_is_refused_unchanged(
    stores: Stores, tmp_path: Path, empty_mlflow_db: Path, command: str, kind: str
) -> None:
    """--storage sqlite:///FILE is an Optuna study database: a database of other tables (someone's own, or
    an MLflow store given in the wrong option) would get Optuna's tables written into it."""
    import shutil

    db = tmp_path / "given.db"
    if kind == "own database":
        data, table = _user_database(db), "measurements"
    else:
        shutil.copy(empty_mlflow_db, db)
        data, table = db.read_bytes(), "alembic_version"
    uri = f"sqlite:///{db}"
    result = run_cli([command, str(write_spec(tmp_path, SPEC)), "--trial", TOY, "--storage", uri,
                      "--tracking-uri", stores.tracking_uri])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and f"`--storage='{uri}'` is invalid; {db} is an SQLite database but not an Optuna " \
        "study database (its tables: " in line and table in line and "a journal file path" in line, line
    assert db.read_bytes() == data and stores.written() == []


def test_an_optuna_database_is_not_an_mlflow_store(stores: Stores, tmp_path: Path) -> None:
    """Both libraries stamp alembic_version: MLflow's own tables, not the stamp, make a run store."""
    db = tmp_path / "optuna.db"
    data = _optuna_database(db)
    uri = f"sqlite:///{db}"
    result = run_cli(["report", "quick", "--tracking-uri", uri])
    assert result.exit_code == 2, result.output
    assert f"`--tracking-uri='{uri}'` is invalid; {db} is an SQLite database but not an MLflow store" in result.output
    assert db.read_bytes() == data


def test_an_optuna_database_optuna_wrote_is_accepted(tmp_path: Path) -> None:
    from simlab import stores as st

    db = tmp_path / "optuna.db"
    data = _optuna_database(db)
    assert st.study_store(f"sqlite:///{db}", tmp_path).kind == "sqlite" and db.read_bytes() == data


@pytest.mark.parametrize("kind", ["empty file", "database without tables"])
def test_report_reads_an_empty_tracking_database_without_creating_the_store(tmp_path: Path, kind: str) -> None:
    """A sweep may create its store in an empty file; a report only reads, so it says there is nothing yet
    instead of letting MLflow write its tables into the file (0 B -> 954 KB). The command checks before
    MLflow loads; the report's own reader (for a caller without the command) refuses too."""
    from simlab.analysis.report.runs import load_runs
    from simlab.errors import ReportError

    db = tmp_path / "empty.db"
    data = _empty_database(db, kind)
    with pytest.raises(ReportError, match="no MLflow store there"):
        load_runs("quick", f"sqlite:///{db}")
    assert db.read_bytes() == data
    result = run_cli(["report", "quick", "--tracking-uri", f"sqlite:///{db}"])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (f"error: experiment 'quick' does not exist in sqlite:///{db} (the file holds no "
                                     "MLflow store yet); run `simlab sweep` first"), result.output
    assert db.read_bytes() == data and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def _empty_database(db: Path, kind: str) -> bytes:
    """An SQLite file with no table: a file of 0 bytes, or a database with a header only."""
    import contextlib
    import sqlite3

    if kind == "empty file":
        db.touch()
    else:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.execute("PRAGMA user_version = 7")
            conn.commit()
    return db.read_bytes()


@pytest.mark.parametrize("kind", ["empty file", "database without tables"])
def test_findings_read_an_empty_tracking_database_without_creating_the_store(tmp_path: Path, kind: str) -> None:
    """Noticed in stop 35: `simlab findings --source store` let MLflow fill an empty file (0 B -> 954 KB).
    Reading finds no runs there: `store` says so row by row, `auto` falls back to the committed exports."""
    db = tmp_path / "empty.db"
    data = _empty_database(db, kind)
    for source in ("store", "auto"):
        result = run_cli(["findings", "--source", source, "--tracking-uri", f"sqlite:///{db}"])
        assert result.exit_code == 0, result.output
        assert db.read_bytes() == data and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"], source
    assert "exports" in run_cli(["findings", "--source", "auto", "--tracking-uri", f"sqlite:///{db}"]).output


@pytest.mark.parametrize("kind", ["empty file", "database without tables"])
def test_the_ui_refuses_an_empty_tracking_database(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "empty.db"
    data = _empty_database(db, kind)
    result = run_cli(["ui", "--port", "5997", "--tracking-uri", f"sqlite:///{db}"])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (f"error: `--tracking-uri='sqlite:///{db}'` is invalid; the file holds no MLflow "
                                     "store yet (the UI would write its tables into it); run `simlab sweep` first, "
                                     "or give a path that is not there"), result.output
    assert db.read_bytes() == data and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]
