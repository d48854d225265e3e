"""The Agent's entry points refuse bad input before anything is committed (reliability
findings F4, F15, F16), using the checks of ``trio_agent._checks`` at every door:
``prompt``, ``steer``, ``follow_up``, ``AgentInitialState`` and the ``state.messages`` and
``state.tools`` setters.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from agent_helpers import make_tool

from trio_agent import (
    Agent,
    AgentInitialState,
    TextContent,
    UserMessage,
)
from trio_agent.testing import FauxProvider, faux_assistant_message


def make_agent(**state: Any) -> Agent:
    faux = FauxProvider([faux_assistant_message("ok")])
    return Agent(
        initial_state=AgentInitialState(model=faux.get_model(), **state),
        stream_fn=faux.stream_fn,
    )


MESSAGE = (
    "(SystemMessage, UserMessage, AssistantMessage, ToolResultMessage or a class registered "
    "with register_message_type)"
)


async def test_prompt_refuses_a_message_with_a_wrong_field_and_commits_nothing() -> None:
    agent = make_agent()
    with pytest.raises(TypeError) as info:
        with attrs.validators.disabled():  # built past its own check, as cattrs could
            bad = UserMessage(content=123)  # type: ignore[arg-type]  # the bad input
        await agent.prompt(bad)
    assert str(info.value) == (
        "prompt(): UserMessage.content must be a str or a list of TextContent or "
        "ImageContent, got 123"
    )
    assert agent.state.messages == []
    await agent.prompt("hi")  # the agent is not stuck
    assert [message.role for message in agent.state.messages] == ["user", "assistant"]


async def test_prompt_refuses_a_dict_block() -> None:
    agent = make_agent()
    with attrs.validators.disabled():  # past the constructor's check
        bad = UserMessage(content=[{"type": "text", "text": "x"}])  # type: ignore[list-item]
    with pytest.raises(TypeError) as info:
        await agent.prompt(bad)
    assert str(info.value) == (
        "prompt(): UserMessage.content[0] must be a TextContent or an ImageContent, got "
        "{'type': 'text', 'text': 'x'}"
    )


async def test_prompt_names_bytes_and_bad_images_whole() -> None:
    agent = make_agent()
    with pytest.raises(TypeError) as info:
        await agent.prompt(b"hello")  # type: ignore[arg-type]
    assert str(info.value) == f"prompt(): expected a message {MESSAGE}, got b'hello'"
    with pytest.raises(TypeError) as info:
        await agent.prompt("hi", images="abc")  # type: ignore[arg-type]
    assert str(info.value) == "prompt(): images must be a sequence of ImageContent, got 'abc'"


def test_steer_and_follow_up_check_deeply() -> None:
    agent = make_agent()
    with pytest.raises(TypeError) as info:
        agent.steer(UserMessage(content=[TextContent(text=None)]))  # type: ignore[arg-type]
    assert str(info.value) == "steer(): UserMessage.content[0].text must be a str, got None"
    with pytest.raises(TypeError) as info:
        agent.follow_up(UserMessage(content="x", timestamp="now"))  # type: ignore[arg-type]
    assert str(info.value) == "follow_up(): UserMessage.timestamp must be an int, got 'now'"


def test_initial_messages_are_checked_before_any_attribute_is_read() -> None:
    with pytest.raises(TypeError) as info:
        make_agent(messages=[{"role": "user", "content": "x"}])
    assert str(info.value) == (
        f"AgentInitialState.messages[0]: expected a message {MESSAGE}, got "
        "{'role': 'user', 'content': 'x'}"
    )


def test_state_messages_setter_checks() -> None:
    agent = make_agent()
    with pytest.raises(TypeError) as info:
        agent.state.messages = [{"role": "user", "content": "x"}]  # type: ignore[list-item]
    assert str(info.value) == (
        f"state.messages[0]: expected a message {MESSAGE}, got {{'role': 'user', 'content': 'x'}}"
    )
    assert agent.state.messages == []


def test_duplicate_tool_names_are_refused_at_construction() -> None:
    with pytest.raises(ValueError) as info:
        make_agent(tools=[make_tool("search"), make_tool("search")])
    assert str(info.value) == (
        "duplicate tool name 'search' at AgentInitialState.tools[0] and AgentInitialState.tools[1]"
    )


def test_duplicate_tool_names_are_refused_by_the_setter() -> None:
    agent = make_agent(tools=[make_tool("search")])
    with pytest.raises(ValueError) as info:
        agent.state.tools = [make_tool("search"), make_tool("read"), make_tool("search")]
    assert str(info.value) == "duplicate tool name 'search' at state.tools[0] and state.tools[2]"
    assert [tool.name for tool in agent.state.tools] == ["search"]


async def test_good_input_still_runs() -> None:
    agent = make_agent(tools=[make_tool("search"), make_tool("read")])
    await agent.prompt(UserMessage(content=[TextContent(text="hi")], timestamp=1))
    assert [message.role for message in agent.state.messages] == ["system", "user", "assistant"]
