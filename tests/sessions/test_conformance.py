"""Every built-in store passes the shipped conformance suite."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio.testing

from trio_agent.sessions import CONFORMANCE_CHECKS, StoreFactory


@pytest.mark.parametrize("check", CONFORMANCE_CHECKS.values(), ids=list(CONFORMANCE_CHECKS))
async def test_conformance(
    check: Callable[[StoreFactory], Awaitable[None]],
    store_factory: StoreFactory,
    mock_clock: trio.testing.MockClock,
) -> None:
    # Not 0: the clock must not jump while a renewal is in a backend's thread.
    mock_clock.autojump_threshold = 0.02
    await check(store_factory)
