"""A worker of the many-processes SQLite test: appends as fast as it can."""

from __future__ import annotations

import traceback
from typing import Any

import trio

from trio_agent import UserMessage
from trio_agent.sessions import SessionBusyError, open_store

ROUNDS = 40


async def run(url: str, worker: int, go: Any, results: Any) -> None:
    busy = claimed = 0
    async with open_store(url, holder=f"writer-{worker}") as store:
        own = await store.create(session_id=f"own-{worker}")
        shared = await store.open("shared")
        await trio.to_thread.run_sync(go.wait)
        for n in range(ROUNDS):
            await own.append_messages(
                [UserMessage(content=f"{worker}.{n}.{k}", timestamp=1) for k in range(3)]
            )
            await shared.append_message(UserMessage(content=f"{worker}.{n}", timestamp=1))
            try:
                async with store.open_for_writing("contended") as session:
                    await session.append_message(UserMessage(content=f"{worker}", timestamp=1))
                    claimed += 1
            except SessionBusyError:
                busy += 1
    results.put((worker, claimed, busy, None))


def main(url: str, worker: int, go: Any, results: Any) -> None:
    try:
        trio.run(run, url, worker, go, results)
    except BaseException:
        results.put((worker, 0, 0, traceback.format_exc()))
        raise
