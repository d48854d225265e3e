"""The JSON that trio_agent writes is the JSON pi 1.6.0 writes (reference parity.md N1 and
the transcript item of issue 10): numbers as ``JSON.stringify`` writes them, and keys
that pi writes but trio_agent does not model kept through a load/dump round trip."""

from __future__ import annotations

import io
from typing import Any

import attrs
import pytest

from trio_agent import (
    AssistantMessage,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from trio_agent.serialization import (
    WireExtras,
    dump_transcript,
    from_dict,
    load_transcript,
    to_dict,
    to_json,
)


def _details_json(value: Any) -> str:
    message = ToolResultMessage(
        tool_call_id="c", tool_name="t", content=[], details=value, timestamp=1
    )
    text = to_json(message)
    head = '{"role":"toolResult","toolCallId":"c","toolName":"t","content":[],"details":'
    tail = ',"isError":false,"timestamp":1}'
    assert text.startswith(head)
    assert text.endswith(tail)
    return text[len(head) : -len(tail)]


# -- N1: numbers as JSON.stringify writes them -----------------------------------------------


def test_usage_costs_are_written_as_integers() -> None:
    assert to_json(Usage()) == (
        '{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,'
        '"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}'
    )
    assert '"total":0}' in to_json(Usage())


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (-0.0, "0"),
        (5.0, "5"),
        (1.5e-07, "1.5e-7"),
        (1e-07, "1e-7"),
        (2.5e-05, "0.000025"),
        (1e-06, "0.000001"),
        (1e16, "10000000000000000"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (0.1 + 0.2, "0.30000000000000004"),
        (7, "7"),
        (-(2**60), "-1152921504606846976"),
        (10**30, "1000000000000000000000000000000"),
        (float("nan"), "null"),
        (float("inf"), "null"),
        (float("-inf"), "null"),
    ],
)
def test_numbers_are_written_as_json_stringify_does(value: float, text: str) -> None:
    assert _details_json(value) == text
    assert _details_json([value]) == f"[{text}]"
    assert _details_json({"n": value}) == f'{{"n":{text}}}'


def test_dump_transcript_writes_javascript_numbers() -> None:
    buffer = io.StringIO()
    dump_transcript(
        buffer,
        [
            ToolResultMessage(
                tool_call_id="c",
                tool_name="t",
                content=[],
                details={"ratio": 5.0, "tiny": 1.5e-07},
                usage=Usage(),
                timestamp=1,
            )
        ],
    )
    line = buffer.getvalue()
    assert '"details":{"ratio":5,"tiny":1.5e-7}' in line
    assert '"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}' in line
    assert load_transcript(io.StringIO(line))[0] == ToolResultMessage(
        tool_call_id="c",
        tool_name="t",
        content=[],
        details={"ratio": 5, "tiny": 1.5e-07},
        usage=Usage(),
        timestamp=1,
    )


# -- keys pi writes that trio_agent does not model -------------------------------------------

# Lines written by pi-agent-core 1.6.0's Agent (JSON.stringify of each message) with its
# faux provider: a tool call, its result and the answer.
PI_FAUX_SESSION = [
    '{"role":"system","content":"Be brief.","toolsAdded":[{"name":"read","description":"read a'
    ' file","parameters":{"type":"object","properties":{"path":{"type":"string"},"n":{"type":'
    '"number"}},"required":["path"]}}],"timestamp":0}',
    '{"role":"user","content":[{"type":"text","text":"read a.txt"}],"timestamp":1796301677341}',
    '{"role":"assistant","content":[{"type":"thinking","thinking":"plan"},{"type":"toolCall",'
    '"id":"call_1","name":"read","arguments":{"path":"a.txt","n":1.5,"big":12345678901234567000'
    '}}],"api":"faux:1796301677332:5hq9fvowm6x","provider":"faux","model":"faux-1","usage":{'
    '"input":49,"output":16,"cacheRead":0,"cacheWrite":0,"totalTokens":65,"cost":{"input":0,'
    '"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":'
    '1796301677332,"thinkingLevel":"off"}',
    '{"role":"toolResult","toolCallId":"call_1","toolName":"read","content":[{"type":"text",'
    '"text":"contents"}],"details":{"bytes":8,"ratio":0.5,"nested":{"2":1,"a":[1,2.5e-7]}},'
    '"isError":false,"durationMs":0,"timestamp":1796301677370}',
    '{"role":"assistant","content":[{"type":"text","text":"done: 0.1"}],"api":'
    '"faux:1796301677332:5hq9fvowm6x","provider":"faux","model":"faux-1","usage":{"input":74,'
    '"output":3,"cacheRead":0,"cacheWrite":0,"totalTokens":77,"cost":{"input":0,"output":0,'
    '"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1796301677332,'
    '"thinkingLevel":"off"}',
]

