"""Transcripts and JSON values at the edges (reliability findings F8 and F9): every
failure to read or write is a :class:`~trio_agent.SerializationError` that names the line
and the value, never ``UnicodeDecodeError`` or ``RecursionError``; what
``dump_transcript`` writes, ``load_transcript`` reads back."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pytest

from trio_agent import (
    AgentMessage,
    AssistantMessage,
    Cost,
    SerializationError,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from trio_agent.serialization import dump_transcript, from_json, load_transcript, to_json

GOOD = b'{"role":"user","content":"hi","timestamp":1}\n'
TOO_DEEP = "JSON nested too deeply (more than 200 levels)"


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


def result(details: Any) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id="c", tool_name="t", content=[], details=details, timestamp=1
    )


def load_error(path: Path) -> str:
    with pytest.raises(SerializationError) as info:
        load_transcript(path)
    assert info.value.__cause__ is None
    return str(info.value)


def dump_error(messages: list[Any]) -> str:
    buffer = io.StringIO()
    with pytest.raises(SerializationError) as info:
        dump_transcript(buffer, messages)
    assert buffer.getvalue() == ""  # nothing written
    return str(info.value)


# -- F8: loading -----------------------------------------------------------------------------


def test_latin1_line_names_the_line_byte_and_column(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_bytes(GOOD + '{"role":"user","content":"café","timestamp":1}\n'.encode("latin-1"))
    # Columns count from 1, as in the "invalid JSON" errors.
    assert load_error(path) == "line 2: not valid UTF-8 (byte 0xe9 at column 30)"


def test_column_counts_characters_before_the_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_bytes('{"content":"été'.encode() + b"\xff" + b'"}\n')
    assert load_error(path) == "line 1: not valid UTF-8 (byte 0xff at column 16)"


def test_binary_junk(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"\x80\x81\x82 junk\n")
    assert load_error(path) == "line 1: not valid UTF-8 (byte 0x80 at column 1)"


def test_deep_line_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    deep = b"[" * 10_000 + b"]" * 10_000
    path.write_bytes(GOOD + b'{"role":"user","content":' + deep + b',"timestamp":1}\n')
    assert load_error(path) == f"line 2: {TOO_DEEP}"


def test_nesting_just_within_the_limit_loads(tmp_path: Path) -> None:
    # The message object is level 1, so details may nest 199 levels.
    path = tmp_path / "session.jsonl"
    dump_transcript(path, [result(nested(199))])
    assert load_transcript(path) == [result(nested(199))]
    with pytest.raises(SerializationError) as info:
        dump_transcript(path, [result(nested(200))])
    assert str(info.value).startswith("line 1: ToolResultMessage.details.a.a.a")
    assert str(info.value).endswith(f"...: {TOO_DEEP}")
    too_deep = '{"role":"user","content":' + "[" * 200 + "]" * 200 + ',"timestamp":1}'
    path.write_text(too_deep)
    assert load_error(path) == f"line 1: {TOO_DEEP}"


def test_text_file_with_bad_bytes() -> None:
    file = io.TextIOWrapper(io.BytesIO(GOOD + b"\xff\n"), encoding="utf-8")
    with pytest.raises(SerializationError) as info:
        load_transcript(file)
    assert str(info.value).startswith("line ")
    assert " or later: not valid utf-8 (invalid start byte)" in str(info.value)


def test_from_json_deep_text() -> None:
    with pytest.raises(SerializationError) as info:
        from_json("[" * 100_000 + "]" * 100_000, AgentMessage)
    assert str(info.value) == TOO_DEEP
    with pytest.raises(SerializationError) as info:
        from_json('{"role":"user","content":' + "[" * 201 + "]" * 201 + "}", AgentMessage)
    assert str(info.value) == TOO_DEEP


def test_from_json_bytes_that_are_not_utf8() -> None:
    with pytest.raises(SerializationError) as info:
        from_json(b'{"role":"user","content":"caf\xe9","timestamp":1}', AgentMessage)
    assert str(info.value) == "not valid UTF-8 (byte 0xe9 at column 30)"
    assert from_json(GOOD, AgentMessage) == UserMessage(content="hi", timestamp=1)


# -- F9: dumping -----------------------------------------------------------------------------


def test_a_dict_is_not_a_message() -> None:
    assert dump_error(
        [UserMessage(content="x", timestamp=1), {"role": "user", "content": "x"}]
    ) == (
        "line 2: expected a message (SystemMessage, UserMessage, AssistantMessage, "
        "ToolResultMessage or a class registered with register_message_type), got "
        "{'role': 'user', 'content': 'x'}"
    )


def test_a_message_with_a_wrong_field_type_is_refused() -> None:
    # Built past the constructor's own check, as a message changed in place would be.
    bad = UserMessage(content="x", timestamp=1)
    object.__setattr__(bad, "content", 123)
    assert dump_error([bad]) == (
        "line 1: UserMessage.content must be a str or a list of TextContent or ImageContent, "
        "got 123"
    )
    bad_block = UserMessage(content=[TextContent(text=None)], timestamp=1)  # type: ignore[arg-type]
    assert dump_error([bad_block]) == "line 1: UserMessage.content[0].text must be a str, got None"
    late = UserMessage(content="x", timestamp="now")  # type: ignore[arg-type]  # the bad input
    assert dump_error([late]) == "line 1: UserMessage.timestamp must be an int, got 'now'"


def test_bytes_are_refused_not_changed() -> None:
    assert dump_error([result({"b": b"\x00raw"})]) == (
        "line 1: ToolResultMessage.details.b: bytes are not JSON"
    )
    with pytest.raises(SerializationError) as info:
        to_json(result({"b": b"\x00raw"}))
    assert str(info.value) == "bytes are not JSON @ $.details.b"


def test_deep_tool_arguments_are_refused() -> None:
    call = ToolCall(id="c", name="deep", arguments=nested(2_000))
    message = AssistantMessage(content=[call], api="faux", provider="faux", model="m", timestamp=1)
    error = dump_error([message])
    assert error.startswith("line 1: AssistantMessage.content[0].arguments.a.a.a")
    assert error.endswith(f"...: {TOO_DEEP}")
    with pytest.raises(SerializationError) as info:
        to_json(message)
    assert str(info.value).startswith(f"{TOO_DEEP} @ $.content[0].arguments.a")


def test_cyclic_details_are_refused() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    assert dump_error([result({"x": cycle})]) == (
        "line 1: ToolResultMessage.details.x[0]: cyclic value"
    )
    mapping: dict[str, Any] = {}
    mapping["self"] = mapping
    with pytest.raises(SerializationError) as info:
        to_json(result(mapping))
    assert str(info.value) == "cyclic value @ $.details.self"


def test_shared_values_are_not_cycles() -> None:
    shared = {"k": 1}
    assert to_json(result([shared, shared])).count('{"k":1}') == 2


@pytest.mark.parametrize(
    ("value", "name"),
    [(float("nan"), "NaN"), (float("inf"), "Infinity"), (float("-inf"), "-Infinity")],
)
def test_non_finite_floats_are_refused_by_dump(value: float, name: str) -> None:
    message = AssistantMessage(
        content=[],
        api="faux",
        provider="faux",
        model="m",
        usage=Usage(cost=Cost(total=value)),
        timestamp=1,
    )
    assert dump_error([message]) == (
        f"line 1: AssistantMessage.usage.cost.total must be a finite number, got {value!r}"
    )
    assert dump_error([result({"r": [value]})]) == (
        f"line 1: ToolResultMessage.details.r[0]: {name} is not JSON"
    )
    # to_json writes what JSON.stringify writes (reference parity.md N1).
    assert '"r":[null]' in to_json(result({"r": [value]}))


def test_odd_keys_and_types_are_named() -> None:
    assert dump_error([result({1: "x"})]) == (
        "line 1: ToolResultMessage.details: a key must be a string, got 1"
    )
    assert dump_error([result({"a b": {2.5}})]) == (
        "line 1: ToolResultMessage.details[\"a b\"]: cannot write 'set' values as JSON"
    )


def test_failed_dump_leaves_the_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_bytes(GOOD)
    with pytest.raises(SerializationError):
        dump_transcript(path, [UserMessage(content="new", timestamp=2), result(b"x")])
    assert path.read_bytes() == GOOD


def test_what_dump_writes_load_reads() -> None:
    messages: list[AgentMessage] = [
        UserMessage(content="x", timestamp=1),
        result({"list": [1, 2], "n": 2.5, "deep": nested(150)}),
    ]
    buffer = io.StringIO()
    dump_transcript(buffer, messages)
    loaded = load_transcript(io.StringIO(buffer.getvalue()))
    assert loaded[0] == messages[0]
    assert loaded == messages


def test_a_tuple_is_refused_by_dump() -> None:
    # A tuple would load back as a list, so the transcript would not read back equal.
    assert dump_error([result({"t": (1, 2)})]) == (
        "line 1: ToolResultMessage.details.t: a tuple is not JSON (it would load back as a list)"
    )
    call = ToolCall(id="c", name="t", arguments={"points": [(0, 1)]})
    message = AssistantMessage(content=[call], api="faux", provider="faux", model="m", timestamp=1)
    assert dump_error([UserMessage(content="x", timestamp=1), message]) == (
        "line 2: AssistantMessage.content[0].arguments.points[0]: "
        "a tuple is not JSON (it would load back as a list)"
    )
    # to_json writes what JSON.stringify writes: an array.
    assert '"details":{"t":[1,2]}' in to_json(result({"t": (1, 2)}))


# -- Many problems in one value --------------------------------------------------------------


def test_many_bad_elements_are_summed_up_quickly() -> None:
    # A million bad content blocks: the first few are named, the rest counted, and the
    # error comes fast (all of them were once listed: 58 MB of text after 20 s).
    line = '{"role":"user","content":[' + ",".join(["7"] * 1_000_000) + '],"timestamp":1}\n'
    started = time.perf_counter()
    error = load_error_of(line)
    assert time.perf_counter() - started < 10
    problems = [f"expected a JSON object, got a number @ $.content[{index}]" for index in range(10)]
    assert error == "line 1: " + "; ".join(problems) + "; ... and 999990 more"
    assert len(error) < 1_000


def test_problems_are_counted_across_values() -> None:
    # Nested lists: the count covers every list, and a few problems are not cut short.
    blocks = ",".join(['{"type":"text","text":1}'] * 3)
    assert load_error_of(f'{{"role":"user","content":[{blocks}],"timestamp":"x"}}') == (
        "line 1: expected a string, got 1 @ $.content[0].text; "
        "expected a string, got 1 @ $.content[1].text; "
        "expected a string, got 1 @ $.content[2].text; "
        "expected an integer, got 'x' @ $.timestamp"
    )
    many = ",".join(['{"type":"text","text":1}'] * 25)
    error = load_error_of(f'{{"role":"user","content":[{many}],"timestamp":"x"}}')
    assert error.endswith("expected a string, got 1 @ $.content[9].text; ... and 16 more")


def test_many_unknown_keys_are_summed_up_quickly() -> None:
    keys = ",".join(f'"k{index}":0' for index in range(1_000_000))
    started = time.perf_counter()
    error = load_error_of(f'{{"role":"user","content":"x","timestamp":1,{keys}}}')
    assert time.perf_counter() - started < 10
    assert error == (
        "line 1: unknown keys 'k0', 'k1', 'k10', 'k100', 'k1000', 'k10000', 'k100000', "
        "'k100001', 'k100002', 'k100003' and 999990 more in UserMessage"
    )


def load_error_of(text: str) -> str:
    with pytest.raises(SerializationError) as info:
        load_transcript(io.StringIO(text))
    return str(info.value)
