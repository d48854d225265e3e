"""Where a run's events go: the sink protocol and its adapters.

The loop hands each event to a sink in the shape of trio's ``MemorySendChannel``
(``send_nowait``, then ``await send`` only when it raises ``trio.WouldBlock``). A callable
``emit(event)`` and a memory channel are adapted here; the close policy for each is
stated before its code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

import trio

from ._events import AgentEvent

__all__ = ["AgentEventSink", "AnySink", "ChannelSink", "as_sink"]


@runtime_checkable
class AgentEventSink(Protocol):
    """Where a run's events go, in the shape of trio's ``MemorySendChannel``.

    The loop hands every event to ``send_nowait``; only when that raises
    ``trio.WouldBlock`` (the event needs awaiting: an ``async def`` listener, a full
    channel) does it ``await send(event)``, shielded from the run's abort. Either way the
    loop does not go on until the event was handled, and it never calls the sink
    concurrently. An exception from either method fails the run (see the guide,
    "Failures"). A ``trio.MemorySendChannel`` is a sink; so is any callable ``emit(event)``
    (a plain function or ``async def``), which the loop adapts.
    """

    def send_nowait(self, event: AgentEvent) -> None:
        """Handle ``event`` now, or raise ``trio.WouldBlock`` to have it awaited."""

    async def send(self, event: AgentEvent) -> None:
        """Handle ``event``, finishing what ``send_nowait`` started for it, if anything."""


class _CallableSink:
    """A sink for an ``emit(event)`` callable that may return an awaitable."""

    __slots__ = ("_emit", "_pending")

    def __init__(self, emit: Callable[[AgentEvent], Awaitable[None] | None]) -> None:
        self._emit = emit
        self._pending: Awaitable[None] | None = None

    def send_nowait(self, event: AgentEvent) -> None:
        value = self._emit(event)
        if value is not None:
            self._pending = value
            raise trio.WouldBlock

    async def send(self, event: AgentEvent) -> None:
        value, self._pending = self._pending, None
        if value is None:
            value = self._emit(event)
        if value is not None:
            await value


AnySink = AgentEventSink | Callable[[AgentEvent], Awaitable[None] | None]
"""What the loop accepts as ``emit``: a sink, or a callable it adapts."""


def as_sink(emit: AnySink) -> AgentEventSink:
    # Duck typing rather than isinstance() against the runtime-checkable protocol, which
    # costs tens of microseconds per run.
    if hasattr(emit, "send_nowait") and hasattr(emit, "send"):
        return emit
    if not callable(emit):
        raise TypeError(f"emit must be an AgentEventSink or a callable, got {emit!r}")
    return _CallableSink(emit)


class ChannelSink:
    """A memory channel's send side whose consumer may leave early."""

    __slots__ = ("_send",)

    def __init__(self, send: trio.MemorySendChannel[AgentEvent]) -> None:
        self._send = send

    def send_nowait(self, event: AgentEvent) -> None:
        try:
            self._send.send_nowait(event)
        except trio.BrokenResourceError:
            pass  # the consumer left the block: the closing events have nobody to go to

    async def send(self, event: AgentEvent) -> None:
        try:
            await self._send.send(event)
        except trio.BrokenResourceError:
            pass
