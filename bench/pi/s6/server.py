"""Loopback HTTP/1.1 server of scenario S6 (started by the client of each run).

``python server.py`` prints ``<port>`` on its first line, then serves until stdin closes.
A request to ``/<api>/<kind>/<n>/...`` (any method, any rest of the path) is answered with
status 200, ``text/event-stream``, and the events of ``bodies.events(api, kind, n)`` in a
chunked body, one chunk per write of ``--per-write`` events (default 1, or the
``S6_PER_WRITE`` environment variable: one event per write, as a provider's server streams
them; the client still reads whatever has arrived).
Bodies are built once per (api, kind, n) before they are first served.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import bodies

_cache: dict[tuple[str, str, int], list[bytes]] = {}
_lock = threading.Lock()
PER_WRITE = 1


def _chunks(key: tuple[str, str, int]) -> list[bytes]:
    with _lock:
        if key not in _cache:
            events = bodies.events(*key)
            groups = [b"".join(events[i : i + PER_WRITE]) for i in range(0, len(events), PER_WRITE)]
            _cache[key] = [b"%x\r\n%s\r\n" % (len(g), g) for g in groups] + [b"0\r\n\r\n"]
        return _cache[key]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # each write goes out at once, as a streaming server's

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        parts = self.path.split("/")
        try:
            key = (parts[1], parts[2], int(parts[3]))
            chunks = _chunks(key)
        except (IndexError, ValueError, KeyError):
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        write = self.wfile.write
        for chunk in chunks:
            write(chunk)


def main() -> None:
    global PER_WRITE
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-write", type=int, default=int(os.environ.get("S6_PER_WRITE", "1")))
    parser.add_argument("--prepare", nargs="*", default=[], help="api:kind:n to build before serving")
    args = parser.parse_args()
    PER_WRITE = args.per_write
    for spec in args.prepare:
        api, kind, n = spec.split(":")
        _chunks((api, kind, int(n)))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdout.write(f"{server.server_address[1]}\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the client closes it
    server.shutdown()


if __name__ == "__main__":
    main()
