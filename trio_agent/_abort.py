"""Abort signals: upstream's ``AbortController``/``AbortSignal`` on Trio.

A run's abort is a cancel scope; the signal is the object hooks, tools, listeners
and stream functions receive so upstream-style code can poll ``aborted`` or ``await
signal.wait()``. :func:`open_abort_scope` links a signal to a cancel scope.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import trio

__all__ = [
    "OPERATION_ABORTED",
    "REQUEST_ABORTED",
    "AbortController",
    "AbortSignal",
    "open_abort_scope",
]

REQUEST_ABORTED = "Request was aborted"
"""The error text of a provider request that an abort ended (as pi words it)."""
OPERATION_ABORTED = "Operation aborted"
"""The error text of an operation (a tool call, a turn before its request) an abort ended."""


class AbortSignal:
    """Tells whether an operation was aborted. Created by :class:`AbortController`.

    Not constructed by users. ``aborted`` and ``reason`` are plain attributes reads;
    :meth:`wait` blocks until the abort happens.
    """

    __slots__ = ("_aborted", "_callbacks", "_event", "_reason")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: Any = None
        self._event: trio.Event | None = None
        self._callbacks: list[Callable[[], object]] = []

    @property
    def aborted(self) -> bool:
        """True once :meth:`AbortController.abort` was called."""
        return self._aborted

    @property
    def reason(self) -> Any:
        """The reason given to :meth:`AbortController.abort` (``None`` if none was given)."""
        return self._reason

    async def wait(self) -> None:
        """Block until the signal is aborted. A checkpoint, also when already aborted."""
        if self._aborted:
            await trio.lowlevel.checkpoint()
            return
        if self._event is None:
            self._event = trio.Event()
        await self._event.wait()

    def add_abort_callback(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback()`` (synchronously) when the signal is aborted.

        If it is already aborted, ``callback`` runs now. Returns a function that removes
        the callback; calling it twice is harmless.
        """
        if self._aborted:
            callback()
            return lambda: None
        self._callbacks.append(callback)

        def remove() -> None:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

        return remove

    def _abort(self, reason: Any) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        if self._event is not None:
            self._event.set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def __repr__(self) -> str:
        return f"<AbortSignal aborted={self._aborted} reason={self._reason!r}>"


class AbortController:
    """Owns an :class:`AbortSignal`; :meth:`abort` aborts it.

    ``abort()`` is synchronous and idempotent: the first call wins and fixes ``reason``.
    """

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()
        """The signal this controller aborts."""

    def abort(self, reason: Any = None) -> None:
        """Abort the signal, run its callbacks and wake its waiters."""
        self.signal._abort(reason)

    def __repr__(self) -> str:
        return f"<AbortController signal={self.signal!r}>"


@contextmanager
def open_abort_scope(signal: AbortSignal | None) -> Iterator[trio.CancelScope]:
    """A cancel scope that is cancelled as soon as ``signal`` is aborted.

    With ``signal=None`` it is a plain cancel scope. Check ``scope.cancelled_caught``
    afterwards to learn whether the abort interrupted the block.
    """
    with trio.CancelScope() as scope:
        if signal is None:
            yield scope
            return
        remove = signal.add_abort_callback(
            lambda: scope.cancel(reason=f"aborted: {signal.reason!r}")
        )
        try:
            yield scope
        finally:
            remove()
