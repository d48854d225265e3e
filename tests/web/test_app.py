"""The ASGI app with httpx: through httpx's ASGITransport (which runs on Trio, but
buffers a response whole) and, for streaming, disconnects and steering, against Hypercorn's
Trio worker on 127.0.0.1."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import trio
import trio.testing

from trio_agent import Agent, AgentEvent, UserMessage, content_text
from trio_agent.models import FauxProvider, faux_assistant_message, faux_tool_call
from trio_agent.web import MemorySessions, agui_messages, create_app, open_agent_host
from trio_agent.web._host import SLOW_SUBSCRIBER_SECONDS

from ._agui_grammar import check_agui_stream
from ._sse_client import open_sse
from .conftest import faux_factory, running_server

_LONG = "word " * 200


async def test_asgi_transport_runs_on_trio() -> None:
    provider = FauxProvider([faux_assistant_message("Hi from the app.")])
    async with open_agent_host(faux_factory(provider)) as host:
        transport = httpx.ASGITransport(app=create_app(host))
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            assert (await client.get("/api/sessions")).json() == {"sessions": []}
            session_id = (await client.post("/api/sessions")).json()["id"]
            assert (await client.get("/api/sessions/nope")).status_code == 404
            assert (
                await client.post("/api/sessions/nope/runs", json={"prompt": "x"})
            ).status_code == 404
            assert (
                await client.post(f"/api/sessions/{session_id}/runs", json={})
            ).status_code == 400
            steer = await client.post(f"/api/sessions/{session_id}/steer", json={"text": "x"})
            assert steer.status_code == 409
            abort = await client.post(f"/api/sessions/{session_id}/abort")
            assert abort.json() == {"aborted": False}
            response = await client.post(
                f"/api/sessions/{session_id}/runs", json={"prompt": "Hello"}
            )
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = [
                httpx_json(line) for line in response.text.splitlines() if line.startswith("data: ")
            ]
            check_agui_stream(events)
            text = "".join(
                e["delta"]
                for e in events
                if e["type"] == "TEXT_MESSAGE_CONTENT" and e["messageId"].endswith(":2")
            )
            assert text == "Hi from the app."
            transcript = (await client.get(f"/api/sessions/{session_id}")).json()
            assert transcript["running"] is False
            assert [m["role"] for m in transcript["messages"]] == ["user", "assistant"]
            sessions = (await client.get("/api/sessions")).json()["sessions"]
            assert [(s["id"], s["title"], s["running"]) for s in sessions] == [
                (session_id, "Hello", False)
            ]
            page = await client.get("/")
            assert '<textarea id="prompt"' in page.text
            assert (await client.get("/static/chat.js")).status_code == 200


def httpx_json(line: str) -> dict[str, Any]:
    import json

    value: dict[str, Any] = json.loads(line[6:])
    return value


async def test_ag_ui_run_agent_input_is_accepted() -> None:
    provider = FauxProvider([faux_assistant_message("ok")])
    async with open_agent_host(faux_factory(provider)) as host:
        transport = httpx.ASGITransport(app=create_app(host, ui=False))
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            assert (await client.get("/")).status_code == 404
            session_id = (await client.post("/api/sessions")).json()["id"]
            body = {
                "threadId": session_id,
                "runId": "r1",
                "state": {},
                "messages": [{"id": "u1", "role": "user", "content": "from AG-UI"}],
                "tools": [],
                "context": [],
                "forwardedProps": {},
            }
            response = await client.post(f"/api/sessions/{session_id}/runs", json=body)
            assert response.status_code == 200
            messages = await host.messages(session_id)
            assert agui_messages(session_id, messages)[0]["content"] == "from AG-UI"


async def test_events_stream_as_they_happen_and_steering() -> None:
    provider = FauxProvider(tokens_per_second=400)
    provider.set_responses(
        [
            faux_assistant_message(
                [faux_tool_call("pause", {"seconds": 1.5}, id="c1")], stop_reason="toolUse"
            ),
            faux_assistant_message("after steering: " + "x " * 20),
        ]
    )
    async with running_server(provider) as server:
        session_id = await server.new_session()
        seen: list[dict[str, Any]] = []
        async with open_sse(
            server.url, f"/api/sessions/{session_id}/runs", {"prompt": "go"}
        ) as response:
            while (event := await response.next_event()) is not None:
                seen.append(event)
                if event["type"] == "TOOL_CALL_START":
                    # The run is going on while we read: steer it, and a second run is refused.
                    steer = await server.client.post(
                        f"/api/sessions/{session_id}/steer", json={"text": "and also"}
                    )
                    assert steer.status_code == 202
                    busy = await server.client.post(
                        f"/api/sessions/{session_id}/runs", json={"prompt": "again"}
                    )
                    assert busy.status_code == 409
                    listed = (await server.client.get("/api/sessions")).json()["sessions"]
                    assert listed[0]["running"] is True
        check_agui_stream(seen)
        users = [
            e["messageId"]
            for e in seen
            if e["type"] == "TEXT_MESSAGE_START" and e["role"] == "user"
        ]
        assert len(users) == 2
        messages = (await server.client.get(f"/api/sessions/{session_id}")).json()["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user", "assistant"]
        assert messages[3]["content"] == "and also"


async def test_disconnect_aborts_the_run() -> None:
    provider = FauxProvider([faux_assistant_message(_LONG)], tokens_per_second=100)
    async with running_server(provider) as server:
        session_id = await server.new_session()
        async with open_sse(
            server.url, f"/api/sessions/{session_id}/runs", {"prompt": "go"}
        ) as response:
            while (event := await response.next_event()) is not None:
                if event["type"] == "TEXT_MESSAGE_CONTENT" and event["messageId"].endswith(":2"):
                    break  # leaving the block closes the connection
        with trio.fail_after(5):
            await server.host.wait_idle(session_id)
        messages = await server.host.messages(session_id)
        assert messages[-1].role == "assistant"
        assert messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]


async def test_disconnect_can_let_the_run_finish() -> None:
    provider = FauxProvider([faux_assistant_message(_LONG)], tokens_per_second=2000)
    async with running_server(provider, on_disconnect="continue") as server:
        session_id = await server.new_session()
        async with open_sse(
            server.url, f"/api/sessions/{session_id}/runs", {"prompt": "go"}
        ) as response:
            while (event := await response.next_event()) is not None:
                if event["type"] == "TEXT_MESSAGE_CONTENT" and event["messageId"].endswith(":2"):
                    break
        with trio.fail_after(10):
            await server.host.wait_idle(session_id)
        messages = await server.host.messages(session_id)
        assert messages[-1].stop_reason == "stop"  # type: ignore[union-attr]


async def test_abort_endpoint_and_attach() -> None:
    provider = FauxProvider([faux_assistant_message(_LONG)], tokens_per_second=100)
    async with running_server(provider) as server:
        session_id = await server.new_session()
        assert (
            await server.client.get(f"/api/sessions/{session_id}/runs/current")
        ).status_code == 204
        async with open_sse(
            server.url, f"/api/sessions/{session_id}/runs", {"prompt": "go"}
        ) as response:
            kinds: list[str] = []
            while (event := await response.next_event()) is not None:
                kinds.append(event["type"])
                if event["type"] == "TEXT_MESSAGE_CONTENT" and event["messageId"].endswith(":2"):
                    break
            # A second client attaches to the same run, then stops it.
            async with open_sse(server.url, f"/api/sessions/{session_id}/runs/current") as watcher:
                watched: list[dict[str, Any]] = []
                while (event := await watcher.next_event()) is not None:
                    watched.append(event)
                    if len(watched) == 3:
                        stop = await server.client.post(f"/api/sessions/{session_id}/abort")
                        assert stop.json() == {"aborted": True}
                assert watched[0]["type"] == "RUN_STARTED"
                assert watched[-1]["type"] == "RUN_FINISHED"
                assert watched[-1]["outcome"] == {"type": "cancelled"}
            while (event := await response.next_event()) is not None:
                kinds.append(event["type"])
        assert kinds[-1] == "RUN_FINISHED"


async def test_closing_the_host_aborts_its_runs() -> None:
    provider = FauxProvider([faux_assistant_message(_LONG)], tokens_per_second=50)
    async with open_agent_host(faux_factory(provider)) as host:
        session_id = await host.create_session()
        stream = await host.start_run(session_id, "go")
        async with stream:
            first = await stream.events.receive()
            assert first["type"] == "RUN_STARTED"
    # The block waited for the run: it ended aborted, and no task is left.
    messages = await host.messages(session_id)
    assert messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]
    assert not host.is_running(session_id)


async def test_steering_that_arrives_after_the_last_poll_is_not_left_queued() -> None:
    provider = FauxProvider(
        [faux_assistant_message("First."), faux_assistant_message("Then the late one.")]
    )

    def make(session_id: str) -> Agent:
        agent = faux_factory(provider)(session_id)

        def late_steer(event: AgentEvent) -> None:
            # As if the page's steer request landed while agent_end was being sent.
            if event.type == "agent_end" and len(agent.state.messages) < 4:
                agent.steer(UserMessage(content="late"))

        agent.subscribe(late_steer)
        return agent

    async with open_agent_host(make) as host:
        session_id = await host.create_session()
        stream = await host.start_run(session_id, "go")
        async with stream:
            events = [event async for event in stream.events]
        check_agui_stream(events)
        assert [e["type"] for e in events].count("RUN_STARTED") == 2
        messages = await host.messages(session_id)
        assert [content_text(m.content) for m in messages[1:]] == [  # type: ignore[union-attr]
            "go",
            "First.",
            "late",
            "Then the late one.",
        ]


async def test_a_failing_store_is_the_runs_error_not_the_hosts() -> None:
    class Broken(MemorySessions):
        @contextlib.asynccontextmanager
        async def open_run(self, session_id: str, agent: Agent) -> AsyncIterator[None]:
            await trio.lowlevel.checkpoint()
            raise OSError("disk full")
            yield  # pragma: no cover

    provider = FauxProvider([faux_assistant_message("never")])
    async with open_agent_host(faux_factory(provider), sessions=Broken()) as host:
        session_id = await host.create_session()
        stream = await host.start_run(session_id, "go")
        async with stream:
            events = [event async for event in stream.events]
        assert events == [
            {"type": "RUN_STARTED", "threadId": session_id, "runId": stream.run_id},
            {"type": "RUN_ERROR", "message": "disk full", "code": "error"},
        ]
        assert not host.is_running(session_id)


async def test_a_watcher_that_leaves_does_not_abort_the_run() -> None:
    # Longer than the starter's buffer: the run waits for it, so the watcher finds it.
    provider = FauxProvider([faux_assistant_message("word " * 200)], tokens_per_second=400)
    async with running_server(provider) as server:
        session_id = await server.new_session()
        stream = await server.host.start_run(session_id, "go")
        async with stream:
            async with open_sse(server.url, f"/api/sessions/{session_id}/runs/current") as watcher:
                assert (await watcher.next_event()) is not None
            # The watcher has gone; the starter reads on to the end.
            events = [event async for event in stream.events]
        assert events[-1]["type"] == "RUN_FINISHED"
        assert events[-1]["outcome"] == {"type": "success"}


async def test_the_ag_ui_endpoint_creates_the_thread_on_first_use() -> None:
    provider = FauxProvider([faux_assistant_message("one"), faux_assistant_message("two")])
    async with open_agent_host(faux_factory(provider)) as host:
        transport = httpx.ASGITransport(app=create_app(host, ui=False))
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            thread = "0190e1c2-7a3b-7c4d-8e5f-000000000001"

            def run_input(text: str) -> dict[str, Any]:
                return {
                    "threadId": thread,
                    "runId": "r",
                    "messages": [{"id": "u", "role": "user", "content": text}],
                    "tools": [],
                    "context": [],
                    "state": {},
                    "forwardedProps": {},
                }

            for text in ("first", "second"):
                response = await client.post("/api/agui", json=run_input(text))
                assert response.status_code == 200
                events = [httpx_json(line) for line in response.text.splitlines() if line]
                check_agui_stream(events)
                assert events[0]["threadId"] == thread
            messages = (await client.get(f"/api/sessions/{thread}")).json()["messages"]
            assert [m.get("content") for m in messages] == ["first", "one", "second", "two"]
            bad = {**run_input("x"), "threadId": "no spaces allowed"}
            assert (await client.post("/api/agui", json=bad)).status_code == 400
            assert (await client.post("/api/agui", json={"threadId": thread})).status_code == 400


async def test_a_subscriber_that_stops_reading_is_dropped_not_waited_for(
    autojump_clock: trio.testing.MockClock,
) -> None:
    provider = FauxProvider([faux_assistant_message("word " * 300)])
    async with open_agent_host(faux_factory(provider)) as host:
        session_id = await host.create_session()
        stream = await host.start_run(session_id, "go")
        async with stream:
            started = trio.current_time()
            await host.wait_idle(session_id)  # while this client reads nothing
            assert trio.current_time() - started >= SLOW_SUBSCRIBER_SECONDS
            received = [event async for event in stream.events]
        assert len(received) == 64  # what its buffer held; then its stream ended
        messages = await host.messages(session_id)
        assert messages[-1].stop_reason == "stop"  # type: ignore[union-attr]


async def test_steering_before_the_runs_agent_exists_is_delivered() -> None:
    provider = FauxProvider([faux_assistant_message("one"), faux_assistant_message("two")])
    async with open_agent_host(faux_factory(provider)) as host:
        session_id = await host.create_session()
        stream = await host.start_run(session_id, "go")
        # The run's task has not started yet: there is no agent to queue on.
        assert host.steer(session_id, "right away")
        async with stream:
            events = [event async for event in stream.events]
        check_agui_stream(events)
        messages = await host.messages(session_id)
        texts = [content_text(m.content) for m in messages[1:]]  # type: ignore[union-attr]
        assert texts == ["go", "right away", "one"]
