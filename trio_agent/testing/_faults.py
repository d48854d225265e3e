"""Fault injection at a chosen event: raise, abort, or cancel the caller.

A :class:`FaultInjector` is a listener (``agent.subscribe(injector)``) and an ``emit``
sink for the low-level loop (``run_agent_loop(..., emit=injector)``). It records every
event it sees and, at the first event that matches its trigger, performs its action once:
:func:`raise_at` raises an exception from the listener, :func:`abort_at` aborts the run
(``agent.abort()`` or an :class:`~trio_agent.AbortController`), :func:`cancel_at` cancels
a :class:`trio.CancelScope` of the caller. The project's own property tests inject their
faults with these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeAlias

import trio

from .._abort import AbortSignal

__all__ = [
    "EventTrigger",
    "FaultInjector",
    "abort_at",
    "cancel_at",
    "raise_at",
]

EventTrigger: TypeAlias = "int | str | Callable[[Any], bool]"
"""When a fault fires: an event index (0-based, counting every event the injector sees),
an event type (its first event of that type), or a predicate called with each event, in
order, until it returns true."""


class _Abortable(Protocol):
    def abort(self) -> Any: ...


class FaultInjector:
    """Records events and performs ``action`` once, at the first event ``when`` matches.

    Call it like a listener: ``(event)`` or ``(event, signal)``. It is a plain function
    (never a checkpoint), so it adds no scheduling point to the run, and an exception its
    action raises reaches the run exactly as a failing listener's or sink's does.

    Args:
        when: The :data:`EventTrigger`.
        action: Called with the matching event; what it raises propagates.
        description: Shown in the repr (e.g. ``"abort"``).
    """

    def __init__(
        self, when: EventTrigger, action: Callable[[Any], None], *, description: str = "fault"
    ) -> None:
        if isinstance(when, bool) or (not isinstance(when, int | str) and not callable(when)):
            raise TypeError(f"when must be an index, an event type or a predicate, not {when!r}")
        self.when = when
        """The trigger."""
        self.events: list[Any] = []
        """Every event seen, oldest first (including the one the fault fired at)."""
        self.fired_at: int | None = None
        """The index of the event the fault fired at (``None`` while it has not fired)."""
        self.armed = True
        """Whether the fault can still fire; :meth:`disarm` clears it."""
        self._action = action
        self._description = description

    @property
    def fired(self) -> bool:
        """Whether the fault has fired."""
        return self.fired_at is not None

    @property
    def types(self) -> list[str]:
        """The ``type`` of each event seen, in order."""
        return [event.type for event in self.events]

    def disarm(self) -> None:
        """Never fire (from now on)."""
        self.armed = False

    def __call__(self, event: Any, signal: AbortSignal | None = None) -> None:
        """Record ``event``; fire if it is the chosen one."""
        index = len(self.events)
        self.events.append(event)
        if not self.armed or not self._matches(index, event):
            return
        self.armed = False
        self.fired_at = index
        self._action(event)

    def _matches(self, index: int, event: Any) -> bool:
        when = self.when
        if isinstance(when, int):
            return index == when
        if isinstance(when, str):
            return bool(event.type == when)
        return bool(when(event))

    def __iter__(self) -> Iterator[Any]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def __repr__(self) -> str:
        state = f"fired at {self.fired_at}" if self.fired else "armed" if self.armed else "off"
        return f"<FaultInjector {self._description} when={self.when!r} {state}>"


def raise_at(when: EventTrigger, error: BaseException | type[BaseException]) -> FaultInjector:
    """A listener that raises ``error`` at the chosen event.

    An ``Exception`` fails the run as a failing listener does (the failure message closes
    it); a ``BaseException`` such as ``KeyboardInterrupt`` closes the run and propagates
    from ``prompt()`` / the loop call.

    Args:
        when: The :data:`EventTrigger`.
        error: An exception instance, or a class (instantiated with the message
            ``"injected fault"``).
    """

    def action(event: Any) -> None:
        raise error("injected fault") if isinstance(error, type) else error

    return FaultInjector(when, action, description=f"raise {error!r}")


def abort_at(when: EventTrigger, target: _Abortable) -> FaultInjector:
    """A listener that aborts the run at the chosen event.

    Args:
        when: The :data:`EventTrigger`.
        target: What to abort: an :class:`~trio_agent.Agent` (``agent.abort()``) or the
            :class:`~trio_agent.AbortController` whose signal a loop run was given.
    """

    def action(event: Any) -> None:
        target.abort()

    return FaultInjector(when, action, description="abort")


def cancel_at(when: EventTrigger, scope: trio.CancelScope) -> FaultInjector:
    """A listener that cancels ``scope`` (the caller's scope) at the chosen event.

    The run then closes like an abort and ``prompt()`` / the loop call raises
    ``trio.Cancelled``, which ``scope`` catches::

        scope = trio.CancelScope()
        agent.subscribe(cancel_at(5, scope))
        with scope:
            await agent.prompt("go")
        assert scope.cancelled_caught

    Args:
        when: The :data:`EventTrigger`.
        scope: The scope to cancel (it may be entered after the injector is made).
    """

    def action(event: Any) -> None:
        scope.cancel()

    return FaultInjector(when, action, description="cancel")
