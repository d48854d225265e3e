"""Input checks (reliability findings F4, F15, F16 and P7b): messages checked deeply,
images with a ``data:`` prefix or bad base64 refused, tool names checked, duplicate tool
names refused; every error names the entry point, the field and the value."""

from __future__ import annotations

import io
from typing import Any

import attrs
import pytest
from agent_helpers import make_tool

from trio_agent import (
    AgentTool,
    AssistantMessage,
    ImageContent,
    SerializationError,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolDeclaration,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from trio_agent._checks import (
    check_images,
    check_message,
    check_messages,
    check_tools,
    prompt_messages,
)
from trio_agent.serialization import load_transcript

PNG = "iVBORw0KGgo="


def type_error(value: Any, where: str = "prompt()") -> str:
    with pytest.raises(TypeError) as info:
        check_message(value, where)
    return str(info.value)


def value_error(value: Any, where: str = "prompt()") -> str:
    with pytest.raises(ValueError) as info:
        check_message(value, where)
    return str(info.value)


# -- F4: messages are checked deeply --------------------------------------------------------


def test_good_messages_pass_unchanged() -> None:
    messages: list[Any] = [
        SystemMessage(
            content="be brief",
            sections={"a": "x", "b": None},
            tools_added=[ToolDeclaration(name="t", description="d", parameters={})],
            timestamp=0,
        ),
        UserMessage(
            content=[TextContent(text="hi"), ImageContent(data=PNG, mime_type="image/png")]
        ),
        AssistantMessage(
            content=[ToolCall(id="c", name="t", arguments={"a": [1, 2.5, None]})],
            api="faux",
            provider="faux",
            model="m",
            usage=Usage(input=1, reasoning=None),
            stop_reason="toolUse",
        ),
        ToolResultMessage(
            tool_call_id="c", tool_name="t", content=[], details={"k": (1, 2)}, is_error=True
        ),
    ]
    for message in messages:
        assert check_message(message, "prompt()") is message
    assert check_messages(messages, "state.messages") == messages
    assert check_messages((), "state.messages") == []


def test_content_of_the_wrong_type() -> None:
    with attrs.validators.disabled():  # the constructor's own check is tested elsewhere
        bad = UserMessage(content=123)  # type: ignore[arg-type]  # the bad input
    assert type_error(bad) == (
        "prompt(): UserMessage.content must be a str or a list of TextContent or "
        "ImageContent, got 123"
    )


def test_a_dict_as_a_content_block() -> None:
    with attrs.validators.disabled():  # past the constructor's check
        bad = UserMessage(content=[{"type": "text", "text": "x"}])  # type: ignore[list-item]
    assert type_error(bad, "steer()") == (
        "steer(): UserMessage.content[0] must be a TextContent or an ImageContent, got "
        "{'type': 'text', 'text': 'x'}"
    )


def test_a_block_with_a_field_of_the_wrong_type() -> None:
    bad = UserMessage(content=[TextContent(text=None)])  # type: ignore[arg-type]
    assert type_error(bad) == "prompt(): UserMessage.content[0].text must be a str, got None"


def test_timestamps_and_counts_are_ints_not_bools_or_text() -> None:
    bad = UserMessage(content="hi", timestamp="now")  # type: ignore[arg-type]
    assert type_error(bad, "follow_up()") == (
        "follow_up(): UserMessage.timestamp must be an int, got 'now'"
    )
    usage = Usage(input=True)
    message = AssistantMessage(content=[], api="a", provider="p", model="m", usage=usage)
    assert type_error(message) == "prompt(): AssistantMessage.usage.input must be an int, got True"


def test_literal_fields_name_their_values() -> None:
    bad = AssistantMessage(content=[], api="a", provider="p", model="m", stop_reason="done")  # type: ignore[arg-type]
    assert value_error(bad) == (
        "prompt(): AssistantMessage.stop_reason must be one of 'stop', 'length', 'toolUse', "
        "'error', 'aborted', 'pending', got 'done'"
    )


def test_assistant_content_may_not_hold_images() -> None:
    image = ImageContent(data=PNG, mime_type="image/png")
    bad = AssistantMessage(content=[image], api="a", provider="p", model="m")  # type: ignore[list-item]
    assert type_error(bad).startswith(
        "prompt(): AssistantMessage.content[0] must be a TextContent or a ThinkingContent or "
        "a ToolCall, got ImageContent("
    )


def test_free_form_values_must_be_json() -> None:
    bad = ToolResultMessage(tool_call_id="c", tool_name="t", content=[], details={"b": b"x"})
    assert value_error(bad) == "prompt(): ToolResultMessage.details.b: bytes are not JSON"
    call = ToolCall(id="c", name="t", arguments={"when": object()})
    message = AssistantMessage(content=[call], api="a", provider="p", model="m")
    assert type_error(message) == (
        "prompt(): AssistantMessage.content[0].arguments.when: cannot write 'object' values as JSON"
    )
    sections = SystemMessage(content="x", sections={"a": 1})  # type: ignore[dict-item]
    assert type_error(sections) == (
        "prompt(): SystemMessage.sections['a'] must be a str or None, got 1"
    )


def test_non_finite_costs_are_refused() -> None:
    usage = Usage(cost=Usage().cost.__class__(total=float("nan")))
    message = AssistantMessage(content=[], api="a", provider="p", model="m", usage=usage)
    assert value_error(message) == (
        "prompt(): AssistantMessage.usage.cost.total must be a finite number, got nan"
    )


# -- F15: errors name the whole value --------------------------------------------------------


def test_not_a_message_names_the_whole_value() -> None:
    expected = (
        "AgentInitialState.messages[0]: expected a message (SystemMessage, UserMessage, "
        "AssistantMessage, ToolResultMessage or a class registered with "
        "register_message_type), got {'role': 'user', 'content': 'x'}"
    )
    with pytest.raises(TypeError) as info:
        check_messages([{"role": "user", "content": "x"}], "AgentInitialState.messages")
    assert str(info.value) == expected


def test_text_and_bytes_are_not_sequences_of_messages() -> None:
    with pytest.raises(TypeError) as info:
        check_messages("hi", "state.messages")
    assert str(info.value) == "state.messages must be a sequence of messages, got 'hi'"
    with pytest.raises(TypeError) as info:
        prompt_messages(b"hello")
    assert str(info.value) == (
        "prompt(): expected a message (SystemMessage, UserMessage, AssistantMessage, "
        "ToolResultMessage or a class registered with register_message_type), got b'hello'"
    )


def test_images_must_be_a_sequence_of_image_content() -> None:
    with pytest.raises(TypeError) as info:
        prompt_messages("hi", images="abc")
    assert str(info.value) == "prompt(): images must be a sequence of ImageContent, got 'abc'"
    with pytest.raises(TypeError) as info:
        check_images([PNG], "prompt()")
    assert str(info.value) == f"prompt(): images must be ImageContent, got {PNG!r}"
    with pytest.raises(TypeError) as info:
        prompt_messages(UserMessage(content="x"), images=[])
    assert str(info.value).startswith("prompt(): images can only go with a text input, got ")


def test_prompt_messages_normalizes_its_input() -> None:
    image = ImageContent(data=PNG, mime_type="image/png")
    (made,) = prompt_messages("look", images=[image])
    assert isinstance(made, UserMessage)
    assert made.content == [TextContent(text="look"), image]
    one = UserMessage(content="x", timestamp=1)
    assert prompt_messages(one) == [one]
    assert prompt_messages((one, one)) == [one, one]
    assert prompt_messages([]) == []


def test_long_values_are_shown_cut() -> None:
    error = type_error("y" * 10_000)
    assert error.endswith("(10002 characters)")
    assert len(error) < 400


# -- P7b: images -----------------------------------------------------------------------------


def test_image_with_a_data_url_prefix_is_refused() -> None:
    with pytest.raises(ValueError) as info:
        ImageContent(data=f"data:image/png;base64,{PNG}", mime_type="image/png")
    assert str(info.value) == (
        "ImageContent.data must be plain base64, without a data: URL prefix (the media type "
        "goes in mime_type), got 'data:image/png;base64,iVBORw0KGgo='"
    )


@pytest.mark.parametrize("data", ["!!!not base64!!!", "abc", "aGVs bG8=", "aGVsbG8=\n", "été="])
def test_image_with_invalid_base64_is_refused(data: str) -> None:
    with pytest.raises(ValueError) as info:
        ImageContent(data=data, mime_type="image/png")
    assert str(info.value).startswith("ImageContent.data is not valid base64 (")
    assert str(info.value).endswith(f"): {data!r}")


def test_image_fields_must_be_text() -> None:
    with pytest.raises(TypeError) as info:
        ImageContent(data=b"iVBORw0KGgo=", mime_type="image/png")  # type: ignore[arg-type]
    assert str(info.value) == "ImageContent.data must be a str of base64, got b'iVBORw0KGgo='"
    with pytest.raises(TypeError) as info:
        ImageContent(data=PNG, mime_type=None)  # type: ignore[arg-type]
    assert str(info.value) == "ImageContent.mime_type must be a str, got None"


def test_a_long_bad_image_shows_its_start() -> None:
    with pytest.raises(ValueError) as info:
        ImageContent(data="data:" + "A" * 100_000, mime_type="image/png")
    assert str(info.value).endswith(
        "got 'data:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'... (100005 characters)"
    )


def test_load_transcript_refuses_a_bad_image_naming_the_line() -> None:
    good = '{"role":"user","content":"hi","timestamp":1}'
    bad = (
        '{"role":"user","content":[{"type":"image","data":"data:image/png;base64,'
        f'{PNG}","mimeType":"image/png"}}],"timestamp":2}}'
    )
    with pytest.raises(SerializationError) as info:
        load_transcript(io.StringIO(f"{good}\n{bad}\n"))
    assert str(info.value) == (
        "line 2: ImageContent.data must be plain base64, without a data: URL prefix (the "
        "media type goes in mime_type), got 'data:image/png;base64,iVBORw0KGgo=' @ "
        "$.content[0]"
    )
    bad = bad.replace(f"data:image/png;base64,{PNG}", "!!!not base64!!!")
    with pytest.raises(SerializationError) as info:
        load_transcript(io.StringIO(bad))
    assert str(info.value).startswith("line 1: ImageContent.data is not valid base64 (")


# -- F16: tool names -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "a b\nc", "tab\tname", "zero\u200bwidth", " lead"])
def test_tool_names_with_space_or_control_characters_are_refused(name: str) -> None:
    with pytest.raises(ValueError) as info:
        make_tool(name)
    if name:
        assert str(info.value) == (
            f"AgentTool.name must not contain white space or control characters, got {name!r}"
        )
    else:
        assert str(info.value) == "AgentTool.name must not be empty"


@pytest.mark.parametrize("name", ["a/b", "名前", "x" * 65, "read.file"])
def test_tool_names_some_providers_refuse_are_flagged(name: str) -> None:
    execute = make_tool("ok").execute
    with pytest.warns(UserWarning) as record:
        tool = AgentTool(name=name, label=name, description="d", parameters={}, execute=execute)
    assert tool.name == name
    assert str(record[0].message) == (
        f"tool name {name!r} is refused by the OpenAI and Anthropic APIs, which accept 1 to "
        "64 ASCII letters, digits, '_' and '-'"
    )
    assert record[0].filename == __file__


@pytest.mark.parametrize("name", ["read_file", "x" * 64, "a-b", "A1"])
def test_provider_safe_tool_names_pass(name: str) -> None:
    assert make_tool(name).name == name


def test_tool_fields_are_checked() -> None:
    with pytest.raises(TypeError) as info:
        make_tool(None)  # type: ignore[arg-type]
    assert str(info.value) == "AgentTool.name must be a str, got None"
    with pytest.raises(TypeError) as info:
        bad: Any = "{}"
        AgentTool(
            name="t", label="t", description="d", parameters=bad, execute=make_tool("t").execute
        )
    assert str(info.value) == "AgentTool.parameters must be a JSON Schema dict, got '{}'"
    with pytest.raises(TypeError) as info:
        AgentTool(name="t", label="t", description="d", parameters={}, execute=None)  # type: ignore[arg-type]
    assert str(info.value) == "AgentTool.execute must be callable, got None"


def test_duplicate_tool_names_are_refused() -> None:
    first, other, second = make_tool("search"), make_tool("read"), make_tool("search")
    with pytest.raises(ValueError) as info:
        check_tools([first, other, second], "state.tools")
    assert str(info.value) == "duplicate tool name 'search' at state.tools[0] and state.tools[2]"
    assert check_tools((first, other), "state.tools") == [first, other]


def test_tool_sets_hold_only_tools() -> None:
    with pytest.raises(TypeError) as info:
        check_tools([make_tool("a"), "b"], "AgentInitialState.tools")
    assert str(info.value) == "AgentInitialState.tools[1] must be an AgentTool, got 'b'"
    with pytest.raises(TypeError) as info:
        check_tools(make_tool("a"), "state.tools")
    assert str(info.value).startswith("state.tools must be a sequence of AgentTool, got AgentTool(")
