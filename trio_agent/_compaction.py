"""Compaction: replace the older part of a transcript with a summary when the context fills.

The facts come from pi-coding-agent 1.6.0 (``core/compaction/``, ``core/messages.js``):
the settings, the cut point that keeps about ``keep_recent_tokens`` recent tokens and
never cuts between a tool call and its results, the structured summary prompt and its
update form, the split-turn prefix summary, the file lists, and the summary message sent
to the model as a user message. What pi does with session entries this module does with a
transcript (a list of messages): see ``docs/context.md`` for the mapping to pi's
``compaction`` session entry.

Beyond pi (issue 22): :class:`ContextTracker` keeps the context estimate up to date in
O(new messages) so :func:`compact_if_needed` can run before every request, and the kept
part of a transcript never starts with a tool result whose call was summarized.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final, Literal

import attrs
import trio

from ._abort import AbortSignal
from ._estimate import (
    ContextEstimate,
    arguments_json,
    calculate_context_tokens,
    estimate_message_tokens,
    js_length,
    usage_applies,
)
from ._events import DoneEvent, ErrorEvent
from ._messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    Message,
    Model,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    add_usage,
    now_ms,
    register_message_type,
)
from ._overflow import is_context_overflow
from ._serialization import to_json
from ._streaming import LlmContext, StreamFn, StreamOptions, iterate_stream
from ._transcript import content_text, get_current_system_message

__all__ = [
    "COMPACTION_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_SUFFIX",
    "DEFAULT_COMPACTION_SETTINGS",
    "SUMMARIZATION_PROMPT",
    "SUMMARIZATION_SYSTEM_PROMPT",
    "TURN_PREFIX_SUMMARIZATION_PROMPT",
    "UPDATE_SUMMARIZATION_PROMPT",
    "CompactionDetails",
    "CompactionFailure",
    "CompactionPreparation",
    "CompactionResult",
    "CompactionSettings",
    "CompactionSummary",
    "ContextTracker",
    "CutPoint",
    "compact",
    "compact_after_overflow",
    "compact_if_needed",
    "convert_to_llm",
    "estimate_tokens",
    "find_cut_point",
    "prepare_compaction",
    "serialize_conversation",
    "should_compact",
    "summary_to_user_message",
    "to_llm_message",
    "transcript_tokens",
]

# ---------------------------------------------------------------------------------------
# Settings


@attrs.frozen(kw_only=True)
class CompactionSettings:
    """When to compact and how much to keep (pi-coding-agent's defaults)."""

    enabled: bool = True
    """Whether :func:`compact_if_needed` compacts at all (:func:`compact` always does)."""
    reserve_tokens: int = 16384
    """Room left for the response: compact when the context exceeds the window minus this."""
    keep_recent_tokens: int = 20000
    """About how many recent tokens (``estimate_tokens``, 4 characters a token) to keep
    verbatim. Against a small window :func:`compact_if_needed` keeps at most half of the
    window minus the reserve (see :meth:`keep_for_window`)."""

    def keep_for_window(self, context_window: int) -> int:
        """``keep_recent_tokens``, lowered to ``(context_window - reserve_tokens) // 2``.

        pi keeps ``keep_recent_tokens`` whatever the window, so below a window of about
        57k tokens the kept part alone is over the threshold and every request compacts
        again (issue 22). The lowered value leaves half of the room for the summary and
        the turns that follow. Windows of 56,768 tokens and more keep pi's value.
        """
        room = (context_window - self.reserve_tokens) // 2
        if context_window <= 0 or room <= 0:
            return self.keep_recent_tokens
        return min(self.keep_recent_tokens, room)


DEFAULT_COMPACTION_SETTINGS: Final = CompactionSettings()
"""``enabled``, ``reserve_tokens`` 16384, ``keep_recent_tokens`` 20000."""


def should_compact(context_tokens: int, context_window: int, settings: CompactionSettings) -> bool:
    """Whether ``context_tokens`` is above ``context_window - settings.reserve_tokens``
    (and compaction is enabled)."""
    if not settings.enabled:
        return False
    return context_tokens > context_window - settings.reserve_tokens


# ---------------------------------------------------------------------------------------
# The summary message


@attrs.frozen(kw_only=True)
class CompactionDetails:
    """The files the summarized part read and changed (pi's ``details`` of a compaction)."""

    read_files: list[str] = attrs.field(factory=list)
    """Files only read, sorted."""
    modified_files: list[str] = attrs.field(factory=list)
    """Files written or edited, sorted."""


@register_message_type
@attrs.frozen(kw_only=True)
class CompactionSummary:
    """The summary that stands for the compacted part of a transcript.

    Sent to the model as a user message (:func:`summary_to_user_message`), like pi's
    ``compactionSummary`` message; on the wire ``{"role": "compactionSummary", "summary",
    "tokensBefore", "details"?, "timestamp"}``. ``details`` (beyond pi's message, which
    leaves it to the session's ``compaction`` entry) lets the next compaction carry the
    file lists on without a session.
    """

    summary: str
    """The summary text."""
    tokens_before: int
    """The estimated context size before the compaction."""
    details: CompactionDetails | None = None
    """The file lists of the summarized part (and of earlier compactions)."""
    timestamp: int = attrs.field(factory=now_ms)
    """When the compaction happened (Unix milliseconds)."""
    role: Literal["compactionSummary"] = "compactionSummary"


COMPACTION_SUMMARY_PREFIX: Final = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX: Final = "\n</summary>"


def summary_to_user_message(message: CompactionSummary) -> UserMessage:
    """The user message the model sees for a summary (pi's ``convertToLlm``)."""
    text = COMPACTION_SUMMARY_PREFIX + message.summary + COMPACTION_SUMMARY_SUFFIX
    return UserMessage(content=[TextContent(text=text)], timestamp=message.timestamp)


_LLM_TYPES: Final = (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage)


def to_llm_message(message: AgentMessage) -> Message | None:
    """One message as the model sees it: a summary as a user message, a provider message
    as itself, any other application message as nothing."""
    if isinstance(message, _LLM_TYPES):
        return message
    if isinstance(message, CompactionSummary):
        return summary_to_user_message(message)
    return None


def convert_to_llm(messages: Sequence[AgentMessage]) -> list[Message]:
    """``convert_to_llm`` for transcripts that hold summaries: the loop's default
    conversion, with each :class:`CompactionSummary` sent as a user message."""
    converted = []
    for message in messages:
        llm = to_llm_message(message)
        if llm is not None:
            converted.append(llm)
    return converted


# ---------------------------------------------------------------------------------------
# The cut point (pi-coding-agent's estimateTokens and findCutPoint, over messages)

_IMAGE_CHARS: Final = 4800


def _content_chars(content: str | Sequence[TextContent | ImageContent]) -> int:
    if isinstance(content, str):
        return js_length(content)
    return sum(
        js_length(block.text) if isinstance(block, TextContent) else _IMAGE_CHARS
        for block in content
    )


def estimate_tokens(message: AgentMessage) -> int:
    """pi-coding-agent's ``estimateTokens``: ``ceil(characters / 4)`` of one message.

    The cut point is measured with it (it differs from pi-ai's 3.5 characters a token):
    a system message counts its content, sections and the JSON of its added tools; a
    summary its summary text; an application message the model does not see, 0.
    """
    if isinstance(message, SystemMessage):
        chars = _content_chars(message.content)
        chars += sum(js_length(text) for text in (message.sections or {}).values() if text)
        if message.tools_added is not None:
            chars += js_length(to_json(list(message.tools_added)))
    elif isinstance(message, UserMessage | ToolResultMessage):
        chars = _content_chars(message.content)
    elif isinstance(message, AssistantMessage):
        chars = 0
        for block in message.content:
            if isinstance(block, TextContent):
                chars += js_length(block.text)
            elif isinstance(block, ThinkingContent):
                chars += js_length(block.thinking)
            elif isinstance(block, ToolCall):
                chars += js_length(block.name) + js_length(arguments_json(block.arguments))
    elif isinstance(message, CompactionSummary):
        chars = js_length(message.summary)
    else:
        return 0
    return math.ceil(chars / 4)


def _visible(message: AgentMessage) -> bool:
    return isinstance(message, (*_LLM_TYPES, CompactionSummary))


def _is_cut_point(message: AgentMessage) -> bool:
    # A summary stands where pi's compaction entry stands: never a cut point.
    return isinstance(message, UserMessage | AssistantMessage)


def _is_turn_start(message: AgentMessage) -> bool:
    return isinstance(message, UserMessage)


@attrs.frozen(kw_only=True)
class CutPoint:
    """Where a compaction cuts (pi's ``CutPointResult``)."""

    first_kept_index: int
    """The first message kept verbatim."""
    turn_start_index: int
    """When the cut is inside a turn, the user message that started it; else -1."""
    is_split_turn: bool
    """Whether the cut is inside a turn (at an assistant message after its user message)."""


def _turn_start_index(messages: Sequence[AgentMessage], index: int, start: int) -> int:
    for i in range(index, start - 1, -1):
        if _is_turn_start(messages[i]):
            return i
    return -1


def find_cut_point(
    messages: Sequence[AgentMessage], start: int, end: int, keep_recent_tokens: int
) -> CutPoint:
    """Where to cut ``messages[start:end]`` to keep about ``keep_recent_tokens``.

    pi-coding-agent 1.6.0 ``findCutPoint``: walk back from the newest message adding
    :func:`estimate_tokens`; at the message where the sum reaches ``keep_recent_tokens``
    cut at the nearest user or assistant message at or after it (the last one when there
    is none), then move the cut back over messages the model does not see. A cut is never
    at a tool result, so an assistant message's tool results stay with it. When nothing
    reaches the budget, everything from the first user or assistant message is kept.
    """
    cut_points = [i for i in range(start, end) if _is_cut_point(messages[i])]
    if not cut_points:
        return CutPoint(first_kept_index=start, turn_start_index=-1, is_split_turn=False)
    accumulated = 0
    cut = cut_points[0]
    for i in range(end - 1, start - 1, -1):
        tokens = estimate_tokens(messages[i])
        if tokens == 0:
            continue
        accumulated += tokens
        if accumulated >= keep_recent_tokens:
            cut = next((c for c in cut_points if c >= i), cut_points[-1])
            break
    while cut > start and not _visible(messages[cut - 1]):
        cut -= 1
    if _is_turn_start(messages[cut]):
        return CutPoint(first_kept_index=cut, turn_start_index=-1, is_split_turn=False)
    turn_start = _turn_start_index(messages, cut, start)
    return CutPoint(
        first_kept_index=cut, turn_start_index=turn_start, is_split_turn=turn_start != -1
    )


def _pair_cut(messages: Sequence[AgentMessage], start: int, cut: int) -> int:
    """Move ``cut`` back so that no kept tool result answers a call made before it.

    A well-formed transcript never needs this (results follow their call's assistant
    message, and a cut is never at a result); a hand-built one may interleave.
    """
    kept_results = {m.tool_call_id for m in messages[cut:] if isinstance(m, ToolResultMessage)}
    for i in range(cut - 1, start - 1, -1):
        if not kept_results:
            break
        message = messages[i]
        if isinstance(message, AssistantMessage):
            calls = {b.id for b in message.content if isinstance(b, ToolCall)}
            if calls & kept_results:
                cut = i
            kept_results -= calls
    return cut


# ---------------------------------------------------------------------------------------
# Preparation


@attrs.frozen(kw_only=True)
class CompactionPreparation:
    """What a compaction will summarize and keep (pi's ``CompactionPreparation``)."""

    first_kept_index: int
    """Index in the transcript of the first message kept verbatim."""
    messages_to_summarize: list[AgentMessage]
    """The history before the cut (without system messages), for the main summary."""
    turn_prefix_messages: list[AgentMessage]
    """When the cut splits a turn: the turn's messages before the cut."""
    is_split_turn: bool
    """Whether the cut splits a turn."""
    previous_summary: str | None
    """The summary of the previous compaction, updated rather than rewritten."""
    previous_details: CompactionDetails | None
    """The file lists of the previous compaction."""
    tokens_before: int
    """:func:`transcript_tokens` of the transcript."""


def _last_summary_index(messages: Sequence[AgentMessage]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], CompactionSummary):
            return i
    return -1


