"""Tool-argument coercion and union errors as pi 1.6.0 words them (reference parity.md
B3 and B4): strings become numbers as JavaScript's ``Number()`` reads them, and a union
that fails reports its best branch."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent import (
    AbortSignal,
    Agent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    TextContent,
    ToolArgumentsError,
    ToolCall,
    ToolExecutionEndEvent,
    ToolResultMessage,
    validate_tool_arguments,
)
from trio_agent.testing import FauxProvider, faux_assistant_message, faux_tool_call


async def _execute(
    tool_call_id: str,
    params: dict[str, Any],
    signal: AbortSignal,
    on_update: AgentToolUpdateCallback,
) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text="ok")])


def _tool(schema: Any, name: str = "echo") -> AgentTool:
    parameters = {"type": "object", "properties": {"p": schema}, "required": ["p"]}
    return AgentTool(
        name=name, label=name, description="test", parameters=parameters, execute=_execute
    )


def _run(schema: Any, value: Any, name: str = "echo") -> Any:
    """The coerced ``p``, or the error text without the ``Received arguments`` part."""
    call = ToolCall(id="call_1", name=name, arguments={"p": value})
    try:
        return validate_tool_arguments(_tool(schema, name), call)["p"]
    except ToolArgumentsError as error:
        return str(error).partition("\n\nReceived arguments:\n")[0]


def _err(*lines: str) -> str:
    return 'Validation failed for tool "echo":\n' + "\n".join(f"  - {line}" for line in lines)


NUMBER = {"type": "number"}
INTEGER = {"type": "integer"}

# -- B3: blank and prefixed strings ---------------------------------------------------------


@pytest.mark.parametrize("type_name", ["number", "integer"])
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        (" ", 0),
        ("\t\n", 0),
        (" 12 ", 12),
        ("0x10", 16),
        ("0X1f", 31),
        ("0b101", 5),
        ("0o17", 15),
        # JavaScript's white space includes U+FEFF and the line separators.
        ("\ufeff5", 5),
        ("\u2028 7", 7),
    ],
)
def test_strings_read_as_javascript_number(type_name: str, text: str, expected: int) -> None:
    result = _run({"type": type_name}, text)
    assert result == expected
    assert type(result) is int


@pytest.mark.parametrize("type_name", ["number", "integer"])
@pytest.mark.parametrize(
    "text",
    [
        "-0x10",
        "+0x10",
        "0x",
        "Infinity",
        "-Infinity",
        "NaN",
        "1e400",
        "1_000",
        "abc",
        # Python's str.strip() removes these; JavaScript's Number() does not.
        "\x1c5",
        "\x855",
        # Words and BigInt text are not trimmed.
        " true ",
        " 12n ",
    ],
)
def test_strings_that_are_not_javascript_numbers(type_name: str, text: str) -> None:
    assert _run({"type": type_name}, text) == _err(f"p: expected {type_name}, got string")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (".5", 0.5),
        ("5.", 5),
        ("+5", 5),
        ("1e3", 1000),
        ("1.5", 1.5),
        ("true", 1),
        ("FALSE", 0),
        ("12n", 12),
    ],
)
def test_decimal_text_and_words_into_number(text: str, expected: float) -> None:
    assert _run(NUMBER, text) == expected


@pytest.mark.parametrize(("text", "expected"), [(".5", 0), ("1.5", 1)])
def test_integer_truncates_toward_zero(text: str, expected: int) -> None:
    assert _run(INTEGER, text) == expected


def test_prefixed_text_beyond_the_safe_range_rounds_like_a_double() -> None:
    assert _run(NUMBER, "0x20000000000001") == 2.0**53


def test_blank_and_prefixed_strings_in_arrays_unions_and_type_lists() -> None:
    array = {"type": "array", "items": NUMBER}
    assert _run(array, "") == [0]
    assert _run(array, ["", "0x10"]) == [0, 16]
    assert _run({"type": ["boolean", "number"]}, "0x10") == 16
    assert _run({"anyOf": [NUMBER, {"type": "boolean"}]}, "") == 0


def test_coerced_prefixed_string_is_then_checked() -> None:
    assert _run({"type": "number", "minimum": 0, "maximum": 10}, "0x10") == _err(
        "p: expected <= 10"
    )


async def test_blank_string_runs_the_tool_with_zero() -> None:
    seen: list[dict[str, Any]] = []

    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        seen.append(params)
        return AgentToolResult(content=[TextContent(text="done")])

    calc = AgentTool(
        name="calc",
        label="Calc",
        description="calculator",
        parameters={"type": "object", "properties": {"p": NUMBER}},
        execute=execute,
    )
    faux = FauxProvider(
        [
            faux_assistant_message(
                [faux_tool_call("calc", {"p": ""}, id="call_1")], stop_reason="toolUse"
            ),
            faux_assistant_message("ok"),
        ]
    )
    agent = Agent(
        initial_state=AgentInitialState(model=faux.get_model(), tools=[calc]),
        stream_fn=faux.stream_fn,
    )
    ends: list[ToolExecutionEndEvent] = []
    agent.subscribe(
        lambda event, signal: (
            ends.append(event) if isinstance(event, ToolExecutionEndEvent) else None
        )
    )
    await agent.prompt("go")
    assert seen == [{"p": 0}]
    assert [event.is_error for event in ends] == [False]
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert [m.is_error for m in results] == [False]


# -- B4: a failed union reports its best branch -----------------------------------------------

STRING = {"type": "string"}


@pytest.mark.parametrize(
    ("schema", "value", "lines"),
    [
        ({"anyOf": [STRING, NUMBER]}, [1], ["p: expected string, got array"]),
        ({"anyOf": [STRING, NUMBER]}, {"a": 1}, ["p: expected string, got object"]),
        ({"oneOf": [STRING, NUMBER]}, [1], ["p: expected string, got array"]),
        ({"anyOf": [{"type": "boolean"}, STRING]}, [1], ["p: expected boolean, got array"]),
        (
            {"anyOf": [{"type": "string", "minLength": 5}, {"type": "number", "minimum": 10}]},
            3,
            ["p: expected string, got integer"],
        ),
        (
            {
                "anyOf": [
                    {"type": "object", "properties": {"a": STRING}, "required": ["a"]},
                    {
                        "type": "object",
                        "properties": {"b": NUMBER, "c": STRING},
                        "required": ["b", "c"],
                    },
                ]
            },
            {"b": "x", "c": 1},
            ["p.b: expected number, got string", "p.c: expected string, got integer"],
        ),
        (
            {
                "anyOf": [
                    {"type": "object", "properties": {"a": STRING}},
                    {
                        "type": "object",
                        "properties": {"a": {"type": "object", "properties": {"x": STRING}}},
                    },
                ]
            },
            {"a": {"x": [1]}},
            ["p.a.x: expected string, got array"],
        ),
        ({"anyOf": []}, 5, ["p: matches no alternative"]),
        ({"oneOf": [NUMBER, INTEGER]}, 5, ["p: matches more than one alternative"]),
    ],
)
def test_union_reports_the_best_branch(schema: Any, value: Any, lines: list[str]) -> None:
    assert _run(schema, value) == _err(*lines)


def test_branch_declaring_keys_through_a_ref_counts() -> None:
    schema = {
        "anyOf": [
            {"type": "object", "properties": {"a": STRING}, "required": ["a"]},
            {"$ref": "#/$defs/b"},
        ]
    }
    tool = AgentTool(
        name="echo",
        label="echo",
        description="test",
        parameters={
            "type": "object",
            "properties": {"p": schema},
            "$defs": {"b": {"type": "object", "properties": {"b": NUMBER, "c": NUMBER}}},
        },
        execute=_execute,
    )
    call = ToolCall(id="call_1", name="echo", arguments={"p": {"b": [1], "c": [2]}})
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(tool, call)
    assert str(info.value).startswith(
        _err("p.b: expected number, got array", "p.c: expected number, got array")
    )


async def test_union_error_text_reaches_the_event_and_the_tool_result() -> None:
    read = AgentTool(
        name="read",
        label="Read",
        description="read",
        parameters={
            "type": "object",
            "properties": {"r": {"anyOf": [STRING, NUMBER]}},
            "required": ["r"],
        },
        execute=_execute,
    )
    faux = FauxProvider(
        [
            faux_assistant_message(
                [faux_tool_call("read", {"r": [1]}, id="call_1")], stop_reason="toolUse"
            ),
            faux_assistant_message("ok"),
        ]
    )
    agent = Agent(
        initial_state=AgentInitialState(model=faux.get_model(), tools=[read]),
        stream_fn=faux.stream_fn,
    )
    ends: list[ToolExecutionEndEvent] = []
    agent.subscribe(
        lambda event, signal: (
            ends.append(event) if isinstance(event, ToolExecutionEndEvent) else None
        )
    )
    await agent.prompt("go")
    expected = (
        'Validation failed for tool "read":\n  - r: expected string, got array\n\n'
        'Received arguments:\n{\n  "r": [\n    1\n  ]\n}'
    )
    assert [event.is_error for event in ends] == [True]
    assert [block.text for block in ends[0].result.content if isinstance(block, TextContent)] == [
        expected
    ]
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert [m.content for m in results] == [[TextContent(text=expected)]]


# -- found by comparing with pi 1.6.0 on random schemas -------------------------------------

KIND_A = {
    "type": "object",
    "properties": {"kind": {"const": "a"}, "size": {"type": "integer"}},
    "required": ["kind", "size"],
}
KIND_B = {
    "type": "object",
    "properties": {"kind": {"const": "b"}, "n": {"type": "string"}},
    "required": ["kind", "n"],
}


@pytest.mark.parametrize("keyword", ["anyOf", "oneOf"])
def test_a_union_of_objects_with_a_const_property_is_discriminated(keyword: str) -> None:
    schema = {keyword: [KIND_A, KIND_B]}
    assert _run(schema, {"kind": "c"}) == _err('p.kind: expected one of ["a","b"]')
    assert _run(schema, {"size": 1}) == _err('p.kind: expected one of ["a","b"]')
    assert _run(schema, {"kind": "b"}) == _err("p.n: missing")
    assert _run({keyword: [KIND_A]}, {}) == _err('p.kind: expected one of ["a"]')
    # Not an object: the first branch reports, as for any union.
    assert _run(schema, "x") == _err("p: expected object, got string")


def test_a_union_with_a_branch_that_is_not_discriminated_reports_the_best_branch() -> None:
    schema = {"anyOf": [NUMBER, {"type": "object", "properties": {"c": {"const": "x"}}}]}
    assert _run(schema, {"c": "y"}) == _err('p.c: expected "x"')


@pytest.mark.parametrize("value", [0, False, "", "null"])
def test_nothing_converts_to_a_null_literal(value: Any) -> None:
    assert _run({"enum": [None, "b"]}, value) == _err('p: expected one of [null,"b"]')
    assert _run({"const": None}, 0) == _err("p: expected null")


@pytest.mark.parametrize("text", ["", " ", "\t"])
def test_blank_text_is_not_a_number_for_a_type_list(text: str) -> None:
    assert _run({"type": ["number", "boolean"]}, text) == _err(
        "p: expected number or boolean, got string"
    )
    assert _run({"type": ["number", "boolean"]}, " 12 ") == 12


def test_object_errors_follow_the_schema_then_the_value() -> None:
    schema = {
        "type": "object",
        "properties": {"c": {"type": "boolean"}, "a": {"type": "string"}, "b": NUMBER},
        "patternProperties": {"^z": NUMBER},
        "additionalProperties": False,
        "required": ["b", "x", "c"],
    }
    value = {"b": "q", "q": 1, "a": 1, "c": "z", "z": "w"}
    assert _run(schema, value) == _err(
        "p.x: missing",
        "p.c: expected boolean, got string",
        "p.b: expected number, got string",
        "p.q: unknown field",
        "p.z: expected number, got string",
    )


def test_a_keyword_conversion_must_satisfy_the_whole_union() -> None:
    # "5" converts to 5 for both branches; 5 matches both, so the conversion is dropped
    # in the keyword pass, then the type pass coerces it anyway.
    assert _run({"oneOf": [INTEGER, NUMBER]}, "5") == _err("p: matches more than one alternative")
    # 1.5 truncates to 1 for the first branch, which matches three: dropped; the type
    # list of the third then makes it the string "1.5".
    schema = {"oneOf": [INTEGER, {"const": 1}, {"type": ["integer", "string"]}]}
    assert _run(schema, 1.5) == "1.5"
    assert _run({"oneOf": [{"type": "null"}, {"type": "boolean"}]}, 0) is None
