"""`simlab ui` bad input: exit 2 before any server starts; the server it starts keeps MLflow's telemetry off."""

from __future__ import annotations

import json
import os
import socket
import urllib.request
from pathlib import Path

import pytest

from tests.stores import Stores, run_cli
from tests.tracking.ui_server import simlab_ui


def test_port_in_use_is_refused(stores: Stores) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = run_cli(["ui", "--port", str(port), "--tracking-uri", stores.tracking_uri])
    assert result.exit_code == 2 and f"--port={port}" in result.output and "already listens" in result.output
    assert stores.written() == []


def test_file_store_uri_and_bad_port_are_refused(stores: Stores) -> None:
    result = run_cli(["ui", "--tracking-uri", "mlruns"])
    assert result.exit_code == 2 and "refuses a plain file store" in result.output
    result = run_cli(["ui", "--port", "70000", "--tracking-uri", stores.tracking_uri])
    assert result.exit_code == 2 and "[1, 65535]" in result.output


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads the server's environment from /proc")
@pytest.mark.parametrize(("given", "expected"), [(None, "true"), ("false", "false")], ids=["default", "opted-in"])
def test_the_ui_server_runs_with_mlflow_telemetry_off_unless_the_user_opts_in(
    ready_stores: Stores, given: str | None, expected: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_DISABLE_TELEMETRY"}
    if given is not None:
        env["MLFLOW_DISABLE_TELEMETRY"] = given
    with simlab_ui(ready_stores.tracking_uri, env) as ui:
        # `simlab ui` execs the server in its own process: what it runs with is that process's environment
        assert _environ(ui.proc.pid).get("MLFLOW_DISABLE_TELEMETRY") == expected
        if given is None:
            with urllib.request.urlopen(f"{ui.base}/ajax-api/3.0/mlflow/ui-telemetry", timeout=10) as resp:
                assert json.load(resp)["disable_ui_telemetry"] is True