def _conversation(messages: Sequence[AgentMessage]) -> list[AgentMessage]:
    # System messages are prompt state, not conversation; the compacted transcript keeps
    # their replay (pi: the compaction entry carries the current system message).
    return [m for m in messages if not isinstance(m, SystemMessage)]


def prepare_compaction(
    messages: Sequence[AgentMessage],
    settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS,
    *,
    keep_recent_tokens: int | None = None,
) -> CompactionPreparation | None:
    """Decide what a compaction of ``messages`` summarizes and keeps.

    The part after the last :class:`CompactionSummary` (all of it without one) is cut by
    :func:`find_cut_point`; ``keep_recent_tokens`` overrides the settings' value. Returns
    ``None`` when the transcript ends with a summary or nothing lies before the cut.
    """
    if not messages or isinstance(messages[-1], CompactionSummary):
        return None
    previous = _last_summary_index(messages)
    previous_summary = previous_details = None
    if previous >= 0:
        summary = messages[previous]
        assert isinstance(summary, CompactionSummary)
        previous_summary, previous_details = summary.summary, summary.details
    start, end = previous + 1, len(messages)
    keep = settings.keep_recent_tokens if keep_recent_tokens is None else keep_recent_tokens
    cut = find_cut_point(messages, start, end, keep)
    first_kept = _pair_cut(messages, start, cut.first_kept_index)
    if first_kept >= end:
        return None
    if first_kept != cut.first_kept_index:
        turn_start = -1
        if not _is_turn_start(messages[first_kept]):
            turn_start = _turn_start_index(messages, first_kept, start)
        cut = CutPoint(
            first_kept_index=first_kept, turn_start_index=turn_start, is_split_turn=turn_start != -1
        )
    split = cut.is_split_turn
    history_end = cut.turn_start_index if split else first_kept
    to_summarize = _conversation(messages[start:history_end])
    prefix = _conversation(messages[cut.turn_start_index : first_kept]) if split else []
    if not to_summarize and not prefix:
        return None
    return CompactionPreparation(
        first_kept_index=first_kept,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=prefix,
        is_split_turn=split,
        previous_summary=previous_summary,
        previous_details=previous_details,
        tokens_before=transcript_tokens(messages).tokens,
    )


