"""Session entries: pi's session format, version 3.

A session is a header followed by entries. Every entry has an ``id`` (8 hex digits when
trio_agent makes it), the ``parentId`` of the entry it follows (``null`` for a root) and
an ISO-8601 ``timestamp``; the ``parentId`` links form a tree, and the current branch is
the path from the root to the leaf (the last entry appended, unless
:meth:`~trio_agent.sessions.Session.branch` moved it). The JSON of each entry is what
pi-coding-agent 1.6.0's ``SessionManager`` writes: camelCase keys, optional keys left out,
messages in the wire format of :mod:`trio_agent.serialization`.

Entry types this module models: ``message``, ``model_change``, ``thinking_level_change``,
``compaction``, ``branch_summary``, ``custom``, ``custom_message``, ``label``,
``session_info`` and ``context_edit``. Any other type, and a message whose role neither
trio_agent nor the application registered, loads as an :class:`UnknownEntry` that keeps
its JSON and is written back unchanged.

The run journal (:class:`RunStartedEntry`, :class:`ToolStartedEntry`,
:class:`RunFinishedEntry`) is written as ``custom`` entries (``customType``
``"trio_agent.run_started"`` ...), which pi keeps and leaves out of the model's context.
"""

from __future__ import annotations

import datetime
import os
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, TypeAlias

import attrs

from .._exceptions import SerializationError
from .._messages import AgentMessage, SystemMessage, ThinkingLevel
from .._serialization import from_dict, to_dict
from ._errors import SessionFormatError

__all__ = [
    "CURRENT_VERSION",
    "BranchSummaryEntry",
    "CompactionEntry",
    "ContextEditEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "LabelEntry",
    "MessageEntry",
    "ModelChangeEntry",
    "RecoveredCall",
    "RunFinishedEntry",
    "RunStartedEntry",
    "SessionEntry",
    "SessionHeader",
    "SessionInfoEntry",
    "ThinkingLevelChangeEntry",
    "ToolStartedEntry",
    "UnknownEntry",
    "decode_entry",
    "decode_header",
    "encode_entry",
    "encode_header",
    "iso_now",
    "iso_to_ms",
    "new_entry_id",
    "new_session_id",
]

CURRENT_VERSION: Final = 3
"""The session format version written and read (pi-coding-agent 1.6.0's)."""

RUN_STARTED: Final = "trio_agent.run_started"
TOOL_STARTED: Final = "trio_agent.tool_started"
RUN_FINISHED: Final = "trio_agent.run_finished"


def iso_now() -> str:
    """The wall-clock time as JavaScript's ``Date.toISOString()`` writes it."""
    now = datetime.datetime.now(datetime.UTC)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_to_ms(timestamp: str) -> int:
    """An ISO-8601 timestamp as Unix milliseconds (0 when it cannot be read)."""
    try:
        parsed = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return 0
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return int(parsed.timestamp() * 1000)


