"""Record events and assert their sequence.

:class:`EventRecorder` is a listener for :meth:`Agent.subscribe
<trio_agent.Agent.subscribe>` and an ``emit`` sink for the low-level loop;
:func:`assert_event_types` compares a recorded sequence of event types with the expected
one and explains the difference.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from typing import Any

import trio

from .._abort import AbortSignal

__all__ = ["EventRecorder", "assert_event_types", "event_types"]


class EventRecorder:
    """Stores every event it is called with, in order.

    Usable as ``agent.subscribe(recorder)`` (it takes ``(event, signal)``), as the
    ``emit`` argument of :func:`trio_agent.loop.run_agent_loop`, or anywhere an async
    ``(event)`` callback is expected. Iterating a recorder iterates its events.
    """

    def __init__(self) -> None:
        self.events: list[Any] = []
        """The recorded events, oldest first."""
        self.signals: list[AbortSignal | None] = []
        """The signal passed with each event (``None`` when none was passed)."""

    async def __call__(self, event: Any, signal: AbortSignal | None = None) -> None:
        """Record ``event``; then a checkpoint, as every Trio async function.

        The event is recorded before the checkpoint, so an event is never lost to a
        cancellation of the caller.
        """
        self.events.append(event)
        self.signals.append(signal)
        await trio.lowlevel.checkpoint()

    @property
    def types(self) -> list[str]:
        """The ``type`` of each recorded event, in order."""
        return event_types(self.events)

    def of_type(self, type_: str) -> list[Any]:
        """The recorded events whose ``type`` is ``type_``, in order."""
        return [event for event in self.events if event.type == type_]

    def clear(self) -> None:
        """Forget every recorded event."""
        self.events.clear()
        self.signals.clear()

    def __iter__(self) -> Iterator[Any]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def __repr__(self) -> str:
        return f"<EventRecorder {len(self.events)} events>"


def event_types(events: Iterable[Any]) -> list[str]:
    """The ``type`` string of each event, in order.

    Items may be events (anything with a ``type`` attribute, e.g. an
    :class:`EventRecorder`'s events) or already type strings.

    Raises:
        TypeError: if an item is neither a string nor has a ``type`` attribute.
    """
    types: list[str] = []
    for item in events:
        if isinstance(item, str):
            types.append(item)
            continue
        kind = getattr(item, "type", None)
        if not isinstance(kind, str):
            raise TypeError(f"not an event (no string 'type' attribute): {item!r}")
        types.append(kind)
    return types


def assert_event_types(events: Iterable[Any], expected: list[str]) -> None:
    """Assert that the types of ``events`` are exactly ``expected``, in order.

    Args:
        events: Events, type strings, or an :class:`EventRecorder`.
        expected: The expected ``type`` strings.

    Raises:
        AssertionError: if they differ. The message gives both lengths, the first
            differing index and a line diff (``-`` expected only, ``+`` actual only).
    """
    actual = event_types(events)
    if actual == expected:
        return
    index = next(
        (i for i, (want, got) in enumerate(zip(expected, actual, strict=False)) if want != got),
        min(len(expected), len(actual)),
    )
    want = repr(expected[index]) if index < len(expected) else "nothing"
    got = repr(actual[index]) if index < len(actual) else "nothing"
    lines = [
        f"event types differ (expected {len(expected)}, got {len(actual)}); "
        f"first difference at index {index}: expected {want}, got {got}",
        "diff (- expected, + actual):",
    ]
    lines.extend(
        f"  {line}" for line in difflib.ndiff(expected, actual) if not line.startswith("?")
    )
    raise AssertionError("\n".join(lines))
