"""JSON Lines transcript files: :func:`dump_transcript` and :func:`load_transcript`.

One message per line, in the wire format of :mod:`trio_agent._serialization`. Reading is
strict and names the line of every problem (not UTF-8, not JSON, nested too deeply, not
a message); writing checks every message first and writes only what reads back.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import IO, Any

from ._checks import check_message
from ._exceptions import SerializationError
from ._messages import AgentMessage
from ._serialization import (
    Unwritable,
    _decode_line,
    _dumps,
    _loads,
    _NotUtf8,
    _structure,
    _TooDeep,
    check_writable,
    converter,
)

__all__ = ["dump_transcript", "load_transcript"]

_PathOrFile = str | os.PathLike[str] | IO[str]


def dump_transcript(path_or_file: _PathOrFile, messages: Iterable[AgentMessage]) -> None:
    """Write ``messages`` as JSON Lines: one compact JSON message per line.

    ``path_or_file`` is a path (the file is created or truncated, UTF-8, ``\\n`` line
    ends) or an open text file (written at its position and left open). This does
    blocking file I/O; from Trio code call it through ``trio.to_thread.run_sync``.

    Every message is checked before anything is written, so a failed dump writes
    nothing (a path is not even truncated): what this function writes,
    :func:`load_transcript` reads back. A tuple in a free-form
    value (``details``, tool arguments) is refused, since it would come back as a list;
    integral floats come back as ints (equal to them below 2**53; from there on, the int
    of JavaScript's digits).

    Raises:
        SerializationError: an entry is not a message (a built-in one or one of a class
            registered with :func:`~trio_agent.register_message_type`), holds something
            JSON cannot represent (bytes, NaN or an infinity, a non-string key, a cyclic
            value, nesting deeper than 200 levels) or would not load back equal (a
            tuple). The message
            starts with the entry's 1-based line number and names the JSON path
            (``line 2: $.details.b: bytes are not JSON``).
    """
    lines = [_transcript_line(lineno, message) for lineno, message in enumerate(messages, 1)]
    text = "".join(line + "\n" for line in lines)
    if isinstance(path_or_file, str | os.PathLike):
        with open(path_or_file, "w", encoding="utf-8", newline="\n") as file:
            file.write(text)
    else:
        path_or_file.write(text)


def _transcript_line(lineno: int, message: Any) -> str:
    """The JSON line of one transcript entry, checked to load back."""
    where = f"line {lineno}"
    try:
        check_message(message, where)
    except (TypeError, ValueError) as exc:
        raise SerializationError(str(exc)) from None
    try:
        # A tuple is a JSON array, but it would load back as a list, not equal to what
        # was written (issue 18, item 11); the agent's own checks allow tuples.
        check_writable(message, strict=True, root=type(message).__name__, tuples=False)
    except Unwritable as exc:
        raise SerializationError(f"{where}: {exc.path}: {exc.problem}") from None
    try:
        line = _dumps(converter.unstructure(message))
        # Parse it as load_transcript will: anything it would refuse is refused here.
        _structure(_loads(line), AgentMessage)
    except SerializationError as exc:
        raise SerializationError(f"{where}: {exc}") from None
    except ValueError as exc:  # not reached: the check refuses what JSON cannot hold
        raise SerializationError(f"{where}: cannot serialize: {exc}") from None
    return line


def load_transcript(path_or_file: _PathOrFile) -> list[AgentMessage]:
    """Read a JSON Lines transcript written by :func:`dump_transcript` (or by upstream).

    Blank lines are skipped. Each line is one message resolved by ``role``, including the
    roles of registered application message classes. Upstream-only keys listed in
    :data:`UPSTREAM_ONLY_KEYS` are kept (see :class:`~trio_agent.serialization.WireExtras`).
    A path is read as UTF-8, line by line; an open text file is read as it decodes.
    Blocking file I/O, like :func:`dump_transcript`.

    Raises:
        SerializationError: a line is not UTF-8, not JSON, nests deeper than 200 levels
            or is not a message; the message starts with the 1-based line number
            (``line 3: unknown role 'bogus'``, ``line 2: not valid UTF-8 (byte 0xe9 at
            column 29)``, ``line 2: JSON nested too deeply (more than 200 levels)``).
    """
    if isinstance(path_or_file, str | os.PathLike):
        with open(path_or_file, "rb") as file:
            return _read_lines(file)
    return _read_lines(path_or_file)


_WHITESPACE = re.compile(r"\s*")


def _lines(file: IO[Any]) -> Iterable[tuple[int, str]]:
    """``(line number, text)`` of each line; bytes are decoded line by line."""
    lineno = 0
    iterator = iter(file)
    while True:
        lineno += 1
        try:
            line = next(iterator)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            # A text file opened by the caller decodes a whole buffer at a time, so the
            # bad byte may lie a few lines further on.
            raise SerializationError(
                f"line {lineno} or later: not valid {exc.encoding} ({exc.reason})"
            ) from None
        if isinstance(line, bytes):
            try:
                line = _decode_line(line)
            except _NotUtf8 as exc:
                raise SerializationError(f"line {lineno}: {exc}") from None
        yield lineno, line


def _read_lines(file: IO[Any]) -> list[AgentMessage]:
    messages: list[AgentMessage] = []
    for lineno, line in _lines(file):
        if _WHITESPACE.fullmatch(line):
            continue
        try:
            # Without the line end: an error at the end of the line would otherwise be
            # reported at column 1 of the (non-existent) next line.
            data = _loads(line.rstrip("\r\n"))
        except _TooDeep as exc:
            raise SerializationError(f"line {lineno}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise SerializationError(
                f"line {lineno}: invalid JSON: {exc.msg} at column {exc.colno}"
            ) from None
        except ValueError as exc:
            raise SerializationError(f"line {lineno}: invalid JSON: {exc}") from None
        try:
            messages.append(_structure(data, AgentMessage))
        except SerializationError as exc:
            raise SerializationError(f"line {lineno}: {exc}") from None
    return messages
