from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AgentEndEvent,
    AgentEvent,
    AgentMessage,
    AgentStartEvent,
    AgentToolResult,
    AssistantMessage,
    AssistantMessageEvent,
    Cost,
    CustomAgentMessage,
    DoneEvent,
    ErrorEvent,
    ImageContent,
    Message,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    Model,
    ModelCost,
    SerializationError,
    StartEvent,
    SystemMessage,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolDeclaration,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolReference,
    ToolResultMessage,
    TurnEndEvent,
    TurnStartEvent,
    Usage,
    UserMessage,
    register_message_type,
)
from trio_agent.serialization import (
    UPSTREAM_ONLY_KEYS,
    converter,
    dump_transcript,
    from_dict,
    from_json,
    load_transcript,
    to_dict,
    to_json,
)


@attrs.frozen(kw_only=True)
class BookmarkMessage:
    """An application message used to test registered roles."""

    label: str
    note_text: str | None = None
    timestamp: int = 0
    role: Literal["test-bookmark"] = "test-bookmark"


register_message_type(BookmarkMessage)


# ---------------------------------------------------------------------------------------
# Strategies

texts = st.text(max_size=12)
opt_texts = st.none() | texts
ints = st.integers(min_value=0, max_value=2**53)
floats = st.floats(allow_nan=False, allow_infinity=False)
# Free-form values are written as JSON.stringify writes them (reference parity.md N1): an
# integral float of 2**53 or more is written with JavaScript's digits (4.047784553350795e16
# as 40477845533507950) and reads back as that int, equal only in JavaScript's terms.
free_floats = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda x: abs(x) < 2**53 or not x.is_integer()
)
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | free_floats | texts,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(texts, children, max_size=3),
    max_leaves=6,
)
json_objects = st.dictionaries(texts, json_values, max_size=3)

text_blocks = st.builds(TextContent, text=texts, text_signature=opt_texts)
thinking_blocks = st.builds(
    ThinkingContent,
    thinking=texts,
    thinking_signature=opt_texts,
    redacted=st.none() | st.booleans(),
)
image_blocks = st.builds(
    ImageContent,
    data=st.binary(max_size=12).map(lambda raw: base64.b64encode(raw).decode()),
    mime_type=texts,
)
tool_calls = st.builds(
    ToolCall,
    id=texts,
    name=texts,
    arguments=json_objects,
    thought_signature=opt_texts,
    arguments_error=opt_texts,
)
costs = st.builds(
    Cost, input=floats, output=floats, cache_read=floats, cache_write=floats, total=floats
)
usages = st.builds(
    Usage,
    input=ints,
    output=ints,
    cache_read=ints,
    cache_write=ints,
    total_tokens=ints,
    reasoning=st.none() | ints,
    cost=costs,
)
declarations = st.builds(
    ToolDeclaration,
    name=texts,
    description=texts,
    parameters=json_objects,
    constrained_sampling=st.none() | st.just(False) | json_objects,
)
stop_reasons = st.sampled_from(["stop", "length", "toolUse", "error", "aborted", "pending"])
thinking_levels = st.sampled_from(["off", "minimal", "low", "medium", "high", "xhigh", "max"])

system_messages = st.builds(
    SystemMessage,
    content=texts | st.lists(text_blocks, max_size=2),
    sections=st.none() | st.dictionaries(texts, opt_texts, max_size=2),
    tools_added=st.none() | st.lists(declarations, max_size=2),
    tools_removed=st.none() | st.lists(st.builds(ToolReference, name=texts), max_size=2),
    timestamp=ints,
)
user_messages = st.builds(
    UserMessage,
    content=texts | st.lists(text_blocks | image_blocks, max_size=3),
    timestamp=ints,
)
assistant_messages = st.builds(
    AssistantMessage,
    content=st.lists(text_blocks | thinking_blocks | tool_calls, max_size=3),
    api=texts,
    provider=texts,
    model=texts,
    usage=usages,
    stop_reason=stop_reasons,
    error_message=opt_texts,
    response_id=opt_texts,
    response_model=opt_texts,
    thinking_level=st.none() | thinking_levels,
    duration_ms=st.none() | ints,
    timestamp=ints,
)
tool_result_messages = st.builds(
    ToolResultMessage,
    tool_call_id=texts,
    tool_name=texts,
    content=st.lists(text_blocks | image_blocks, max_size=2),
    details=json_values,
    usage=st.none() | usages,
    is_error=st.booleans(),
    duration_ms=st.none() | ints,
    timestamp=ints,
)
bookmark_messages = st.builds(BookmarkMessage, label=texts, note_text=opt_texts, timestamp=ints)
messages: st.SearchStrategy[Any] = (
    system_messages | user_messages | assistant_messages | tool_result_messages
)
agent_messages: st.SearchStrategy[Any] = messages | bookmark_messages