# The shapes pi 1.6.0's HTTP providers build (reference upstream-ai.md §1.1-§1.3): keys in
# the order the provider sets them, so later keys (responseId, rawStopReason, durationMs,
# the agent's thinkingLevel, usage.cacheWrite1h, cost.totalFromProvider) come after the
# ones the message starts with.
PI_PROVIDER_LINES = [
    # anthropic-messages, managed effort, 1-hour cache writes
    '{"role":"assistant","content":[{"type":"thinking","thinking":"Let me look.",'
    '"thinkingSignature":"EqQBCkgIBxABGAIiQ"},{"type":"toolCall","id":"toolu_01","name":"read",'
    '"arguments":{"path":"a.txt"}}],"api":"anthropic-messages","provider":"anthropic","model":'
    '"claude-sonnet-4-5","usage":{"input":12,"output":30,"cacheRead":0,"cacheWrite":100,'
    '"totalTokens":142,"cost":{"input":0.000036,"output":0.00045,"cacheRead":0,"cacheWrite":'
    '0.000495,"total":0.000981,"totalFromProvider":false},"cacheWrite1h":40},"stopReason":'
    '"toolUse","timestamp":1700000000000,"providerThinkingLevel":"high","responseId":"msg_01",'
    '"rawStopReason":"tool_use","durationMs":1234,"thinkingLevel":"high"}',
    # openai-responses: namespaced tool call, diagnostics, reasoning tokens set late
    '{"role":"assistant","content":[{"type":"toolCall","id":"call_9|fc_9","name":"search",'
    '"arguments":{"q":"trio"},"namespace":"web"}],"api":"openai-responses","provider":"openai",'
    '"model":"gpt-5","usage":{"input":100,"output":20,"cacheRead":0,"cacheWrite":0,'
    '"totalTokens":120,"cost":{"input":0.000125,"output":0.0002,"cacheRead":0,"cacheWrite":0,'
    '"total":0.000325,"totalFromProvider":false},"reasoning":8},"stopReason":"toolUse",'
    '"timestamp":1700000001000,"diagnostics":[{"type":"openai_input_transformations",'
    '"timestamp":1700000001001,"details":{"dropped":2}}],"responseId":"resp_1","rawStopReason":'
    '"completed","durationMs":250}',
    # openai-completions error
    '{"role":"assistant","content":[],"api":"openai-completions","provider":"openrouter","model"'
    ':"x/y","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":'
    '{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"error",'
    '"timestamp":1700000002000,"errorMessage":"429 rate limited","rawStopReason":"error"}',
    # a tool result with the session record of nested calls
    '{"role":"toolResult","toolCallId":"toolu_01","toolName":"read","content":[{"type":"text",'
    '"text":"contents"}],"details":{"bytes":8},"nestedCalls":{"calls":[{"id":"n1","name":"ls",'
    '"status":"ok","durationMs":3}],"complete":true},"isError":false,"timestamp":1700000000500}',
]


@pytest.mark.parametrize("lines", [PI_FAUX_SESSION, PI_PROVIDER_LINES])
def test_pi_transcript_loads_and_dumps_back_byte_for_byte(lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    messages = load_transcript(io.StringIO(text))
    assert len(messages) == len(lines)
    buffer = io.StringIO()
    dump_transcript(buffer, messages)
    assert buffer.getvalue() == text
    # Each value alone too.
    assert [to_json(message) for message in messages] == lines


def test_unmodelled_keys_are_kept_but_do_not_change_equality() -> None:
    anthropic, responses, _, result = load_transcript(io.StringIO("\n".join(PI_PROVIDER_LINES)))
    assert isinstance(anthropic, AssistantMessage)
    assert anthropic.wire_extras is not None
    assert dict(anthropic.wire_extras.values) == {
        "providerThinkingLevel": "high",
        "rawStopReason": "tool_use",
    }
    assert anthropic.usage.wire_extras is not None
    assert dict(anthropic.usage.wire_extras.values) == {"cacheWrite1h": 40}
    assert anthropic.usage.cost.wire_extras is not None
    assert dict(anthropic.usage.cost.wire_extras.values) == {"totalFromProvider": False}
    assert isinstance(responses, AssistantMessage)
    call = responses.content[0]
    assert isinstance(call, ToolCall)
    assert call.wire_extras is not None
    assert dict(call.wire_extras.values) == {"namespace": "web"}
    assert call == ToolCall(id="call_9|fc_9", name="search", arguments={"q": "trio"})
    assert "namespace" not in repr(call)
    assert isinstance(result, ToolResultMessage)
    assert result.wire_extras is not None
    assert "nestedCalls" in result.wire_extras.values
    # Equal to the same message built in Python, which writes trio_agent's own order.
    rebuilt = attrs.evolve(anthropic, wire_extras=None)
    assert rebuilt == anthropic
    assert to_json(rebuilt) != PI_PROVIDER_LINES[0]
    assert '"rawStopReason"' not in to_json(rebuilt)


def test_a_field_set_later_is_written_after_the_loaded_keys() -> None:
    (message,) = load_transcript(io.StringIO(PI_PROVIDER_LINES[2]))
    assert isinstance(message, AssistantMessage)
    changed = attrs.evolve(message, response_id="gen-1")
    assert to_json(changed) == PI_PROVIDER_LINES[2][:-1] + ',"responseId":"gen-1"}'
    # A modelled field cleared later is simply left out.
    cleared = attrs.evolve(message, error_message=None)
    assert '"errorMessage"' not in to_json(cleared)
    assert '"rawStopReason":"error"' in to_json(cleared)


def test_extras_cannot_shadow_a_modelled_field() -> None:
    block = TextContent(text="real", wire_extras=WireExtras(values={"text": "fake", "x": 1}))
    assert to_json(block) == '{"type":"text","text":"real","x":1}'


def test_built_in_order_needs_no_extras() -> None:
    (user,) = load_transcript(io.StringIO(PI_FAUX_SESSION[1]))
    assert isinstance(user, UserMessage)
    assert user.wire_extras is None
    assert isinstance(user.content, list)
    assert user.content[0].wire_extras is None


def test_model_only_keys_are_still_dropped() -> None:
    data = to_dict(
        Model(id="m", name="M", api="faux", provider="faux", base_url="http://localhost")
    )
    data["inputLimits"] = {"image": 5}
    data["cost"]["tiers"] = []
    model = from_dict(data, Model)
    assert "inputLimits" not in to_json(model)
    assert "tiers" not in to_json(model)
