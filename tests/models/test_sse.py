"""The SSE decoder: framing rules (parity rows U02-U04, U06) under any cut of the body."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trio_agent.models._sse import SseDecoder, SseEvent

BODY = (
    "\ufeffid: 1\n\n\n"
    ": a comment\r\n"
    "data: a\r\n\r\n"
    "event: x\n"
    'data: {"u":"\u2028\x85\x0b","e":"\u00e9\U0001f600"}\r'
    "data: second line\r\r"
    "event: only-a-name\n\n"
    "retry: 5\n"
    "unknown: field\n"
    "data:no space\n"
    "data\n"
    "\n"
    "data: last"
).encode()

EXPECTED = [
    SseEvent(event="message", data="a", id="1"),
    SseEvent(event="x", data='{"u":"\u2028\x85\x0b","e":"\u00e9\U0001f600"}\nsecond line', id="1"),
    SseEvent(event="only-a-name", data="", id="1"),
    SseEvent(event="message", data="no space\n", id="1"),
    SseEvent(event="message", data="last", id="1"),
]


def decode(pieces: list[bytes]) -> list[SseEvent]:
    decoder = SseDecoder()
    events = [event for piece in pieces for event in decoder.feed(piece)]
    return events + decoder.end()


def test_whole_body() -> None:
    assert decode([BODY]) == EXPECTED


def test_every_single_cut() -> None:
    for cut in range(len(BODY) + 1):
        assert decode([BODY[:cut], BODY[cut:]]) == EXPECTED, cut


@given(st.lists(st.integers(min_value=0, max_value=len(BODY)), max_size=12))
def test_any_cuts(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    pieces = [BODY[a:b] for a, b in zip([0, *points], [*points, len(BODY)], strict=True)]
    assert decode(pieces) == EXPECTED


def test_one_byte_reads() -> None:
    assert decode([BODY[i : i + 1] for i in range(len(BODY))]) == EXPECTED


def test_a_json_body_is_collected_not_framed() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"\xef\xbb\xbf \r\n ") == []
    assert decoder.feed(b'{"error": {"message": "busy"}}\n') == []
    assert decoder.end() == []
    assert decoder.json_text == '{"error": {"message": "busy"}}\n'
    stream = SseDecoder()
    assert stream.feed(b"data: {}\n\n") == [SseEvent(event="message", data="{}")]
    assert stream.json_text is None


def test_a_long_line_in_small_pieces() -> None:
    line = b"data: " + b"x" * 200_000 + b"\n\n"
    pieces = [line[i : i + 7] for i in range(0, len(line), 7)]
    assert decode(pieces) == [SseEvent(event="message", data="x" * 200_000)]
