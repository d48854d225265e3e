"""The SSE decoder frames text without carriage returns on a path of its own (split at
newlines, ``data:`` and ``event:`` lines handled inline); it gives what the general path
gives for the same lines ended by ``\\r\\n``, raw lines included, however the body is cut."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trio_agent.models._sse import SseDecoder

_LINES = st.sampled_from(
    [
        "data: a",
        "data:b",
        "data:  two spaces",
        "data",
        "data:",
        "event: x",
        "event:y",
        "event",
        "event:",
        "id: 7",
        ": comment",
        "retry: 5",
        "other: field",
        "datum: not data",
        'data: {"k": "v\u2028"}',
        "",
    ]
)


def _events(body: bytes, cuts: list[int]) -> list[tuple[str, str, str, tuple[str, ...]]]:
    points = sorted({min(cut, len(body)) for cut in cuts})
    decoder = SseDecoder()
    out = []
    for a, b in zip([0, *points], [*points, len(body)], strict=True):
        out.extend(decoder.feed(body[a:b]))
    out.extend(decoder.end())
    return [(event.event, event.data, event.id, event.raw) for event in out]


@given(
    lines=st.lists(_LINES, max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=8),
)
def test_newline_and_crlf_bodies_frame_alike(lines: list[str], cuts: list[int]) -> None:
    lf = "".join(f"{line}\n" for line in lines).encode()
    crlf = "".join(f"{line}\r\n" for line in lines).encode()
    # The same cut points in line terms: cut the CRLF body after the same lines and
    # characters (each "\n" of the LF body is "\r\n" there, and a cut between "\r" and
    # "\n" is covered by the decoder's own tests).
    mapped = [cut + lf[:cut].count(b"\n") for cut in cuts if cut <= len(lf)]
    assert _events(lf, cuts) == _events(crlf, mapped)
    assert _events(lf, cuts) == _events(lf, [])
