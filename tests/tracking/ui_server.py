"""`simlab ui` as a user starts it: a real process on a free loopback port, stopped with its workers."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from simlab import tracking
from tests.services import free_port, stop_group

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class UiServer:
    proc: subprocess.Popen[str]
    base: str
    """``http://127.0.0.1:PORT``."""
    banner: Path
    """What ``simlab ui`` printed (its links) and the server's log."""

    def printed(self) -> str:
        return self.banner.read_text(encoding="utf-8")

    def links(self) -> dict[str, str]:
        """The links ``simlab ui`` printed for the store's one sweep, by name (trials, charts, summary)."""
        out = {}
        for line in self.printed().splitlines():
            words = line.split()
            if len(words) == 2 and words[0] in ("trials", "charts", "summary") and words[1].startswith("http"):
                out[words[0]] = words[1]
        return out


@contextlib.contextmanager
def simlab_ui(tracking_uri: str, env: Mapping[str, str] | None = None) -> Iterator[UiServer]:
    """Run ``simlab ui --port PORT --tracking-uri URI`` until the block ends; fail if it never answers."""
    port = free_port()
    cmd = [sys.executable, "-m", "simlab.cli", "ui", "--port", str(port), "--tracking-uri", tracking_uri]
    environ = {**(os.environ if env is None else env), "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory(prefix="simlab-ui-") as tmp:
        banner = Path(tmp) / "ui.log"
        with banner.open("w", encoding="utf-8") as log:
            # its own process group: uvicorn's workers stop with it
            proc = subprocess.Popen(cmd, cwd=REPO, env=environ, stdout=log, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True)
        server = UiServer(proc, f"http://127.0.0.1:{port}", banner)
        try:
            alive = lambda: proc.poll() is None  # noqa: E731
            assert tracking.wait_for_server(f"{server.base}/health", timeout=120, alive=alive), (
                f"`simlab ui` did not answer in 120 s:\n{server.printed()[-3000:]}"
            )
            yield server
        finally:
            stop_group(proc)
