"""JSON helpers for streamed tool-call arguments.

Providers stream a tool call's arguments as raw JSON text in small pieces. Two views of
that text matter:

* while it streams, a best-effort *partial* value for previews
  (:class:`ToolCallArgumentsStream`, backed by an incremental lenient parser that never
  raises);
* once it is complete, the real arguments or an ``arguments_error`` for the model
  (:func:`parse_tool_call_arguments`), after repairing the mistakes models commonly make
  inside string literals (:func:`repair_json`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from ._jsjson import MAX_ARGUMENTS_DEPTH, depth_exceeds

__all__ = [
    "ToolCallArgumentsStream",
    "parse_json_with_repair",
    "parse_tool_call_arguments",
    "repair_json",
]

# ---------------------------------------------------------------------------------------
# Repair and strict parsing

_SIMPLE_ESCAPES: Final = frozenset('"\\/bfnrt')
_HEX_DIGITS: Final = frozenset("0123456789abcdefABCDEF")
_NAMED_CONTROLS: Final = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Runs of string content that need no attention from the repair loop.
_PLAIN_STRING_RUN: Final = re.compile(r'[^"\\\x00-\x1f]+')


def repair_json(text: str) -> str:
    """Repair the string literals of almost-JSON text.

    Only the inside of string literals is touched: raw control characters are escaped
    (``\\b \\f \\n \\r \\t`` by name, the others as ``\\u00XX``) and a backslash that does not
    start a valid escape (``\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX``) is doubled, so it survives
    as a literal backslash; a lone backslash at the very end is doubled too. Text outside
    strings is copied unchanged, so structural mistakes are left for the parser to report.

    Args:
        text: The text to repair.

    Returns:
        The repaired text (equal to ``text`` when nothing needed repair).
    """
    out: list[str] = []
    in_string = False
    i = 0
    n = len(text)
    while i < n:
        if not in_string:
            # Copy everything up to the next string opener in one slice.
            j = text.find('"', i)
            if j < 0:
                out.append(text[i:])
                break
            out.append(text[i : j + 1])
            in_string = True
            i = j + 1
            continue
        match = _PLAIN_STRING_RUN.match(text, i)
        if match is not None:
            out.append(match.group())
            i = match.end()
            continue
        ch = text[i]
        if ch == '"':
            out.append(ch)
            in_string = False
            i += 1
        elif ch == "\\":
            nxt = text[i + 1] if i + 1 < n else ""
            if nxt and nxt in _SIMPLE_ESCAPES:
                out.append(text[i : i + 2])
                i += 2
            elif nxt == "u" and len(text) >= i + 6 and set(text[i + 2 : i + 6]) <= _HEX_DIGITS:
                out.append(text[i : i + 6])
                i += 6
            else:
                # Not an escape: keep the backslash as a literal character; whatever
                # follows is handled on the next round as ordinary string content.
                out.append("\\\\")
                i += 1
        else:
            out.append(_NAMED_CONTROLS.get(ch) or f"\\u{ord(ch):04x}")
            i += 1
    return "".join(out)


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN/Infinity; JSON (and the upstream parser) does not.
    raise ValueError(f"Invalid JSON value: {name}")


# One decoder for every call: ``json.loads`` with arguments builds a new one each time, a
# cost paid per streamed event.
_STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _strict_loads(text: str) -> Any:
    if text.startswith("\ufeff"):  # what json.loads checks before decoding
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _STRICT_DECODER.decode(text)


def parse_json_with_repair(text: str) -> Any:
    """Parse JSON, retrying once on the :func:`repair_json` output.

    Args:
        text: JSON text, possibly with raw control characters or stray backslashes inside
            string literals.

    Returns:
        The parsed value (any JSON value, not only objects).

    Raises:
        ValueError: The text is not JSON even after repair. When repair changed the text,
            the error is the one for the repaired text; otherwise the original error
            (a :class:`json.JSONDecodeError` in both cases, except for ``NaN`` and
            ``Infinity``, which are rejected with a plain :class:`ValueError`).
    """
    try:
        return _strict_loads(text)
    except ValueError:
        repaired = repair_json(text)
        if repaired == text:
            raise
    return _strict_loads(repaired)


_NOT_AN_OBJECT: Final = "Tool arguments must be a JSON object"
TOO_DEEP: Final = f"JSON nested too deeply (more than {MAX_ARGUMENTS_DEPTH} levels)"
"""The problem reported for arguments nested deeper than ``MAX_ARGUMENTS_DEPTH``."""


def parse_tool_call_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """Parse the complete argument text of a tool call.

    The error text reaches the model (as the validation error of the call), so it names
    the problem and repeats what was received. For text that is not JSON the problem is
    Python's :mod:`json` error message (for example
    ``Expecting value: line 1 column 1 (char 0)``), not the JavaScript wording of
    the reference implementation.

    Args:
        text: The full argument text as streamed by the provider.

    Returns:
        ``(arguments, arguments_error)``: ``({}, None)`` for empty or whitespace-only text;
        ``(obj, None)`` when the text (after :func:`repair_json`) is a JSON object;
        otherwise ``({}, "<problem>\\n\\nReceived arguments:\\n<text>")``, where the problem
        is ``Tool arguments must be a JSON object`` for any other JSON value and
        ``JSON nested too deeply (more than 100 levels)`` for an object nested deeper
        than that. Never raises.
    """
    if not text.strip():
        return {}, None
    try:
        value = parse_json_with_repair(text)
    except ValueError as exc:
        return {}, f"{exc}\n\nReceived arguments:\n{text}"
    except RecursionError:
        return {}, f"{TOO_DEEP}\n\nReceived arguments:\n{text}"
    if not isinstance(value, dict):
        return {}, f"{_NOT_AN_OBJECT}\n\nReceived arguments:\n{text}"
    if depth_exceeds(value, MAX_ARGUMENTS_DEPTH):
        return {}, f"{TOO_DEEP}\n\nReceived arguments:\n{text}"
    return value, None


# ---------------------------------------------------------------------------------------
# Incremental lenient parser


class _Missing:
    """Marks a value that is not shown yet (a member whose value has not started)."""


_MISSING: Final = _Missing()

# Parser modes: what the next character is read as.
_VALUE: Final = 0  # a value may start here
_KEY: Final = 1  # inside an object, a key (or the closing brace) may start here
_COLON: Final = 2  # after a key
_AFTER: Final = 3  # after a complete value inside a container
_STRING: Final = 4
_NUMBER: Final = 5
_LITERAL: Final = 6
_DONE: Final = 7  # the top-level value is complete; the rest is ignored

_WHITESPACE: Final = " \t\n\r"
_NUMBER_CHARS: Final = frozenset("0123456789+-.eE")
_NUMBER_START: Final = frozenset("-0123456789")
_NUMBER_PREFIX: Final = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_LITERALS: Final[tuple[tuple[str, Any], ...]] = (("true", True), ("false", False), ("null", None))
_ESCAPED: Final = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_STRING_RUN: Final = re.compile(r'[^"\\]+')


class _Container:
    """An object or array that is still open."""

    __slots__ = ("key", "value")

    def __init__(self, value: dict[str, Any] | list[Any]) -> None:
        self.value = value
        # Objects only: the completed key whose value is being read, if any.
        self.key: str | None = None


def _number_value(text: str) -> Any:
    """The value of the longest prefix of ``text`` that is a number (dangling parts of
    an exponent or fraction are ignored), or ``_MISSING``."""
    match = _NUMBER_PREFIX.match(text)
    if match is None:
        return _MISSING
    if match.group(1) is None and match.group(2) is None:
        return int(match.group())
    return float(match.group())


def _literal_value(text: str) -> Any:
    for word, value in _LITERALS:
        if word.startswith(text):
            return value
    return _MISSING


def _same(a: Any, b: Any) -> bool:
    """JSON equality that tells ``1`` from ``True`` and ``1.0`` (Python's ``==`` does not).

    Iterative: previews may nest deeper than the interpreter's stack allows recursion."""
    pairs = [(a, b)]
    while pairs:
        x, y = pairs.pop()
        if x is y:
            continue
        if type(x) is not type(y):
            return False
        if isinstance(x, dict):
            if len(x) != len(y) or any(kx != ky for kx, ky in zip(x, y, strict=True)):
                return False
            pairs.extend((x[key], y[key]) for key in x)
        elif isinstance(x, list):
            if len(x) != len(y):
                return False
            pairs.extend(zip(x, y, strict=True))
        elif x != y:
            return False
    return True


class _PartialJsonParser:
    """Reads JSON text piece by piece and can show the value read so far at any point.

    Completed values are built once and shared between snapshots; only the containers
    that are still open are copied for a snapshot, so the cost of a snapshot is the size
    of the open containers, not of the whole document. Malformed input is read leniently:
    characters that fit nowhere are skipped.
    """

    def __init__(self) -> None:
        self._mode = _VALUE
        self._stack: list[_Container] = []
        self._result: Any = _MISSING
        # String state.
        self._str_parts: list[str] = []
        self._str_is_key = False
        self._escape: str | None = None  # text read after a backslash, while unfinished
        self._high_surrogate: str | None = None
        # Number / literal state.
        self._token = ""
        # The deepest the open containers have been.
        self.max_depth = 0

    # -- feeding -------------------------------------------------------------------------

    def feed(self, text: str) -> None:
        i = 0
        n = len(text)
        while i < n:
            mode = self._mode
            if mode == _STRING:
                i = self._feed_string(text, i)
                continue
            ch = text[i]
            if mode == _NUMBER:
                if ch in _NUMBER_CHARS:
                    self._token += ch
                    i += 1
                else:
                    self._complete(_number_value(self._token))
                continue  # re-read ``ch`` in the new mode
            if mode == _LITERAL:
                if ch.isalpha():
                    self._token += ch
                    i += 1
                else:
                    self._complete(_literal_value(self._token))
                continue
            i += 1
            if ch in _WHITESPACE or mode == _DONE:
                continue
            if mode == _VALUE:
                self._start_value(ch)
            elif mode == _KEY:
                if ch == '"':
                    self._start_string(is_key=True)
                elif ch == "}":
                    self._close()
            elif mode == _COLON:
                if ch == ":":
                    self._mode = _VALUE
                elif ch == ",":
                    self._stack[-1].key = None
                    self._mode = _KEY
                elif ch == "}":
                    self._stack[-1].key = None
                    self._close()
            else:  # _AFTER
                self._after_value(ch)

    def _start_value(self, ch: str) -> None:
        if ch == "{":
            self._stack.append(_Container({}))
            self.max_depth = max(self.max_depth, len(self._stack))
            self._mode = _KEY
        elif ch == "[":
            self._stack.append(_Container([]))
            self.max_depth = max(self.max_depth, len(self._stack))
            self._mode = _VALUE
        elif ch == '"':
            self._start_string(is_key=False)
        elif ch in _NUMBER_START:
            self._token = ch
            self._mode = _NUMBER
        elif ch.isalpha():
            self._token = ch
            self._mode = _LITERAL
        elif ch in "]}" and self._stack:
            # ``[1,]`` or ``{"a":}``: close the container, dropping the empty slot.
            self._stack[-1].key = None
            self._close()
        # Anything else cannot start a value: skip it.

    def _after_value(self, ch: str) -> None:
        top = self._stack[-1]
        if ch == ",":
            self._mode = _KEY if isinstance(top.value, dict) else _VALUE
        elif ch in "]}":
            self._close()
        elif isinstance(top.value, dict):
            if ch == '"':  # a missing comma between members
                self._start_string(is_key=True)
        else:
            self._start_value(ch)  # a missing comma between items

    def _start_string(self, *, is_key: bool) -> None:
        self._mode = _STRING
        self._str_is_key = is_key
        self._str_parts = []
        self._escape = None
        self._high_surrogate = None

    def _feed_string(self, text: str, i: int) -> int:
        """Read string content from ``text[i:]``; return where reading stopped."""
        n = len(text)
        while i < n:
            if self._escape is not None:
                i = self._feed_escape(text, i)
                continue
            match = _STRING_RUN.match(text, i)
            if match is not None:
                self._flush_surrogate()
                # Raw control characters are kept: repair_json would escape them, so the
                # final value contains them too.
                self._str_parts.append(match.group())
                i = match.end()
                continue
            ch = text[i]
            i += 1
            if ch == "\\":
                self._escape = ""
            else:  # the closing quote
                self._flush_surrogate()
                value = "".join(self._str_parts)
                self._str_parts = []
                if self._str_is_key:
                    self._stack[-1].key = value
                    self._mode = _COLON
                else:
                    self._complete(value)
                return i
        return i

    def _feed_escape(self, text: str, i: int) -> int:
        escape = self._escape
        assert escape is not None
        ch = text[i]
        if escape == "":
            if ch == "u":
                self._escape = "u"
                return i + 1
            self._escape = None
            self._flush_surrogate()
            if ch in '"\\/':
                self._str_parts.append(ch)
            elif ch in _ESCAPED:
                self._str_parts.append(_ESCAPED[ch])
            else:
                # Not an escape: the backslash is a literal character (as after repair).
                self._str_parts.append("\\" + ch)
            return i + 1
        # Inside ``\\uXXXX``.
        if ch not in _HEX_DIGITS:
            # Broken unicode escape: literal text (as after repair); ``ch`` is re-read.
            self._escape = None
            self._flush_surrogate()
            self._str_parts.append("\\" + escape)
            return i
        escape += ch
        if len(escape) < 5:
            self._escape = escape
            return i + 1
        self._escape = None
        code = int(escape[1:], 16)
        high = self._high_surrogate
        if high is not None and 0xDC00 <= code <= 0xDFFF:
            self._high_surrogate = None
            combined = 0x10000 + ((ord(high) - 0xD800) << 10) + (code - 0xDC00)
            self._str_parts.append(chr(combined))
        else:
            self._flush_surrogate()
            if 0xD800 <= code <= 0xDBFF:
                # Held back until we know whether a low surrogate follows.
                self._high_surrogate = chr(code)
            else:
                self._str_parts.append(chr(code))
        return i + 1

    def _flush_surrogate(self) -> None:
        if self._high_surrogate is not None:
            self._str_parts.append(self._high_surrogate)
            self._high_surrogate = None

    def _complete(self, value: Any) -> None:
        """A scalar or container value has ended; attach it to its parent."""
        self._token = ""
        if not self._stack:
            if value is _MISSING:
                self._mode = _VALUE  # unreadable top-level text: keep looking for a value
            else:
                self._result = value
                self._mode = _DONE
            return
        top = self._stack[-1]
        self._mode = _AFTER
        if value is _MISSING:
            top.key = None
        elif isinstance(top.value, dict):
            if top.key is not None:
                top.value[top.key] = value
                top.key = None
        else:
            top.value.append(value)

    def _close(self) -> None:
        container = self._stack.pop()
        self._complete(container.value)

    # -- snapshots -----------------------------------------------------------------------

    def _pending_scalar(self) -> Any:
        mode = self._mode
        if mode == _STRING:
            if self._str_is_key:
                return _MISSING
            if len(self._str_parts) > 1:
                self._str_parts = ["".join(self._str_parts)]
            # An unfinished escape (and a lone high surrogate) is held back.
            return self._str_parts[0] if self._str_parts else ""
        if mode == _NUMBER:
            return _number_value(self._token)
        if mode == _LITERAL:
            return _literal_value(self._token)
        return _MISSING

    def snapshot(self) -> Any:
        """The value read so far, or ``_MISSING`` when no value has started."""
        if not self._stack:
            if self._result is not _MISSING:
                return self._result
            return self._pending_scalar()
        child = self._pending_scalar()
        for container in reversed(self._stack):
            value = container.value
            if isinstance(value, dict):
                members = dict(value)
                if child is not _MISSING and container.key is not None:
                    members[container.key] = child
                child = members
            else:
                items = list(value)
                if child is not _MISSING:
                    items.append(child)
                child = items
        return child


class ToolCallArgumentsStream:
    """Accumulates a tool call's streamed argument text and previews its arguments.

    Feed it the deltas a provider streams (:meth:`append`), or the complete text when a
    provider resends it (:meth:`replace`); call :meth:`finish` once the call is complete.
    Previews are lenient and never raise: an unterminated string shows what was read (an
    unfinished escape is held back), a member whose key or value has not started is
    omitted, an unterminated ``true``/``false``/``null`` shows once the text is a prefix
    of it, and an unterminated number shows its value once its digits form a number
    (a dangling exponent or decimal point is ignored).

    The preview objects are shared with later previews where they did not change, so
    treat them as read-only.
    """

    def __init__(self) -> None:
        # The pieces of the text, joined only when the whole text is needed: ``+=`` on an
        # attribute copies the text every time (CPython only extends a string in place
        # through a local variable), which made a long argument quadratic to stream.
        self._chunks: list[str] = []
        self._length = 0
        self._parser = _PartialJsonParser()
        self._arguments: dict[str, Any] = {}

    @property
    def text(self) -> str:
        """The argument text received so far."""
        if len(self._chunks) > 1:
            self._chunks = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""

    @property
    def arguments(self) -> dict[str, Any]:
        """The current preview (the value last returned by :meth:`append`)."""
        return self._arguments

    def append(self, delta: str) -> dict[str, Any]:
        """Add a piece of argument text and return the preview.

        Args:
            delta: The next piece of the raw argument text.

        Returns:
            The arguments read so far; always a dict (``{}`` while the text is not an
            object). It is a new object only when the preview changed; otherwise the
            object returned last time.
        """
        if delta:
            self._chunks.append(delta)
            self._length += len(delta)
        self._parser.feed(delta)
        return self._refresh()

    def replace(self, full_text: str) -> str:
        """Set the complete argument text received so far.

        If ``full_text`` extends the current text, only the missing piece is parsed;
        otherwise parsing restarts from scratch.

        Args:
            full_text: The argument text as a whole.

        Returns:
            The text that was appended: the missing piece, or all of ``full_text`` after
            a restart (``""`` when nothing changed).
        """
        if full_text.startswith(self.text):
            delta = full_text[self._length :]
            if delta:
                self.append(delta)
            return delta
        self._chunks = []
        self._length = 0
        self._parser = _PartialJsonParser()
        self.append(full_text)
        return full_text

    def finish(self) -> tuple[dict[str, Any], str | None]:
        """Parse the complete text strictly (see :func:`parse_tool_call_arguments`).

        Returns:
            ``(arguments, arguments_error)``; the error is ``None`` on success.
        """
        return parse_tool_call_arguments(self.text)

    def _refresh(self) -> dict[str, Any]:
        if self._parser.max_depth > MAX_ARGUMENTS_DEPTH:
            # The arguments will be refused as nested too deeply; the preview stays as it
            # was, so nothing downstream has to walk an arbitrarily deep value.
            return self._arguments
        value = self._parser.snapshot()
        if not isinstance(value, dict):
            value = {}
        if not _same(value, self._arguments):
            self._arguments = value
        return self._arguments
