"""``open_store(url)``: the store named by a URL."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from . import _postgres
from ._store import MemoryStore, SessionStore

__all__ = ["STORE_FACTORIES", "open_store"]


def _memory(rest: str, options: dict[str, Any]) -> SessionStore:
    if rest:
        raise ValueError(f"a memory store takes no path: 'memory:{rest}'")
    return MemoryStore(**options)


def _jsonl(rest: str, options: dict[str, Any]) -> SessionStore:
    from ._jsonl import JsonlStore

    if not rest:
        raise ValueError("a JSONL store needs a directory: 'jsonl:DIR'")
    return JsonlStore(rest, **options)


def _sqlite(rest: str, options: dict[str, Any]) -> SessionStore:
    from ._sqlite import SqliteStore

    if not rest:
        raise ValueError("an SQLite store needs a file: 'sqlite:PATH'")
    return SqliteStore(rest, **options)


STORE_FACTORIES: dict[str, Callable[[str, dict[str, Any]], SessionStore]] = {
    "memory": _memory,
    "jsonl": _jsonl,
    "sqlite": _sqlite,
    **dict.fromkeys(("postgresql", "postgres"), _postgres.store_from_url),
}
"""URL scheme -> ``factory(rest_of_url, options)`` returning a store. A backend adds one
line here (the PostgreSQL one: ``"postgresql"`` and ``"postgres"``; a URL whose rest starts
with ``//`` is passed whole)."""


@contextlib.asynccontextmanager
async def open_store(url: str, **options: Any) -> AsyncIterator[SessionStore]:
    """Open the session store named by ``url`` and close it at the end of the block.

    ``"memory:"`` keeps sessions in this process; ``"jsonl:DIR"`` keeps them as pi's JSONL
    files in a directory (created if missing); ``"sqlite:PATH"`` in an SQLite database
    file (created if missing). ``options`` go to :class:`SessionStore` (``lease_seconds``,
    ``clock``, ``holder``).

    Raises:
        ValueError: an unknown scheme or a URL without its path.
    """
    scheme, sep, rest = url.partition(":")
    factory = STORE_FACTORIES.get(scheme) if sep else None
    if factory is None:
        known = ", ".join(f"{name}:" for name in STORE_FACTORIES)
        raise ValueError(f"unknown session store URL {url!r} (known: {known})")
    store = factory(url if rest.startswith("//") else rest, dict(options))
    async with store:
        yield store
