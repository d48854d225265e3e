"""Starting the ``aimock`` mock server (npm ``@copilotkit/aimock``) for the interop tests."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["FIXTURES", "running_aimock"]

FIXTURES = Path(__file__).with_name("aimock-fixtures.json")
"""The scripted answers the server gives (matched on the last user message)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def running_aimock(cli: str, log: Path) -> Iterator[str]:
    """Run aimock's CLI script ``cli`` with node on a free port of 127.0.0.1, writing its
    output to ``log``; yield its base URL (``http://127.0.0.1:<port>``)."""
    port = _free_port()
    command = ["node", cli, "-p", str(port), "-h", "127.0.0.1", "-f", str(FIXTURES)]
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*command, "--log-level", "warn"], stdout=output, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"aimock did not start: {log.read_text()}") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
