"""Tool approval: inline (an awaited approver inside the run) and deferred (the run ends,
the decision is a message in the transcript, the next run runs the call exactly once)."""

from __future__ import annotations

import io
from typing import Any

import pytest
import trio
import trio.testing
from agent_helpers import make_agent

from trio_agent import (
    AbortSignal,
    AgentError,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessage,
    TextContent,
    ToolApproval,
    ToolCall,
    ToolResultMessage,
)
from trio_agent.models import FauxProvider, faux_assistant_message, faux_tool_call
from trio_agent.serialization import dump_transcript, load_transcript
from trio_agent.testing import EventRecorder

PARAMS = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def deleting_tool(ran: list[str], needs_approval: Any = True) -> AgentTool:
    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        ran.append(tool_call_id)
        return AgentToolResult(content=[TextContent(text=f"deleted {params['path']}")])

    return AgentTool(
        name="delete",
        label="Delete",
        description="Deletes a file.",
        parameters=PARAMS,
        execute=execute,
        needs_approval=needs_approval,
    )


def asks(*ids: str) -> AssistantMessage:
    return faux_assistant_message(
        [faux_tool_call("delete", {"path": f"/tmp/{i}"}, id=i) for i in ids],
        stop_reason="toolUse",
    )


def seen_by_model(provider: FauxProvider) -> list[list[Any]]:
    """What each request sent: the tool results' texts."""
    return [
        [
            (m.tool_call_id, m.content[0].text)  # type: ignore[union-attr]
            for m in request.context.messages
            if isinstance(m, ToolResultMessage)
        ]
        for request in provider.requests
    ]


# ---------------------------------------------------------------------------------------
# Inline


async def test_an_inline_approver_lets_a_call_run(autojump_clock: trio.testing.MockClock) -> None:
    ran: list[str] = []
    asked: list[str] = []

    async def approve(call: ToolCall, signal: AbortSignal) -> bool:
        asked.append(call.id)
        await trio.sleep(1)  # a person thinking
        return True

    agent, _ = make_agent(
        [asks("a"), faux_assistant_message("done")],
        tools=[deleting_tool(ran)],
        approve_tool_call=approve,
    )
    result = await agent.prompt("clean up")
    assert (asked, ran, result.ending) == (["a"], ["a"], "stop")