indexes = st.integers(min_value=0, max_value=10)
assistant_events: st.SearchStrategy[Any] = st.one_of(
    st.builds(StartEvent, partial=assistant_messages),
    st.builds(TextStartEvent, content_index=indexes, partial=assistant_messages),
    st.builds(TextDeltaEvent, content_index=indexes, delta=texts, partial=assistant_messages),
    st.builds(TextEndEvent, content_index=indexes, content=texts, partial=assistant_messages),
    st.builds(ThinkingStartEvent, content_index=indexes, partial=assistant_messages),
    st.builds(ThinkingDeltaEvent, content_index=indexes, delta=texts, partial=assistant_messages),
    st.builds(ThinkingEndEvent, content_index=indexes, content=texts, partial=assistant_messages),
    st.builds(ToolCallStartEvent, content_index=indexes, partial=assistant_messages),
    st.builds(ToolCallDeltaEvent, content_index=indexes, delta=texts, partial=assistant_messages),
    st.builds(
        ToolCallEndEvent, content_index=indexes, tool_call=tool_calls, partial=assistant_messages
    ),
    st.builds(
        DoneEvent, reason=st.sampled_from(["stop", "length", "toolUse"]), message=assistant_messages
    ),
    st.builds(ErrorEvent, reason=st.sampled_from(["error", "aborted"]), error=assistant_messages),
)
tool_results = st.builds(
    AgentToolResult,
    content=st.lists(text_blocks | image_blocks, max_size=2),
    details=json_values,
    structured_content=json_values,
    usage=st.none() | usages,
    is_error=st.none() | st.booleans(),
    terminate=st.none() | st.booleans(),
)
agent_events: st.SearchStrategy[Any] = st.one_of(
    st.just(AgentStartEvent()),
    st.builds(AgentEndEvent, messages=st.lists(agent_messages, max_size=2)),
    st.just(TurnStartEvent()),
    st.builds(
        TurnEndEvent,
        message=agent_messages,
        tool_results=st.lists(tool_result_messages, max_size=2),
    ),
    st.builds(MessageStartEvent, message=agent_messages),
    st.builds(
        MessageUpdateEvent, message=assistant_messages, assistant_message_event=assistant_events
    ),
    st.builds(MessageEndEvent, message=agent_messages),
    st.builds(ToolExecutionStartEvent, tool_call_id=texts, tool_name=texts, args=json_objects),
    st.builds(
        ToolExecutionUpdateEvent,
        tool_call_id=texts,
        tool_name=texts,
        args=json_objects,
        partial_result=tool_results,
    ),
    st.builds(
        ToolExecutionEndEvent,
        tool_call_id=texts,
        tool_name=texts,
        result=tool_results,
        is_error=st.booleans(),
        duration_ms=st.none() | ints,
    ),
)
models = st.builds(
    Model,
    id=texts,
    name=texts,
    api=texts,
    provider=texts,
    base_url=texts,
    reasoning=st.booleans(),
    input=st.lists(st.sampled_from(["text", "image"]), max_size=2),
    cost=st.builds(ModelCost, input=floats, output=floats, cache_read=floats, cache_write=floats),
    context_window=ints,
    max_tokens=ints,
    headers=st.none() | st.dictionaries(texts, texts, max_size=2),
    compat=st.none() | json_objects,
    thinking_level_map=st.none() | st.dictionaries(texts, opt_texts, max_size=2),
)


