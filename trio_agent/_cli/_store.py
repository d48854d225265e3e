"""The session store of ``trio-agent``: ``--store``, ``--session ID``, ``--continue``, the
``sessions`` command and ``/sessions``.

Sessions are kept by :mod:`trio_agent.sessions`: by default ``jsonl:`` of the sessions
directory, so a saved chat is one of pi's session files (format version 3) that pi's
coding agent opens too; ``--store URL`` picks another store (``sqlite:PATH``,
``postgresql://...``, ``memory:``). A session is claimed while the program writes it, so a
second ``trio-agent`` on the same session stops with the holder's name
(:class:`~trio_agent.sessions.SessionBusyError`), and every message is committed as it
ends (:func:`~trio_agent.sessions.attach_agent`).

A *file* given to ``--session`` (a name with a ``/`` or ending in ``.jsonl``) is looked
at first: a pi session file is opened through ``jsonl:`` of its directory; any other file
(or one that does not exist yet) is a transcript file of :mod:`._session`, loaded and
saved as before.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Literal

import attrs
import trio

from .._agent import Agent
from .._messages import (
    AgentMessage,
    AssistantMessage,
    ToolResultMessage,
    UserMessage,
)
from .._tools import AgentTool
from .._transcript import content_text
from ..sessions import (
    Session,
    SessionBusyError,
    SessionExistsError,
    SessionFormatError,
    SessionNotFoundError,
    SessionStore,
    SessionStoreError,
    attach_agent,
    open_store,
)
from ._args import CommandError, UsageError
from ._files import open_regular_file
from ._render import one_line
from ._session import MAX_LINE_BYTES, load_session, sessions_directory

__all__ = [
    "StoreSession",
    "default_store_url",
    "file_format",
    "is_file_name",
    "new_session_id",
    "session_table",
    "show_lines",
]

_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def default_store_url(environ: Mapping[str, str] | None = None) -> str:
    """``jsonl:`` of the sessions directory."""
    return f"jsonl:{sessions_directory(environ)}"


def is_file_name(text: str) -> bool:
    """Whether ``--session TEXT`` names a file (a ``/`` or the platform's separator in
    it, or a ``.jsonl`` ending) rather than a session id of the store."""
    return "/" in text or os.sep in text or text.endswith(".jsonl")


def check_session_id(text: str) -> str:
    """``text`` if it is a session id as pi allows them.

    Raises:
        UsageError: it is not.
    """
    if not _ID.fullmatch(text):
        raise UsageError(
            f"--session {text!r}: a session id has letters, digits, '.', '_' and '-', and "
            "starts and ends with a letter or digit (a file name needs a '/' or the "
            ".jsonl ending)"
        )
    return text


def new_session_id() -> str:
    """A new UUID version 7 (time-ordered), as pi names sessions."""
    ms = datetime.datetime.now(datetime.UTC).timestamp() * 1000
    value = (int(ms) & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    rand = int.from_bytes(os.urandom(10), "big")
    value |= ((rand >> 68) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def file_format(path: Path) -> tuple[Literal["pi", "transcript"], str | None] | None:
    """What ``path`` holds: ``("pi", session_id)`` for a pi session file (its first line
    is a ``{"type": "session", ...}`` header), ``("transcript", None)`` for anything else
    that exists (a transcript file of earlier versions, or a file that
    :func:`~._session.load_session` will refuse with its own message), ``None`` when
    there is no file. Blocking."""
    try:
        with open_regular_file(path) as file:
            while True:
                line = file.readline(MAX_LINE_BYTES + 2)
                if not line:
                    return ("transcript", None)
                if line.strip():
                    break
    except FileNotFoundError:
        return None
    except OSError:
        return ("transcript", None)
    try:
        header = json.loads(line)
    except ValueError:
        return ("transcript", None)
    if isinstance(header, dict) and header.get("type") == "session":
        session_id = header.get("id")
        return ("pi", session_id if isinstance(session_id, str) else "")
    return ("transcript", None)


def _store_problem(url: str, exc: Exception) -> Exception:
    """The program's error for a store that failed: a usage error for what the user
    can fix on the command line, else a command error."""
    if isinstance(exc, SessionFormatError):
        return UsageError(f"cannot load session: {exc}")
    if isinstance(exc, ValueError):
        return UsageError(f"--store {url!r}: {exc}")
    return CommandError(str(exc))


@contextlib.asynccontextmanager
async def opened_store(url: str) -> AsyncIterator[SessionStore]:
    """:func:`~trio_agent.sessions.open_store`, its errors said as the program says
    them (the errors of the block are left alone)."""
    entered = False
    try:
        async with open_store(url) as store:
            entered = True
            yield store
    except (ValueError, SessionStoreError, OSError) as exc:
        if entered:
            raise
        raise _store_problem(url, exc) from None


@attrs.define(eq=False)
class StoreSession:
    """A session of a store that the program writes: opened (or created), claimed and
    attached to the agent by :meth:`open`.

    Args:
        url: The store.
        session_id: The session.
        create: Create the session (it is new); an existing one is opened instead.
    """

    url: str
    session_id: str
    create: bool = False
    store: SessionStore | None = None
    """The open store, while :meth:`open` runs."""
    session: Session | None = None
    """The claimed session, while :meth:`open` runs."""
    _attached: contextlib.AsyncExitStack | None = None

    @property
    def label(self) -> str:
        return f"session {self.session_id!r}"

    @contextlib.asynccontextmanager
    async def open(self, agent: Agent, tools: Sequence[AgentTool]) -> AsyncIterator[Session]:
        """Open the store, claim the session (creating it if it is new), recover it, and
        attach ``agent``: the agent starts from the session's messages, or (a new
        session) the session starts with the agent's system message. Detached, released
        and closed on exit.

        Raises:
            CommandError: another process writes the session (the message names the
                holder), or the store failed.
            UsageError: the session does not exist, or cannot be read.
        """
        async with opened_store(self.url) as store:
            claimed = False
            try:
                if self.create:
                    with contextlib.suppress(SessionExistsError):
                        await store.create(session_id=self.session_id)
                async with store.open_for_writing(self.session_id, tools=tools) as session:
                    claimed = True
                    self.store, self.session = store, session
                    try:
                        async with contextlib.AsyncExitStack() as attached:
                            self._attached = attached
                            await attached.enter_async_context(attach_agent(agent, session))
                            yield session
                    finally:
                        self.store = self.session = None
                        self._attached = None
            except SessionBusyError as exc:
                if claimed:
                    raise
                lease = f"{store.lease_seconds:g}"
                raise CommandError(
                    f"{exc} (another trio-agent is using it: wait until it ends, or "
                    "choose another session; the claim of a program that was killed "
                    f"expires within {lease} seconds)"
                ) from None
            except SessionNotFoundError:
                if claimed:
                    raise
                raise UsageError(f"no session {self.session_id!r} in {self.url}") from None
            except (SessionFormatError, SessionStoreError, ValueError) as exc:
                if claimed:
                    raise
                raise _store_problem(self.url, exc) from None

    async def start_over(self, agent: Agent) -> None:
        """``/reset``: a new branch of the session at its root, which the agent (reset
        already) starts with its system message; earlier messages stay in the session,
        on their own branch."""
        assert self.session is not None and self._attached is not None
        await self._attached.aclose()
        self.session.branch(None)
        await self._attached.enter_async_context(attach_agent(agent, self.session))


# ---------------------------------------------------------------------------------------
# Listing and showing


@attrs.frozen(kw_only=True)
class SessionRow:
    """One line of ``sessions list``."""

    name: str
    """The session id, or a transcript file's path."""
    created: str
    messages: int
    first_prompt: str