# ---------------------------------------------------------------------------------------
# The summary request

SUMMARIZATION_SYSTEM_PROMPT: Final = (
    "You are a context summarization assistant. Your task is to read a conversation "
    "between a user and an AI assistant, then produce a structured summary following the "
    "exact format specified.\n\nDo NOT continue the conversation. Do NOT respond to any "
    "questions in the conversation. ONLY output the structured summary."
)

_SUMMARY_FORMAT: Final = "\n".join(
    [
        "## Goal",
        (
            "[What is the user trying to accomplish? Can be multiple items if the "
            "session covers different tasks.]"
        ),
        "",
        "## Constraints & Preferences",
        "- [Any constraints, preferences, or requirements mentioned by user]",
        '- [Or "(none)" if none were mentioned]',
        "",
        "## Progress",
        "### Done",
        "- [x] [Completed tasks/changes]",
        "",
        "### In Progress",
        "- [ ] [Current work]",
        "",
        "### Blocked",
        "- [Issues preventing progress, if any]",
        "",
        "## Key Decisions",
        "- **[Decision]**: [Brief rationale]",
        "",
        "## Next Steps",
        "1. [Ordered list of what should happen next]",
        "",
        "## Critical Context",
        "- [Any data, examples, or references needed to continue]",
        '- [Or "(none)" if not applicable]',
        "",
        (
            "Keep each section concise. Preserve exact file paths, function names, "
            "and error messages."
        ),
    ]
)