def assert_no_none_values(data: Any) -> None:
    """Optional fields are omitted, never written as null (outside free-form values)."""
    assert isinstance(data, dict)
    for key, value in data.items():
        assert value is not None, key


# ---------------------------------------------------------------------------------------
# Round trips


@settings(max_examples=50, deadline=None)
@given(agent_messages)
def test_agent_message_round_trip(message: Any) -> None:
    text = to_json(message)
    assert from_json(text, AgentMessage) == message
    assert from_json(text, type(message)) == message
    assert from_dict(json.loads(text), AgentMessage) == message


@settings(max_examples=50, deadline=None)
@given(messages)
def test_message_round_trip(message: Any) -> None:
    assert from_json(to_json(message), Message) == message


@settings(max_examples=50, deadline=None)
@given(agent_events)
def test_agent_event_round_trip(event: Any) -> None:
    text = to_json(event)
    assert json.loads(text)["type"] == event.type
    assert from_json(text, AgentEvent) == event
    assert from_json(text, type(event)) == event


@settings(max_examples=50, deadline=None)
@given(assistant_events)
def test_assistant_message_event_round_trip(event: Any) -> None:
    assert from_json(to_json(event), AssistantMessageEvent) == event


@settings(max_examples=50, deadline=None)
@given(st.one_of(text_blocks, thinking_blocks, image_blocks, tool_calls))
def test_content_block_round_trip(block: Any) -> None:
    assert from_json(to_json(block), type(block)) == block
    assert from_dict(to_dict(block), TextContent | ThinkingContent | ImageContent | ToolCall) == (
        block
    )


@settings(max_examples=50, deadline=None)
@given(st.one_of(usages, models, declarations, tool_results))
def test_value_round_trip(value: Any) -> None:
    assert from_json(to_json(value), type(value)) == value


def test_list_round_trip() -> None:
    values = [UserMessage(content="a", timestamp=1), BookmarkMessage(label="b")]
    assert from_json(to_json(values), list[AgentMessage]) == values


# ---------------------------------------------------------------------------------------
# Exact wire shapes


def test_user_message_json() -> None:
    assert to_json(UserMessage(content="héllo", timestamp=1700000000000)) == (
        '{"role":"user","content":"héllo","timestamp":1700000000000}'
    )


def test_assistant_message_json() -> None:
    message = AssistantMessage(
        content=[
            ThinkingContent(thinking="hmm", thinking_signature="sig"),
            TextContent(text="ok"),
            ToolCall(id="c1", name="echo", arguments={"text": "hi"}, thought_signature="ts"),
        ],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-x",
        usage=Usage(input=1, output=2, total_tokens=3, reasoning=1),
        stop_reason="toolUse",
        response_id="msg_1",
        duration_ms=12,
        timestamp=1700000000000,
    )
    assert json.loads(to_json(message)) == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
            {"type": "text", "text": "ok"},
            {
                "type": "toolCall",
                "id": "c1",
                "name": "echo",
                "arguments": {"text": "hi"},
                "thoughtSignature": "ts",
            },
        ],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-x",
        "usage": {
            "input": 1,
            "output": 2,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 3,
            "reasoning": 1,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": "toolUse",
        "responseId": "msg_1",
        "durationMs": 12,
        "timestamp": 1700000000000,
    }


def test_tool_result_message_json_omits_none_details() -> None:
    message = ToolResultMessage(
        tool_call_id="c1",
        tool_name="echo",
        content=[TextContent(text="hi"), ImageContent(data="AAAA", mime_type="image/png")],
        timestamp=5,
    )
    assert to_json(message) == (
        '{"role":"toolResult","toolCallId":"c1","toolName":"echo","content":'
        '[{"type":"text","text":"hi"},{"type":"image","data":"AAAA","mimeType":"image/png"}],'
        '"isError":false,"timestamp":5}'
    )
    assert_no_none_values(to_dict(message))


