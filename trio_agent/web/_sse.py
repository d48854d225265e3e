"""Server-Sent Events: the framing, and an ASGI response that streams a run.

:class:`EventStreamResponse` is written against the ASGI interface directly rather than
Starlette's ``StreamingResponse``: it watches the client's ``http.disconnect`` in a
nursery of its own (no async generator is suspended inside a cancel scope), and tells
its caller when the client went away so the run can be aborted.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import attrs
import trio

__all__ = ["KEEPALIVE_SECONDS", "EventStreamResponse", "sse_event"]

KEEPALIVE_SECONDS = 15.0
"""A comment line is sent after this long without an event, so that proxies keep the
connection and a vanished client is noticed."""

_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def sse_event(data: dict[str, Any]) -> bytes:
    """One SSE event: ``data: <compact JSON>`` and a blank line (JSON has no newline)."""
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


@attrs.define(eq=False)
class EventStreamResponse:
    """An ASGI response streaming ``events`` as SSE until the channel ends."""

    events: trio.MemoryReceiveChannel[dict[str, Any]]
    """The events to send; the response ends when the channel is closed."""
    on_disconnect: Callable[[], None]
    """Called (once) when the client disconnects before the end."""
    first: list[dict[str, Any]] = attrs.Factory(list)
    """Events sent before the channel's (a snapshot, say)."""
    keepalive_seconds: float = KEEPALIVE_SECONDS
    """Seconds of silence after which a comment line keeps the connection alive."""

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        disconnected = False
        async with self.events:
            try:
                await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
                async with trio.open_nursery() as nursery:

                    async def watch() -> None:
                        nonlocal disconnected
                        while (await receive())["type"] != "http.disconnect":
                            pass
                        disconnected = True
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(watch)
                    for event in self.first:
                        await self._body(send, sse_event(event))
                    await self._stream(send)
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    nursery.cancel_scope.cancel()
            except OSError:
                disconnected = True  # the server could not write: the client has gone
            finally:
                if disconnected:
                    self.on_disconnect()

    async def _stream(self, send: Callable[[MutableMapping[str, Any]], Awaitable[None]]) -> None:
        while True:
            with trio.move_on_after(self.keepalive_seconds) as idle:
                try:
                    event = await self.events.receive()
                except trio.EndOfChannel:
                    return
            if idle.cancelled_caught:
                await self._body(send, b": keepalive\n\n")
            else:
                await self._body(send, sse_event(event))

    @staticmethod
    async def _body(
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]], body: bytes
    ) -> None:
        await send({"type": "http.response.body", "body": body, "more_body": True})