SUMMARIZATION_PROMPT: Final = (
    "The messages above are a conversation to summarize. Create a structured context "
    "checkpoint summary that another LLM will use to continue the work.\n\n"
    "Use this EXACT format:\n\n" + _SUMMARY_FORMAT
)

_UPDATE_FORMAT: Final = "\n".join(
    [
        "## Goal",
        "[Preserve existing goals, add new ones if the task expanded]",
        "",
        "## Constraints & Preferences",
        "- [Preserve existing, add new ones discovered]",
        "",
        "## Progress",
        "### Done",
        "- [x] [Include previously done items AND newly completed items]",
        "",
        "### In Progress",
        "- [ ] [Current work - update based on progress]",
        "",
        "### Blocked",
        "- [Current blockers - remove if resolved]",
        "",
        "## Key Decisions",
        "- **[Decision]**: [Brief rationale] (preserve all previous, add new)",
        "",
        "## Next Steps",
        "1. [Update based on current state]",
        "",
        "## Critical Context",
        "- [Preserve important context, add new if needed]",
        "",
        (
            "Keep each section concise. Preserve exact file paths, function names, "
            "and error messages."
        ),
    ]
)

UPDATE_SUMMARIZATION_PROMPT: Final = (
    "The messages above are NEW conversation messages to incorporate into the existing "
    "summary provided in <previous-summary> tags.\n\n"
    "Update the existing structured summary with new information. RULES:\n"
    "- PRESERVE all existing information from the previous summary\n"
    "- ADD new progress, decisions, and context from the new messages\n"
    '- UPDATE the Progress section: move items from "In Progress" to "Done" when completed\n'
    '- UPDATE "Next Steps" based on what was accomplished\n'
    "- PRESERVE exact file paths, function names, and error messages\n"
    "- If something is no longer relevant, you may remove it\n\n"
    "Use this EXACT format:\n\n" + _UPDATE_FORMAT
)

TURN_PREFIX_SUMMARIZATION_PROMPT: Final = "\n".join(
    [
        (
            "The messages above are earlier context from an ongoing conversation. "
            "Later messages are stored separately and do not need to be "
            "reconstructed."
        ),
        "",
        (
            "Create a concise checkpoint of the user's request and the progress "
            "shown above. This checkpoint will be placed before the later messages "
            "so the conversation can continue with the necessary context."
        ),
        "",
        "## Original Request",
        "[What did the user ask for?]",
        "",
        "## Progress So Far",
        "- [Key decisions and work completed in these messages]",
        "",
        "## Context Needed to Continue",
        "- [Information from these messages needed to understand the later work]",
        "",
        (
            "Only summarize information explicitly present above. Do not infer or "
            "recreate later messages."
        ),
    ]
)

_TOOL_RESULT_MAX_CHARS: Final = 2000


