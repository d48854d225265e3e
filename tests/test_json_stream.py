from __future__ import annotations

import json
from typing import Any

import pytest

from trio_agent._json_stream import (
    ToolCallArgumentsStream,
    parse_json_with_repair,
    parse_tool_call_arguments,
    repair_json,
)

# -- repair_json / parse_json_with_repair -------------------------------------------------


def test_repair_escapes_raw_control_characters_inside_strings_only() -> None:
    assert repair_json('{"a": "x\ty\nz\x01"}') == '{"a": "x\\ty\\nz\\u0001"}'
    assert repair_json('{\n"a":\t1}') == '{\n"a":\t1}'
    assert repair_json('"\b\f\r"') == '"\\b\\f\\r"'


def test_repair_doubles_invalid_backslashes() -> None:
    assert repair_json('{"path": "A\\H"}') == '{"path": "A\\\\H"}'
    assert repair_json('"\\u12G"') == '"\\\\u12G"'
    assert repair_json('"ok \\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9"') == (
        '"ok \\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9"'
    )


def test_repair_doubles_a_trailing_lone_backslash() -> None:
    assert repair_json('"abc\\') == '"abc\\\\'


def test_repair_leaves_valid_json_unchanged() -> None:
    text = '{"a": [1, 2.5, "x\\"y"], "b": {"c": null}}'
    assert repair_json(text) == text


def test_parse_json_with_repair() -> None:
    assert parse_json_with_repair('{"a": 1}') == {"a": 1}
    assert parse_json_with_repair('{"path": "A\\H"}') == {"path": "A\\H"}
    assert parse_json_with_repair('{"a": "tab\there"}') == {"a": "tab\there"}
    assert parse_json_with_repair("[1, 2]") == [1, 2]


def test_parse_json_with_repair_raises_the_original_error_when_repair_changes_nothing() -> None:
    with pytest.raises(json.JSONDecodeError, match=r"^Expecting value: line 1 column 1"):
        parse_json_with_repair("garbage")


def test_parse_json_with_repair_rejects_nan() -> None:
    with pytest.raises(ValueError, match=r"^Invalid JSON value: NaN$"):
        parse_json_with_repair('{"a": NaN}')


# -- parse_tool_call_arguments -------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_parse_tool_call_arguments_empty(text: str) -> None:
    assert parse_tool_call_arguments(text) == ({}, None)


def test_parse_tool_call_arguments_object() -> None:
    assert parse_tool_call_arguments('{"a": [1, "x"]}') == ({"a": [1, "x"]}, None)
    assert parse_tool_call_arguments('{"a": "line\nbreak"}') == ({"a": "line\nbreak"}, None)


@pytest.mark.parametrize("text", ["[1, 2]", "42", '"x"', "null", "true"])
def test_parse_tool_call_arguments_non_object(text: str) -> None:
    assert parse_tool_call_arguments(text) == (
        {},
        f"Tool arguments must be a JSON object\n\nReceived arguments:\n{text}",
    )


def test_parse_tool_call_arguments_invalid_json_uses_python_error_text() -> None:
    assert parse_tool_call_arguments('{"a": 1') == (
        {},
        "Expecting ',' delimiter: line 1 column 8 (char 7)\n\nReceived arguments:\n{\"a\": 1",
    )
    assert parse_tool_call_arguments("garbage") == (
        {},
        "Expecting value: line 1 column 1 (char 0)\n\nReceived arguments:\ngarbage",
    )


# -- ToolCallArgumentsStream ---------------------------------------------------------------


def test_stream_replays_the_observed_sequence() -> None:
    stream = ToolCallArgumentsStream()
    assert stream.append('{"pa') == {}
    assert stream.append('th": "/sr') == {"path": "/sr"}
    assert stream.append('c/x", "n": 1') == {"path": "/src/x", "n": 1}
    assert stream.append('2, "arr": [1,') == {"path": "/src/x", "n": 12, "arr": [1]}
    assert stream.append(' {"k": tr') == {"path": "/src/x", "n": 12, "arr": [1, {"k": True}]}
    assert stream.append("ue}]}") == {"path": "/src/x", "n": 12, "arr": [1, {"k": True}]}
    assert stream.text == '{"path": "/src/x", "n": 12, "arr": [1, {"k": true}]}'
    assert stream.finish() == ({"path": "/src/x", "n": 12, "arr": [1, {"k": True}]}, None)


