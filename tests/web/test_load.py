"""Many SSE clients at once against the demo model (the default suite's small version of
``bench/web_load.py``): every client gets its first event, and after they all disconnect
no run, task or connection is left on the server."""

from __future__ import annotations

import statistics
import time

import httpx
import trio
import trio.testing

from trio_agent.web import create_app, demo_factory, open_agent_host

from ._sse_client import open_sse
from .conftest import start_server

CLIENTS = 30


def _task_count() -> int:
    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(
            walk(child) for nursery in task.child_nurseries for child in nursery.child_tasks
        )

    root = trio.lowlevel.current_root_task()
    assert root is not None
    return walk(root)


async def test_many_clients_then_nothing_left() -> None:
    async with (
        open_agent_host(demo_factory(tokens_per_second=5)) as host,
        trio.open_nursery() as server_nursery,
    ):
        url = await start_server(server_nursery, host)
        async with httpx.AsyncClient(base_url=url) as http:
            sessions = [(await http.post("/api/sessions")).json()["id"] for _ in range(CLIENTS)]
        await trio.sleep(0.1)
        baseline = _task_count()

        first_event_ms: list[float] = []
        all_open = trio.Event()
        release = trio.Event()

        async def client(session_id: str) -> None:
            started = time.perf_counter()
            async with open_sse(
                url, f"/api/sessions/{session_id}/runs", {"prompt": "tell me a long story"}
            ) as stream:
                first = await stream.next_event()
                assert first is not None and first["type"] == "RUN_STARTED"
                first_event_ms.append((time.perf_counter() - started) * 1000)
                if len(first_event_ms) == CLIENTS:
                    all_open.set()
                await release.wait()

        with trio.fail_after(30):
            async with trio.open_nursery() as clients:
                for session_id in sessions:
                    clients.start_soon(client, session_id)
                await all_open.wait()
                assert all(host.is_running(session_id) for session_id in sessions)
                release.set()  # every client disconnects: every run is aborted
            for session_id in sessions:
                await host.wait_idle(session_id)
            # The connections' tasks end once they have seen the disconnections.
            await trio.testing.wait_all_tasks_blocked(0.05)
        assert _task_count() == baseline
        assert statistics.median(first_event_ms) < 5_000
        for session_id in sessions:
            messages = await host.messages(session_id)
            assert messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]
        server_nursery.cancel_scope.cancel()


async def test_create_app_with_a_factory_opens_its_host_in_the_lifespan() -> None:
    app = create_app(demo_factory(tokens_per_second=None), ui=False)
    async with trio.open_nursery() as nursery:
        from hypercorn.config import Config
        from hypercorn.trio import serve

        config = Config()
        config.bind = ["127.0.0.1:0"]
        config.accesslog = None
        config.errorlog = None
        urls = await nursery.start(serve, app, config)
        async with httpx.AsyncClient(base_url=urls[0]) as http:
            session_id = (await http.post("/api/sessions")).json()["id"]
            async with open_sse(
                urls[0], f"/api/sessions/{session_id}/runs", {"prompt": "What is 6 * 7?"}
            ) as stream:
                events = await stream.read_all()
            assert events[-1]["type"] == "RUN_FINISHED"
            transcript = (await http.get(f"/api/sessions/{session_id}")).json()
            assert transcript["messages"][-1]["content"] == "6 * 7 = 42."
        nursery.cancel_scope.cancel()