def _slice_head(text: str, units: int) -> str:
    """The first ``units`` UTF-16 code units of ``text``, never half a surrogate pair."""
    if text.isascii():
        return text[:units]
    encoded = text.encode("utf-16-le", "surrogatepass")[: units * 2]
    if encoded and 0xD800 <= int.from_bytes(encoded[-2:], "little") <= 0xDBFF:
        encoded = encoded[:-2]
    return encoded.decode("utf-16-le", "surrogatepass")


def _truncate_for_summary(text: str) -> str:
    length = js_length(text)
    if length <= _TOOL_RESULT_MAX_CHARS:
        return text
    cut = length - _TOOL_RESULT_MAX_CHARS
    head = _slice_head(text, _TOOL_RESULT_MAX_CHARS)
    return f"{head}\n\n[... {cut} more characters truncated]"


def serialize_conversation(messages: Sequence[Message]) -> str:
    """The conversation as plain text, so the summarizer does not continue it.

    pi-coding-agent's ``serializeConversation``: ``[User]:``, ``[Assistant]:``,
    ``[Assistant tool calls]: name(key=<JSON>, ...); ...`` and ``[Tool result]:`` (cut to
    2,000 characters) paragraphs; thinking and system messages are left out.
    """
    parts: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            text = content_text(message.content, "")
            if text:
                parts.append(f"[User]: {text}")
        elif isinstance(message, AssistantMessage):
            calls = [
                block.name
                + "("
                + ", ".join(f"{key}={to_json(value)}" for key, value in block.arguments.items())
                + ")"
                for block in message.content
                if isinstance(block, ToolCall)
            ]
            if any(isinstance(block, TextContent) for block in message.content):
                parts.append(f"[Assistant]: {content_text(message.content)}")
            if calls:
                parts.append(f"[Assistant tool calls]: {'; '.join(calls)}")
        elif isinstance(message, ToolResultMessage):
            text = content_text(message.content, "")
            if text:
                parts.append(f"[Tool result]: {_truncate_for_summary(text)}")
    return "\n\n".join(parts)


def _file_details(
    preparation: CompactionPreparation,
) -> CompactionDetails:
    read: set[str] = set()
    modified: set[str] = set()
    if preparation.previous_details is not None:
        read.update(preparation.previous_details.read_files)
        modified.update(preparation.previous_details.modified_files)
    for message in [*preparation.messages_to_summarize, *preparation.turn_prefix_messages]:
        if not isinstance(message, AssistantMessage):
            continue
        for block in message.content:
            if not isinstance(block, ToolCall):
                continue
            path = block.arguments.get("path")
            if not isinstance(path, str) or not path:
                continue
            if block.name == "read":
                read.add(path)
            elif block.name in ("write", "edit"):
                modified.add(path)
    return CompactionDetails(read_files=sorted(read - modified), modified_files=sorted(modified))


def _file_lists_text(details: CompactionDetails) -> str:
    sections = []
    if details.read_files:
        sections.append("<read-files>\n" + "\n".join(details.read_files) + "\n</read-files>")
    if details.modified_files:
        sections.append(
            "<modified-files>\n" + "\n".join(details.modified_files) + "\n</modified-files>"
        )
    return "\n\n" + "\n\n".join(sections) if sections else ""


class _SummaryFailed(Exception):
    """A summary request that gave no usable summary (turned into a CompactionFailure)."""

    def __init__(self, message: str, *, aborted: bool = False):
        super().__init__(message)
        self.aborted = aborted


async def _final_message(
    stream_fn: StreamFn, model: Model, context: LlmContext, options: StreamOptions
) -> AssistantMessage | None:
    events: AsyncIterator[Any] = await iterate_stream(stream_fn, model, context, options)
    try:
        async for event in events:
            if isinstance(event, DoneEvent):
                return event.message
            if isinstance(event, ErrorEvent):
                return event.error
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    return None


async def _request_summary(
    prompt: str, label: str, model: Model, stream_fn: StreamFn, options: StreamOptions
) -> tuple[str, Usage]:
    context = LlmContext(
        messages=[
            SystemMessage(content=SUMMARIZATION_SYSTEM_PROMPT, timestamp=0),
            UserMessage(content=[TextContent(text=prompt)], timestamp=now_ms()),
        ]
    )
    try:
        response = await _final_message(stream_fn, model, context, options)
    except Exception as exc:  # a stream function must not raise; report it in-band anyway
        raise _SummaryFailed(f"{label} failed: {exc or type(exc).__name__}") from exc
    if response is None:
        raise _SummaryFailed(f"{label} failed: the stream ended without a terminal event")
    if response.stop_reason == "aborted":
        raise _SummaryFailed("Compaction cancelled", aborted=True)
    if response.stop_reason == "error":
        raise _SummaryFailed(f"{label} failed: {response.error_message or 'Unknown error'}")
    if response.stop_reason == "length":
        raise _SummaryFailed(
            f"{label} failed: generation hit the token cap and the summary is incomplete"
        )
    if any(isinstance(block, ToolCall) for block in response.content):
        raise _SummaryFailed(f"{label} attempted to call a tool")
    return content_text(response.content), response.usage


