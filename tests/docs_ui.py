"""For the docs tests: start a server command, check it answers over HTTP, stop it (exit 0 if it answered).

    python tests/docs_ui.py simlab ui --port {port} [more args]

``{port}`` is replaced by a free port on 127.0.0.1. The server runs in its own process group, which is
stopped whatever happens.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(url: str, proc: subprocess.Popen[bytes], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return int(resp.status) == 200
        except OSError:
            time.sleep(0.5)
    return False


def main(argv: list[str]) -> int:
    port = free_port()
    cmd = [a.replace("{port}", str(port)) for a in argv]
    proc = subprocess.Popen(cmd, start_new_session=True)
    try:
        ok = answers(f"http://127.0.0.1:{port}/", proc, timeout=120)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    print(f"{' '.join(cmd)}: {'answered' if ok else 'did not answer'} on port {port}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
