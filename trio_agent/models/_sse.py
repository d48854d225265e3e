"""Server-sent events: an incremental decoder for the bytes of a streaming response.

One implementation for every built-in API, following the framing rules pi 1.6.0 observably
uses:

- lines end at ``\\r\\n``, ``\\r`` or ``\\n``, also when a ``\\r\\n`` is split across two
  reads; no other character ends a line (``str.splitlines`` would also break at U+2028,
  ``\\x85`` and ``\\x0b``, which JSON may carry unescaped);
- a UTF-8 byte order mark at the start of the body is skipped, and UTF-8 sequences cut
  between reads are joined;
- a blank line dispatches an event only if a ``data:`` line or an ``event:`` line with a
  name came since the last dispatch (so blank lines after an ``id:`` line dispatch
  nothing);
- at the end of the body a pending event is dispatched even without its blank line, and an
  unterminated last line counts as a line;
- the Content-Type of the response is not looked at.

A body whose first non-blank character is ``{`` is not a stream but one JSON document (a
server's error object sent with status 200): the decoder collects it as
:attr:`SseDecoder.json_text` instead of framing it.
"""

from __future__ import annotations

import codecs
import re

import attrs

__all__ = ["SseDecoder", "SseEvent"]

_LINE_END = re.compile(r"\r\n|\r|\n")
_RAW_LINES = 4096
"""At most this many raw lines are kept per event (keep-alive comments add up)."""


@attrs.frozen(kw_only=True)
class SseEvent:
    """One server-sent event as framed on the wire."""

    event: str
    """The ``event:`` field (``"message"`` when absent)."""
    data: str
    """The ``data:`` lines joined with ``"\\n"``."""
    id: str = ""
    """The last ``id:`` seen in the stream so far."""
    raw: tuple[str, ...] = attrs.field(default=(), eq=False)
    """The non-blank lines as received since the previous event (comments and ``id:``
    lines included, at most 4096), for error messages that quote the event; not compared."""


class SseDecoder:
    """Turns the body's bytes, fed in any pieces, into :class:`SseEvent` values.

    Call :meth:`feed` for each piece and :meth:`end` once after the last one. The cost is
    linear in the size of the body, however it is cut.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._started = False  # the body's first character was seen (BOM check done)
        self._sniffed = False  # the body's first non-blank character was seen
        self._skip_lf = False  # the last piece ended with "\r"
        self._partial: list[str] = []  # the unterminated line so far, in pieces
        self._event: str | None = None
        self._data: list[str] = []
        self._id = ""
        self._raw: list[str] = []  # the lines since the last dispatched event
        self._json: list[str] | None = None

    @property
    def json_text(self) -> str | None:
        """The body so far when it is a JSON document rather than a stream, else ``None``."""
        return None if self._json is None else "".join(self._json)

    def feed(self, data: bytes) -> list[SseEvent]:
        """Decode one piece of the body; return the events it completed."""
        return self._text(self._decoder.decode(data))

    def end(self) -> list[SseEvent]:
        """Finish the body: the unterminated last line and the pending event count."""
        out = self._text(self._decoder.decode(b"", final=True))
        if self._json is None:
            if self._partial:
                line = "".join(self._partial)
                self._partial.clear()
                self._line(line, out)
            self._dispatch(out)
        return out

    # -- internals ------------------------------------------------------------------

    def _text(self, text: str) -> list[SseEvent]:
        out: list[SseEvent] = []
        if not text:
            return out
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        if not self._sniffed and self._json is None:
            stripped = text.lstrip(" \t\r\n")
            if stripped:
                self._sniffed = True
                if stripped.startswith("{"):
                    self._json = [stripped]
                    return out
        if self._json is not None:
            self._json.append(text)
            return out
        if self._skip_lf:
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        if "\r" not in text:
            self._lf_lines(text, out)
            return out
        position = 0
        for match in _LINE_END.finditer(text):
            piece = text[position : match.start()]
            if self._partial:
                self._partial.append(piece)
                piece = "".join(self._partial)
                self._partial.clear()
            self._line(piece, out)
            position = match.end()
        if position < len(text):
            self._partial.append(text[position:])
        self._skip_lf = text.endswith("\r")
        return out

    def _lf_lines(self, text: str, out: list[SseEvent]) -> None:
        """:meth:`_text` for text without ``\r`` (what servers send): split at ``\n``,
        with ``data:`` and ``event:`` lines handled here rather than in :meth:`_line`."""
        lines = text.split("\n")
        rest = lines.pop()  # after the last "\n": the start of an unterminated line
        if self._partial and lines:
            self._partial.append(lines[0])
            lines[0] = "".join(self._partial)
            self._partial.clear()
        raw = self._raw
        for line in lines:
            if line.startswith("data:"):
                if len(raw) < _RAW_LINES:
                    raw.append(line)
                self._data.append(line[6:] if line.startswith("data: ") else line[5:])
            elif line.startswith("event:"):
                if len(raw) < _RAW_LINES:
                    raw.append(line)
                self._event = line[7:] if line.startswith("event: ") else line[6:]
            elif line:
                self._line(line, out)
            else:
                self._dispatch(out)
                raw = self._raw
        if rest:
            self._partial.append(rest)

    def _line(self, line: str, out: list[SseEvent]) -> None:
        if not line:
            self._dispatch(out)
            return
        if len(self._raw) < _RAW_LINES:
            self._raw.append(line)
        if line.startswith(":"):
            return
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        # "retry" and unknown fields are ignored.

    def _dispatch(self, out: list[SseEvent]) -> None:
        if self._event or self._data:
            out.append(
                SseEvent(
                    event=self._event or "message",
                    data="\n".join(self._data),
                    id=self._id,
                    raw=tuple(self._raw),
                )
            )
            self._raw = []
        self._event = None
        self._data = []
