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
from typing import Any

from simlab.tracking.server import wait_for_server
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
            assert wait_for_server(f"{server.base}/health", timeout=120, alive=alive), (
                f"`simlab ui` did not answer in 120 s:\n{server.printed()[-3000:]}"
            )
            yield server
        finally:
            stop_group(proc)


# --- a browser on the printed links ---

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium: Playwright drives it, never downloads one."""
ASSISTANT_CLOSE = "[data-component-id='mlflow.assistant.chat_panel.close']"


def open_view(browser: Any, url: str, width: int = 1600, height: int = 1000) -> Any:
    """A fresh browser context (no state a user would not have) on ``url``; the page."""
    page = browser.new_context(viewport={"width": width, "height": height}).new_page()
    page.set_default_timeout(90_000)
    page.goto(url)
    return page


def screenshot(page: Any, path: Path) -> Path:
    """The page as shown, MLflow's assistant panel closed first (MLflow 3.17 opens it on a first visit
    from localhost; a user closes it once): the view gets the width the panel took."""
    close = page.locator(ASSISTANT_CLOSE)
    if close.count():
        close.first.click()
        close.first.wait_for(state="detached")
    page.wait_for_timeout(1500)  # the charts re-lay out to the freed width
    page.screenshot(path=str(path))
    return path


def main(argv: list[str]) -> int:
    """``python -m tests.tracking.ui_server TRACKING_URI OUT``: the docs' screenshots of a sweep's trials
    and charts links (``docs/img/``), from a store that holds one sweep (e.g. ``simlab sweep quick``'s)."""
    from playwright.sync_api import sync_playwright

    uri, out = argv[0], Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    with simlab_ui(uri) as ui, sync_playwright() as pw:
        links = ui.links()
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        ready = {"trials": "a[href*='/runs/']", "charts": ".js-plotly-plot .barlayer path",
                 "summary": "[col-id^='tags.`summary/']"}
        for name, height in (("trials", 620), ("charts", 2400), ("summary", 420)):
            page = open_view(browser, links[name], height=height)
            page.locator(ready[name]).last.wait_for(state="attached")
            page.wait_for_timeout(3000)  # the rest of the page's requests
            print(screenshot(page, out / f"ui-{name}.png"))
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
