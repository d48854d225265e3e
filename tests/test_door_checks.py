"""Every door checks what comes in: a clear error naming the field, where the value enters.

Found by trying the API as a new user would: a ``str`` model, ``Agent("hello")``,
``stream_fn=42``, ``UserMessage(content=5)``, ``max_retries=-1``, ``temperature="hot"`` and
assignments to ``agent.state.model`` were accepted and failed later, unclearly, or (a
``None`` model) made a run spin. ``abort()`` from another thread and ``prompt()`` under
asyncio failed with a generic message. And a stream function received
``reasoning="off"`` where pi's receives nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_agent import (
    Agent,
    AgentError,
    AgentInitialState,
    LlmContext,
    Model,
    StreamOptions,
    TextContent,
    UserMessage,
)
from trio_agent.loop import AgentContext, AgentLoopConfig, run_agent_loop
from trio_agent.models import FauxProvider, faux_assistant_message
from trio_agent.models._catalog import load_catalog

# ---------------------------------------------------------------------------------------
# The model


def test_a_model_string_is_resolved_through_the_catalogue() -> None:
    agent = Agent(AgentInitialState(model="openai/gpt-4o-mini"), stream_fn=_never)
    assert agent.state.model == load_catalog()[("openai", "gpt-4o-mini")]
    agent.state.model = "anthropic/claude-sonnet-4-5"
    assert (agent.state.model.provider, agent.state.model.id) == (
        "anthropic",
        "claude-sonnet-4-5",
    )


def test_an_unknown_model_string_is_refused_with_the_closest_names() -> None:
    with pytest.raises(ValueError) as info:
        Agent(AgentInitialState(model="gpt-4o"), stream_fn=_never)
    assert str(info.value) == (
        "AgentInitialState.model: unknown model 'gpt-4o'; give a Model, or "
        "'provider/model-id' from the built-in catalogue (closest: 'openai/gpt-4o', "
        "'openai/gpt-4o-mini', 'openai/gpt-4.1')"
    )


def test_a_model_of_another_type_is_refused_where_it_enters() -> None:
    with pytest.raises(TypeError) as info:
        Agent(AgentInitialState(model=42), stream_fn=_never)  # type: ignore[arg-type]
    assert str(info.value) == (
        "AgentInitialState.model must be a Model or a 'provider/model-id' string, got 42"
    )


@pytest.mark.parametrize("value", [None, 42, "gpt-4o"])
def test_assigning_a_bad_model_changes_nothing(value: Any) -> None:
    faux = FauxProvider([])
    agent = Agent(AgentInitialState(model=faux.get_model()), stream_fn=faux.stream_fn)
    with pytest.raises((TypeError, ValueError)) as info:
        agent.state.model = value
    assert str(info.value).startswith("state.model")
    assert agent.state.model == faux.get_model()


def test_a_bad_thinking_level_is_refused() -> None:
    agent = Agent(stream_fn=_never)
    with pytest.raises(ValueError) as info:
        agent.state.thinking_level = "hard"  # type: ignore[assignment]
    assert str(info.value) == (
        "state.thinking_level must be one of 'off', 'minimal', 'low', 'medium', 'high', "
        "'xhigh', 'max', got 'hard'"
    )
    assert agent.state.thinking_level == "off"


async def test_a_run_whose_model_is_not_a_model_fails_in_band_at_once() -> None:
    """The original hang: a run whose model is not a Model, past every door."""
    with pytest.raises(TypeError) as info:
        AgentLoopConfig(model=None)  # type: ignore[arg-type]
    assert str(info.value) == "AgentLoopConfig.model must be a Model, got None"
    config = AgentLoopConfig(model=FauxProvider([]).get_model())
    object.__setattr__(config, "model", None)  # as a bypass would
    events: list[Any] = []
    with trio.fail_after(2):
        await run_agent_loop(
            [UserMessage(content="hi")],
            AgentContext(messages=[]),
            config,
            events.append,
            stream_fn=_never,
        )
    assert [e.type for e in events][-3:] == ["message_end", "turn_end", "agent_end"]
    failure = events[-1].messages[0]
    assert (failure.api, failure.stop_reason, failure.error_message) == (
        "unknown",
        "error",
        "the run's model must be a Model, got None",
    )


# ---------------------------------------------------------------------------------------
# The Agent's other options


def test_the_initial_state_must_be_an_initial_state() -> None:
    with pytest.raises(TypeError) as info:
        Agent("hello")  # type: ignore[arg-type]
    assert str(info.value) == (
        "Agent(): initial_state must be an AgentInitialState or None, got 'hello'"
    )


@pytest.mark.parametrize(
    "name", ["stream_fn", "convert_to_llm", "get_api_key", "before_tool_call", "finish_turn"]
)
def test_hooks_must_be_callable(name: str) -> None:
    with pytest.raises(TypeError) as info:
        Agent(**{name: 42})  # type: ignore[arg-type]  # the bad input
    assert str(info.value) == f"Agent(): {name} must be callable, got 42"


@pytest.mark.parametrize(
    ("name", "value", "error", "text"),
    [
        ("max_retries", -1, ValueError, "max_retries must be an int >= 0 or None, got -1"),
        ("max_retries", 1.5, TypeError, "max_retries must be an int >= 0 or None, got 1.5"),
        ("max_tokens", -1, ValueError, "max_tokens must be an int >= 0 or None, got -1"),
        (
            "max_retry_delay_ms",
            -5,
            ValueError,
            "max_retry_delay_ms must be an int >= 0 or None, got -5",
        ),
        (
            "temperature",
            "hot",
            TypeError,
            "temperature must be a finite number >= 0 or None, got 'hot'",
        ),
        (
            "temperature",
            float("nan"),
            ValueError,
            "temperature must be a finite number >= 0 or None, got nan",
        ),
        (
            "temperature",
            True,
            TypeError,
            "temperature must be a finite number >= 0 or None, got True",
        ),
    ],
)
def test_request_options_are_checked_by_the_agent_and_by_stream_options(
    name: str, value: Any, error: type[Exception], text: str
) -> None:
    with pytest.raises(error) as info:
        Agent(stream_fn=_never, **{name: value})
    assert str(info.value) == f"Agent(): {text}"
    with pytest.raises(error) as info:
        StreamOptions(**{name: value})
    assert str(info.value) == f"StreamOptions: {text}"
    agent = Agent(stream_fn=_never)
    before = getattr(agent, name)
    with pytest.raises(error) as info:
        setattr(agent, name, value)
    assert str(info.value) == f"Agent.{text}"
    assert getattr(agent, name) == before


def test_valid_request_options_are_kept() -> None:
    agent = Agent(stream_fn=_never, temperature=0, max_tokens=100, max_retries=3)
    agent.temperature = 0.7
    assert (agent.temperature, agent.max_tokens, agent.max_retries) == (0.7, 100, 3)


def test_a_user_message_checks_its_content() -> None:
    with pytest.raises(TypeError) as info:
        UserMessage(content=5)  # type: ignore[arg-type]
    assert str(info.value) == (
        "UserMessage.content must be a str or a list of TextContent or ImageContent, got 5"
    )
    with pytest.raises(TypeError) as info:
        UserMessage(content=[TextContent(text="a"), "b"])  # type: ignore[list-item]
    assert str(info.value) == (
        "UserMessage.content must be a str or a list of TextContent or ImageContent, "
        "got [TextContent(text='a', text_signature=None, type='text'), 'b']"
    )


# ---------------------------------------------------------------------------------------
# Outside Trio


async def test_abort_from_another_thread_is_refused_and_changes_nothing() -> None:
    provider = FauxProvider([faux_assistant_message("the answer")])
    release = trio.Event()

    async def stream_fn(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        await release.wait()
        return provider.stream_fn(model, context, options)

    agent = Agent(AgentInitialState(model=provider.get_model()), stream_fn=stream_fn)
    errors: list[BaseException] = []

    def from_thread() -> None:
        try:
            agent.abort("from a thread")
        except AgentError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "hi")
        await trio.testing.wait_all_tasks_blocked()
        await trio.to_thread.run_sync(from_thread)
        assert agent.signal is not None and not agent.signal.aborted
        release.set()
    assert [str(exc) for exc in errors] == [
        "Agent.abort() was called from another thread; in a thread started by Trio use "
        "trio.from_thread.run_sync(agent.abort), from any other thread "
        "trio.from_thread.run_sync(agent.abort, trio_token=token) with the token of the "
        "agent's Trio run (trio.lowlevel.current_trio_token())"
    ]
    assert agent.state.messages[-1].stop_reason == "stop"  # type: ignore[union-attr]


def test_prompt_under_asyncio_says_what_to_do() -> None:
    agent = Agent(stream_fn=_never)
    with pytest.raises(AgentError) as info:
        asyncio.run(agent.prompt("hi"))
    assert str(info.value) == (
        "Agent.prompt() must run under Trio: call it from trio.run(...), not asyncio "
        "(trio_agent is Trio-native)"
    )
    assert agent.state.messages == []


# ---------------------------------------------------------------------------------------
# reasoning "off" reaches a stream function as None


@pytest.mark.parametrize(("level", "expected"), [("off", None), ("low", "low")])
async def test_a_stream_function_receives_no_reasoning_for_off(
    autojump_clock: trio.testing.MockClock, level: Any, expected: str | None
) -> None:
    provider = FauxProvider([faux_assistant_message("ok"), faux_assistant_message("ok")])
    seen: list[str | None] = []

    def stream_fn(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        seen.append(options.reasoning)
        return provider.stream_fn(model, context, options)

    model = attrs.evolve(provider.get_model(), reasoning=True)
    agent = Agent(AgentInitialState(model=model, thinking_level=level), stream_fn=stream_fn)
    await agent.prompt("hi")
    config = AgentLoopConfig(model=model, stream_options=StreamOptions(reasoning=level))
    await run_agent_loop(
        [UserMessage(content="hi")], AgentContext(messages=[]), config, _ignore, stream_fn=stream_fn
    )
    assert seen == [expected, expected]
    assert agent.state.messages[-1].thinking_level == level  # type: ignore[union-attr]


def _never(*args: Any) -> Any:
    raise AssertionError("no request expected")


def _ignore(event: Any) -> None:
    pass


async def test_events_is_the_earlier_name_of_open_events() -> None:
    agent = Agent(stream_fn=_never)
    async with agent.events() as receive:  # no warning: pytest turns warnings into errors
        assert isinstance(receive, trio.MemoryReceiveChannel)
        assert len(agent._listeners) == 1