def _first_prompt(messages: Sequence[AgentMessage]) -> str:
    for message in messages:
        if isinstance(message, UserMessage):
            return one_line(content_text(message.content, " "), 60)
    return ""


def _said(messages: Sequence[AgentMessage]) -> int:
    return sum(1 for message in messages if message.role != "system")


async def session_rows(store: SessionStore, url: str) -> list[SessionRow]:
    """The sessions of ``store``, newest first; for the default store also the
    transcript files of the sessions directory (by the time they were last written)."""
    rows: list[SessionRow] = []
    for header in await store.list():
        try:
            messages = (await store.open(header.id)).messages()
        except SessionNotFoundError:  # deleted meanwhile
            continue
        rows.append(
            SessionRow(
                name=header.id,
                created=_short_time(header.timestamp),
                messages=_said(messages),
                first_prompt=_first_prompt(messages),
            )
        )
    if url == default_store_url():
        rows.extend(await trio.to_thread.run_sync(_transcript_rows, sessions_directory()))
    return rows


def _transcript_rows(directory: Path) -> list[SessionRow]:
    rows: list[tuple[float, SessionRow]] = []
    try:
        paths = sorted(directory.glob("*.jsonl"))
    except OSError:
        return []
    for path in paths:
        found = file_format(path)
        if found is None or found[0] != "transcript":
            continue
        try:
            messages = load_session(path) or []
            mtime = path.stat().st_mtime
        except (UsageError, OSError):
            continue
        stamp = datetime.datetime.fromtimestamp(mtime, datetime.UTC)
        rows.append(
            (
                mtime,
                SessionRow(
                    name=str(path),
                    created=stamp.strftime("%Y-%m-%d %H:%M"),
                    messages=_said(messages),
                    first_prompt=_first_prompt(messages),
                ),
            )
        )
    rows.sort(key=lambda row: row[0], reverse=True)
    return [row for _, row in rows]