async def test_an_inline_denial_is_seen_by_the_model(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []
    agent, faux = make_agent(
        [asks("a"), faux_assistant_message("ok, I won't")],
        tools=[deleting_tool(ran)],
        approve_tool_call=lambda call, signal: "not that file",
    )
    result = await agent.prompt("clean up")
    assert ran == []
    assert seen_by_model(faux)[-1] == [("a", "Tool call denied: not that file")]
    assert result.ending == "stop"


async def test_only_calls_that_need_approval_are_asked_about(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []
    asked: list[str] = []

    def approve(call: ToolCall, signal: AbortSignal) -> bool:
        asked.append(call.id)
        return False

    tool = deleting_tool(ran, needs_approval=lambda call: call.arguments["path"] == "/tmp/b")
    agent, _ = make_agent(
        [asks("a", "b"), faux_assistant_message("done")], tools=[tool], approve_tool_call=approve
    )
    await agent.prompt("clean up")
    assert (asked, ran) == (["b"], ["a"])


async def test_an_abort_while_waiting_for_an_approver_closes_the_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []

    async def never(call: ToolCall, signal: AbortSignal) -> bool:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    agent, _ = make_agent([asks("a")], tools=[deleting_tool(ran)], approve_tool_call=never)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "clean up")
        await trio.sleep(5)
        agent.abort("nobody answered")
    assert ran == []
    last = agent.state.messages[-1]
    assert isinstance(last, ToolResultMessage)
    assert (last.is_error, last.content) == (True, [TextContent(text="Operation aborted")])
    assert not agent.state.is_streaming


# ---------------------------------------------------------------------------------------
# Deferred


async def test_a_deferred_call_ends_the_run_and_waits_in_the_transcript(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []
    agent, faux = make_agent(
        [asks("a"), faux_assistant_message("deleted it")], tools=[deleting_tool(ran)]
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    result = await agent.prompt("clean up")
    assert (result.ending, [c.id for c in result.pending_approvals]) == ("approval", ["a"])
    assert [c.id for c in agent.pending_approvals] == ["a"]
    assert ran == [] and len(faux.requests) == 1
    assert "tool_execution_start" not in recorder.types
    assert isinstance(agent.state.messages[-1], AssistantMessage)  # unanswered, no blob

    agent.approve("a")
    resumed = await agent.continue_()
    assert ran == ["a"]
    assert [m.role for m in resumed.messages] == ["toolApproval", "toolResult", "assistant"]
    assert resumed.ending == "stop"
    assert seen_by_model(faux)[-1] == [("a", "deleted /tmp/a")]
    assert agent.pending_approvals == []


async def test_a_deferred_denial_is_answered_and_seen_by_the_model(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []
    agent, faux = make_agent(
        [asks("a", "b"), faux_assistant_message("fine")], tools=[deleting_tool(ran)]
    )
    await agent.prompt("clean up")
    agent.approve("b")
    with pytest.raises(AgentError) as info:
        await agent.continue_()
    assert str(info.value) == "tool calls await a decision: 'a'; approve() or deny() each"
    agent.deny("a", "keep it")
    await agent.continue_()
    assert ran == ["b"]
    assert seen_by_model(faux)[-1] == [
        ("a", "Tool call denied: keep it"),
        ("b", "deleted /tmp/b"),
    ]


async def test_an_approval_survives_a_restart_and_runs_exactly_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []
    first, _ = make_agent([asks("a")], tools=[deleting_tool(ran)])
    await first.prompt("clean up")
    saved = io.StringIO()
    dump_transcript(saved, first.state.messages)

    # A new process: the transcript is all there is.
    saved.seek(0)
    provider = FauxProvider([faux_assistant_message("done"), faux_assistant_message("again")])
    from trio_agent import Agent, AgentInitialState

    second = Agent(
        AgentInitialState(
            model=provider.get_model(), tools=[deleting_tool(ran)], messages=load_transcript(saved)
        ),
        stream_fn=provider.stream_fn,
    )
    assert [c.id for c in second.pending_approvals] == ["a"]
    second.approve("a")
    await second.continue_()
    assert ran == ["a"]
    assert any(isinstance(m, ToolApproval) for m in second.state.messages)
    # Nothing is left to run: a later run does not run it again.
    await second.prompt("anything else?")
    assert ran == ["a"]


def test_a_decision_on_an_unknown_call_is_refused() -> None:
    agent, _ = make_agent([])
    with pytest.raises(ValueError) as info:
        agent.approve("nope")
    assert str(info.value) == "no tool call 'nope' awaits a decision"


async def test_a_pending_call_is_reported_whatever_stop_reason_the_provider_gave(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []
    calls_without_tool_use = faux_assistant_message(
        [faux_tool_call("delete", {"path": "/tmp/a"}, id="a")]  # stop_reason "stop"
    )
    agent, _ = make_agent([calls_without_tool_use], tools=[deleting_tool(ran)])
    result = await agent.prompt("clean up")
    assert (result.ending, [c.id for c in result.pending_approvals]) == ("approval", ["a"])


async def test_an_approval_pending_across_a_restart_with_a_sqlite_store_runs_once(
    tmp_path: Any,
) -> None:
    from trio_agent import Agent, AgentInitialState
    from trio_agent.sessions import attach_agent, open_store

    ran: list[str] = []
    url = f"sqlite:{tmp_path / 'sessions.db'}"
    provider = FauxProvider([asks("a"), faux_assistant_message("deleted it")])

    def worker_agent() -> Agent:
        return Agent(
            AgentInitialState(model=provider.get_model(), tools=[deleting_tool(ran)]),
            stream_fn=provider.stream_fn,
        )

    # The first worker: the run ends waiting for a decision, committed to the store.
    async with open_store(url) as store:
        session_id = (await store.create()).id
        async with store.open_for_writing(session_id) as session:
            agent = worker_agent()
            async with attach_agent(agent, session):
                result = await agent.prompt("clean up")
    assert result.ending == "approval" and ran == []

    # A restart: a new store object and a new agent; the pending call is in the transcript.
    for _ in range(2):  # the second time there is nothing left to run
        async with open_store(url) as store, store.open_for_writing(session_id) as session:
            agent = worker_agent()
            async with attach_agent(agent, session):
                if agent.pending_approvals:
                    assert [c.id for c in agent.pending_approvals] == ["a"]
                    agent.approve("a")
                    await agent.continue_()
    assert ran == ["a"]
    async with open_store(url) as store:
        stored = (await store.open(session_id)).messages()
    assert [m.role for m in stored[-3:]] == ["toolApproval", "toolResult", "assistant"]
