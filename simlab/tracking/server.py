"""The MLflow UI server ``simlab ui`` starts: its command line, the check that it could listen where asked,
and waiting until a server answers.
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Callable

from simlab.errors import ConfigError
from simlab.tracking import Store


def ui_command(store: Store, host: str = "127.0.0.1", port: int = 5000, workers: int = 1) -> list[str]:
    """The ``mlflow ui`` command line for ``store``, bound to ``host`` only."""
    import sys

    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        store.tracking_uri,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    if store.artifact_root:
        cmd += ["--default-artifact-root", store.artifact_root]
    return cmd


def check_listen(host: str, port: int) -> None:
    """Raise ``ConfigError`` unless a server could listen on ``host:port``: the name resolves (IPv4 or
    IPv6), the address belongs to this machine, and nothing listens on the port. Binds nothing for good."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise ConfigError.invalid("--host", host, f"the name does not resolve ({reason}); give an address or "
                                  "a name of this machine, e.g. 127.0.0.1") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: TIME_WAIT is no clash
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError.invalid("--port", port, f"something already listens on {host}:{port}; "
                                          "choose another") from None
            raise ConfigError.invalid("--host", host, f"cannot listen there ({exc.strerror}); give an address "
                                      "of this machine, e.g. 127.0.0.1") from None


def wait_for_server(url: str, timeout: float = 60.0, alive: Callable[[], bool] = lambda: True) -> bool:
    """Poll ``url`` until it answers 200 (True) or ``timeout`` passes or ``alive()`` turns False."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.3)
    return False
