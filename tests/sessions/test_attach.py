"""attach_agent(): every message committed at its message_end, the journal, resuming."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from trio_agent import (
    AbortSignal,
    Agent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessage,
    TextContent,
    ToolResultMessage,
    content_text,
)
from trio_agent.serialization import to_dict
from trio_agent.sessions import (
    MessageEntry,
    ModelChangeEntry,
    RunFinishedEntry,
    RunStartedEntry,
    ToolStartedEntry,
    attach_agent,
    open_store,
)
from trio_agent.testing import FauxProvider, faux_assistant_message, faux_tool_call


def make_tool(name: str, *, forever: bool = False) -> AgentTool:
    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        if forever:
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()
        return AgentToolResult(content=[TextContent(text=f"{name} done")])

    return AgentTool(
        name=name,
        label=name,
        description=name,
        parameters={"type": "object", "properties": {}},
        execute=execute,
        replay="safe",
    )


def make_agent(faux: FauxProvider, tools: list[AgentTool]) -> Agent:
    return Agent(
        initial_state=AgentInitialState(
            system_prompt="You are terse.", model=faux.get_model(), tools=tools
        ),
        stream_fn=faux.stream_fn,
    )


def tool_turn_faux(answer: str) -> FauxProvider:
    """A call to ``look`` (id ``c1``), then ``answer``."""
    return FauxProvider(
        [
            faux_assistant_message([faux_tool_call("look", {}, id="c1")], stop_reason="toolUse"),
            faux_assistant_message(answer),
        ]
    )


def wire(messages: list[Any]) -> list[Any]:
    return [to_dict(m) for m in messages]


async def test_a_run_is_committed_with_its_journal(tmp_path: Path) -> None:
    faux = tool_turn_faux("found it")
    agent = make_agent(faux, [make_tool("look")])
    async with open_store(f"sqlite:{tmp_path / 'db'}") as store:
        created = await store.create(session_id="s")
        committed_before_next_event: list[bool] = []

        async def check(event: Any) -> None:
            # Subscribed after attaching: the message is already in the store.
            if event.type == "message_end":
                stored = await store.open("s")
                committed_before_next_event.append(stored.messages()[-1] == event.message)

        async with store.open_for_writing(created.id) as session, attach_agent(agent, session):
            agent.subscribe(check)
            await agent.prompt("find it")
        assert committed_before_next_event == [True] * 4
        stored = await store.open("s")
        assert wire(stored.messages()) == wire(agent.state.messages)
        kinds = [type(e).__name__ for e in stored.entries]
        assert kinds == [
            "ModelChangeEntry",
            "MessageEntry",  # the system message
            "RunStartedEntry",
            "MessageEntry",  # user
            "MessageEntry",  # assistant with the call
            "ToolStartedEntry",
            "MessageEntry",  # tool result
            "MessageEntry",  # final text
            "RunFinishedEntry",
        ]
        started = stored.entries[5]
        assert isinstance(started, ToolStartedEntry)
        assert (started.tool_call_id, started.tool_name, started.replay) == ("c1", "look", "safe")
        finished = stored.entries[-1]
        assert isinstance(finished, RunFinishedEntry) and finished.outcome == "completed"
        run = stored.entries[2]
        assert isinstance(run, RunStartedEntry) and run.run_id == finished.run_id
        model = stored.entries[0]
        assert isinstance(model, ModelChangeEntry)
        assert (model.provider, model.model_id) == (faux.provider, faux.get_model().id)


async def test_a_new_agent_resumes_from_the_session(tmp_path: Path) -> None:
    async with open_store(f"jsonl:{tmp_path}") as store:
        await store.create(session_id="s")
        first = FauxProvider([faux_assistant_message("one")])
        async with store.open_for_writing("s") as session:
            agent = make_agent(first, [])
            async with attach_agent(agent, session):
                await agent.prompt("first")
        second = FauxProvider([faux_assistant_message("two")])
        async with store.open_for_writing("s") as session:
            agent = make_agent(second, [])
            async with attach_agent(agent, session):
                assert [m.role for m in agent.state.messages] == ["system", "user", "assistant"]
                await agent.prompt("second")
        (request,) = second.requests
        roles = [m.role for m in request.context.messages]
        assert roles == ["system", "user", "assistant", "user"]
        stored = await store.open("s")
        assert wire(stored.messages()) == wire(agent.state.messages)
        assert sum(isinstance(e, RunFinishedEntry) for e in stored.entries) == 2


async def test_an_aborted_run_is_committed_and_the_next_prompt_works(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    faux = FauxProvider(
        [
            faux_assistant_message(
                [faux_tool_call("wait", {}, id="c1"), faux_tool_call("wait", {}, id="c2")],
                stop_reason="toolUse",
            ),
            faux_assistant_message("after the abort"),
        ]
    )
    agent = make_agent(faux, [make_tool("wait", forever=True)])
    async with open_store("memory:") as store:
        await store.create(session_id="s")
        async with store.open_for_writing("s") as session, attach_agent(agent, session):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.prompt, "go")
                await trio.sleep(1)
                agent.abort()
            stored = await store.open("s")
            results = [
                content_text(e.message.content)
                for e in stored.entries
                if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
            ]
            assert results == ["Operation aborted"] * 2
            finished = stored.entries[-1]
            assert isinstance(finished, RunFinishedEntry) and finished.outcome == "aborted"
            assert stored.unfinished_run() is None and stored.unanswered_tool_calls() == []
            await agent.prompt("again")
        stored = await store.open("s")
        assert wire(stored.messages()) == wire(agent.state.messages)
        last = stored.messages()[-1]
        assert isinstance(last, AssistantMessage)
        assert content_text(last.content) == "after the abort"


async def test_model_and_thinking_changes_are_entries() -> None:
    faux = FauxProvider([faux_assistant_message("a"), faux_assistant_message("b")])
    agent = make_agent(faux, [])
    async with open_store("memory:") as store2:
        await store2.create(session_id="s")
        async with store2.open_for_writing("s") as session, attach_agent(agent, session):
            await agent.prompt("one")
            agent.state.thinking_level = "high"
            await agent.prompt("two")
        context = (await store2.open("s")).context()
        assert context.thinking_level == "high"
        agent2 = make_agent(FauxProvider([]), [])
        async with store2.open_for_writing("s") as session, attach_agent(agent2, session):
            assert agent2.state.thinking_level == "high"


async def test_a_failed_run_is_committed_and_the_next_prompt_works() -> None:
    faux = tool_turn_faux("fine now")
    agent = make_agent(faux, [make_tool("look")])

    broken = [True]

    def listener(event: Any) -> None:
        if event.type == "tool_execution_end" and broken[0]:
            raise RuntimeError("listener broke")

    async with open_store("memory:") as store:
        await store.create(session_id="s")
        async with store.open_for_writing("s") as session, attach_agent(agent, session):
            agent.subscribe(listener)
            await agent.prompt("go")
            stored = await store.open("s")
            assert wire(stored.messages()) == wire(agent.state.messages)
            failure = stored.messages()[-1]
            assert isinstance(failure, AssistantMessage) and failure.stop_reason == "error"
            assert failure.error_message == "listener broke"
            finished = stored.entries[-1]
            assert isinstance(finished, RunFinishedEntry) and finished.outcome == "failed"
            broken[0] = False
            await agent.prompt("again")
        stored = await store.open("s")
        assert wire(stored.messages()) == wire(agent.state.messages)
        assert content_text(stored.messages()[-1].content) == "fine now"  # type: ignore[union-attr]
