"""U49 · U54: strict tools only for constrained tools, with the schema converted."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sse_server import SseServer
from test_anthropic import collect as anthropic_collect
from test_anthropic import final_error
from test_anthropic import make_model as anthropic_model
from test_anthropic import request_body as anthropic_body
from test_openai_completions import make_model as completions_model
from test_openai_responses import make_model as responses_model
from test_openai_responses import request_body as responses_body

from trio_agent import LlmContext, StreamOptions, SystemMessage, ToolDeclaration, UserMessage
from trio_agent.models._openai_completions import build_openai_completions_body
from trio_agent.models._strict_tools import StrictSchemaError, strict_tool_schema

AB = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a"],
}
STRICT_AB = {
    "type": "object",
    "properties": {
        "a": {"type": "integer"},
        "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    },
    "required": ["a", "b"],
    "additionalProperties": False,
}
CONSTRAINED = ToolDeclaration(
    name="sum",
    description="Add",
    parameters=AB,
    constrained_sampling={"type": "json_schema", "strict": "prefer"},
)
PLAIN = ToolDeclaration(name="plain", description="Plain", parameters=AB)


def transcript(*tools: ToolDeclaration) -> list[Any]:
    return [
        SystemMessage(content="Sys.", tools_added=list(tools), timestamp=0),
        UserMessage(content="hi", timestamp=1),
    ]


def test_the_schema_conversion() -> None:
    assert strict_tool_schema(AB) == STRICT_AB
    nested = {
        "type": "object",
        "properties": {
            "list": {
                "type": "array",
                "items": {"type": "object", "properties": {"x": {"type": "string"}}},
            },
            "maybe": {"type": ["string", "null"]},
            "either": {"anyOf": [{"type": "string"}, {"type": "number"}]},
        },
        "required": ["list"],
    }
    assert strict_tool_schema(nested) == {
        "type": "object",
        "properties": {
            "list": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
                    "required": ["x"],
                    "additionalProperties": False,
                },
            },
            "maybe": {"type": ["string", "null"]},
            "either": {
                "anyOf": [
                    {"anyOf": [{"type": "string"}, {"type": "number"}]},
                    {"type": "null"},
                ]
            },
        },
        "required": ["list", "maybe", "either"],
        "additionalProperties": False,
    }
    assert AB["required"] == ["a"]  # the input is not changed


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}, "parameters.a uses $ref"),
        ({"type": "object", "$defs": {}}, "parameters uses $defs"),
        ({"type": "object", "properties": {"a": {"allOf": []}}}, "parameters.a uses allOf"),
        ({"type": "object", "properties": {"a": {"oneOf": []}}}, "parameters.a uses oneOf"),
        ({"type": "object", "patternProperties": {}}, "parameters uses patternProperties"),
        ({"type": "object", "properties": {"a": {"not": {}}}}, "parameters.a uses not"),
        ({"type": "object", "if": {}}, "parameters uses if"),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "array", "items": [{"type": "string"}]}},
            },
            "parameters.a is a tuple",
        ),
        ({"type": "object", "properties": {"a": {}}}, "parameters.a has no type"),
        (
            {"type": "object", "properties": {"a": {"anyOf": [{"type": "object"}]}}},
            "parameters.a.anyOf[0] is an object branch",
        ),
        (
            {"type": "object", "properties": {"a": {"anyOf": [{"type": "array"}]}}},
            "parameters.a.anyOf[0] is an array branch",
        ),
        (
            {"type": "object", "additionalProperties": True},
            "parameters allows additional properties",
        ),
    ],
)
def test_schemas_that_cannot_be_strict(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(StrictSchemaError) as caught:
        strict_tool_schema(schema)
    assert str(caught.value) == reason


def completions_tools(*tools: ToolDeclaration, **compat: Any) -> list[dict[str, Any]]:
    model = completions_model("http://127.0.0.1:1", compat=compat)
    body = build_openai_completions_body(
        model, LlmContext(messages=transcript(*tools)), StreamOptions()
    )
    result: list[dict[str, Any]] = body["tools"]
    return result


def test_completions_strict_tools() -> None:
    supported = completions_tools(CONSTRAINED, PLAIN, supportsStrictMode=True)
    assert supported == [
        {
            "type": "function",
            "function": {
                "name": "sum",
                "description": "Add",
                "parameters": STRICT_AB,
                "strict": True,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "plain",
                "description": "Plain",
                "parameters": AB,
                "strict": False,
            },
        },
    ]
    unsupported = completions_tools(CONSTRAINED, PLAIN)
    assert [tool["function"] for tool in unsupported] == [
        {"name": "sum", "description": "Add", "parameters": AB},
        {"name": "plain", "description": "Plain", "parameters": AB},
    ]


def test_responses_strict_tools() -> None:
    body = responses_body(
        responses_model(compat={"supportsStrictMode": True}), transcript(CONSTRAINED, PLAIN)
    )
    assert body["tools"] == [
        {
            "type": "function",
            "name": "sum",
            "description": "Add",
            "parameters": STRICT_AB,
            "strict": True,
        },
        {
            "type": "function",
            "name": "plain",
            "description": "Plain",
            "parameters": AB,
            "strict": False,
        },
    ]
    plain = responses_body(responses_model(), transcript(CONSTRAINED))
    assert "strict" not in plain["tools"][0]
    assert plain["tools"][0]["parameters"] == AB


def test_anthropic_strict_tools() -> None:
    model = anthropic_model(compat={"supportsStrictTools": True, "cacheRetention": "none"})
    body = anthropic_body(model, transcript(CONSTRAINED, PLAIN))
    assert body["tools"] == [
        {
            "name": "sum",
            "description": "Add",
            "eager_input_streaming": True,
            "input_schema": STRICT_AB,
            "strict": True,
        },
        {
            "name": "plain",
            "description": "Plain",
            "eager_input_streaming": True,
            "input_schema": {**AB},
        },
    ]


def test_prefer_falls_back_and_require_fails() -> None:
    unconvertible = {"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}
    prefer = ToolDeclaration(
        name="t",
        description="d",
        parameters=unconvertible,
        constrained_sampling={"type": "json_schema", "strict": "prefer"},
    )
    (tool,) = completions_tools(prefer, supportsStrictMode=True)
    assert tool["function"]["strict"] is False
    assert tool["function"]["parameters"] == unconvertible
    require = ToolDeclaration(
        name="t",
        description="d",
        parameters=unconvertible,
        constrained_sampling={"type": "json_schema", "strict": "require"},
    )
    with pytest.raises(ValueError) as caught:
        completions_tools(require, supportsStrictMode=True)
    assert str(caught.value) == (
        'Tool "t" requires JSON-schema constrained sampling, but its schema cannot be made '
        "strict (parameters.a uses oneOf)."
    )
    with pytest.raises(ValueError) as caught:
        completions_tools(require)
    assert str(caught.value) == (
        'Tool "t" requires JSON-schema constrained sampling, but custom does not support '
        "strict tools for this model."
    )


async def test_a_required_strict_tool_fails_the_request(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    require = ToolDeclaration(
        name="t",
        description="d",
        parameters=AB,
        constrained_sampling={"type": "json_schema", "strict": "require"},
    )
    model = anthropic_model(base_url=sse_server.base_url)
    events = await anthropic_collect(model, http_client, transcript(require))
    assert [event.type for event in events] == ["error"]
    assert final_error(events).error_message == (
        'Tool "t" requires JSON-schema constrained sampling, but strict tools are unsupported.'
    )
    assert sse_server.requests == []


def test_a_bare_enum_counts_as_typed_and_a_null_enum_or_const_allows_null() -> None:
    # Found by the differential check against pi-ai 1.6.0: strict mode takes an enum
    # without a type, and a member that already admits null gets no null branch.
    schema = {
        "type": "object",
        "properties": {
            "mode": {"enum": ["a", "b"]},
            "maybe": {"enum": ["x", None]},
            "nothing": {"type": "string", "const": None},
        },
        "required": ["mode"],
    }
    assert strict_tool_schema(schema) == {
        "type": "object",
        "properties": {
            "mode": {"enum": ["a", "b"]},
            "maybe": {"enum": ["x", None]},
            "nothing": {"type": "string", "const": None},
        },
        "required": ["mode", "maybe", "nothing"],
        "additionalProperties": False,
    }
    with pytest.raises(StrictSchemaError, match=r"^parameters\.c has no type$"):
        strict_tool_schema({"type": "object", "properties": {"c": {"const": 1}}})
