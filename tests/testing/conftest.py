"""Fixtures of the test-kit tests: the loopback SSE server of the provider tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

# The provider tests' scripted server (tests/models/sse_server.py) is shared, not copied.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from sse_server import SseServer, start_sse_server


@pytest.fixture
async def sse_server(nursery: trio.Nursery) -> SseServer:
    """A running :class:`~sse_server.SseServer` (stopped with the test's nursery)."""
    return await start_sse_server(nursery)