def new_session_id() -> str:
    """A UUID version 7 (time-ordered), as pi names sessions."""
    return _uuid7_text(time.time_ns() // 1_000_000, int.from_bytes(os.urandom(10), "big"))


def _uuid7_text(ms: int, rand: int) -> str:
    rand_a = (rand >> 68) & 0xFFF
    rand_b = rand & ((1 << 62) - 1)
    value = ((ms & ((1 << 48) - 1)) << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def new_entry_id(taken: Callable[[str], bool]) -> str:
    """Eight hex digits not ``taken`` (pi's entry ids), a full token after 100 tries."""
    for _ in range(100):
        candidate = secrets.token_hex(4)
        if not taken(candidate):
            return candidate
    return secrets.token_hex(16)


# ---------------------------------------------------------------------------------------
# The header


@attrs.frozen(kw_only=True)
class SessionHeader:
    """The first line of a session: its id, creation time and origin."""

    id: str
    """The session id (a UUID v7 unless the creator chose one)."""
    timestamp: str
    """Creation time, ISO 8601."""
    cwd: str = ""
    """The working directory the session belongs to (pi groups sessions by it)."""
    parent_session: str | None = None
    """Where the session was forked from (pi writes the source file's path; trio_agent
    the source session's id)."""
    version: int = CURRENT_VERSION
    """The format version."""
    extra: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    """Header keys this class does not model, kept as read."""


def encode_header(header: SessionHeader) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "session",
        "version": header.version,
        "id": header.id,
        "timestamp": header.timestamp,
        "cwd": header.cwd,
    }
    if header.parent_session is not None:
        data["parentSession"] = header.parent_session
    data.update(header.extra)
    return data


def decode_header(data: Any, where: str) -> SessionHeader:
    """Read a header; ``where`` names the file or session for the error message."""
    if not isinstance(data, dict) or data.get("type") != "session":
        raise SessionFormatError(f"{where}: the first line is not a session header")
    session_id = data.get("id")
    if not isinstance(session_id, str) or not session_id:
        raise SessionFormatError(f"{where}: the session header has no id")
    version = data.get("version", 1)
    if version != CURRENT_VERSION:
        raise SessionFormatError(
            f"{where}: session format version {version!r} is not supported "
            f"(this version of trio_agent reads version {CURRENT_VERSION})"
        )
    known = {"type", "version", "id", "timestamp", "cwd", "parentSession"}
    parent = data.get("parentSession")
    return SessionHeader(
        id=session_id,
        timestamp=str(data.get("timestamp", "")),
        cwd=str(data.get("cwd", "")),
        parent_session=parent if isinstance(parent, str) else None,
        version=version,
        extra={k: v for k, v in data.items() if k not in known},
    )


# ---------------------------------------------------------------------------------------
# Entries. Every class starts with the same three tree fields; ``append()`` fills an empty
# ``id`` and ``timestamp`` and always sets ``parent_id`` to the current leaf.

_ID = attrs.field(default="", kw_only=True)
_PARENT = attrs.field(default=None, kw_only=True)
_TIME = attrs.field(default="", kw_only=True)


@attrs.frozen(kw_only=True)
class MessageEntry:
    """A message of the transcript."""

    message: AgentMessage
    """The message (any role the serializer knows, registered ones included)."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""
    type: Literal["message"] = "message"


@attrs.frozen(kw_only=True)
class ModelChangeEntry:
    """The model of later runs changed."""

    provider: str
    """The model's provider from then on."""
    model_id: str
    """The model's id from then on."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""
    type: Literal["model_change"] = "model_change"


@attrs.frozen(kw_only=True)
class ThinkingLevelChangeEntry:
    """The thinking level of later runs changed."""

    thinking_level: ThinkingLevel | str
    """The thinking level from then on."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""
    type: Literal["thinking_level_change"] = "thinking_level_change"


@attrs.frozen(kw_only=True)
class CompactionEntry:
    """The branch before ``first_kept_entry_id`` is replaced by ``summary`` in the context."""

    summary: str
    """The summary that stands for the entries before the first kept one."""
    first_kept_entry_id: str
    """The first entry kept verbatim (the compaction's own id keeps nothing before it)."""
    tokens_before: int
    """The estimated context size before the compaction."""
    details: Any = None
    """The files the summarized part read and changed (``readFiles``, ``modifiedFiles``)."""
    usage: Any = None
    """The usage of the summarizing call, as JSON."""
    from_hook: bool | None = None
    """Whether an extension hook wrote the summary (pi's ``fromHook``)."""
    system_message: SystemMessage | None = None
    """The prompt and tool state at the compaction boundary."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""
    type: Literal["compaction"] = "compaction"


@attrs.frozen(kw_only=True)
class BranchSummaryEntry:
    """The branch left at ``from_id``, summarized; starts a new branch."""

    from_id: str
    """The entry the abandoned branch left from."""
    summary: str
    """The summary of the abandoned branch."""
    details: Any = None
    """Application data about the summarized branch (pi's ``details``)."""
    usage: Any = None
    """The usage of the summarizing call, as JSON."""
    from_hook: bool | None = None
    """Whether an extension hook wrote the summary (pi's ``fromHook``)."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""
    type: Literal["branch_summary"] = "branch_summary"


@attrs.frozen(kw_only=True)
class CustomEntry:
    """Application data kept in the session and left out of the model's context."""

    custom_type: str
    """The application's name for this kind of data."""
    data: Any = None
    """The application's data (JSON); never part of the context."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""
    type: Literal["custom"] = "custom"


@attrs.frozen(kw_only=True)
class CustomMessageEntry:
    """Application content that the model sees as a user message."""

    custom_type: str
    """The application's name for this kind of message."""
    content: Any
    """A string or a list of text and image blocks, as JSON."""
    display: bool = True
    """Whether a UI shows the message."""
    details: Any = None
    """Application data about the message (JSON)."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""
    type: Literal["custom_message"] = "custom_message"


@attrs.frozen(kw_only=True)
class LabelEntry:
    """A bookmark on an entry (``label=None`` clears it)."""

    target_id: str
    """The entry labelled."""
    label: str | None = None
    """The label (``None`` removes an earlier one)."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""
    type: Literal["label"] = "label"


@attrs.frozen(kw_only=True)
class SessionInfoEntry:
    """Session metadata: its display name."""

    name: str | None = None
    """The session's display name."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""
    type: Literal["session_info"] = "session_info"


@attrs.frozen(kw_only=True)
class ContextEditEntry:
    """Replaces the content of an earlier entry of the branch in the context
    (``replacement=None`` leaves the entry out)."""

    target_id: str
    """The earlier entry whose content is replaced (or removed)."""
    replacement: Any
    """``{"content": ...}`` as JSON, or ``None``."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""
    type: Literal["context_edit"] = "context_edit"


@attrs.frozen(kw_only=True)
class RunStartedEntry:
    """Journal: a run of an attached agent started."""

    run_id: str
    """The run's id, repeated by its tool and finish entries."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""
    type: Literal["custom"] = "custom"


@attrs.frozen(kw_only=True)
class ToolStartedEntry:
    """Journal: a tool call started executing, with the tool's replay policy."""

    run_id: str
    """The run the call belongs to."""
    tool_call_id: str
    """The call that started."""
    tool_name: str
    """The tool it called."""
    replay: Literal["never", "safe"] | None = None
    """The tool's ``replay`` policy: ``"safe"`` calls are re-run by a recovery, others answered."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""
    type: Literal["custom"] = "custom"


@attrs.frozen(kw_only=True)
class RecoveredCall:
    """What recovery did with one unanswered tool call."""

    tool_call_id: str
    """The call that was answered or re-run."""
    tool_name: str
    """The tool it called."""
    action: Literal["rerun", "interrupted"]
    """``"rerun"``: the tool (``replay="safe"``) ran again and its result was committed;
    ``"interrupted"``: an error result says the tool was not re-run."""


RunOutcome: TypeAlias = Literal["completed", "aborted", "failed", "cancelled", "recovered"]


@attrs.frozen(kw_only=True)
class RunFinishedEntry:
    """Journal: a run ended (``outcome="recovered"`` when recovery closed it)."""

    run_id: str
    """The run that finished."""
    outcome: RunOutcome | str
    """How the run ended (see :data:`RunOutcome`)."""
    recovered: tuple[RecoveredCall, ...] = ()
    """The calls a recovery answered or re-ran (empty for a run that finished itself)."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""
    type: Literal["custom"] = "custom"


@attrs.frozen(kw_only=True)
class UnknownEntry:
    """An entry of a type (or a message of a role) trio_agent does not know, kept as read
    and written back unchanged."""

    data: Mapping[str, Any]
    """The entry's JSON object."""
    id: str = _ID
    """The entry's id, unique in its session (given by the session when empty)."""
    parent_id: str | None = _PARENT
    """The id of the entry before it on its branch (``None`` for the first)."""
    timestamp: str = _TIME
    """When it was written (ISO 8601, UTC), as pi writes it."""

    @property
    def type(self) -> str:
        return str(self.data.get("type", ""))


SessionEntry: TypeAlias = (
    MessageEntry
    | ModelChangeEntry
    | ThinkingLevelChangeEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | CustomMessageEntry
    | LabelEntry
    | SessionInfoEntry
    | ContextEditEntry
    | RunStartedEntry
    | ToolStartedEntry
    | RunFinishedEntry
    | UnknownEntry
)
"""Any entry of a session."""


# ---------------------------------------------------------------------------------------
# JSON


def _put(data: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        data[key] = value


def _base(entry: Any, kind: str) -> dict[str, Any]:
    return {
        "type": kind,
        "id": entry.id,
        "parentId": entry.parent_id,
        "timestamp": entry.timestamp,
    }


def encode_entry(entry: SessionEntry) -> dict[str, Any]:
    """The entry's JSON object, as pi writes it."""
    if isinstance(entry, UnknownEntry):
        data = dict(entry.data)
        data.update(id=entry.id, parentId=entry.parent_id, timestamp=entry.timestamp)
        return data
    if isinstance(entry, RunStartedEntry | ToolStartedEntry | RunFinishedEntry):
        data = _base(entry, "custom")
        journal: dict[str, Any] = {"runId": entry.run_id}
        if isinstance(entry, RunStartedEntry):
            data["customType"] = RUN_STARTED
        elif isinstance(entry, ToolStartedEntry):
            data["customType"] = TOOL_STARTED
            journal.update(toolCallId=entry.tool_call_id, toolName=entry.tool_name)
            _put(journal, "replay", entry.replay)
        else:
            data["customType"] = RUN_FINISHED
            journal["outcome"] = entry.outcome
            if entry.recovered:
                journal["recovered"] = [
                    {"toolCallId": c.tool_call_id, "toolName": c.tool_name, "action": c.action}
                    for c in entry.recovered
                ]
        data["data"] = journal
        return data
    data = _base(entry, entry.type)
    if isinstance(entry, MessageEntry):
        data["message"] = to_dict(entry.message)
    elif isinstance(entry, ModelChangeEntry):
        data.update(provider=entry.provider, modelId=entry.model_id)
    elif isinstance(entry, ThinkingLevelChangeEntry):
        data["thinkingLevel"] = entry.thinking_level
    elif isinstance(entry, CompactionEntry):
        data.update(
            summary=entry.summary,
            firstKeptEntryId=entry.first_kept_entry_id,
            tokensBefore=entry.tokens_before,
        )
        _put(data, "details", entry.details)
        _put(data, "usage", entry.usage)
        _put(data, "fromHook", entry.from_hook)
        if entry.system_message is not None:
            data["systemMessage"] = to_dict(entry.system_message)
    elif isinstance(entry, BranchSummaryEntry):
        data.update(fromId=entry.from_id, summary=entry.summary)
        _put(data, "details", entry.details)
        _put(data, "usage", entry.usage)
        _put(data, "fromHook", entry.from_hook)
    elif isinstance(entry, CustomEntry):
        data["customType"] = entry.custom_type
        _put(data, "data", entry.data)
    elif isinstance(entry, CustomMessageEntry):
        data.update(customType=entry.custom_type, content=entry.content, display=entry.display)
        _put(data, "details", entry.details)
    elif isinstance(entry, LabelEntry):
        data["targetId"] = entry.target_id
        _put(data, "label", entry.label)
    elif isinstance(entry, SessionInfoEntry):
        _put(data, "name", entry.name)
    else:
        data.update(targetId=entry.target_id, replacement=entry.replacement)
    return data


def _str(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise SessionFormatError(f"{where}: {data.get('type')} entry needs a string {key!r}")
    return value


def _tree(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    entry_id = data.get("id")
    parent = data.get("parentId")
    if not isinstance(entry_id, str) or not entry_id:
        raise SessionFormatError(f"{where}: entry has no id")
    if parent is not None and not isinstance(parent, str):
        raise SessionFormatError(f"{where}: entry {entry_id!r} has a parentId that is not a string")
    timestamp = data.get("timestamp")
    return {
        "id": entry_id,
        "parent_id": parent,
        "timestamp": timestamp if isinstance(timestamp, str) else "",
    }


def _journal(data: Mapping[str, Any], tree: dict[str, Any]) -> SessionEntry | None:
    kind = data.get("customType")
    body = data.get("data")
    if kind not in (RUN_STARTED, TOOL_STARTED, RUN_FINISHED) or not isinstance(body, dict):
        return None
    run_id = body.get("runId")
    if not isinstance(run_id, str):
        return None
    if kind == RUN_STARTED:
        return RunStartedEntry(run_id=run_id, **tree)
    if kind == TOOL_STARTED:
        replay = body.get("replay")
        return ToolStartedEntry(
            run_id=run_id,
            tool_call_id=str(body.get("toolCallId", "")),
            tool_name=str(body.get("toolName", "")),
            replay=replay if replay in ("never", "safe") else None,
            **tree,
        )
    calls = tuple(
        RecoveredCall(
            tool_call_id=str(c.get("toolCallId", "")),
            tool_name=str(c.get("toolName", "")),
            action="rerun" if c.get("action") == "rerun" else "interrupted",
        )
        for c in body.get("recovered") or ()
        if isinstance(c, dict)
    )
    return RunFinishedEntry(
        run_id=run_id, outcome=str(body.get("outcome", "")), recovered=calls, **tree
    )


def decode_entry(data: Any, where: str) -> SessionEntry:
    """Read an entry's JSON object; ``where`` names the file and line (or session) for the
    error message.

    Raises:
        SessionFormatError: not an object, no id, or a known type missing a key it needs.
    """
    if not isinstance(data, dict):
        raise SessionFormatError(f"{where}: an entry must be a JSON object")
    tree = _tree(data, where)
    kind = data.get("type")
    if kind == "message":
        raw = data.get("message")
        if not isinstance(raw, dict):
            raise SessionFormatError(f"{where}: message entry has no message object")
        try:
            message = from_dict(raw, AgentMessage)
        except SerializationError:
            # A role this process does not know (pi's bashExecution, custom, ...): kept.
            return UnknownEntry(data=dict(data), **tree)
        return MessageEntry(message=message, **tree)
    if kind == "model_change":
        return ModelChangeEntry(
            provider=_str(data, "provider", where), model_id=_str(data, "modelId", where), **tree
        )
    if kind == "thinking_level_change":
        return ThinkingLevelChangeEntry(thinking_level=_str(data, "thinkingLevel", where), **tree)
    if kind == "compaction":
        system = data.get("systemMessage")
        tokens = data.get("tokensBefore", 0)
        return CompactionEntry(
            summary=_str(data, "summary", where),
            first_kept_entry_id=_str(data, "firstKeptEntryId", where),
            tokens_before=tokens if isinstance(tokens, int) else 0,
            details=data.get("details"),
            usage=data.get("usage"),
            from_hook=data.get("fromHook"),
            system_message=from_dict(system, SystemMessage) if isinstance(system, dict) else None,
            **tree,
        )
    if kind == "branch_summary":
        return BranchSummaryEntry(
            from_id=_str(data, "fromId", where),
            summary=str(data.get("summary") or ""),
            details=data.get("details"),
            usage=data.get("usage"),
            from_hook=data.get("fromHook"),
            **tree,
        )
    if kind == "custom":
        journal = _journal(data, tree)
        if journal is not None:
            return journal
        return CustomEntry(
            custom_type=_str(data, "customType", where), data=data.get("data"), **tree
        )
    if kind == "custom_message":
        return CustomMessageEntry(
            custom_type=_str(data, "customType", where),
            content=data.get("content"),
            display=bool(data.get("display", True)),
            details=data.get("details"),
            **tree,
        )
    if kind == "label":
        label = data.get("label")
        return LabelEntry(
            target_id=_str(data, "targetId", where),
            label=label if isinstance(label, str) else None,
            **tree,
        )
    if kind == "session_info":
        name = data.get("name")
        return SessionInfoEntry(name=name if isinstance(name, str) else None, **tree)
    if kind == "context_edit":
        return ContextEditEntry(
            target_id=_str(data, "targetId", where), replacement=data.get("replacement"), **tree
        )
    return UnknownEntry(data=dict(data), **tree)