def test_stream_one_character_at_a_time_matches_the_final_value() -> None:
    text = '{"s": "a\\"b\\u00e9\\ud83d\\ude00", "n": -12.5e2, "l": [true, false, null], "o": {}}'
    stream = ToolCallArgumentsStream()
    for ch in text:
        stream.append(ch)
    assert stream.arguments == json.loads(text)
    assert stream.finish() == (json.loads(text), None)


def test_stream_returns_the_same_object_while_unchanged() -> None:
    stream = ToolCallArgumentsStream()
    first = stream.append('{"a": 1')
    assert stream.append(" ") is first
    assert stream.append(",") is first
    assert stream.append(' "b') is first  # key not finished: member omitted
    assert stream.append('": ') is first  # value not started: member omitted
    second = stream.append('"')
    assert second is not first
    assert second == {"a": 1, "b": ""}
    assert first == {"a": 1}  # earlier previews are never modified
    assert stream.append('"}') is second
    assert stream.arguments is second


def test_stream_tells_true_from_one() -> None:
    stream = ToolCallArgumentsStream()
    one = stream.append('{"a": 1')
    assert stream.replace('{"a": t') == '{"a": t'
    assert stream.arguments is not one
    assert stream.arguments == {"a": True}
    assert stream.arguments["a"] is True


def test_stream_starts_empty() -> None:
    stream = ToolCallArgumentsStream()
    assert stream.text == ""
    assert stream.arguments == {}
    empty = stream.arguments
    assert stream.append("  ") is empty
    assert stream.append("{") is empty


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The observed partial results of the reference §4.2 ...
        ('{"a": 1', {"a": 1}),
        ('{"a": "hel', {"a": "hel"}),
        ('{"a": [1, 2', {"a": [1, 2]}),
        ('{"a": tr', {"a": True}),
        ('{"a":', {}),
        ('{"a": "x\\n', {"a": "x\n"}),
        ('{"a": "\\u00', {"a": ""}),
        ('{"a": 12e', {"a": 12}),
        ("garbage", {}),
        # ... except a dangling decimal point, which is ignored like a dangling exponent
        # (the legacy parser shows {} here).
        ('{"a": 1.', {"a": 1}),
        # Further partial rules.
        ('{"a": 12e+', {"a": 12}),
        ('{"a": 1.5e', {"a": 1.5}),
        ('{"a": -', {}),
        ('{"a": n', {"a": None}),
        ('{"a": f', {"a": False}),
        ('{"a": x', {}),
        ('{"a": "x\\', {"a": "x"}),
        ('{"a": "\\ud83d', {"a": ""}),
        ('{"a": {"b": [', {"a": {"b": []}}),
        ("[1, 2", {}),
        ('"text', {}),
        ('{"a": "x\\H', {"a": "x\\H"}),
        ('{"a": "tab\there', {"a": "tab\there"}),
        ('{"a": [1,]', {"a": [1]}),
        ('{"a": 1 "b": 2', {"a": 1, "b": 2}),
        ('{"a": 1} trailing {"b": 2}', {"a": 1}),
    ],
)
def test_stream_partial_values(text: str, expected: dict[str, Any]) -> None:
    stream = ToolCallArgumentsStream()
    assert stream.append(text) == expected
    # The same result when the text arrives one character at a time.
    stream = ToolCallArgumentsStream()
    for ch in text:
        stream.append(ch)
    assert stream.arguments == expected


def test_stream_number_values_keep_their_json_types() -> None:
    stream = ToolCallArgumentsStream()
    args = stream.append('{"i": 3, "f": 2.0, "e": 1e2')
    assert args == {"i": 3, "f": 2.0, "e": 100.0}
    assert type(args["i"]) is int
    assert type(args["f"]) is float
    assert type(args["e"]) is float


def test_replace_appends_only_the_missing_piece() -> None:
    stream = ToolCallArgumentsStream()
    stream.append('{"a": "x')
    assert stream.replace('{"a": "xyz"}') == 'yz"}'
    assert stream.text == '{"a": "xyz"}'
    assert stream.arguments == {"a": "xyz"}
    unchanged = stream.arguments
    assert stream.replace('{"a": "xyz"}') == ""
    assert stream.arguments is unchanged


def test_replace_restarts_when_the_text_does_not_extend() -> None:
    stream = ToolCallArgumentsStream()
    stream.append('{"a": "old", "b": 1')
    assert stream.replace('{"a": "new"}') == '{"a": "new"}'
    assert stream.text == '{"a": "new"}'
    assert stream.arguments == {"a": "new"}
    assert stream.finish() == ({"a": "new"}, None)


