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
    autojump_clock: trio.testing.MockClock,
) -> None:
    await check(store_factory)
