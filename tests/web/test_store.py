"""Sessions kept in a trio_agent.sessions store: a run commits its messages as they end,
and a new host (a restarted server, another worker) resumes the session from the store."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio

from trio_agent.models import FauxProvider, faux_assistant_message
from trio_agent.sessions import MemoryStore, open_store
from trio_agent.web import StoreSessions, UnknownSessionError, create_app, open_agent_host

from ._agui_grammar import check_agui_stream
from ._sse_client import open_sse
from .conftest import faux_factory, start_server


async def test_a_new_host_resumes_the_session(tmp_path: Path) -> None:
    provider = FauxProvider(
        [faux_assistant_message("First answer."), faux_assistant_message("Second answer.")]
    )
    url_of_store = f"sqlite:{tmp_path / 'sessions.db'}"
    async with open_store(url_of_store) as store:
        sessions = StoreSessions(store)
        async with open_agent_host(faux_factory(provider), sessions=sessions) as host:
            session_id = await host.create_session()
            stream = await host.start_run(session_id, "Hello")
            async with stream:
                events = [event async for event in stream.events]
            check_agui_stream(events)
        assert [info.title for info in await sessions.list()] == ["Hello"]

    # Another store object on the same file, another host: the session goes on.
    async with (
        open_store(url_of_store) as store,
        open_agent_host(faux_factory(provider), sessions=StoreSessions(store)) as host,
        trio.open_nursery() as nursery,
    ):
        url = await start_server(nursery, host)
        async with httpx.AsyncClient(base_url=url) as http:
            transcript = (await http.get(f"/api/sessions/{session_id}")).json()
            assert [m.get("content") for m in transcript["messages"]] == [
                "Hello",
                "First answer.",
            ]
            async with open_sse(
                url, f"/api/sessions/{session_id}/runs", {"prompt": "Again"}
            ) as response:
                events = await response.read_all()
            check_agui_stream(events)
            # The ids continue the transcript: system, user, assistant, user, assistant.
            assert events[-3]["messageId"] == f"{session_id}:4"
            transcript = (await http.get(f"/api/sessions/{session_id}")).json()
            assert [m.get("content") for m in transcript["messages"]][-2:] == [
                "Again",
                "Second answer.",
            ]
            listed = (await http.get("/api/sessions")).json()["sessions"]
            assert [(s["id"], s["title"]) for s in listed] == [(session_id, "Hello")]
        nursery.cancel_scope.cancel()


async def test_unknown_session() -> None:
    async with MemoryStore() as store:
        sessions = StoreSessions(store)
        with pytest.raises(UnknownSessionError):
            await sessions.messages("nope")
        async with open_agent_host(faux_factory(FauxProvider()), sessions=sessions) as host:
            transport = httpx.ASGITransport(app=create_app(host))
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
                assert (await http.get("/api/sessions/nope")).status_code == 404
                response = await http.post("/api/sessions/nope/runs", json={"prompt": "x"})
                assert response.status_code == 404
