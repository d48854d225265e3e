from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import trio_agent
from trio_agent import (
    AbortSignal,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    TextContent,
    ToolArgumentsError,
    ToolCall,
    validate_tool_arguments,
)
from trio_agent._jsjson import js_number as _js_number
from trio_agent._jsjson import js_stringify


async def _execute(
    tool_call_id: str,
    params: dict[str, Any],
    signal: AbortSignal,
    on_update: AgentToolUpdateCallback,
) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text="ok")])


def _tool(parameters: dict[str, Any], name: str = "echo") -> AgentTool:
    return AgentTool(
        name=name, label=name, description="test tool", parameters=parameters, execute=_execute
    )


def _call(arguments: dict[str, Any], name: str = "echo") -> ToolCall:
    return ToolCall(id="call_1", name=name, arguments=arguments)


def _obj(
    properties: dict[str, Any], required: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    """An object schema; every property is required unless ``required`` says otherwise."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        **extra,
    }


def _validate(schema: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    return validate_tool_arguments(_tool(schema), _call(arguments))


def _problems(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    """The ``  - path: message`` lines of the validation error."""
    with pytest.raises(ToolArgumentsError) as info:
        _validate(schema, arguments)
    message = str(info.value)
    head, _, received = message.partition("\n\nReceived arguments:\n")
    # The exact layout (JSON.stringify's, with JavaScript numbers) is pinned by
    # test_received_arguments_use_javascript_formatting.
    assert json.loads(received) == arguments
    first, *lines = head.split("\n")
    assert first == 'Validation failed for tool "echo":'
    return lines


def test_exported() -> None:
    assert trio_agent.validate_tool_arguments is validate_tool_arguments
    assert validate_tool_arguments.__module__ == "trio_agent"


# -- the observed examples of reference §4.1 ------------------------------------------------


def test_null_into_required_string_becomes_the_string_null() -> None:
    assert _validate(_obj({"s": {"type": "string"}}), {"s": None}) == {"s": "null"}


def test_numeric_string_into_integer_is_truncated() -> None:
    result = _validate(_obj({"n": {"type": "integer"}}), {"n": "42.1"})
    assert result == {"n": 42}
    assert type(result["n"]) is int


def test_fractional_number_into_integer_is_truncated() -> None:
    result = _validate(_obj({"n": {"type": "integer"}}), {"n": 1.5})
    assert result == {"n": 1}
    assert type(result["n"]) is int


def test_scalar_is_wrapped_into_an_array() -> None:
    schema = _obj({"ids": {"type": "array", "items": {"type": "integer"}}})
    assert _validate(schema, {"ids": "7"}) == {"ids": [7]}


def test_tuples_never_wrap() -> None:
    schema = _obj({"pair": {"type": "array", "prefixItems": [{"type": "integer"}]}})
    assert _problems(schema, {"pair": "7"}) == ["  - pair: expected array, got string"]


def test_json_string_is_not_parsed_into_an_object() -> None:
    schema = _obj({"o": {"type": "object", "properties": {"a": {"type": "string"}}}})
    assert _problems(schema, {"o": '{"a":"x"}'}) == ["  - o: expected object, got string"]


def test_union_of_literals_reports_the_first_branch() -> None:
    schema = _obj(
        {"mode": {"anyOf": [{"const": "a", "type": "string"}, {"const": "b", "type": "string"}]}}
    )
    assert _problems(schema, {"mode": "c"}) == ['  - mode: expected "a"']
    assert _validate(schema, {"mode": "b"}) == {"mode": "b"}


def test_type_list_number_string_keeps_a_string() -> None:
    result = _validate(_obj({"x": {"type": ["number", "string"]}}), {"x": "1"})
    assert result == {"x": "1"}


def test_type_list_boolean_number_coerces_to_number() -> None:
    result = _validate(_obj({"x": {"type": ["boolean", "number"]}}), {"x": "1"})
    assert result == {"x": 1}
    assert type(result["x"]) is int


def test_echo_example_full_message() -> None:
    schema = _obj(
        {"count": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}}}
    )
    with pytest.raises(ToolArgumentsError) as info:
        _validate(schema, {"count": "abc", "tags": ["x"]})
    assert str(info.value) == (
        'Validation failed for tool "echo":\n'
        "  - count: expected number, got string\n"
        "\n"
        "Received arguments:\n"
        "{\n"
        '  "count": "abc",\n'
        '  "tags": [\n'
        '    "x"\n'
        "  ]\n"
        "}"
    )


# -- reference §8 assertions that hold in 1.6.0 ----------------------------------------------


def test_numeric_string_into_number() -> None:
    result = _validate(_obj({"n": {"type": "number"}}), {"n": "42"})
    assert result == {"n": 42}
    assert _validate(_obj({"n": {"type": "number"}}), {"n": "2.5"}) == {"n": 2.5}


def test_nullable_union_keeps_null() -> None:
    schema = _obj({"x": {"anyOf": [{"type": "number"}, {"type": "null"}]}}, required=[])
    assert _validate(schema, {"x": None}) == {"x": None}
    schema = _obj({"x": {"type": ["string", "null"]}})
    assert _validate(schema, {"x": None}) == {"x": None}


def test_numeric_string_into_nullable_number_union() -> None:
    schema = _obj({"x": {"anyOf": [{"type": "number"}, {"type": "null"}]}})
    assert _validate(schema, {"x": "42"}) == {"x": 42}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        (1, True),
        ("false", False),
        ("0", False),
        (0, False),
        (None, False),
        (True, True),
    ],
)
def test_boolean_coercions(value: Any, expected: bool) -> None:
    result = _validate(_obj({"b": {"type": "boolean"}}), {"b": value})
    assert result["b"] is expected


@pytest.mark.parametrize("value", [None, "", "0", 0, False, "null", "undefined"])
def test_null_coercions(value: Any) -> None:
    assert _validate(_obj({"z": {"type": "null"}}), {"z": value}) == {"z": None}


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, 1), (False, 0), (None, 0), ("TRUE", 1), ("false", 0), (" 12 ", 12), ("12n", 12)],
)
def test_number_conversions(value: Any, expected: int) -> None:
    result = _validate(_obj({"n": {"type": "number"}}), {"n": value})
    assert result == {"n": expected}
    assert type(result["n"]) is int


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1.5, "1.5"), (1.0, "1"), (1e21, "1e+21"), (7, "7"), (True, "true"), (False, "false")],
)
def test_string_conversions_use_javascript_formatting(value: Any, expected: str) -> None:
    assert _validate(_obj({"s": {"type": "string"}}), {"s": value}) == {"s": expected}


def test_invalid_input_throws_for_echo() -> None:
    with pytest.raises(ToolArgumentsError, match=r'^Validation failed for tool "echo":\n'):
        _validate(_obj({"n": {"type": "number"}}), {"n": [1]})


# -- coercion passes -------------------------------------------------------------------------


def test_optional_null_is_dropped() -> None:
    schema = _obj({"a": {"type": "string"}, "b": {"type": "integer"}}, required=["a"])
    assert _validate(schema, {"a": "x", "b": None}) == {"a": "x"}


def test_optional_null_behind_a_ref_is_not_dropped() -> None:
    schema = {
        "type": "object",
        "properties": {"b": {"$ref": "#/$defs/count"}},
        "$defs": {"count": {"type": "integer"}},
    }
    # Kept, so the later passes convert it like a present value.
    assert _validate(schema, {"b": None}) == {"b": 0}


def test_optional_nulls_dropped_in_nested_objects() -> None:
    inner = _obj({"x": {"type": "string"}, "y": {"type": "string"}}, required=["x"])
    schema = _obj({"items": {"type": "array", "items": inner}})
    result = _validate(schema, {"items": [{"x": "1", "y": None}]})
    assert result == {"items": [{"x": "1"}]}


def test_enum_and_const_convert_to_the_literal() -> None:
    schema = _obj({"level": {"enum": [1, 2, 3]}, "flag": {"const": True}, "tag": {"const": "7"}})
    result = _validate(schema, {"level": "2", "flag": "true", "tag": 7})
    assert result == {"level": 2, "flag": True, "tag": "7"}
    assert result["flag"] is True


def test_object_members_are_converted_through_refs_and_additional_properties() -> None:
    schema = {
        "type": "object",
        "properties": {"point": {"$ref": "#/definitions/point"}},
        "additionalProperties": {"type": "integer"},
        "definitions": {
            "point": _obj({"x": {"type": "number"}, "y": {"type": "number"}}),
        },
    }
    result = _validate(schema, {"point": {"x": "1", "y": 2.5}, "extra": "3"})
    assert result == {"point": {"x": 1, "y": 2.5}, "extra": 3}


def test_the_tool_call_is_never_modified() -> None:
    schema = _obj(
        {"n": {"type": "integer"}, "s": {"type": "string"}, "o": {"type": "boolean"}}, ["n"]
    )
    arguments = {"n": "5", "s": None, "o": "true", "nested": {"deep": [1]}}
    snapshot = copy.deepcopy(arguments)
    call = _call(arguments)
    result = validate_tool_arguments(_tool(schema), call)
    assert result == {"n": 5, "o": True, "nested": {"deep": [1]}}
    assert call.arguments is arguments
    assert arguments == snapshot
    result["nested"]["deep"].append(2)
    assert arguments == snapshot


# -- errors ------------------------------------------------------------------------------------


def test_arguments_error_short_circuits() -> None:
    call = ToolCall(
        id="c",
        name="echo",
        arguments={},
        arguments_error="Expecting value\n\nReceived arguments:\nx",
    )
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(_tool(_obj({})), call)
    assert str(info.value) == (
        'Invalid arguments for tool "echo": Expecting value\n\nReceived arguments:\nx'
    )


def test_missing_required_path_names_the_property() -> None:
    schema = _obj({"edits": {"type": "array", "items": _obj({"oldText": {"type": "string"}})}})
    assert _problems(schema, {}) == ["  - edits: missing"]
    assert _problems(schema, {"edits": [{"oldText": "a"}, {}]}) == ["  - edits.1.oldText: missing"]


def test_root_errors() -> None:
    schema = _obj({"a": {"type": "string"}}, minProperties=2)
    assert _problems(schema, {"a": "x"}) == ["  - root: expected at least 2 properties"]


def test_additional_properties_false_reports_unknown_fields() -> None:
    schema = _obj({"a": {"type": "string"}}, additionalProperties=False)
    assert _problems(schema, {"a": "x", "b": 1, "c": 2}) == [
        "  - b: unknown field",
        "  - c: unknown field",
    ]


def test_pattern_properties() -> None:
    schema = _obj({}, patternProperties={"^n_": {"type": "integer"}}, additionalProperties=False)
    assert _validate(schema, {"n_a": "1"}) == {"n_a": 1}
    assert _problems(schema, {"n_a": "x", "other": 1}) == [
        "  - n_a: expected integer, got string",
        "  - other: unknown field",
    ]


def test_enum_message() -> None:
    schema = _obj({"c": {"type": "string", "enum": ["red", "green"]}})
    assert _problems(schema, {"c": "blue"}) == ['  - c: expected one of ["red","green"]']


def test_long_enum_message_is_cut_after_twenty() -> None:
    values = list(range(25))
    schema = _obj({"c": {"enum": values}})
    shown = ",".join(str(v) for v in range(20))
    assert _problems(schema, {"c": 99}) == [f"  - c: expected one of [{shown}, ... and 5 more]"]


def test_const_message() -> None:
    schema = _obj({"c": {"const": {"k": [1, "x"]}}})
    assert _problems(schema, {"c": "other"}) == ['  - c: expected {"k":[1,"x"]}']


def test_type_messages() -> None:
    schema = _obj(
        {
            "a": {"type": "string"},
            "b": {"type": ["string", "null"]},
            "c": {"type": "integer"},
            "d": {"type": "boolean"},
        }
    )
    assert _problems(schema, {"a": [1], "b": {"x": 1}, "c": "1.5x", "d": 7}) == [
        "  - a: expected string, got array",
        "  - b: expected string or null, got object",
        "  - c: expected integer, got string",
        "  - d: expected boolean, got integer",
    ]
    assert _problems(_obj({"s": {"type": "string"}}), {"s": {"k": 1.5}}) == [
        "  - s: expected string, got object"
    ]


def test_array_without_items_wraps_any_scalar() -> None:
    assert _validate(_obj({"l": {"type": "array"}}), {"l": 2.5}) == {"l": [2.5]}


def test_got_number_for_fractions() -> None:
    assert _problems(_obj({"b": {"type": "boolean"}}), {"b": 2.5}) == [
        "  - b: expected boolean, got number"
    ]


def test_string_keyword_messages() -> None:
    schema = _obj(
        {
            "short": {"type": "string", "minLength": 3},
            "long": {"type": "string", "maxLength": 2},
            "pat": {"type": "string", "pattern": "^[a-z]+$"},
        }
    )
    assert _problems(schema, {"short": "ab", "long": "abc", "pat": "A1"}) == [
        "  - short: expected at least 3 characters",
        "  - long: expected at most 2 characters",
        "  - pat: expected to match ^[a-z]+$",
    ]


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date-time", "2024-02-29T12:30:00Z", "2023-02-29T12:30:00Z"),
        ("date-time", "2024-01-01t00:00:00.5+02:00", "2024-01-01T00:00:00"),
        ("date", "2024-12-31", "2024-13-01"),
        ("time", "23:59:60", "24:00:00"),
        ("email", "a.b@example.com", "not an email"),
        ("uri", "https://example.com/x?y=1", "/relative/path"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456"),
        ("ipv4", "192.168.0.1", "256.1.1.1"),
        ("ipv6", "::1", "192.168.0.1"),
    ],
)
def test_formats(fmt: str, good: str, bad: str) -> None:
    schema = _obj({"v": {"type": "string", "format": fmt}})
    assert _validate(schema, {"v": good}) == {"v": good}
    assert _problems(schema, {"v": bad}) == [f"  - v: expected format {fmt}"]


def test_unknown_formats_are_ignored() -> None:
    schema = _obj({"v": {"type": "string", "format": "color"}})
    assert _validate(schema, {"v": "x"}) == {"v": "x"}


def test_number_keyword_messages() -> None:
    schema = _obj(
        {
            "a": {"type": "number", "minimum": 1.5},
            "b": {"type": "number", "maximum": 10},
            "c": {"type": "number", "exclusiveMinimum": 0},
            "d": {"type": "number", "exclusiveMaximum": 1e21},
            "e": {"type": "number", "multipleOf": 0.1},
        }
    )
    assert _validate(schema, {"a": 1.5, "b": 10, "c": 0.1, "d": 5, "e": 0.3}) == {
        "a": 1.5,
        "b": 10,
        "c": 0.1,
        "d": 5,
        "e": 0.3,
    }
    assert _problems(schema, {"a": 1, "b": 10.5, "c": 0, "d": 1e21, "e": 0.35}) == [
        "  - a: expected >= 1.5",
        "  - b: expected <= 10",
        "  - c: expected > 0",
        "  - d: expected < 1e+21",
        "  - e: expected a multiple of 0.1",
    ]


def test_multiple_of_with_distant_magnitudes() -> None:
    schema = _obj({"big": {"type": "number", "multipleOf": 0.1}})
    assert _validate(schema, {"big": 1e30}) == {"big": 1e30}
    assert _problems(schema, {"big": 1e-30}) == ["  - big: expected a multiple of 0.1"]


def test_array_keyword_messages() -> None:
    schema = _obj(
        {
            "few": {"type": "array", "minItems": 2},
            "many": {"type": "array", "maxItems": 1},
            "uniq": {"type": "array", "uniqueItems": True},
            "typed": {"type": "array", "items": {"type": "integer"}},
        }
    )
    arguments = {"few": [1], "many": [1, 2], "uniq": [1, {"a": 1}, 1.0], "typed": [1, "x"]}
    assert _problems(schema, arguments) == [
        "  - few: expected at least 2 items",
        "  - many: expected at most 1 items",
        "  - uniq: expected unique items",
        "  - typed.1: expected integer, got string",
    ]
    assert _validate(schema, {"few": [1, 2], "many": [], "uniq": [1, True, "1"], "typed": []})[
        "uniq"
    ] == [1, True, "1"]


def test_tuple_items_and_false_schema() -> None:
    schema = _obj({"t": {"type": "array", "prefixItems": [{"type": "string"}], "items": False}})
    assert _validate(schema, {"t": [5]}) == {"t": ["5"]}
    assert _problems(schema, {"t": ["a", "b"]}) == ["  - t.1: no value is allowed here"]


def test_one_of_messages() -> None:
    schema = _obj({"v": {"oneOf": [{"type": "integer"}, {"type": "number"}]}})
    assert _problems(schema, {"v": 3}) == ["  - v: matches more than one alternative"]
    assert _validate(schema, {"v": 2.5}) == {"v": 2.5}
    schema = _obj({"v": {"oneOf": [{"type": "boolean"}, {"type": "object"}]}})
    # The first branch reports (reference parity.md B4).
    assert _problems(schema, {"v": "x"}) == ["  - v: expected boolean, got string"]
    # A branch that converts the value wins (the array wraps the string).
    schema = _obj({"v": {"oneOf": [{"type": "array"}, {"type": "object"}]}})
    assert _validate(schema, {"v": "x"}) == {"v": ["x"]}


def test_union_reports_the_closest_branch() -> None:
    branch_a = _obj({"kind": {"const": "a"}, "size": {"type": "integer"}})
    branch_b = _obj({"kind": {"const": "b"}})
    schema = _obj({"shape": {"anyOf": [{"type": "string"}, branch_a, branch_b]}})
    assert _problems(schema, {"shape": {"kind": "a", "size": "big"}}) == [
        "  - shape.size: expected integer, got string"
    ]
    # Both object branches declare "kind" and fail first at the same depth: the first wins.
    assert _problems(schema, {"shape": {"kind": "c"}}) == [
        "  - shape.size: missing",
        '  - shape.kind: expected "a"',
    ]
    assert _validate(schema, {"shape": {"kind": "a", "size": "3"}}) == {
        "shape": {"kind": "a", "size": 3}
    }


def test_all_of_and_not() -> None:
    schema = _obj(
        {
            "v": {
                "allOf": [{"type": "integer", "minimum": 1}, {"maximum": 5}],
                "not": {"const": 3},
            }
        }
    )
    assert _validate(schema, {"v": "4"}) == {"v": 4}
    assert _problems(schema, {"v": 9}) == ["  - v: expected <= 5"]
    assert _problems(schema, {"v": 3}) == ["  - v: must not match the schema in not"]


def test_false_schema_property() -> None:
    schema = _obj({"never": False}, required=[])
    assert _problems(schema, {"never": 1}) == ["  - never: no value is allowed here"]


def test_unresolved_ref_rejects_only_at_its_position() -> None:
    schema = _obj({"x": {"$ref": "#/$defs/missing"}, "y": {"type": "integer"}}, required=["y"])
    assert _validate(schema, {"y": "1"}) == {"y": 1}
    assert _problems(schema, {"x": 1, "y": 1}) == ["  - x: unresolved reference #/$defs/missing"]
    schema = _obj({"x": {"$ref": "https://example.com/schema.json"}})
    assert _problems(schema, {"x": 1}) == [
        "  - x: unresolved reference https://example.com/schema.json"
    ]


def test_ref_to_something_that_is_not_a_schema_is_unresolved() -> None:
    schema = _obj({"x": {"type": "integer"}, "y": {"$ref": "#/properties/x/type"}}, ["x"])
    assert _problems(schema, {"x": 1, "y": 2}) == [
        "  - y: unresolved reference #/properties/x/type"
    ]
    schema = _obj({"x": {"type": "integer"}, "y": {"$ref": "#/properties/x"}}, ["x"])
    assert _validate(schema, {"x": 1, "y": "2"}) == {"x": 1, "y": 2}


def test_recursive_refs() -> None:
    node = {
        "type": "object",
        "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}},
        "required": ["v"],
    }
    schema = {
        "type": "object",
        "properties": {"head": {"$ref": "#/$defs/node"}},
        "$defs": {"node": node},
    }
    arguments = {"head": {"v": "1", "next": {"v": "2", "next": {}}}}
    assert _problems(schema, arguments) == ["  - head.next.next.v: missing"]
    arguments = {"head": {"v": "1", "next": {"v": "2"}}}
    assert _validate(schema, arguments) == {"head": {"v": 1, "next": {"v": 2}}}


def test_ref_cycle_without_data_does_not_recurse_forever() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/a"}},
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
    }
    assert _validate(schema, {"x": 1}) == {"x": 1}


def test_whole_root_ref() -> None:
    schema = {
        "type": "object",
        "properties": {"child": {"$ref": "#"}, "n": {"type": "integer"}},
    }
    assert _validate(schema, {"child": {"child": {"n": "3"}}}) == {"child": {"child": {"n": 3}}}


def test_received_arguments_are_the_original_unicode_json() -> None:
    schema = _obj({"name": {"type": "integer"}})
    with pytest.raises(ToolArgumentsError) as info:
        _validate(schema, {"name": "héllo ✓"})
    assert str(info.value).endswith('Received arguments:\n{\n  "name": "héllo ✓"\n}')


def test_received_arguments_use_javascript_formatting() -> None:
    # As JSON.stringify(args, null, 2): 1.0 is 1, 1e-07 is 1e-7, empty containers stay
    # on one line, integer-like keys come first.
    schema = _obj({"s": {"type": "string", "minLength": 3}}, required=[])
    arguments = json.loads(
        '{"s": "a", "ratio": 1.0, "tiny": 1e-7, "big": 1e21, "e": [], "o": {}, '
        '"n": [0.5, {"x": -0.0}], "7": null}'
    )
    with pytest.raises(ToolArgumentsError) as info:
        _validate(schema, arguments)
    assert str(info.value) == (
        'Validation failed for tool "echo":\n'
        "  - s: expected at least 3 characters\n"
        "\n"
        "Received arguments:\n"
        "{\n"
        '  "7": null,\n'
        '  "s": "a",\n'
        '  "ratio": 1,\n'
        '  "tiny": 1e-7,\n'
        '  "big": 1e+21,\n'
        '  "e": [],\n'
        '  "o": {},\n'
        '  "n": [\n'
        "    0.5,\n"
        "    {\n"
        '      "x": 0\n'
        "    }\n"
        "  ]\n"
        "}"
    )


def test_received_arguments_fall_back_for_non_json_values() -> None:
    # Arguments built in Python may hold values JSON has no form for: written with str(),
    # as before; a non-string key falls back to Python's json module.
    schema = _obj({"s": {"type": "string", "minLength": 2}}, required=[])
    with pytest.raises(ToolArgumentsError) as info:
        _validate(schema, {"s": "a", "when": {1, 2}, "n": 1.0})
    assert str(info.value).endswith(
        'Received arguments:\n{\n  "s": "a",\n  "when": "{1, 2}",\n  "n": 1\n}'
    )
    with pytest.raises(ToolArgumentsError) as info:
        _validate(schema, {"s": "a", "m": {3: "x"}})
    assert str(info.value).endswith(
        'Received arguments:\n{\n  "s": "a",\n  "m": {\n    "3": "x"\n  }\n}'
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        ([], "[]"),
        ({}, "{}"),
        ([1.0, True, "é"], '[\n  1,\n  true,\n  "é"\n]'),
        ({"a": {"b": [2e-7]}}, '{\n  "a": {\n    "b": [\n      2e-7\n    ]\n  }\n}'),
    ],
)
def test_js_stringify_indented(value: Any, text: str) -> None:
    assert js_stringify(value, indent=2) == text
    assert (
        js_stringify(value, indent=0)
        == js_stringify(value)
        == text.replace("\n", "").replace("  ", "").replace(": ", ":")
    )


def test_pattern_digits_are_ascii() -> None:
    # ECMAScript's \d is [0-9]; Python's also matches Arabic-Indic and other digits.
    schema = _obj({"x": {"type": "string", "pattern": "^\\d+$"}})
    assert _validate(schema, {"x": "123"}) == {"x": "123"}
    assert _problems(schema, {"x": "\u0661\u0662\u0663"}) == ["  - x: expected to match ^\\d+$"]
    in_class = _obj({"x": {"type": "string", "pattern": "^[\\d.]+$"}})
    assert _validate(in_class, {"x": "1.5"}) == {"x": "1.5"}
    assert _problems(in_class, {"x": "\u0661.5"}) == ["  - x: expected to match ^[\\d.]+$"]
    # An escaped backslash before "d" is a literal backslash and a "d".
    literal = _obj({"x": {"type": "string", "pattern": "^a\\\\d$"}})
    assert _validate(literal, {"x": "a\\d"}) == {"x": "a\\d"}


def test_pattern_final_dollar_is_the_end_of_the_text() -> None:
    # In ECMAScript (no m flag) $ does not match before a trailing newline.
    schema = _obj({"x": {"type": "string", "pattern": "^[a-z]+$"}})
    assert _validate(schema, {"x": "abc"}) == {"x": "abc"}
    assert _problems(schema, {"x": "abc\n"}) == ["  - x: expected to match ^[a-z]+$"]
    # An escaped $ and a $ in a class stay literal.
    escaped = _obj({"x": {"type": "string", "pattern": "^a\\$"}, "y": {"pattern": "[$]"}})
    assert _validate(escaped, {"x": "a$", "y": "$"}) == {"x": "a$", "y": "$"}


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "number"}, "\u0661\u0662"),
        ({"type": "integer"}, "\u0664\u0662"),
        ({"type": "integer"}, "\u0664\u0662n"),
        ({"type": ["number", "boolean"]}, "\u0661"),
    ],
)
def test_non_ascii_digits_are_not_numbers(schema: dict[str, Any], value: str) -> None:
    lines = _problems(_obj({"x": schema}), {"x": value})
    assert len(lines) == 1
    assert lines[0].startswith("  - x: expected ")
    assert lines[0].endswith(", got string")


@pytest.mark.parametrize(
    ("fmt", "value"),
    [
        ("date", "\u0662\u0660\u0662\u0664-\u0660\u0661-\u0660\u0661"),
        ("time", "1\u0662:00:00Z"),
        ("date-time", "2024-01-01T10:00:0\u0660Z"),
    ],
)
def test_formats_need_ascii_digits(fmt: str, value: str) -> None:
    schema = _obj({"x": {"type": "string", "format": fmt}})
    assert _problems(schema, {"x": value}) == [f"  - x: expected format {fmt}"]


def test_tool_name_in_message() -> None:
    tool = _tool(_obj({"n": {"type": "integer"}}), name="read_file")
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(tool, _call({}, name="read_file"))
    assert str(info.value).startswith('Validation failed for tool "read_file":\n  - n: missing\n')
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0, "0"),
        (-0.0, "0"),
        (1.5, "1.5"),
        (1.0, "1"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (123456789012345680000.0, "123456789012345680000"),
        (-2.5e-5, "-0.000025"),
        (10**22, "1e+22"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (float("inf"), "Infinity"),
        (10**400, "Infinity"),
    ],
)
def test_js_number_formatting(number: float, text: str) -> None:
    assert _js_number(number) == text