def test_system_message_json() -> None:
    message = SystemMessage(
        content="base",
        sections={"a": "x", "b": None},
        tools_added=[
            ToolDeclaration(
                name="t", description="d", parameters={"type": "object"}, constrained_sampling=False
            )
        ],
        tools_removed=[ToolReference(name="old")],
        timestamp=0,
    )
    assert to_json(message) == (
        '{"role":"system","content":"base","sections":{"a":"x","b":null},'
        '"toolsAdded":[{"name":"t","description":"d","parameters":{"type":"object"},'
        '"constrainedSampling":false}],"toolsRemoved":[{"name":"old"}],"timestamp":0}'
    )


def test_event_json() -> None:
    event = ToolExecutionEndEvent(
        tool_call_id="c1",
        tool_name="echo",
        result=AgentToolResult(
            content=[TextContent(text="done")], structured_content={"n": 1}, is_error=True
        ),
        is_error=True,
        duration_ms=7,
    )
    assert to_json(event) == (
        '{"type":"tool_execution_end","toolCallId":"c1","toolName":"echo","result":'
        '{"content":[{"type":"text","text":"done"}],"structuredContent":{"n":1},"isError":true},'
        '"isError":true,"durationMs":7}'
    )
    update = MessageUpdateEvent(
        message=AssistantMessage(content=[], api="a", provider="p", model="m", timestamp=1),
        assistant_message_event=TextStartEvent(
            content_index=0,
            partial=AssistantMessage(content=[], api="a", provider="p", model="m", timestamp=1),
        ),
    )
    data = to_dict(update)
    assert list(data) == ["type", "message", "assistantMessageEvent"]
    assert list(data["assistantMessageEvent"]) == ["type", "contentIndex", "partial"]


def test_model_json() -> None:
    model = Model(
        id="m1",
        name="M1",
        api="openai-completions",
        provider="openai",
        base_url="https://example.invalid/v1",
        context_window=1000,
        max_tokens=100,
        thinking_level_map={"xhigh": None},
    )
    assert to_dict(model) == {
        "id": "m1",
        "name": "M1",
        "api": "openai-completions",
        "provider": "openai",
        "baseUrl": "https://example.invalid/v1",
        "reasoning": False,
        "input": ["text"],
        "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0},
        "contextWindow": 1000,
        "maxTokens": 100,
        "thinkingLevelMap": {"xhigh": None},
    }


def test_converter_is_not_the_global_one() -> None:
    import cattrs

    assert converter is not cattrs.global_converter
    assert to_dict(UserMessage(content="x", timestamp=1)) == converter.unstructure(
        UserMessage(content="x", timestamp=1)
    )


# ---------------------------------------------------------------------------------------
# Application messages


def test_custom_message_round_trip() -> None:
    message = BookmarkMessage(label="here", note_text="n", timestamp=3)
    text = to_json(message)
    assert text == '{"role":"test-bookmark","label":"here","noteText":"n","timestamp":3}'
    assert from_json(text, AgentMessage) == message
    assert from_json(text, CustomAgentMessage) == message
    assert from_json(text, BookmarkMessage) == message
    event = MessageEndEvent(message=message)
    assert from_json(to_json(event), AgentEvent) == event


def test_custom_role_is_not_a_message() -> None:
    text = to_json(BookmarkMessage(label="here"))
    with pytest.raises(SerializationError) as info:
        from_json(text, Message)
    assert str(info.value) == "unknown role 'test-bookmark'"
    with pytest.raises(SerializationError) as info:
        from_json('{"role":"user","content":"x"}', CustomAgentMessage)
    assert str(info.value) == "unknown role 'user'"


# ---------------------------------------------------------------------------------------
# Transcripts

