"""A scripted HTTP/1.1 server on 127.0.0.1 for provider tests.

It runs on Trio in the test's nursery (see the ``sse_server`` fixture in ``conftest.py``),
records every request (method, path, headers, JSON body) and answers each one with the
next :class:`ScriptedResponse`: a status, headers and a body given as byte chunks sent with
chunked transfer encoding, optionally pausing between chunks (on Trio's clock), closing the
connection before the body is complete, hanging after the chunks until the client goes
away, repeating the last chunk until the client goes away (an endless body), or answering
with a body built from the request (e.g. echoing its headers). It records when a client
closes a connection it was still serving, so a test can assert that cancelling a consumer
closed the HTTP stream.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

import attrs
import trio

__all__ = [
    "RecordedRequest",
    "ScriptedResponse",
    "SseServer",
    "error_response",
    "sse_chunk",
    "sse_response",
]


@attrs.frozen(kw_only=True)
class ScriptedResponse:
    """What the server sends for one request."""

    status: int = 200
    headers: dict[str, str] = attrs.field(factory=lambda: {"content-type": "text/event-stream"})
    chunks: Sequence[bytes] = ()
    """Body pieces; each is written (and flushed) as one HTTP chunk."""
    pause: float = 0.0
    """Seconds to sleep before each chunk after the first."""
    close_early: bool = False
    """Close the connection after the chunks without the terminating chunk."""
    hang: bool = False
    """After the chunks, keep the connection open until the client closes it."""
    content_length: bool = False
    """Send the body with a ``content-length`` header instead of chunked encoding."""
    endless: bool = False
    """After the chunks, send the last one again and again until the client goes away."""
    body_for: Callable[[RecordedRequest], bytes] | None = None
    """Builds the body (one chunk) from the request, in place of :attr:`chunks`."""


@attrs.frozen(kw_only=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    """Lower-case header names."""
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


def sse_chunk(data: Any, event: str | None = None) -> bytes:
    """One SSE frame: ``event:`` (optional) and ``data:`` with ``data`` as compact JSON
    (a ``str`` is sent verbatim)."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    prefix = f"event: {event}\n" if event is not None else ""
    return f"{prefix}data: {text}\n\n".encode()


def sse_response(frames: Iterable[Any], **kwargs: Any) -> ScriptedResponse:
    """A 200 ``text/event-stream`` response with one chunk per frame (dicts become JSON)."""
    chunks = [f if isinstance(f, bytes) else sse_chunk(f) for f in frames]
    return ScriptedResponse(chunks=chunks, **kwargs)


def error_response(
    status: int, body: str | dict[str, Any], headers: dict[str, str] | None = None
) -> ScriptedResponse:
    """An error status with a JSON (dict) or plain-text body."""
    is_json = isinstance(body, dict)
    text = json.dumps(body) if is_json else str(body)
    content_type = "application/json" if is_json else "text/plain"
    return ScriptedResponse(
        status=status,
        headers={"content-type": content_type, **(headers or {})},
        chunks=[text.encode()],
    )


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    429: "Too Many Requests",
    500: "Internal Server Error",
}


class SseServer:
    """The server. Start it with ``await nursery.start(server.serve)``."""

    def __init__(self) -> None:
        self.port = 0
        self.requests: list[RecordedRequest] = []
        """Every request received, in order."""
        self.client_closed = trio.Event()
        """Set when a client closed a connection the server was still writing or holding."""
        self.closed_by_client = 0
        """How many connections the client closed early."""
        self.keep_alive = False
        """Serve several requests per connection (HTTP/1.1 keep-alive) when true."""
        self.connections = 0
        """How many TCP connections clients opened."""
        self._responses: deque[ScriptedResponse] = deque()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def enqueue(self, *responses: ScriptedResponse) -> None:
        """Answer the next requests with ``responses``, in order."""
        self._responses.extend(responses)

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on a free loopback port and serve until cancelled."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    # -- connection handling -----------------------------------------------------------

    async def _handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        try:
            while True:
                request = await _read_request(stream)
                if request is None:
                    return
                self.requests.append(request)
                response = (
                    self._responses.popleft()
                    if self._responses
                    else error_response(500, "no scripted response")
                )
                if response.body_for is not None:
                    response = attrs.evolve(response, chunks=[response.body_for(request)])
                keep = self.keep_alive and not (
                    response.close_early or response.hang or response.endless
                )
                await self._send(stream, response, keep_alive=keep)
                if not keep:
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._record_close()
        finally:
            with trio.move_on_after(1, shield=True):
                await stream.aclose()

    def _record_close(self) -> None:
        self.closed_by_client += 1
        self.client_closed.set()

    async def _send(
        self, stream: trio.SocketStream, response: ScriptedResponse, *, keep_alive: bool = False
    ) -> None:
        reason = _REASONS.get(response.status, "Status")
        head = [f"HTTP/1.1 {response.status} {reason}"]
        head += [f"{name}: {value}" for name, value in response.headers.items()]
        if response.content_length:
            head.append(f"content-length: {sum(len(chunk) for chunk in response.chunks)}")
        else:
            head.append("transfer-encoding: chunked")
        head += [f"connection: {'keep-alive' if keep_alive else 'close'}", "", ""]
        await stream.send_all("\r\n".join(head).encode())
        for position, chunk in enumerate(response.chunks):
            if position and response.pause:
                await trio.sleep(response.pause)
            if response.content_length:
                await stream.send_all(chunk)
            else:
                await stream.send_all(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        if response.close_early:
            return
        if response.endless:
            last = b"%x\r\n%s\r\n" % (len(response.chunks[-1]), response.chunks[-1])
            while True:
                await stream.send_all(last)
        if response.hang:
            # Wait for the client to go away: EOF or a reset both count as a close.
            while await stream.receive_some(65536):
                pass
            self._record_close()
            return
        if not response.content_length:
            await stream.send_all(b"0\r\n\r\n")


async def _read_request(stream: trio.SocketStream) -> RecordedRequest | None:
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        data = await stream.receive_some(65536)
        if not data:
            break
        rest += data
    return RecordedRequest(method=method, path=path, headers=headers, body=rest[:length])


async def start_sse_server(nursery: trio.Nursery) -> SseServer:
    """Start an :class:`SseServer` in ``nursery`` and return it once it listens."""
    server = SseServer()
    await nursery.start(partial(server.serve))
    return server