def _history_prompt(
    messages: Sequence[AgentMessage], previous_summary: str | None, instructions: str | None
) -> str:
    base = UPDATE_SUMMARIZATION_PROMPT if previous_summary else SUMMARIZATION_PROMPT
    if instructions:
        base = f"{base}\n\nAdditional focus: {instructions}"
    prompt = (
        f"<conversation>\n{serialize_conversation(convert_to_llm(messages))}\n</conversation>\n\n"
    )
    if previous_summary:
        prompt += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
    return prompt + base


def _turn_prefix_prompt(messages: Sequence[AgentMessage], instructions: str | None) -> str:
    conversation = serialize_conversation(convert_to_llm(messages))
    prompt = f"# Conversation\n{conversation}\n\n# Instructions\n{TURN_PREFIX_SUMMARIZATION_PROMPT}"
    if instructions:
        prompt = f"{prompt}\n\nAdditional focus: {instructions}"
    return prompt


# ---------------------------------------------------------------------------------------
# Results


@attrs.frozen(kw_only=True)
class CompactionResult:
    """A compaction that succeeded.

    ``messages`` is the transcript to use from now on: the current system message
    (every system message replayed into one, so the declared tools stay), the
    :class:`CompactionSummary`, and the kept messages without their system messages. The
    input list is never changed.
    """

    messages: list[AgentMessage]
    """The compacted transcript."""
    summary: CompactionSummary
    """The summary message (also in ``messages``)."""
    first_kept_index: int
    """Index, in the transcript that was compacted, of the first message kept (pi's
    ``firstKeptEntryId`` names that message's session entry)."""
    tokens_before: int
    """The estimated context size before."""
    tokens_after: int
    """The estimated context size of ``messages``."""
    usage: Usage
    """Usage of the summary request(s)."""


@attrs.frozen(kw_only=True)
class CompactionFailure:
    """A compaction that did not happen; the transcript stays as it was."""

    error_message: str
    """Why: the summary request's error (``"Summarization failed: ..."``), ``"Compaction
    cancelled"`` after an abort, or ``"Nothing to compact (session too small)"`` /
    ``"Already compacted"``."""
    aborted: bool = False
    """Whether the summary request was aborted through ``signal``."""
    tokens_before: int = 0
    """The estimated context size (unchanged)."""


async def compact(
    messages: Sequence[AgentMessage],
    model: Model,
    stream_fn: StreamFn,
    options: StreamOptions | None = None,
    *,
    settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS,
    instructions: str | None = None,
    previous_summary: str | None = None,
    signal: AbortSignal | None = None,
    keep_recent_tokens: int | None = None,
) -> CompactionResult | CompactionFailure:
    """Summarize the older part of ``messages`` with ``model``; keep the recent part.

    The summary is one request through ``stream_fn`` (two when the cut splits a turn: the
    history, then the turn's beginning), with ``options`` (``signal`` replaces its
    signal; ``reasoning`` is dropped for a model without reasoning). It uses the
    structured prompt, or the update prompt when the transcript already holds a summary
    (``previous_summary`` overrides its text); ``instructions`` add a focus. The file
    lists of ``read``/``write``/``edit`` tool calls are appended as pi does.

    Never raises for a failed request: a provider error, a length stop, a tool call, an
    abort through ``signal`` or a stream function that raised give a
    :class:`CompactionFailure` and ``messages`` is left as it was. Cancellation of the
    caller's scope cancels the request and propagates (``Cancelled``), also leaving
    ``messages`` unchanged. Always a checkpoint.
    """
    await trio.lowlevel.checkpoint()
    preparation = prepare_compaction(messages, settings, keep_recent_tokens=keep_recent_tokens)
    if preparation is None:
        reason = (
            "Already compacted"
            if messages and isinstance(messages[-1], CompactionSummary)
            else "Nothing to compact (session too small)"
        )
        return CompactionFailure(
            error_message=reason, tokens_before=transcript_tokens(messages).tokens
        )
    if previous_summary is not None:
        preparation = attrs.evolve(preparation, previous_summary=previous_summary)
    options = options if options is not None else StreamOptions()
    options = attrs.evolve(
        options,
        signal=signal if signal is not None else options.signal,
        reasoning=options.reasoning if model.reasoning else None,
    )
    prior = preparation.previous_summary
    try:
        if preparation.is_split_turn and preparation.turn_prefix_messages:
            history, usage = prior or "No prior history.", None
            if preparation.messages_to_summarize:
                prompt = _history_prompt(preparation.messages_to_summarize, prior, instructions)
                history, usage = await _request_summary(
                    prompt, "Summarization", model, stream_fn, options
                )
            prefix_prompt = _turn_prefix_prompt(preparation.turn_prefix_messages, instructions)
            prefix, prefix_usage = await _request_summary(
                prefix_prompt, "Turn prefix summarization", model, stream_fn, options
            )
            text = f"{history}\n\n---\n\n**Turn Context (split turn):**\n\n{prefix}"
            usage = prefix_usage if usage is None else add_usage(usage, prefix_usage)
        else:
            prompt = _history_prompt(preparation.messages_to_summarize, prior, instructions)
            text, usage = await _request_summary(prompt, "Summarization", model, stream_fn, options)
    except _SummaryFailed as failed:
        return CompactionFailure(
            error_message=str(failed),
            aborted=failed.aborted,
            tokens_before=preparation.tokens_before,
        )
    details = _file_details(preparation)
    timestamp = now_ms()
    summary = CompactionSummary(
        summary=text + _file_lists_text(details),
        tokens_before=preparation.tokens_before,
        details=details,
        timestamp=timestamp,
    )
    compacted: list[AgentMessage] = []
    system = get_current_system_message(messages)
    if system is not None:
        compacted.append(attrs.evolve(system, timestamp=timestamp))
    compacted.append(summary)
    compacted.extend(_conversation(messages[preparation.first_kept_index :]))
    return CompactionResult(
        messages=compacted,
        summary=summary,
        first_kept_index=preparation.first_kept_index,
        tokens_before=preparation.tokens_before,
        tokens_after=transcript_tokens(compacted).tokens,
        usage=usage,
    )


