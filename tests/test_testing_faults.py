"""Fault injection helpers: raise, abort or cancel the caller at a chosen event, for Agent
and loop runs."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_agent import (
    AbortController,
    Agent,
    AgentEvent,
    AgentInitialState,
    AssistantMessage,
    TurnStartEvent,
    UserMessage,
)
from trio_agent.loop import AgentContext, AgentLoopConfig, run_agent_loop
from trio_agent.testing import (
    FauxProvider,
    abort_at,
    assert_event_grammar,
    assert_event_types,
    cancel_at,
    faux_assistant_message,
    raise_at,
)

ANSWER = "a long answer with plenty of words to stream"


def make_agent() -> tuple[Agent, FauxProvider]:
    faux = FauxProvider([faux_assistant_message(ANSWER)], tokens_per_second=10)
    agent = Agent(AgentInitialState(model=faux.get_model()), stream_fn=faux.stream_fn)
    return agent, faux


def first_delta(event: AgentEvent) -> bool:
    return event.type == "message_update" and event.assistant_message_event.type == "text_delta"


async def test_raise_at_an_index_fails_the_agent_run(autojump_clock: trio.abc.Clock) -> None:
    agent, _ = make_agent()
    fault = raise_at(4, ValueError("boom"))
    agent.subscribe(fault)
    await agent.prompt("go")
    assert fault.fired_at == 4
    assert fault.events[4].type == "message_start"
    assert_event_grammar(fault)
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.error_message) == ("error", "boom")


async def test_raise_at_a_base_exception_class_propagates(autojump_clock: trio.abc.Clock) -> None:
    agent, _ = make_agent()
    fault = raise_at("turn_start", KeyboardInterrupt)
    agent.subscribe(fault)
    with pytest.raises(KeyboardInterrupt, match="injected fault"):
        await agent.prompt("go")
    assert fault.fired_at == 1
    assert_event_grammar(fault)
    assert agent.state.is_streaming is False


async def test_abort_at_a_predicate_aborts_the_agent(autojump_clock: trio.abc.Clock) -> None:
    agent, _ = make_agent()
    fault = abort_at(first_delta, agent)
    agent.subscribe(fault)
    await agent.prompt("go")
    assert fault.fired
    assert_event_grammar(fault)
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.error_message) == ("aborted", "Request was aborted")
    # The abort landed after the first delta: the partial text is kept.
    assert 0 < len(last.content[0].text) < len(ANSWER)  # type: ignore[union-attr]  # a text block
    assert trio.current_time() < len(ANSWER) / 4 / 10


async def test_cancel_at_cancels_the_callers_scope(autojump_clock: trio.abc.Clock) -> None:
    agent, _ = make_agent()
    scope = trio.CancelScope()
    fault = cancel_at(first_delta, scope)
    agent.subscribe(fault)
    with scope:
        await agent.prompt("go")
    assert scope.cancelled_caught
    assert_event_grammar(fault)
    assert fault.types[-3:] == ["message_end", "turn_end", "agent_end"]
    assert agent.state.is_streaming is False


async def test_loop_runs_abort_through_their_controller(autojump_clock: trio.abc.Clock) -> None:
    faux = FauxProvider([faux_assistant_message(ANSWER)], tokens_per_second=10)
    controller = AbortController()
    fault = abort_at(first_delta, controller)
    messages = await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(messages=[]),
        AgentLoopConfig(model=faux.get_model()),
        fault,
        signal=controller.signal,
        stream_fn=faux.stream_fn,
    )
    assert controller.signal.aborted
    assert_event_grammar(fault)
    final = messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "aborted"


@pytest.mark.parametrize("kind", ["raise", "cancel"])
async def test_loop_runs_take_raise_and_cancel(kind: str) -> None:
    faux = FauxProvider([faux_assistant_message("hi")])
    scope = trio.CancelScope()
    if kind == "raise":
        fault = raise_at("message_end", RuntimeError("sink broke"))
    else:
        fault = cancel_at("message_end", scope)
    with scope:
        await run_agent_loop(
            [UserMessage(content="go")],
            AgentContext(messages=[]),
            AgentLoopConfig(model=faux.get_model()),
            fault,
            stream_fn=faux.stream_fn,
        )
    assert fault.fired_at == 3
    assert scope.cancelled_caught is (kind == "cancel")
    assert_event_grammar(fault)


async def test_a_fault_fires_once_and_can_be_disarmed() -> None:
    fault = raise_at("turn_start", ValueError)
    assert repr(fault) == "<FaultInjector raise <class 'ValueError'> when='turn_start' armed>"
    with pytest.raises(ValueError, match="injected fault"):
        fault(TurnStartEvent())
    fault(TurnStartEvent())  # fired already: only recorded
    assert (fault.fired_at, len(fault)) == (0, 2)
    assert repr(fault) == "<FaultInjector raise <class 'ValueError'> when='turn_start' fired at 0>"
    other = raise_at(0, ValueError)
    other.disarm()
    other(TurnStartEvent())
    assert not other.fired
    assert_event_types(other, ["turn_start"])
    with pytest.raises(TypeError, match="when must be an index"):
        raise_at(True, ValueError)