UPSTREAM_LINES = [
    '{"role":"system","content":"You are helpful.","toolsAdded":[{"name":"echo",'
    '"description":"Echo text","parameters":{"type":"object","properties":{"text":'
    '{"type":"string"}},"required":["text"]}}],"timestamp":0}',
    '{"role":"user","content":[{"type":"text","text":"say hi"},'
    '{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"timestamp":1699999999000}',
    '{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"echo","arguments":'
    '{"text":"hi"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-x",'
    '"usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":'
    '{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse",'
    '"timestamp":1700000000000}',
    '{"role":"toolResult","toolCallId":"c1","toolName":"echo","content":[{"type":"text",'
    '"text":"hi"}],"details":{"echoed":true},"isError":false,"timestamp":1700000000100,'
    '"durationMs":4,"nestedCalls":{"calls":[],"complete":true}}',
    '{"role":"assistant","content":[{"type":"thinking","thinking":"done","thinkingSignature":'
    '"sig","redacted":false},{"type":"text","text":"hi","textSignature":"t1"}],'
    '"api":"openai-responses","provider":"openai","model":"gpt-x","responseModel":"gpt-x-1",'
    '"responseId":"resp_1","providerThinkingLevel":"medium","thinkingLevel":"medium",'
    '"diagnostics":[{"type":"openai_input_transformations","timestamp":1}],'
    '"usage":{"input":10,"output":5,"cacheRead":2,"cacheWrite":1,"cacheWrite1h":0,'
    '"reasoning":3,"totalTokens":18,"cost":{"input":0.5,"output":0.25,"cacheRead":0,'
    '"cacheWrite":0,"total":0.75,"totalFromProvider":false}},"stopReason":"stop",'
    '"rawStopReason":"completed","timestamp":1700000000200,"durationMs":250}',
]

UPSTREAM_MESSAGES: list[AgentMessage] = [
    SystemMessage(
        content="You are helpful.",
        tools_added=[
            ToolDeclaration(
                name="echo",
                description="Echo text",
                parameters={
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                },
            )
        ],
        timestamp=0,
    ),
    UserMessage(
        content=[
            TextContent(text="say hi"),
            ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
        ],
        timestamp=1699999999000,
    ),
    AssistantMessage(
        content=[ToolCall(id="c1", name="echo", arguments={"text": "hi"})],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-x",
        usage=Usage(input=1, output=2, total_tokens=3),
        stop_reason="toolUse",
        timestamp=1700000000000,
    ),
    ToolResultMessage(
        tool_call_id="c1",
        tool_name="echo",
        content=[TextContent(text="hi")],
        details={"echoed": True},
        timestamp=1700000000100,
        duration_ms=4,
    ),
    AssistantMessage(
        content=[
            ThinkingContent(thinking="done", thinking_signature="sig", redacted=False),
            TextContent(text="hi", text_signature="t1"),
        ],
        api="openai-responses",
        provider="openai",
        model="gpt-x",
        response_model="gpt-x-1",
        response_id="resp_1",
        thinking_level="medium",
        usage=Usage(
            input=10,
            output=5,
            cache_read=2,
            cache_write=1,
            reasoning=3,
            total_tokens=18,
            cost=Cost(input=0.5, output=0.25, total=0.75),
        ),
        stop_reason="stop",
        timestamp=1700000000200,
        duration_ms=250,
    ),
]


def test_load_upstream_transcript() -> None:
    loaded = load_transcript(io.StringIO("\n".join(UPSTREAM_LINES) + "\n"))
    assert loaded == UPSTREAM_MESSAGES
    # Every line survives a round trip byte for byte, upstream-only keys and key order
    # included.
    assert [to_json(message) for message in loaded] == UPSTREAM_LINES


def test_upstream_only_keys_are_documented() -> None:
    assert UPSTREAM_ONLY_KEYS[AssistantMessage] == frozenset(
        {"providerThinkingLevel", "diagnostics", "deferred", "rawStopReason", "endTurn"}
    )
    assert UPSTREAM_ONLY_KEYS[ToolResultMessage] == frozenset({"nestedCalls"})
    assert UPSTREAM_ONLY_KEYS[Usage] == frozenset({"cacheWrite1h"})
    assert UPSTREAM_ONLY_KEYS[Cost] == frozenset({"totalFromProvider"})


def test_upstream_only_key_on_another_class_is_rejected() -> None:
    with pytest.raises(SerializationError) as info:
        from_json('{"role":"user","content":"x","timestamp":1,"rawStopReason":"x"}', AgentMessage)
    assert str(info.value) == "unknown key 'rawStopReason' in UserMessage"