def _short_time(timestamp: str) -> str:
    """``2026-12-04T16:01:58.123Z`` as ``2026-12-04 16:01``."""
    return timestamp[:16].replace("T", " ")


def session_table(rows: Sequence[SessionRow], current: str | None = None) -> list[str]:
    """``sessions list`` and ``/sessions``: one line per session; ``current`` is marked
    with ``*``."""
    width = max((len(row.name) for row in rows), default=0)
    lines = []
    for row in rows:
        mark = "* " if row.name == current else "  " if current is not None else ""
        count = f"{row.messages} message" + ("" if row.messages == 1 else "s")
        text = f"{mark}{row.name:<{width}}  {row.created}  {count:>12}"
        if row.first_prompt:
            text += f"  {row.first_prompt}"
        lines.append(text.rstrip())
    return lines


def show_lines(messages: Sequence[AgentMessage]) -> list[str]:
    """``sessions show``: each message as ``[role] text`` (its whole text; tool calls and
    results on lines of their own)."""
    lines: list[str] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            text = content_text(message.content)
            if text:
                lines.append(f"[assistant] {text}")
            for block in message.content:
                if block.type == "toolCall":
                    arguments = json.dumps(block.arguments, ensure_ascii=False)
                    lines.append(f"[tool call] {block.name} {arguments}")
            if message.stop_reason in ("error", "aborted"):
                lines.append(f"[{message.stop_reason}] {message.error_message or ''}".rstrip())
        elif isinstance(message, ToolResultMessage):
            tag = "tool error" if message.is_error else "tool result"
            lines.append(f"[{tag}] {message.tool_name}: {content_text(message.content)}")
        elif message.role == "system":
            lines.append(f"[system] {content_text(getattr(message, 'content', ''))}")
        elif isinstance(message, UserMessage):
            lines.append(f"[user] {content_text(message.content)}")
        else:
            summary = getattr(message, "summary", None)
            text = summary if isinstance(summary, str) else ""
            lines.append(f"[{message.role}] {text}".rstrip())
    return lines
