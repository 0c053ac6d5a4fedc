"""Real services for the scale-out tests: PostgreSQL databases and an MLflow tracking server on loopback.

``$SIMLAB_TEST_POSTGRES`` names a PostgreSQL role that may create databases (``.ci/run`` starts one);
each test session creates its own databases there and drops them afterwards. Without it the tests that
need PostgreSQL skip with a message, unless ``$SIMLAB_REQUIRE_SERVICES=1`` (set by CI), which turns the
skip into a failure: CI skips nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

POSTGRES_ENV = "SIMLAB_TEST_POSTGRES"
REQUIRE_ENV = "SIMLAB_REQUIRE_SERVICES"


def missing(what: str) -> None:
    """Skip (locally) or fail (CI) because ``what`` is not available."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{what} ({REQUIRE_ENV}=1: CI skips nothing)")
    pytest.skip(what)


def _admin_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        missing(
            f"PostgreSQL is absent: set {POSTGRES_ENV}=postgresql://USER:PASSWORD@127.0.0.1:PORT/postgres "
            "(a role with CREATEDB; .ci/run shows how to start a throwaway one)"
        )
    assert url is not None
    return url


def _with_database(url: str, database: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(database=database).render_as_string(hide_password=False)


class Postgres:
    """Creates throwaway databases through the admin URL; drops them at the end of the session."""

    def __init__(self, admin_url: str) -> None:
        from sqlalchemy import create_engine

        self.admin_url = admin_url
        self.engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
        self.created: list[str] = []

    def database(self, label: str) -> str:
        """A new, empty database; its URL."""
        from sqlalchemy import text

        name = f"simlab_test_{label}_{uuid.uuid4().hex[:8]}"
        with self.engine.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        self.created.append(name)
        return _with_database(self.admin_url, name)

    def close(self) -> None:
        from sqlalchemy import text

        with self.engine.connect() as conn:
            for name in self.created:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.engine.dispose()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    url = _admin_url()
    from simlab import stores

    try:
        stores.check_database(url, POSTGRES_ENV)
    except stores.StoreError as exc:
        missing(f"PostgreSQL at {POSTGRES_ENV} does not answer: {exc}")
    pg = Postgres(url)
    yield pg
    pg.close()


@pytest.fixture(scope="session")
def optuna_db(postgres: Postgres) -> str:
    """One database for every study of the session (tests tell their studies apart by name)."""
    return postgres.database("optuna")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_mlflow_server(backend: str, folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``mlflow server`` on a free loopback port with ``backend`` as its store and artifacts in ``folder``."""
    from simlab.tracking.server import wait_for_server

    port = free_port()
    cmd = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", backend,
        "--artifacts-destination", str(folder / "artifacts"),
        "--host", "127.0.0.1", "--port", str(port),
        "--workers", "1",
    ]  # fmt: skip
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with (folder / "server.log").open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    if not wait_for_server(f"{url}/health", timeout=120, alive=lambda: proc.poll() is None):
        stop_group(proc)
        raise RuntimeError(f"mlflow server did not start: {(folder / 'server.log').read_text()[-3000:]}")
    return proc, url


@pytest.fixture(scope="session")
def mlflow_server(postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``mlflow server`` with a PostgreSQL backend store and a local artifact root, on loopback; its URL."""
    try:
        proc, url = start_mlflow_server(postgres.database("mlflow"), tmp_path_factory.mktemp("mlflow-server"))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield url
    finally:
        stop_group(proc)


def stop_group(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM a server started with ``start_new_session=True`` and its children; SIGKILL after 20 s."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
