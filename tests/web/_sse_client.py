"""A small SSE client on a Trio TCP stream and h11, for tests and the load benchmark.

httpx's line iterators are async generators nested three deep, which a test cannot close
when it stops reading early; this client holds no generator, and closing it closes the
connection (which is what a browser tab that goes away does).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import h11
import trio


class SseClient:
    def __init__(self, stream: trio.SocketStream, connection: h11.Connection) -> None:
        self._stream = stream
        self._connection = connection
        self._buffer = b""
        self._ended = False
        self.status = 0

    async def _next_h11_event(self) -> Any:
        while True:
            event = self._connection.next_event()
            if event is h11.NEED_DATA:
                data = await self._stream.receive_some(65536)
                self._connection.receive_data(data)
                continue
            return event

    async def _start(self) -> None:
        event = await self._next_h11_event()
        assert isinstance(event, h11.Response), event
        self.status = event.status_code

    async def next_event(self) -> dict[str, Any] | None:
        """The next ``data:`` event, or ``None`` at the end of the response."""
        while True:
            end = self._buffer.find(b"\n\n")
            if end >= 0:
                block, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
                for line in block.split(b"\n"):
                    if line.startswith(b"data: "):
                        value: dict[str, Any] = json.loads(line[6:])
                        return value
                continue
            if self._ended:
                return None
            event = await self._next_h11_event()
            if isinstance(event, h11.Data):
                self._buffer += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                self._ended = True

    async def read_all(self) -> list[dict[str, Any]]:
        events = []
        while (event := await self.next_event()) is not None:
            events.append(event)
        return events


@contextlib.asynccontextmanager
async def open_sse(
    base_url: str, path: str, body: dict[str, Any] | None = None
) -> AsyncIterator[SseClient]:
    """POST ``body`` (or GET without one) and read the SSE response; closing the block
    closes the connection."""
    parts = urlsplit(base_url)
    assert parts.hostname is not None and parts.port is not None
    stream = await trio.open_tcp_stream(parts.hostname, parts.port)
    async with stream:
        connection = h11.Connection(h11.CLIENT)
        data = json.dumps(body).encode() if body is not None else b""
        headers = [("host", parts.netloc), ("accept", "text/event-stream")]
        if body is not None:
            headers += [("content-type", "application/json"), ("content-length", str(len(data)))]
        request = h11.Request(
            method="POST" if body is not None else "GET", target=path, headers=headers
        )
        await stream.send_all(connection.send(request) or b"")
        if data:
            await stream.send_all(connection.send(h11.Data(data=data)) or b"")
        await stream.send_all(connection.send(h11.EndOfMessage()) or b"")
        client = SseClient(stream, connection)
        await client._start()
        yield client