def test_dump_and_load_path(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    transcript: list[AgentMessage] = [*UPSTREAM_MESSAGES, BookmarkMessage(label="é", timestamp=9)]
    dump_transcript(path, transcript)
    lines = path.read_text(encoding="utf-8").split("\n")
    assert len(lines) == len(transcript) + 1
    assert lines[-1] == ""
    assert lines[-2] == '{"role":"test-bookmark","label":"é","timestamp":9}'
    assert load_transcript(path) == transcript
    assert load_transcript(str(path)) == transcript


def test_dump_to_open_file_and_skip_blank_lines() -> None:
    buffer = io.StringIO()
    dump_transcript(buffer, UPSTREAM_MESSAGES[:2])
    assert buffer.getvalue().count("\n") == 2
    text = "\n  \n" + buffer.getvalue().replace("\n", "\n\n")
    assert load_transcript(io.StringIO(text)) == UPSTREAM_MESSAGES[:2]
    assert load_transcript(io.StringIO("")) == []


def test_dump_unserializable_names_the_line() -> None:
    bad = ToolResultMessage(
        tool_call_id="c", tool_name="t", content=[], details=complex(1, 2), timestamp=1
    )
    with pytest.raises(SerializationError) as info:
        dump_transcript(io.StringIO(), [UPSTREAM_MESSAGES[0], bad])
    assert str(info.value) == (
        "line 2: ToolResultMessage.details: cannot write 'complex' values as JSON"
    )


# ---------------------------------------------------------------------------------------
# Errors


def load_error(lines: list[str]) -> str:
    with pytest.raises(SerializationError) as info:
        load_transcript(io.StringIO("\n".join(lines)))
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__
    return str(info.value)


def test_malformed_line_names_its_number() -> None:
    assert load_error([UPSTREAM_LINES[0], '{"role": "user",']) == (
        "line 2: invalid JSON: Expecting property name enclosed in double quotes at column 17"
    )
    assert load_error(["", "NaN"]) == "line 2: invalid JSON: NaN is not valid JSON"


def test_malformed_line_end_column() -> None:
    # An error at the very end of a line that has a line end after it is reported at
    # that position, not at column 1 of a next line.
    assert load_error([UPSTREAM_LINES[0], '{"role": "user",', ""]) == (
        "line 2: invalid JSON: Expecting property name enclosed in double quotes at column 17"
    )
    with pytest.raises(SerializationError) as info:
        load_transcript(io.StringIO('{"role":"user","content":"x"\r\n'))
    assert str(info.value) == ("line 1: invalid JSON: Expecting ',' delimiter at column 29")


def test_required_wire_keys_on_load() -> None:
    # Python construction fills in defaults ...
    assert isinstance(UserMessage(content="x").timestamp, int)
    assert ToolResultMessage(tool_call_id="c", tool_name="t", content=[]).is_error is False
    # ... loading does not: these keys are not optional on the wire.
    assert load_error(['{"role":"user","content":"x"}']) == "line 1: missing key 'timestamp'"
    assert load_error(['{"role":"system","content":"x"}']) == "line 1: missing key 'timestamp'"
    assert load_error(
        [
            UPSTREAM_LINES[0],
            '{"role":"assistant","content":[],"api":"a","provider":"p","model":"m"}',
        ]
    ) == ("line 2: missing key 'usage'; missing key 'stopReason'; missing key 'timestamp'")
    line = '{"role":"toolResult","toolCallId":"c","toolName":"t","content":[],"timestamp":1}'
    assert load_error([line]) == "line 1: missing key 'isError'"
    # Other problems of the same object are still reported, and nested paths are named.
    line = '{"role":"user","content":"x","extra":1}'
    assert load_error([line]) == (
        "line 1: missing key 'timestamp'; unknown key 'extra' in UserMessage"
    )
    with pytest.raises(SerializationError) as info:
        from_json('{"type":"message_start","message":{"role":"user","content":"x"}}', AgentEvent)
    assert str(info.value) == "missing key 'timestamp' @ $.message"
    with pytest.raises(SerializationError) as info:
        from_dict({"role": "user", "content": "x"}, UserMessage)
    assert str(info.value) == "missing key 'timestamp'"


def test_lone_surrogates_are_escaped() -> None:
    message = UserMessage(content="bad \ud83d and \udc00", timestamp=1)
    text = to_json(message)
    assert text == '{"role":"user","content":"bad \\ud83d and \\udc00","timestamp":1}'
    assert from_json(text, AgentMessage) == message
    buffer = io.StringIO()
    dump_transcript(buffer, [message])
    assert buffer.getvalue() == text + "\n"
    assert load_transcript(io.StringIO(buffer.getvalue())) == [message]
    # A proper pair (one code point) is kept as is.
    assert to_json(UserMessage(content="\U0001f600", timestamp=1)) == (
        '{"role":"user","content":"\U0001f600","timestamp":1}'
    )


def test_lone_surrogates_dump_to_path(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    message = ToolResultMessage(
        tool_call_id="c", tool_name="t", content=[TextContent(text="\udfff")], timestamp=2
    )
    dump_transcript(path, [message])
    assert path.read_bytes().decode("ascii").count("\\udfff") == 1
    assert load_transcript(path) == [message]


def test_unknown_role() -> None:
    assert load_error([UPSTREAM_LINES[0], "", '{"role":"bogus"}']) == (
        "line 3: unknown role 'bogus'"
    )
    assert load_error(['{"content":"x"}']) == "line 1: missing key 'role'"
    assert load_error(["[1, 2]"]) == "line 1: expected a JSON object, got an array"


def test_unknown_type() -> None:
    line = '{"role":"user","content":[{"type":"text","text":"a"},{"type":"video"}],"timestamp":1}'
    assert load_error([line]) == "line 1: unknown type 'video' @ $.content[1]"
    # A known block type where it is not allowed (thinking in a user message).
    line = '{"role":"user","content":[{"type":"thinking","thinking":"a"}],"timestamp":1}'
    assert load_error([line]) == "line 1: unknown type 'thinking' @ $.content[0]"
    with pytest.raises(SerializationError) as info:
        from_json('{"type":"bogus_event"}', AgentEvent)
    assert str(info.value) == "unknown type 'bogus_event'"


def test_unknown_key() -> None:
    line = (
        '{"role":"user","content":[{"type":"text","text":"a","bold":true}],'
        '"timestamp":1,"extra":1,"more":2}'
    )
    assert load_error([line]) == (
        "line 1: unknown key 'bold' in TextContent @ $.content[0]; "
        "unknown keys 'extra', 'more' in UserMessage"
    )
    # Python attribute names are not wire names.
    line = (
        '{"role":"toolResult","tool_call_id":"c","toolName":"t","content":[],"isError":false,'
        '"timestamp":1}'
    )
    assert load_error([line]) == (
        "line 1: missing key 'toolCallId'; unknown key 'tool_call_id' in ToolResultMessage"
    )


def test_wrong_values() -> None:
    line = (
        '{"role":"assistant","content":"x","api":"a","provider":"p","model":"m",'
        '"usage":{"input":"1"},"stopReason":"deferred","timestamp":1.5}'
    )
    assert load_error([line]) == (
        "line 1: expected an array, got a string @ $.content; "
        "expected an integer, got '1' @ $.usage.input; "
        "invalid value 'deferred' (expected one of 'stop', 'length', 'toolUse', 'error', "
        "'aborted', 'pending') @ $.stopReason; "
        "expected an integer, got 1.5 @ $.timestamp"
    )
    with pytest.raises(SerializationError) as info:
        from_json('{"role":"system","sections":{"a":3},"timestamp":0}', SystemMessage)
    assert str(info.value) == 'expected a string, got 3 @ $.sections["a"]'
    with pytest.raises(SerializationError) as info:
        from_json("{", UserMessage)
    assert str(info.value) == (
        "invalid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )


def test_unsupported_class() -> None:
    class NotSerializable:
        pass

    with pytest.raises(TypeError) as info:
        from_json("{}", NotSerializable)
    assert str(info.value).startswith("trio_agent.serialization cannot load <class ")