# ---------------------------------------------------------------------------------------
# Tracking the context size, incrementally


class ContextTracker:
    """The estimated context size of a transcript that grows by appending.

    The estimate is pi-ai's (:func:`~trio_agent.compaction.estimate_context_tokens`) over
    the messages the model sees (a summary as its user message, other application
    messages as nothing), with one more rule, the one pi-coding-agent applies to its
    session: only a response newer than the last :class:`CompactionSummary` reports the
    context (a response the compaction kept described the transcript before it, even
    when it is as new as the summary to the millisecond).

    :meth:`update` reads only the messages appended since its previous call, so calling
    it before every request costs O(new messages). It recognises an append-only list by
    its first and last message objects and re-reads the whole list when the list was
    replaced or changed otherwise (after a compaction, say).
    """

    __slots__ = (
        "_first",
        "_last",
        "_newest",
        "_seen",
        "_summary_time",
        "_total",
        "_trailing",
        "_usage",
        "_usage_index",
    )

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._seen = 0
        self._first: object = None
        self._last: object = None
        self._newest = -math.inf
        self._usage = 0  # the anchor response's reported context size
        self._usage_index: int | None = None
        self._trailing = 0  # estimates of the messages after the anchor (all, without one)
        self._total = 0  # estimates of every message since the last summary
        self._summary_time = -math.inf

    def update(self, messages: Sequence[AgentMessage]) -> int:
        """Take in ``messages`` (the whole current transcript); return :meth:`tokens`."""
        seen = self._seen
        count = len(messages)
        if not (
            seen <= count
            and (seen == 0 or (messages[0] is self._first and messages[seen - 1] is self._last))
        ):
            self._reset()
            seen = 0
        for index in range(seen, count):
            self._add(index, messages[index])
        if count:
            self._seen, self._first, self._last = count, messages[0], messages[-1]
        return self._usage + self._trailing

    def _add(self, index: int, message: AgentMessage) -> None:
        llm = to_llm_message(message)
        if llm is None:
            return
        if isinstance(message, CompactionSummary):
            self._usage, self._usage_index = 0, None
            self._trailing = self._total = self._total + estimate_message_tokens(llm)
            self._newest = max(self._newest, llm.timestamp)
            self._summary_time = llm.timestamp
            return
        tokens = estimate_message_tokens(llm)
        self._total += tokens
        if (
            isinstance(llm, AssistantMessage)
            and llm.timestamp > self._summary_time
            and usage_applies(llm, self._newest)
        ):
            self._usage, self._usage_index = calculate_context_tokens(llm.usage), index
            self._trailing = 0
        else:
            self._trailing += tokens
        self._newest = max(self._newest, llm.timestamp)

    def needs_compaction(
        self,
        messages: Sequence[AgentMessage],
        model: Model,
        settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS,
    ) -> bool:
        """:meth:`update`, then whether :func:`compact_if_needed` would compact for
        ``model`` (a window above 0 and :func:`should_compact`). Not a checkpoint: a loop
        can call it before every request and await :func:`compact_if_needed` only when it
        says so."""
        tokens = self.update(messages)
        window = model.context_window
        return window > 0 and should_compact(tokens, window, settings)

    def tokens(self) -> int:
        """The estimate after the last :meth:`update`."""
        return self._usage + self._trailing

    def estimate(self) -> ContextEstimate:
        """The estimate after the last :meth:`update`, in parts."""
        return ContextEstimate(
            tokens=self._usage + self._trailing,
            usage_tokens=self._usage,
            trailing_tokens=self._trailing,
            last_usage_index=self._usage_index,
        )


