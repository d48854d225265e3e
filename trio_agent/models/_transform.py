"""Transcript preparation shared by the built-in providers.

:func:`transform_messages` runs before a provider converts the transcript to its wire
format: it makes images safe for text-only models, strips another model's opaque replay
data, drops failed assistant turns and answers orphaned tool calls, so that every request
is one the provider accepts. :func:`sanitize_surrogates` strips lone UTF-16 surrogates
from text before it is encoded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from .._messages import (
    AssistantContent,
    AssistantMessage,
    ImageContent,
    Message,
    Model,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "IMAGE_OMITTED",
    "NO_RESULT_PROVIDED",
    "TOOL_IMAGE_OMITTED",
    "NormalizeToolCallId",
    "sanitize_surrogates",
    "transform_messages",
]

IMAGE_OMITTED = "(image omitted: model does not support images)"
"""Replaces a run of images in a user message for a text-only model."""
TOOL_IMAGE_OMITTED = "(tool image omitted: model does not support images)"
"""Replaces a run of images in a tool result for a text-only model."""
NO_RESULT_PROVIDED = "No result provided"
"""Text of the synthetic error result that answers an orphaned tool call."""

NormalizeToolCallId = Callable[[str, Model, AssistantMessage], str]
"""``(id, target_model, source_message) -> id`` accepted by the target provider."""

_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def sanitize_surrogates(text: str) -> str:
    """Remove unpaired UTF-16 surrogate code points (they cannot be encoded as UTF-8).

    A high surrogate directly followed by a low one is joined into the character they
    encode; any other surrogate is dropped.
    """
    if not _SURROGATE.search(text):
        return text
    joined = _SURROGATE_PAIR.sub(
        lambda m: chr(0x10000 + ((ord(m[0][0]) - 0xD800) << 10) + (ord(m[0][1]) - 0xDC00)),
        text,
    )
    return _SURROGATE.sub("", joined)


def _replace_images(content: Sequence[Any], placeholder: str) -> list[Any]:
    # One placeholder per run of consecutive images keeps the text around them in place.
    result: list[Any] = []
    previous_was_image = False
    for block in content:
        if isinstance(block, ImageContent):
            if not previous_was_image:
                result.append(TextContent(text=placeholder))
            previous_was_image = True
        else:
            result.append(block)
            previous_was_image = False
    return result


def _is_same_model(message: AssistantMessage, model: Model) -> bool:
    return (
        message.provider == model.provider
        and message.api == model.api
        and message.model == model.id
    )


def _transform_assistant(
    message: AssistantMessage,
    model: Model,
    normalize_tool_call_id: NormalizeToolCallId | None,
    renamed: dict[str, str],
) -> AssistantMessage:
    same_model = _is_same_model(message, model)
    content: list[AssistantContent] = []
    for block in message.content or []:
        if isinstance(block, ThinkingContent):
            if not same_model:
                # Another model's reasoning (and its signature) cannot be replayed.
                continue
            if block.redacted or block.thinking_signature or block.thinking.strip():
                content.append(block)
        elif isinstance(block, TextContent):
            if not same_model and block.text_signature is not None:
                block = attrs.evolve(block, text_signature=None)
            content.append(block)
        elif isinstance(block, ToolCall):
            if not same_model:
                if block.thought_signature is not None:
                    block = attrs.evolve(block, thought_signature=None)
                if normalize_tool_call_id is not None:
                    new_id = normalize_tool_call_id(block.id, model, message)
                    if new_id != block.id:
                        renamed[block.id] = new_id
                        block = attrs.evolve(block, id=new_id)
            content.append(block)
        else:  # pragma: no cover - defensive: unknown blocks pass through
            content.append(block)
    return attrs.evolve(message, content=content)


def _synthetic_results(pending: list[ToolCall], answered: set[str]) -> list[Message]:
    return [
        ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=[TextContent(text=NO_RESULT_PROVIDED)],
            is_error=True,
        )
        for call in pending
        if call.id not in answered
    ]


def transform_messages(
    messages: Sequence[Message],
    model: Model,
    normalize_tool_call_id: NormalizeToolCallId | None = None,
) -> list[Message]:
    """Prepare a transcript for ``model``'s provider. The input is not modified.

    Rules, in order:

    1. absent (``None``) content becomes ``[]``;
    2. for a model without ``"image"`` input, each run of images in a user message or tool
       result becomes one text block (:data:`IMAGE_OMITTED` /
       :data:`TOOL_IMAGE_OMITTED`);
    3. assistant messages of a *different* model (provider, api or id differ) lose their
       thinking blocks, text signatures and tool-call thought signatures, and their
       tool-call ids go through ``normalize_tool_call_id`` (matching tool results are
       renamed). Same model: thinking is kept when redacted, signed or non-blank;
    4. assistant messages with ``stop_reason`` ``"error"`` or ``"aborted"`` are dropped,
       and so are tool results answering their tool calls (the provider would reject a
       result for a call it never saw);
    5. tool calls without a result before the next assistant or user message (or the end)
       get a synthetic error result :data:`NO_RESULT_PROVIDED`; system messages found
       between a tool call and its results are held back until after the results.

    Args:
        messages: The (usually collapsed) transcript.
        model: The model the request is for.
        normalize_tool_call_id: ``(id, model, source_message) -> id`` for foreign ids.

    Returns:
        A new list of messages.
    """
    renamed: dict[str, str] = {}
    first_pass: list[Message] = []
    supports_images = "image" in model.input
    for message in messages:
        if message.role == "assistant":
            if message.content is None:
                message = attrs.evolve(message, content=[])
            first_pass.append(_transform_assistant(message, model, normalize_tool_call_id, renamed))
        elif message.role in ("user", "toolResult"):
            content: Any = message.content
            if content is None:
                message = attrs.evolve(message, content=[])
            elif not supports_images and not isinstance(content, str):
                placeholder = IMAGE_OMITTED if message.role == "user" else TOOL_IMAGE_OMITTED
                if any(isinstance(block, ImageContent) for block in content):
                    message = attrs.evolve(message, content=_replace_images(content, placeholder))
            if isinstance(message, ToolResultMessage) and message.tool_call_id in renamed:
                message = attrs.evolve(message, tool_call_id=renamed[message.tool_call_id])
            first_pass.append(message)
        else:
            if message.content is None:
                message = attrs.evolve(message, content="")
            first_pass.append(message)

    result: list[Message] = []
    pending: list[ToolCall] = []
    answered: set[str] = set()
    held: list[SystemMessage] = []
    dropped_calls: set[str] = set()

    def close_pending() -> None:
        result.extend(_synthetic_results(pending, answered))
        result.extend(held)
        pending.clear()
        answered.clear()
        held.clear()

    for message in first_pass:
        if isinstance(message, AssistantMessage):
            close_pending()
            calls = [block for block in message.content if isinstance(block, ToolCall)]
            if message.stop_reason in ("error", "aborted"):
                dropped_calls.update(call.id for call in calls)
                continue
            result.append(message)
            pending.extend(calls)
        elif isinstance(message, ToolResultMessage):
            if message.tool_call_id in dropped_calls and all(
                call.id != message.tool_call_id for call in pending
            ):
                continue
            result.append(message)
            answered.add(message.tool_call_id)
            if pending and all(call.id in answered for call in pending):
                close_pending()
        elif isinstance(message, UserMessage):
            close_pending()
            result.append(message)
        elif isinstance(message, SystemMessage) and pending:
            held.append(message)
        else:
            result.append(message)
    close_pending()
    return result
