"""The close path always makes progress, keeps its sequence, and raises the trio way.

Each test pins one failure found by probing: a close that spun without a checkpoint, a
``BaseException`` that cut the closing sequence short, a custom ``BaseException`` that
came out in a group, and causes stripped by ``raise ... from None``. The ones that hung
run under ``trio.fail_after`` so a regression fails instead of hanging.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing
from agent_helpers import assert_every_tool_call_answered, calls, make_agent, make_tool

from trio_agent import (
    AgentEvent,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessage,
    Model,
    TextContent,
    UserMessage,
)
from trio_agent._util import collapse_errors
from trio_agent.loop import AgentContext, AgentLoopConfig, run_agent_loop
from trio_agent.models import FauxProvider, faux_assistant_message
from trio_agent.testing import EventRecorder


class Interrupt(BaseException):
    """An application's own ``BaseException``."""


def closing_types(recorder: EventRecorder) -> list[str]:
    return [t for t in recorder.types if t != "message_update"]


# ---------------------------------------------------------------------------------------
# A close that cannot report its failure ends instead of spinning


class _Unreportable(Model):
    """A model whose ``api`` cannot be read: reporting any failure about it raises."""

    __slots__ = ()

    @property
    def api(self) -> str:
        raise RuntimeError("no api")

    @api.setter
    def api(self, value: str) -> None:
        pass


async def test_a_close_that_raises_before_any_event_ends_instead_of_spinning() -> None:
    faux = FauxProvider([faux_assistant_message("never sent")])
    base = faux.get_model()
    model = _Unreportable(**{f.name: getattr(base, f.name) for f in attrs.fields(Model)})

    async def stream_fn(*args: Any) -> Any:
        raise ValueError("request refused")

    recorder = EventRecorder()
    config = AgentLoopConfig(model=model)
    with trio.fail_after(2), pytest.raises(ExceptionGroup) as info:
        await run_agent_loop(
            [UserMessage(content="hi")],
            AgentContext(messages=[]),
            config,
            recorder,
            stream_fn=stream_fn,
        )
    # Both are kept: the failure that could not be reported and the error that stopped it.
    assert [repr(exc) for exc in info.value.exceptions] == [
        "ValueError('request refused')",
        "RuntimeError('no api')",
    ]
    assert closing_types(recorder) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
    ]


# ---------------------------------------------------------------------------------------
# A BaseException from a listener while an aborted run closes: the sequence goes on


