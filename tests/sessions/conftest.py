"""Stores for the session tests: one factory per built-in backend."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from trio_agent.sessions import SessionStore, StoreFactory, open_store

_counter = itertools.count()


@pytest.fixture(params=["memory", "jsonl", "sqlite"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    kind = request.param

    @contextlib.asynccontextmanager
    async def factory(**options: Any) -> AsyncIterator[SessionStore]:
        n = next(_counter)
        url = {
            "memory": "memory:",
            "jsonl": f"jsonl:{tmp_path / f'sessions-{n}'}",
            "sqlite": f"sqlite:{tmp_path / f'sessions-{n}.db'}",
        }[kind]
        async with open_store(url, **options) as store:
            yield store

    return factory
