"""The context an agent resumes with: pi's ``buildSessionContext()``, then its
``convertToLlm()``, over trio_agent's entries.

The branch is the path from the root to the leaf. The settings are the last thinking
level change (default ``"off"``) and the last model change or assistant message's model.
When the branch holds compactions, the newest one stands for everything before it except
the entries from its ``first_kept_entry_id`` on (system messages among them left out):
its system message (if any) and a summary message come first, then the kept entries, then
what follows the compaction. A ``context_edit`` replaces (or removes) an earlier entry's
content. The summaries and application messages become user messages with pi's wording,
so the messages are ready for any provider.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from .._exceptions import SerializationError
from .._messages import AgentMessage, ImageContent, TextContent, UserMessage
from .._serialization import from_dict, to_dict
from ._entries import (
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    CustomMessageEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
    iso_to_ms,
)

__all__ = ["SessionContext", "branch_path", "build_context"]

COMPACTION_SUMMARY_PREFIX: Final = (
    "The conversation history before this point was compacted into the following "
    "summary:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX: Final = "\n</summary>"
BRANCH_SUMMARY_PREFIX: Final = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX: Final = "</summary>"


@attrs.frozen(kw_only=True)
class SessionContext:
    """What an agent resumes with."""

    messages: list[AgentMessage]
    """The transcript, compactions applied, every message ready for a provider."""
    thinking_level: str = "off"
    """The last thinking level of the branch (``"off"`` if none was recorded)."""
    model: tuple[str, str] | None = None
    """``(provider, model_id)`` of the last model change or assistant message."""


def branch_path(by_id: Mapping[str, SessionEntry], leaf_id: str | None) -> list[SessionEntry]:
    """The entries from the root to ``leaf_id`` (empty for ``None``)."""
    path: list[SessionEntry] = []
    seen: set[str] = set()
    current = by_id.get(leaf_id) if leaf_id is not None else None
    while current is not None and current.id not in seen:
        seen.add(current.id)
        path.append(current)
        parent = current.parent_id
        current = by_id.get(parent) if parent is not None else None
    path.reverse()
    return path


def _is_system(entry: SessionEntry) -> bool:
    return isinstance(entry, MessageEntry) and entry.message.role == "system"


def _context_entries(path: list[SessionEntry]) -> list[SessionEntry]:
    compaction: CompactionEntry | None = None
    for entry in path:
        if isinstance(entry, CompactionEntry):
            compaction = entry
    if compaction is None:
        return path
    at = next(i for i, entry in enumerate(path) if entry is compaction)
    kept: list[SessionEntry] = [compaction]
    found = False
    for entry in path[:at]:
        if entry.id == compaction.first_kept_entry_id:
            found = True
        if found and not _is_system(entry):
            kept.append(entry)
    kept.extend(path[at + 1 :])
    return kept


def _text_blocks(content: Any) -> list[TextContent | ImageContent]:
    """pi's custom content (a string or text/image blocks) as message content."""
    if isinstance(content, str):
        return [TextContent(text=content)]
    blocks: list[TextContent | ImageContent] = []
    for block in content or ():
        if isinstance(block, dict):
            try:
                blocks.append(from_dict(block, TextContent | ImageContent))
            except SerializationError:
                continue
    return blocks


def _summary(text: str, timestamp: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=iso_to_ms(timestamp))


def _bash_text(message: Mapping[str, Any]) -> str:
    """pi's ``bashExecutionToText()``."""
    text = f"Ran `{message.get('command', '')}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    exit_code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif exit_code is not None and exit_code != 0:
        text += f"\n\nCommand exited with code {exit_code}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message['fullOutputPath']}]"
    return text


def _unknown_message(raw: Mapping[str, Any]) -> list[AgentMessage]:
    role = raw.get("role")
    timestamp = raw.get("timestamp")
    ms = timestamp if isinstance(timestamp, int) else 0
    if role == "bashExecution" and not raw.get("excludeFromContext"):
        return [UserMessage(content=[TextContent(text=_bash_text(raw))], timestamp=ms)]
    if role == "custom":
        return [UserMessage(content=_text_blocks(raw.get("content")), timestamp=ms)]
    # pi's convertToLlm() drops every other role, as trio_agent's default does.
    return []


def _edited(message: AgentMessage, edit: ContextEditEntry) -> list[AgentMessage]:
    replacement = edit.replacement
    if replacement is None:
        return []
    if message.role not in ("user", "assistant", "toolResult") or not isinstance(replacement, dict):
        return [message]
    content = replacement.get("content")
    if message.role != "user" and isinstance(content, str):
        content = [{"type": "text", "text": content}]
    data = to_dict(message)
    data["content"] = content
    try:
        return [from_dict(data, AgentMessage)]
    except SerializationError:
        return [message]


def _project(entry: SessionEntry, edit: ContextEditEntry | None) -> list[AgentMessage]:
    if isinstance(entry, MessageEntry):
        return _edited(entry.message, edit) if edit is not None else [entry.message]
    if isinstance(entry, UnknownEntry) and entry.type == "message":
        raw = entry.data.get("message")
        if isinstance(raw, Mapping):
            if edit is not None:
                if edit.replacement is None:
                    return []
                if isinstance(edit.replacement, dict) and raw.get("role") == "custom":
                    raw = {**raw, "content": edit.replacement.get("content")}
            return _unknown_message(raw)
        return []
    if isinstance(entry, CustomMessageEntry):
        content = entry.content
        if edit is not None:
            if edit.replacement is None:
                return []
            if isinstance(edit.replacement, dict):
                content = edit.replacement.get("content")
        return [UserMessage(content=_text_blocks(content), timestamp=iso_to_ms(entry.timestamp))]
    if isinstance(entry, BranchSummaryEntry) and entry.summary:
        text = BRANCH_SUMMARY_PREFIX + entry.summary + BRANCH_SUMMARY_SUFFIX
        return [_summary(text, entry.timestamp)]
    if isinstance(entry, CompactionEntry):
        text = COMPACTION_SUMMARY_PREFIX + entry.summary + COMPACTION_SUMMARY_SUFFIX
        summary = _summary(text, entry.timestamp)
        if entry.system_message is not None:
            return [entry.system_message, summary]
        return [summary]
    return []


def build_context(path: Sequence[SessionEntry]) -> SessionContext:
    """The context of a branch (see the module docstring)."""
    thinking_level = "off"
    model: tuple[str, str] | None = None
    for entry in path:
        if isinstance(entry, ThinkingLevelChangeEntry):
            thinking_level = entry.thinking_level
        elif isinstance(entry, ModelChangeEntry):
            model = (entry.provider, entry.model_id)
        elif isinstance(entry, MessageEntry) and entry.message.role == "assistant":
            message: Any = entry.message
            model = (message.provider, message.model)
    entries = _context_entries(list(path))
    edits = {e.target_id: e for e in entries if isinstance(e, ContextEditEntry)}
    messages: list[AgentMessage] = []
    for index, entry in enumerate(entries):
        # An older compaction kept inside the newest one's range adds nothing.
        if isinstance(entry, CompactionEntry) and index > 0:
            continue
        messages.extend(_project(entry, edits.get(entry.id)))
    return SessionContext(messages=messages, thinking_level=thinking_level, model=model)
