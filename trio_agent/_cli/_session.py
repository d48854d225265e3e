"""Transcript files of ``trio-agent``: loading, atomic saving, and the sessions directory.

A transcript file is the format of earlier versions (and of ``/save``): the transcript as
JSON Lines, written whole after every run. ``--session FILE`` keeps one in that format
when it is not a pi session file, and ``--continue`` resumes one found in the sessions
directory (``$XDG_STATE_HOME/trio-agent/sessions``, by default
``~/.local/state/trio-agent/sessions``) when it is the most recently written. Sessions of
the store (pi's session files there by default) are in :mod:`._store`.

Only a regular file (links followed) is loaded, and a line may hold at most
:data:`MAX_LINE_BYTES`: a FIFO would block the program before its first run, and a link
to ``/dev/zero`` would be one endless line (issue 18, item 8).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, BinaryIO, cast

from .._exceptions import SerializationError
from .._messages import AgentMessage
from ..serialization import dump_transcript, load_transcript
from ._args import UsageError
from ._files import open_regular_file

__all__ = [
    "MAX_LINE_BYTES",
    "check_session_directory",
    "history_file",
    "latest_session",
    "load_session",
    "save_transcript",
    "sessions_directory",
    "state_directory",
]


MAX_LINE_BYTES = 128 * 1024 * 1024
"""The longest line of a session file that is loaded (128 MiB: room for a message with a
few images of the 20 MiB that ``--image`` accepts, base64-encoded)."""


class LineTooLongError(Exception):
    """A line of a session file is longer than :data:`MAX_LINE_BYTES`."""


def _bounded_lines(file: BinaryIO, limit: int) -> Iterator[bytes]:
    """The lines of ``file``, refusing one longer than ``limit`` bytes (its line end not
    counted) before more of it is read."""
    lineno = 0
    while True:
        line = file.readline(limit + 2)
        if not line:
            return
        lineno += 1
        if len(line.rstrip(b"\r\n")) > limit:
            raise LineTooLongError(f"line {lineno}: longer than {_size(limit)}")
        yield line


def _size(limit: int) -> str:
    mib = limit / (1024 * 1024)
    return f"{mib:g} MiB" if mib >= 1 else f"{limit} bytes"


def state_directory(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/trio-agent`` (default ``~/.local/state/trio-agent``)."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "trio-agent"


def sessions_directory(environ: Mapping[str, str] | None = None) -> Path:
    """Where chats are saved when no ``--session`` is given."""
    return state_directory(environ) / "sessions"


def history_file(environ: Mapping[str, str] | None = None) -> Path:
    """The ``readline`` history of ``chat``."""
    return state_directory(environ) / "history"


def latest_session(directory: Path) -> Path:
    """The most recently written ``*.jsonl`` file of ``directory`` (for ``--continue``):
    a pi session file or a transcript file.

    Raises:
        UsageError: there is none.
    """
    try:
        candidates = [entry for entry in directory.glob("*.jsonl") if entry.is_file()]
    except OSError:
        candidates = []
    if not candidates:
        raise UsageError(f"no session to continue in {str(directory)!r}")
    return max(candidates, key=lambda entry: (entry.stat().st_mtime_ns, entry.name))


def check_session_directory(path: Path) -> None:
    """Refuse a session whose file could not be written after a run.

    Checked before the run, so that no answer is lost for want of a directory.

    Raises:
        UsageError: the directory does not exist, is not a directory or is not writable.
    """
    directory = path.parent
    if not directory.is_dir():
        problem = "is not a directory" if directory.exists() else "does not exist"
    elif not os.access(directory, os.W_OK):
        problem = "is not writable"
    else:
        return
    raise UsageError(f"cannot write session {str(path)!r}: directory {str(directory)!r} {problem}")


def load_session(path: Path, max_line_bytes: int = MAX_LINE_BYTES) -> list[AgentMessage] | None:
    """The session's transcript, or ``None`` when the file does not exist yet.

    Blocking; run it in a thread that may be abandoned (Ctrl-C must not wait for it).

    Raises:
        UsageError: the file could not be written after a run (see
            :func:`check_session_directory`), or it exists and cannot be loaded: it is
            not a regular file, a line is longer than ``max_line_bytes``, bad content;
            the message names the file and, for bad content, the line.
    """
    check_session_directory(path)
    try:
        with open_regular_file(path) as file:
            # load_transcript iterates what it is given; bytes lines are decoded by it.
            lines = cast(IO[str], _bounded_lines(file, max_line_bytes))
            return load_transcript(lines)
    except FileNotFoundError:
        return None
    except OSError as exc:
        reason = exc.strerror or str(exc)
    except (SerializationError, LineTooLongError, ValueError) as exc:
        reason = str(exc)
    raise UsageError(f"cannot load session {str(path)!r}: {reason}")


def save_transcript(path: Path, messages: Sequence[AgentMessage]) -> None:
    """Write ``messages`` to ``path`` atomically (a temporary file, then a rename).

    The temporary file has a name of its own (``<name>.<random>.tmp`` beside ``path``),
    so that two processes saving one session never write or rename each other's; the
    last rename wins. The file is readable by its owner only. Blocking; run it in a
    thread.

    Raises:
        OSError: the file cannot be written.
        SerializationError: a message cannot be serialized.
    """
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with open(fd, "w", encoding="utf-8", newline="\n") as file:
            dump_transcript(file, messages)
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
