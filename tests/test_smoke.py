import trio


async def test_trio_mode(autojump_clock: trio.abc.Clock) -> None:
    await trio.sleep(10)
    assert trio.current_time() == 10
