"""`simlab ui` bad input: exit 2 before any server starts."""

from __future__ import annotations

import socket

from tests.stores import Stores, run_cli


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