@pytest.mark.parametrize("error_type", [KeyboardInterrupt, Interrupt])
async def test_a_base_exception_on_the_closing_message_start_does_not_cut_the_close_short(
    autojump_clock: trio.testing.MockClock, error_type: type[BaseException]
) -> None:
    agent, _ = make_agent([faux_assistant_message("never streamed")])
    recorder = EventRecorder()

    def aborter(event: AgentEvent) -> None:
        if event.type == "agent_start":
            agent.abort()

    def raiser(event: AgentEvent) -> None:
        if event.type == "message_start" and event.message.role == "assistant":
            raise error_type()

    agent.subscribe(aborter)
    agent.subscribe(raiser)
    agent.subscribe(recorder)
    with trio.fail_after(5), pytest.raises(error_type):
        await agent.prompt("hi")
    # The recorder comes after the raising listener, so it misses that one event only.
    assert closing_types(recorder) == [
        "agent_start",
        "turn_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert not agent.state.is_streaming
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.error_message) == ("aborted", "Operation aborted")


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_a_base_exception_while_a_tool_batch_closes_still_answers_every_call(
    autojump_clock: trio.testing.MockClock, mode: Any
) -> None:
    async def slow(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        await trio.sleep(10)
        return AgentToolResult(content=[TextContent(text="late")])

    tool = make_tool("slow", slow)
    agent, _ = make_agent([calls(("slow", "a"), ("slow", "b"))], tools=[tool], tool_execution=mode)
    recorder = EventRecorder()

    def raiser(event: AgentEvent) -> None:
        if event.type == "tool_execution_end" and event.tool_call_id == "a":
            raise KeyboardInterrupt

    agent.subscribe(raiser)
    agent.subscribe(recorder)
    async with trio.open_nursery() as nursery:

        async def abort_later() -> None:
            await trio.sleep(1)
            agent.abort()

        nursery.start_soon(abort_later)
        with trio.fail_after(5), pytest.raises(KeyboardInterrupt):
            await agent.prompt("hi")
    types = closing_types(recorder)
    assert types[-2:] == ["turn_end", "agent_end"]
    assert types.count("tool_execution_end") == 1  # b; the recorder missed a's
    assert_every_tool_call_answered(agent.state.messages)


async def test_a_second_base_exception_while_closing_stops_delivery(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent, _ = make_agent([faux_assistant_message("never streamed")])
    recorder = EventRecorder()
    raised: list[BaseException] = []

    def aborter(event: AgentEvent) -> None:
        if event.type == "agent_start":
            agent.abort()

    def raiser(event: AgentEvent) -> None:
        if event.type in ("message_start", "message_end"):
            raised.append(Interrupt(event.type))
            raise raised[-1]

    agent.subscribe(aborter)
    agent.subscribe(raiser)
    agent.subscribe(recorder)
    with trio.fail_after(5), pytest.raises(Interrupt) as info:
        await agent.prompt("hi")
    assert closing_types(recorder) == ["agent_start", "turn_start"]
    # The first leaves, the second chained to it: none is dropped.
    assert info.value is raised[0]
    assert info.value.__context__ is raised[1]
    assert not agent.state.is_streaming


# ---------------------------------------------------------------------------------------
# Any BaseException leaves as itself, never in a group


async def test_a_custom_base_exception_from_a_tool_leaves_as_itself(
    autojump_clock: trio.testing.MockClock,
) -> None:
    interrupt = Interrupt("stop")

    async def body(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        raise interrupt

    agent, _ = make_agent([calls(("t", "a"))], tools=[make_tool("t", body)])
    failure = ValueError("failed on agent_end")

    def listener(event: AgentEvent) -> None:
        if event.type == "agent_end":
            raise failure

    agent.subscribe(listener)
    with pytest.raises(Interrupt) as info:
        await agent.prompt("hi")
    assert info.value is interrupt
    assert info.value.__context__ is failure
    assert not info.value.__suppress_context__
    assert_every_tool_call_answered(agent.state.messages)


def test_the_policy_puts_any_base_exception_first_and_keyboard_interrupt_before_it() -> None:
    interrupt, error = Interrupt(), ValueError("x")
    assert collapse_errors([error, interrupt]) is interrupt
    assert interrupt.__context__ is error
    keyboard, other = KeyboardInterrupt(), Interrupt()
    assert collapse_errors([other, keyboard]) is keyboard
    assert keyboard.__context__ is other


def test_the_policy_keeps_an_existing_context_and_chains_the_others_after_it() -> None:
    earlier, later = KeyError("earlier"), ValueError("later")
    keyboard = KeyboardInterrupt()
    keyboard.__context__ = earlier
    assert collapse_errors([keyboard, later]) is keyboard
    assert keyboard.__context__ is earlier
    assert earlier.__context__ is later


# ---------------------------------------------------------------------------------------
# Causes survive


async def test_a_listener_error_keeps_its_cause(autojump_clock: trio.testing.MockClock) -> None:
    agent, _ = make_agent([faux_assistant_message("hello")])

    def listener(event: AgentEvent) -> None:
        if event.type == "agent_end":
            try:
                {"present": 1}["missing"]
            except KeyError as exc:
                raise RuntimeError("lookup failed") from exc

    agent.subscribe(listener)
    with pytest.raises(RuntimeError, match=r"^lookup failed$") as info:
        await agent.prompt("hi")
    assert isinstance(info.value.__cause__, KeyError)


async def test_a_tool_error_that_arrives_with_a_keyboard_interrupt_is_in_the_traceback(
    autojump_clock: trio.testing.MockClock,
) -> None:
    error = ValueError("on agent_end")

    async def body(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        raise KeyboardInterrupt

    agent, _ = make_agent([calls(("t", "a"))], tools=[make_tool("t", body)])

    def listener(event: AgentEvent) -> None:
        if event.type == "agent_end":
            raise error

    agent.subscribe(listener)
    with pytest.raises(KeyboardInterrupt) as info:
        await agent.prompt("hi")
    assert info.value.__context__ is error
    assert not info.value.__suppress_context__
    assert "ValueError: on agent_end" in str(info.getrepr(chain=True))
