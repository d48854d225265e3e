"""The JSON that trio_agent writes is the JSON pi 1.6.0 writes (reference parity.md N1 and
the transcript item of issue 10): numbers as ``JSON.stringify`` writes them, and keys
that pi writes but trio_agent does not model kept through a load/dump round trip."""

from __future__ import annotations

import io
from typing import Any

import pytest

from trio_agent import ToolResultMessage, Usage
from trio_agent.serialization import dump_transcript, load_transcript, to_json


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
