"""Token estimates of messages and transcripts, as pi-ai 1.6.0 makes them.

pi-ai 1.6.0 ``utils/estimate.js``: a message counts ``ceil(characters / 3.5)``, counted
in JavaScript string lengths (UTF-16 code units); an image counts 4,800 characters; a
system message adds its added and removed tool declarations as JSON (nothing for an
empty list); an assistant message counts its text, its thinking and each tool call's name
and JSON arguments. A transcript's estimate starts from the usage the provider reported
for the last response that applies to it and adds the estimates of the messages after it.

``trio_agent.models`` keeps its own copy for the providers' ``max_tokens`` clamp
(``models/_cost.py``); this module is the public one, with pi's full result.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Final

import attrs

from ._messages import (
    AssistantMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolDeclaration,
    ToolReference,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._serialization import to_json
from ._transcript import get_system_message_text

__all__ = [
    "ContextEstimate",
    "arguments_json",
    "calculate_context_tokens",
    "estimate_context_tokens",
    "estimate_message_tokens",
    "estimate_text_tokens",
    "js_length",
    "usage_applies",
]

CHARS_PER_TOKEN: Final = 3.5
IMAGE_CHARS: Final = 4800


def js_length(text: str) -> int:
    """``text.length`` in JavaScript: the number of UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def estimate_text_tokens(text: str) -> int:
    """``ceil(js_length(text) / 3.5)``."""
    return math.ceil(js_length(text) / CHARS_PER_TOKEN)


def _content_chars(content: str | Sequence[TextContent | ImageContent]) -> int:
    if isinstance(content, str):
        return js_length(content)
    return sum(
        js_length(block.text) if isinstance(block, TextContent) else IMAGE_CHARS
        for block in content
    )


def _tools_tokens(tools: Sequence[ToolDeclaration | ToolReference] | None) -> int:
    if not tools:
        return 0
    # The wire form (camelCase keys), as JSON.stringify writes it upstream.
    return estimate_text_tokens(to_json(list(tools)))


def _plain(value: object) -> bool:
    """Whether :func:`json.dumps` writes ``value`` as ``JSON.stringify`` does: no floats
    (JavaScript writes ``1.0`` as ``1``), no integer-like keys (JavaScript lists them
    first), no ints beyond 2**53, no lone surrogates (JavaScript escapes them)."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, str):
        return value.isascii() or not _LONE_SURROGATE.search(value)
    if isinstance(value, int):
        return -_SAFE_INT <= value <= _SAFE_INT
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    if isinstance(value, dict):
        return all(
            isinstance(key, str) and not key.isdigit() and _plain(key) and _plain(item)
            for key, item in value.items()
        )
    return False


_SAFE_INT: Final = 2**53
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def arguments_json(arguments: object) -> str:
    """``JSON.stringify(arguments)``, or ``"[unserializable]"`` when JSON cannot hold it."""
    # The estimate runs before every request on each new message: the C encoder when it
    # writes what JSON.stringify writes, the exact (slower) writer otherwise.
    if _plain(arguments):
        return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    try:
        return to_json(arguments)
    except Exception:  # upstream's safeJsonStringify: an unwritable value still counts
        return "[unserializable]"


def estimate_message_tokens(message: Message) -> int:
    """Estimated tokens of one provider message (pi-ai ``estimateMessageTokens``)."""
    if isinstance(message, SystemMessage):
        return (
            estimate_text_tokens(get_system_message_text(message))
            + _tools_tokens(message.tools_added)
            + _tools_tokens(message.tools_removed)
        )
    if isinstance(message, UserMessage | ToolResultMessage):
        return math.ceil(_content_chars(message.content) / CHARS_PER_TOKEN)
    chars = 0
    for block in message.content:
        if isinstance(block, TextContent):
            chars += js_length(block.text)
        elif isinstance(block, ThinkingContent):
            chars += js_length(block.thinking)
        elif isinstance(block, ToolCall):
            chars += js_length(block.name) + js_length(arguments_json(block.arguments))
    return math.ceil(chars / CHARS_PER_TOKEN)


def calculate_context_tokens(usage: Usage) -> int:
    """The context size a usage reports: ``total_tokens``, else the sum of its counts."""
    return usage.total_tokens or (usage.input + usage.output + usage.cache_read + usage.cache_write)


def usage_applies(message: AssistantMessage, newest_earlier_timestamp: float) -> bool:
    """Whether ``message``'s usage can stand for the transcript up to it.

    A response that failed or was aborted, or reports no tokens, cannot; nor can one older
    than a message before it (a summary inserted later, say).
    """
    return (
        message.timestamp >= newest_earlier_timestamp
        and message.stop_reason not in ("error", "aborted")
        and calculate_context_tokens(message.usage) > 0
    )


@attrs.frozen(kw_only=True)
class ContextEstimate:
    """A transcript's estimated context size (pi-ai ``estimateContextTokens``)."""

    tokens: int
    """``usage_tokens + trailing_tokens``."""
    usage_tokens: int
    """The context size the last applicable response reported (0 without one)."""
    trailing_tokens: int
    """The estimate of the messages after that response (of all, without one)."""
    last_usage_index: int | None
    """The index of that response, ``None`` without one."""


def estimate_context_tokens(messages: Sequence[Message]) -> ContextEstimate:
    """Estimate the context size of ``messages`` as pi-ai 1.6.0 does.

    The last assistant response whose usage applies (see :func:`usage_applies`) counts
    the context size its provider reported; every message after it counts its
    :func:`estimate_message_tokens`. Without such a response, every message counts its
    estimate.
    """
    newest = -math.inf
    anchor: int | None = None
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and usage_applies(message, newest):
            anchor = index
        newest = max(newest, message.timestamp)
    if anchor is None:
        tokens = sum(estimate_message_tokens(message) for message in messages)
        return ContextEstimate(
            tokens=tokens, usage_tokens=0, trailing_tokens=tokens, last_usage_index=None
        )
    anchor_message = messages[anchor]
    assert isinstance(anchor_message, AssistantMessage)
    usage_tokens = calculate_context_tokens(anchor_message.usage)
    trailing = sum(estimate_message_tokens(message) for message in messages[anchor + 1 :])
    return ContextEstimate(
        tokens=usage_tokens + trailing,
        usage_tokens=usage_tokens,
        trailing_tokens=trailing,
        last_usage_index=anchor,
    )
