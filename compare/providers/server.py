"""Loopback HTTP/1.1 server for the provider differential check.

Both clients reach it with a base URL ``http://127.0.0.1:<port>/<side>/<case id>``; the
server records every request (method, path after the prefix, headers, body) and answers the
case's ``responses[n]`` for the n-th request of that side and case (the last one again when
there are more requests than responses). A response is ``{"status", "headers", "body"}``
(``body`` text, or ``body_b64``) plus ``cuts``: byte offsets at which the body is split into
separate chunks of a chunked transfer encoding, each flushed on its own with ``gap_ms``
between them. ``"disconnect": true`` closes the connection after the last piece without
finishing the chunked body.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: DiffServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._serve()

    def do_POST(self) -> None:  # noqa: N802
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        parts = self.path.split("/", 3)
        if len(parts) < 3:
            self.send_error(404)
            return
        side, case_id = parts[1], parts[2]
        rest = "/" + parts[3] if len(parts) > 3 else "/"
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = {"<unparsed>": raw.decode("utf-8", "replace")}
        record = {
            "method": self.command,
            "path": rest,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
        }
        case = self.server.cases.get(case_id)
        with self.server.lock:
            seen = self.server.requests.setdefault((side, case_id), [])
            seen.append(record)
            n = len(seen) - 1
        if case is None:
            self.send_error(404)
            return
        responses = case["responses"]
        response = responses[min(n, len(responses) - 1)]
        self._answer(response)

    def _answer(self, response: dict[str, Any]) -> None:
        if "body_b64" in response:
            data = base64.b64decode(response["body_b64"])
        else:
            data = response.get("body", "").encode("utf-8")
        cuts = sorted(c for c in response.get("cuts", []) if 0 < c < len(data))
        pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        gap = response.get("gap_ms", 0) / 1000
        self.send_response(response.get("status", 200))
        for name, value in response.get("headers", {}).items():
            self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for piece in pieces:
                if not piece:
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
                if gap:
                    time.sleep(gap)
            if response.get("disconnect"):
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True


class DiffServer(ThreadingHTTPServer):
    """The server; ``cases`` maps a case id to its case, ``requests`` collects records."""

    daemon_threads = True

    def __init__(self, cases: dict[str, dict[str, Any]]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.cases = cases
        self.requests: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up early (an abort, a disconnect case) is expected

    @property
    def port(self) -> int:
        return self.server_address[1]

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, daemon=True)
        thread.start()
        return thread