def test_finish_reports_errors() -> None:
    stream = ToolCallArgumentsStream()
    stream.append('{"a": 1')
    assert stream.finish() == (
        {},
        "Expecting ',' delimiter: line 1 column 8 (char 7)\n\nReceived arguments:\n{\"a\": 1",
    )
    stream = ToolCallArgumentsStream()
    stream.append("[1]")
    assert stream.arguments == {}
    assert stream.finish() == (
        {},
        "Tool arguments must be a JSON object\n\nReceived arguments:\n[1]",
    )
    assert ToolCallArgumentsStream().finish() == ({}, None)


def test_finish_repairs_the_text() -> None:
    stream = ToolCallArgumentsStream()
    stream.append('{"path": "A\\H", "t": "a\tb"}')
    assert stream.arguments == {"path": "A\\H", "t": "a\tb"}
    assert stream.finish() == ({"path": "A\\H", "t": "a\tb"}, None)


def test_stream_handles_large_input_incrementally() -> None:
    items = [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(300)]
    text = json.dumps({"items": items, "note": "x" * 5000})
    stream = ToolCallArgumentsStream()
    for start in range(0, len(text), 7):
        stream.append(text[start : start + 7])
    assert stream.arguments == json.loads(text)


class _Piece(str):
    """A delta that counts how often the text so far is concatenated with it."""

    concatenations = 0

    def __radd__(self, other: str) -> str:
        _Piece.concatenations += 1
        return other + str(self)


def test_append_does_not_rebuild_the_text_per_delta() -> None:
    # ``text += delta`` copies the whole text on every delta: quadratic in the length of
    # the arguments (a file's content streamed in 8-character pieces took seconds).
    text = json.dumps({"path": "a.txt", "content": "x" * 2000})
    stream = ToolCallArgumentsStream()
    for start in range(0, len(text), 8):
        stream.append(_Piece(text[start : start + 8]))
    assert _Piece.concatenations == 0
    assert stream.text == text
    assert stream.arguments == json.loads(text)
    assert stream.finish() == (json.loads(text), None)
    # The joined text is kept; replace() still appends only the missing piece.
    assert stream.replace(text + "\n") == "\n"
    assert stream.text == text + "\n"
    assert stream.replace(text + "\n") == ""
    assert stream.replace('{"n": 1}') == '{"n": 1}'
    assert stream.text == '{"n": 1}'
    assert stream.arguments == {"n": 1}


def test_text_of_a_new_stream_is_empty() -> None:
    stream = ToolCallArgumentsStream()
    assert stream.text == ""
    assert stream.append("") == {}
    assert stream.text == ""
    assert stream.replace("") == ""
    assert stream.finish() == ({}, None)


# -- reliability finding F7: arguments nested too deeply ------------------------------------


def _nested_text(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


@pytest.mark.parametrize("levels", [101, 500, 1_000, 10_000])
def test_deep_arguments_stream_without_raising_and_end_as_an_error(levels: int) -> None:
    text = _nested_text(levels)
    stream = ToolCallArgumentsStream()
    for start in range(0, len(text), 16):
        stream.append(text[start : start + 16])
    arguments, error = stream.finish()
    assert arguments == {}
    assert error == (
        f"JSON nested too deeply (more than 100 levels)\n\nReceived arguments:\n{text}"
    )


def test_deep_preview_stops_growing_past_the_limit() -> None:
    stream = ToolCallArgumentsStream()
    stream.append('{"a":' * 99 + "1")
    preview = stream.arguments
    stream.append('{"b":' * 5 + "2")
    assert stream.arguments is preview
    stream.append("}" * 104)
    assert stream.arguments is preview


def test_arguments_at_the_limit_parse() -> None:
    text = _nested_text(100)  # the arguments object is level 1
    arguments, error = parse_tool_call_arguments(text)
    assert error is None
    assert json.dumps(arguments, separators=(",", ":")) == text
    arguments, error = parse_tool_call_arguments(_nested_text(101))
    assert arguments == {}
    assert error is not None
    assert error.startswith("JSON nested too deeply (more than 100 levels)\n\n")


def test_deep_arrays_in_a_string_are_not_nesting() -> None:
    text = '{"s":"' + "[" * 5_000 + '"}'
    assert parse_tool_call_arguments(text) == ({"s": "[" * 5_000}, None)
