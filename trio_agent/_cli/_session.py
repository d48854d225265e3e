"""Session files of ``trio-agent``: loading, atomic saving, and the sessions directory.

A chat is saved as JSON Lines after every run: in ``--session FILE``, or else in a new
file of the sessions directory (``$XDG_STATE_HOME/trio-agent/sessions``, by default
``~/.local/state/trio-agent/sessions``), which ``--continue`` resumes from.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from .._exceptions import SerializationError
from .._messages import AgentMessage
from ..serialization import dump_transcript, load_transcript
from ._args import UsageError

__all__ = [
    "check_session_directory",
    "history_file",
    "latest_session",
    "load_session",
    "new_session_path",
    "save_transcript",
    "sessions_directory",
    "state_directory",
]


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


def new_session_path(directory: Path) -> Path:
    """A new file name in ``directory``: the local time, and the process id."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return directory / f"{stamp}-{os.getpid()}.jsonl"


def latest_session(directory: Path) -> Path:
    """The most recently written session of ``directory`` (for ``--continue``).

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


def load_session(path: Path) -> list[AgentMessage] | None:
    """The session's transcript, or ``None`` when the file does not exist yet.

    Raises:
        UsageError: the file could not be written after a run (see
            :func:`check_session_directory`), or it exists and cannot be loaded; the
            message names the file and, for bad content, the line.
    """
    check_session_directory(path)
    try:
        return load_transcript(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        reason = exc.strerror or str(exc)
    except (SerializationError, ValueError) as exc:
        reason = str(exc)
    raise UsageError(f"cannot load session {str(path)!r}: {reason}")


def save_transcript(path: Path, messages: Sequence[AgentMessage]) -> None:
    """Write ``messages`` to ``path`` atomically (a temporary file, then a rename).

    Blocking; run it in a thread.

    Raises:
        OSError: the file cannot be written.
        SerializationError: a message cannot be serialized.
    """
    temporary = path.with_name(path.name + ".tmp")
    try:
        dump_transcript(temporary, messages)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        raise
