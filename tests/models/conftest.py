"""Fixtures for provider tests: a scripted loopback HTTP server and a real httpx client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import trio
from sse_server import SseServer, start_sse_server


@pytest.fixture
async def sse_server(nursery: trio.Nursery) -> SseServer:
    """A running :class:`~sse_server.SseServer` (stopped with the test's nursery)."""
    return await start_sse_server(nursery)


@pytest.fixture
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    """A real ``httpx.AsyncClient`` (closed after the test)."""
    async with httpx.AsyncClient() as client:
        yield client
