"""store.steer() / follow_up() on the memory and SQLite stores, whose inboxes poll."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from trio_agent import Agent, AgentInitialState, UserMessage, content_text
from trio_agent.sessions import MessageEntry, SessionNotFoundError, attach_agent, open_store
from trio_agent.testing import FauxProvider, faux_assistant_message


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=1_700_000_000_000)


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory:" if request.param == "memory" else f"sqlite:{tmp_path / 'q.db'}"


async def test_a_steered_message_is_delivered_once(url: str) -> None:
    async with open_store(url) as store:
        await store.create(session_id="s")
        with pytest.raises(SessionNotFoundError):
            await store.steer("nobody", user("hello?"))
        faux = FauxProvider([faux_assistant_message("hello"), faux_assistant_message("ok")])
        agent = Agent(
            initial_state=AgentInitialState(system_prompt="Poll.", model=faux.get_model()),
            stream_fn=faux.stream_fn,
        )
        async with (
            store.open_for_writing("s") as session,
            attach_agent(agent, session),
        ):
            await agent.prompt("hi")
            queue_id = await store.follow_up("s", user("one more thing"))
            async with store.open_inbox(session, agent) as inbox:
                with trio.fail_after(10):
                    await inbox.wait_queued()
                await agent.continue_()
        agent = Agent(
            initial_state=AgentInitialState(model=faux.get_model()), stream_fn=faux.stream_fn
        )
        async with (
            store.open_for_writing("s") as session,
            attach_agent(agent, session),
            store.open_inbox(session, agent) as inbox,
        ):
            await trio.sleep(1.0)
            assert inbox.delivered == 0
        stored = await store.open("s")
        entry = stored.entry(queue_id)
        assert isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage)
        assert content_text(entry.message.content) == "one more thing"
        await store.delete("s")