def transcript_tokens(messages: Sequence[AgentMessage]) -> ContextEstimate:
    """:class:`ContextTracker`'s estimate of ``messages``, read whole."""
    tracker = ContextTracker()
    tracker.update(messages)
    return tracker.estimate()


async def compact_if_needed(
    tracker: ContextTracker,
    messages: Sequence[AgentMessage],
    model: Model,
    stream_fn: StreamFn,
    options: StreamOptions | None = None,
    *,
    settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS,
    signal: AbortSignal | None = None,
) -> CompactionResult | CompactionFailure | None:
    """Compact ``messages`` when its estimate is above the window minus the reserve.

    Call it before every request with the run's transcript and the request's model.
    ``tracker.update(messages)`` gives the estimate (O(messages appended since the
    previous call)); when :func:`should_compact` says so for ``model.context_window`` it
    runs :func:`compact` with ``keep_recent_tokens`` lowered to
    :meth:`CompactionSettings.keep_for_window`.

    Returns ``None`` when no compaction was needed, or none was possible (nothing before
    the cut: the request goes out as it is). A :class:`CompactionResult` means: replace
    the transcript by ``result.messages`` (the tracker already follows it). A
    :class:`CompactionFailure` leaves the transcript as it was (report it; the request
    goes out as it is). Cancellation propagates. Always a checkpoint.
    """
    if not tracker.needs_compaction(messages, model, settings):
        await trio.lowlevel.checkpoint()
        return None
    keep = settings.keep_for_window(model.context_window)
    if prepare_compaction(messages, settings, keep_recent_tokens=keep) is None:
        await trio.lowlevel.checkpoint()
        return None
    return await _compact_keeping(
        tracker, messages, model, stream_fn, options, settings, signal, keep
    )


async def _compact_keeping(
    tracker: ContextTracker,
    messages: Sequence[AgentMessage],
    model: Model,
    stream_fn: StreamFn,
    options: StreamOptions | None,
    settings: CompactionSettings,
    signal: AbortSignal | None,
    keep: int,
) -> CompactionResult | CompactionFailure:
    """:func:`compact` keeping ``keep`` recent tokens; the tracker follows a success."""
    outcome = await compact(
        messages,
        model,
        stream_fn,
        options,
        settings=settings,
        signal=signal,
        keep_recent_tokens=keep,
    )
    if isinstance(outcome, CompactionResult):
        tracker.update(outcome.messages)
    return outcome


async def compact_after_overflow(
    tracker: ContextTracker,
    messages: Sequence[AgentMessage],
    response: AssistantMessage,
    model: Model,
    stream_fn: StreamFn,
    options: StreamOptions | None = None,
    *,
    settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS,
    signal: AbortSignal | None = None,
) -> CompactionResult | CompactionFailure | None:
    """Compact after the provider answered ``response`` with a context overflow.

    ``messages`` is the transcript the failed request was built from, without
    ``response`` (pi leaves the failed attempt out of the context too). Returns ``None``
    when ``response`` is no overflow that a retry can fix (see
    :func:`~trio_agent.compaction.is_context_overflow`; a completed ``"stop"`` response
    whose usage exceeded the window is not retried: the check before the next request
    sees its usage) or compaction is disabled. Otherwise compacts like
    :func:`compact_if_needed` whatever the estimate says, keeping at most half of the
    part after the last summary (the provider counted more than the estimate), and the
    caller retries the request once with ``result.messages``; a
    :class:`CompactionFailure` (nothing to cut, the summary failed) means the overflow
    stands. Always a checkpoint.
    """
    window = model.context_window
    if (
        not settings.enabled
        or response.stop_reason == "stop"
        or not is_context_overflow(response, window)
    ):
        await trio.lowlevel.checkpoint()
        return None
    # The provider counted more than the estimate said: keep at most half of what is
    # there to cut, so that a transcript the estimate puts under the budget still shrinks.
    start = _last_summary_index(messages) + 1
    there = sum(estimate_tokens(message) for message in messages[start:])
    keep = min(settings.keep_for_window(window), max(1, there // 2))
    return await _compact_keeping(
        tracker, messages, model, stream_fn, options, settings, signal, keep
    )
