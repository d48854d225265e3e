"""The small shared helpers of trio_agent._util: awaiting hook results, error texts and
trio's exception-group policy."""

from __future__ import annotations

import pytest
import trio

from trio_agent._util import collapse_errors, collapse_exception_group, error_text, maybe_await


async def test_maybe_await_awaits_only_awaitables() -> None:
    async def later() -> int:
        return 2

    plain: int = await maybe_await(1)
    awaited: int = await maybe_await(later())
    assert (plain, awaited) == (1, 2)


@pytest.mark.parametrize(
    ("exc", "text"),
    [
        (ValueError("bad value"), "bad value"),
        (KeyError(), "KeyError"),
        (RuntimeError(""), "RuntimeError"),
    ],
)
def test_error_text_is_the_message_or_the_type(exc: BaseException, text: str) -> None:
    assert error_text(exc) == text


def test_a_single_error_leaves_as_itself_and_several_stay_together() -> None:
    one = ValueError("one")
    assert collapse_exception_group(ExceptionGroup("g", [one])) is one
    two = [ValueError("a"), TypeError("b")]
    group = collapse_exception_group(ExceptionGroup("g", [ExceptionGroup("inner", two)]))
    assert isinstance(group, ExceptionGroup) and list(group.exceptions) == two


def test_cancelled_echoes_are_dropped_beside_a_real_error() -> None:
    error = ValueError("real")

    async def main() -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            try:
                await trio.sleep(1)
            except trio.Cancelled as cancelled:
                assert collapse_errors([cancelled, error]) is error
                assert collapse_errors([cancelled]) is cancelled
                raise

    trio.run(main)
