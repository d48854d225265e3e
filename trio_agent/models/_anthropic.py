"""The ``anthropic-messages`` API: Anthropic's Messages endpoint over SSE.

Request building, event mapping and the thinking rules follow pi 1.6.0. The request goes
through the shared pipeline of :mod:`._http` (keys, headers, hooks, retries, SSE framing,
error and abort handling); this module only knows the Anthropic wire shapes.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import Any, Literal

import attrs

from .._events import AssistantMessageEvent
from .._json_stream import parse_json_with_repair
from .._messages import (
    AssistantMessage,
    ImageContent,
    Message,
    Model,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolDeclaration,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .._streaming import LlmContext, StreamOptions
from .._transcript import collapse_system_messages, get_system_message_text
from ._builder import AssistantMessageBuilder
from ._cost import (
    adjust_max_tokens_for_thinking,
    calculate_cost,
    clamp_max_tokens_to_context,
    is_openrouter,
    provider_billed_total,
    requested_thinking_level,
    with_billed_total,
)
from ._http import (
    CacheRetention,
    HttpApi,
    HttpEnv,
    HttpError,
    ProviderRequest,
    ProviderStreamError,
    SseEvent,
    cache_retention,
    compact_json,
    compat_value,
    stream_http,
)
from ._strict_tools import strict_schema_for, wants_strict
from ._transform import sanitize_surrogates, transform_messages

__all__ = [
    "ANTHROPIC_MESSAGES",
    "ANTHROPIC_VERSION",
    "AnthropicEventMapper",
    "build_anthropic_body",
    "build_anthropic_request",
    "convert_anthropic_messages",
    "convert_anthropic_tools",
    "format_anthropic_http_error",
    "normalize_anthropic_beta",
    "normalize_anthropic_tool_call_id",
    "stream_anthropic",
]

ANTHROPIC_VERSION = "2023-06-01"
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
FINE_GRAINED_TOOL_STREAMING_BETA = "fine-grained-tool-streaming-2025-05-14"
REDACTED_THINKING_TEXT = "[Reasoning redacted]"
_IMAGE_MOVED = "(image attached after the tool results)"


_INVALID_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


# ---------------------------------------------------------------------------------------
# Request


def normalize_anthropic_tool_call_id(tool_call_id: str) -> str:
    """Anthropic accepts tool-use ids of ``[A-Za-z0-9_-]``, at most 64 characters."""
    return _INVALID_ID_CHARS.sub("_", tool_call_id)[:64]


def normalize_anthropic_beta(value: str) -> str:
    """A caller's ``anthropic-beta`` value as upstream sends it: split on commas, trimmed,
    blanks dropped, duplicates dropped (the first kept), joined with ``,``."""
    flags: list[str] = []
    for flag in value.split(","):
        flag = flag.strip()
        if flag and flag not in flags:
            flags.append(flag)
    return ",".join(flags)


def _cache_control(retention: CacheRetention, model: Model) -> dict[str, Any] | None:
    if retention == "none":
        return None
    if retention == "long" and compat_value(model, "supportsLongCacheRetention") is not False:
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


def _image_block(image: ImageContent) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": image.mime_type, "data": image.data},
    }


def _user_content(message: UserMessage) -> str | list[dict[str, Any]] | None:
    if isinstance(message.content, str):
        # Whitespace-only user messages are rejected by the API, so they are skipped.
        return sanitize_surrogates(message.content) if message.content.strip() else None
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": sanitize_surrogates(block.text)})
        else:
            blocks.append(_image_block(block))
    return blocks or None


def _assistant_content(message: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    allow_empty_signature = bool(compat_value(model, "allowEmptySignature", False))
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": sanitize_surrogates(block.text)})
        elif isinstance(block, ThinkingContent):
            if block.redacted:
                blocks.append({"type": "redacted_thinking", "data": block.thinking_signature or ""})
            elif block.thinking_signature and block.thinking_signature.strip():
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": sanitize_surrogates(block.thinking),
                        "signature": block.thinking_signature,
                    }
                )
            elif not block.thinking.strip():
                continue
            elif allow_empty_signature:
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": sanitize_surrogates(block.thinking),
                        "signature": "",
                    }
                )
            else:
                # The API refuses thinking without a signature; keep the reasoning as text.
                blocks.append({"type": "text", "text": sanitize_surrogates(block.thinking)})
        else:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": normalize_anthropic_tool_call_id(block.id),
                    "name": block.name,
                    "input": block.arguments,
                }
            )
    return blocks


def _tool_result_blocks(
    results: Sequence[ToolResultMessage],
) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    # The API accepts no images inside an error tool_result: they follow all results.
    moved: list[dict[str, Any]] = []
    for result in results:
        texts = [
            sanitize_surrogates(block.text)
            for block in result.content
            if isinstance(block, TextContent)
        ]
        images = [block for block in result.content if isinstance(block, ImageContent)]
        content: str | list[dict[str, Any]]
        if not images:
            content = "\n".join(texts)
        elif result.is_error:
            # Each run of images leaves a note where it was.
            pieces: list[str] = []
            for block in result.content:
                if isinstance(block, TextContent):
                    pieces.append(sanitize_surrogates(block.text))
                elif not pieces or pieces[-1] != _IMAGE_MOVED:
                    pieces.append(_IMAGE_MOVED)
            content = "\n".join(pieces)
            moved.append(
                {
                    "type": "text",
                    "text": (
                        f"Images from the error result of tool call {result.tool_call_id} "
                        f"({result.tool_name}):"
                    ),
                }
            )
            moved.extend(_image_block(image) for image in images)
        else:
            parts: list[dict[str, Any]] = [{"type": "text", "text": text} for text in texts if text]
            if not parts:
                parts.append({"type": "text", "text": "(see attached image)"})
            parts.extend(_image_block(image) for image in images)
            content = parts
        blocks.append(
            {
                "type": "tool_result",
                "tool_use_id": normalize_anthropic_tool_call_id(result.tool_call_id),
                "content": content,
                "is_error": result.is_error,
            }
        )
    return blocks + moved


def convert_anthropic_messages(messages: Sequence[Message], model: Model) -> list[dict[str, Any]]:
    """Convert a collapsed, transformed transcript to Anthropic ``messages``.

    System messages are skipped (the leading one goes to ``system``); consecutive tool
    results become one user message; empty messages are skipped.
    """
    params: list[dict[str, Any]] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        if isinstance(message, UserMessage):
            content = _user_content(message)
            if content is not None:
                params.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            blocks = _assistant_content(message, model)
            if blocks:
                params.append({"role": "assistant", "content": blocks})
        elif isinstance(message, ToolResultMessage):
            run: list[ToolResultMessage] = []
            while index < len(messages):
                candidate = messages[index]
                if not isinstance(candidate, ToolResultMessage):
                    break
                run.append(candidate)
                index += 1
            params.append({"role": "user", "content": _tool_result_blocks(run)})
            continue
        index += 1
    return params


def _input_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": parameters.get("properties", {}),
        "required": parameters.get("required", []),
    }
    # Other root keywords are not accepted in input_schema.
    for key in ("additionalProperties", "$defs", "definitions"):
        if key in parameters:
            schema[key] = parameters[key]
    return schema


def _eager_input_streaming(model: Model) -> bool:
    return compat_value(model, "supportsEagerToolInputStreaming", True) is not False


# Keywords Anthropic's strict mode rejects with a 400 for the whole request.
_STRICT_REJECTED_KEYWORDS = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "maxItems",
        "uniqueItems",
        "minContains",
        "maxContains",
        "minProperties",
        "maxProperties",
    }
)
_STRICT_STRING_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)


def _strict_rejected_keyword(schema: Any) -> str | None:
    """The first keyword of ``schema`` (or a nested schema) that Anthropic's strict mode
    rejects, as ``<keyword>: <JSON value> is unsupported``; ``None`` when there is none."""
    if not isinstance(schema, dict):
        return None
    for key, value in schema.items():
        rejected = (
            key in _STRICT_REJECTED_KEYWORDS
            or (key == "minItems" and value not in (0, 1))
            or (
                key == "format" and not (isinstance(value, str) and value in _STRICT_STRING_FORMATS)
            )
        )
        if rejected:
            return f"{key}: {compact_json(value)} is unsupported"
    nested: list[Any] = []
    if isinstance(schema.get("anyOf"), list):
        nested.extend(schema["anyOf"])
    nested.append(schema.get("items"))
    if isinstance(schema.get("properties"), dict):
        nested.extend(schema["properties"].values())
    for member in nested:
        problem = _strict_rejected_keyword(member)
        if problem is not None:
            return problem
    return None


def _strict_schema(tool: ToolDeclaration, model: Model) -> dict[str, Any] | None:
    # The shared rule (see ._strict_tools), with upstream's wording for a model without
    # strict tools and Anthropic's own keyword limits on top.
    if not wants_strict(tool):
        return None
    problem: str | None = None
    if compat_value(model, "supportsStrictTools", False) is not True:
        problem = "strict tools are unsupported"
    else:
        schema = strict_schema_for(tool, supported=True, provider=model.provider)
        if schema is None:
            return None
        problem = _strict_rejected_keyword(tool.parameters)
        if problem is None:
            return schema
    if tool.constrained_sampling.get("strict") == "require":
        raise ValueError(
            f'Tool "{tool.name}" requires JSON-schema constrained sampling, but {problem}.'
        )
    return None


def convert_anthropic_tools(tools: Sequence[ToolDeclaration], model: Model) -> list[dict[str, Any]]:
    """Convert tool declarations to Anthropic ``tools`` entries.

    With ``compat.supportsStrictTools`` a tool asking for JSON-schema constrained sampling
    gets ``strict: true`` and its schema in strict form (see :mod:`._strict_tools`), unless
    its schema uses a keyword Anthropic's strict mode rejects (``minimum``, ``maxItems``,
    a ``format`` other than the supported ones, ...): then it goes out non-strict under
    ``strict: "prefer"`` and fails the request under ``"require"``.
    """
    eager = _eager_input_streaming(model)
    converted: list[dict[str, Any]] = []
    for tool in tools:
        entry: dict[str, Any] = {
            "name": tool.name,
            "description": sanitize_surrogates(tool.description),
        }
        if eager:
            entry["eager_input_streaming"] = True
        strict_schema = _strict_schema(tool, model)
        if strict_schema is None:
            entry["input_schema"] = _input_schema(tool.parameters)
        else:
            # A strict schema keeps its other root keywords (e.g. a description).
            entry["input_schema"] = {**strict_schema, **_input_schema(strict_schema)}
        if strict_schema is not None:
            entry["strict"] = True
        converted.append(entry)
    return converted


def _thinking_disabled_body(model: Model) -> dict[str, Any] | None:
    level_map = model.thinking_level_map or {}
    # A model mapping "off" to None has no way to switch thinking off: send nothing.
    if model.reasoning and not ("off" in level_map and level_map["off"] is None):
        return {"type": "disabled"}
    return None


def _adaptive_effort(model: Model, level: str) -> str:
    mapped = (model.thinking_level_map or {}).get(level)
    if isinstance(mapped, str):
        return mapped
    if level in ("minimal", "low"):
        return "low"
    if level == "medium":
        return "medium"
    return "high"


def build_anthropic_body(
    model: Model,
    messages: Sequence[Message],
    options: StreamOptions,
    *,
    cache_retention: CacheRetention = "short",
    transcript: Sequence[Message] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Build the request body and the beta flags (sent as the ``anthropic-beta`` header).

    Args:
        model: The target model.
        messages: The transcript, already collapsed (at most one leading system message)
            and transformed for ``model``.
        options: Request options (``reasoning``, ``max_tokens``, ``temperature``,
            ``thinking_budgets`` are used here).
        cache_retention: ``"short"`` marks the system block, the last tool and the last
            user block with ``cache_control``; ``"none"`` sends no cache markers.
        transcript: The transcript as given (before collapsing and transforming), from
            which the input size is estimated; ``messages`` when omitted.

    Returns:
        ``(body, betas)``.
    """
    cache = _cache_control(cache_retention, model)
    system = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
    rest = messages[1:] if system is not None else messages
    betas: list[str] = []

    # max_tokens is required by the API; 4096 stands in for a model that declares none.
    estimated = messages if transcript is None else transcript
    max_tokens = clamp_max_tokens_to_context(
        model, estimated, options.max_tokens or model.max_tokens or 4096
    )
    # No requested level means no thinking; the budget and the adaptive effort follow the
    # requested level, the switch the clamped one.
    requested = options.reasoning or "off"
    level = requested_thinking_level(model, requested)
    thinking: dict[str, Any] | None
    output_config: dict[str, Any] | None = None
    thinking_enabled = level != "off"
    if not thinking_enabled:
        thinking = _thinking_disabled_body(model)
    elif compat_value(model, "forceAdaptiveThinking", False):
        thinking = {"type": "adaptive", "display": "summarized"}
        # The effort follows the requested level, as upstream does (not the clamped one).
        output_config = {"effort": _adaptive_effort(model, requested)}
    else:
        # The budget follows the requested level, as upstream does (not the clamped one).
        max_tokens, budget = adjust_max_tokens_for_thinking(
            max_tokens, model.max_tokens or sys.maxsize, requested, options.thinking_budgets
        )
        max_tokens = clamp_max_tokens_to_context(model, estimated, max_tokens)
        # pi's rule exactly (parity U53): the budget leaves 1024 tokens for the answer, so
        # a small output limit gives a budget of 1-1023 (below the API's minimum, which it
        # refuses naming the field); none at all (0) is sent as 1024, as pi does.
        budget = min(budget, max(0, max_tokens - 1024)) or 1024
        thinking = {"type": "enabled", "budget_tokens": budget, "display": "summarized"}
        betas.append(INTERLEAVED_THINKING_BETA)

    converted = convert_anthropic_messages(rest, model)
    if cache is not None and converted and converted[-1]["role"] == "user":
        last = converted[-1]
        if isinstance(last["content"], str):
            last["content"] = [{"type": "text", "text": last["content"]}]
        last["content"][-1] = {**last["content"][-1], "cache_control": cache}

    body: dict[str, Any] = {
        "model": model.id,
        "messages": converted,
        "max_tokens": max_tokens,
        "stream": True,
    }
    if system is not None:
        text = sanitize_surrogates(get_system_message_text(system))
        if text:
            block: dict[str, Any] = {"type": "text", "text": text}
            if cache is not None:
                block["cache_control"] = cache
            body["system"] = [block]
    tools = list(system.tools_added or ()) if system is not None else []
    if tools:
        converted_tools = convert_anthropic_tools(tools, model)
        if cache is not None and compat_value(model, "supportsCacheControlOnTools") is not False:
            converted_tools[-1]["cache_control"] = cache
        body["tools"] = converted_tools
        if not _eager_input_streaming(model):
            betas.append(FINE_GRAINED_TOOL_STREAMING_BETA)
    if thinking is not None:
        body["thinking"] = thinking
    if output_config is not None:
        body["output_config"] = output_config
    if (
        options.temperature is not None
        and not thinking_enabled
        and compat_value(model, "supportsTemperature") is not False
    ):
        body["temperature"] = options.temperature
    return body, betas


# ---------------------------------------------------------------------------------------
# Stream events


_STOP_REASONS: dict[str, Literal["stop", "length", "toolUse"]] = {
    "end_turn": "stop",
    "pause_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "toolUse",
}

_HANDLED_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    }
)


def _stop_reason_error(reason: str, data: dict[str, Any]) -> str:
    if reason == "refusal":
        details = data.get("delta", {}).get("stop_details") or data.get("stop_details") or {}
        explanation = details.get("explanation") if isinstance(details, dict) else None
        return explanation or "The model refused to complete the request"
    if reason == "sensitive":
        return "Provider stopped with: sensitive"
    return f"Unhandled stop reason: {reason}"


class AnthropicEventMapper:
    """Maps the SSE events of one Anthropic response onto an
    :class:`AssistantMessageBuilder` (an :class:`~._http.SseMapper`).

    Failures raise :class:`~._http.ProviderStreamError`; its message becomes the
    assistant's ``error_message``.
    """

    def __init__(self, builder: AssistantMessageBuilder, model: Model) -> None:
        self.finished = False
        """Set once ``message_stop`` arrived: nothing after it matters."""
        self._builder = builder
        self._model = model
        self._blocks: dict[int, tuple[int, str]] = {}
        """Provider block index -> (content index, block kind); unknown kinds are absent."""
        self._error_data: str | None = None
        self._stop_reason: Literal["stop", "length", "toolUse"] | None = None
        self._stop_error: str | None = None
        self._tokens = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}
        self._reasoning: int | None = None
        self._cache_write_1h = 0
        self._billed: float | None = None
        self._started = False

    def parse(self, sse: SseEvent) -> Any:
        """The event's JSON (with its ``type``); an ``error`` event keeps its raw data.

        Raises:
            ProviderStreamError: the data of a processed event is not JSON.
        """
        if sse.event == "error":
            # Upstream reports the raw data string of an error event as the message.
            self._error_data = sse.data
            try:
                return json.loads(sse.data)
            except ValueError:
                return {"type": "error", "data": sse.data}
        if sse.event == "message" or sse.event in _HANDLED_EVENTS:
            try:
                # Raw control characters and stray backslashes in strings are repaired.
                payload = parse_json_with_repair(sse.data)
            except ValueError as exc:
                raw = "\\n".join(
                    sse.raw
                    or ([] if sse.event == "message" else [f"event: {sse.event}"])
                    + [f"data: {line}" for line in sse.data.split("\n")]
                )
                raise ProviderStreamError(
                    f"Could not parse Anthropic SSE event {sse.event}: {exc}; "
                    f"data={sse.data}; raw={raw}"
                ) from exc
        else:
            # ping and future event kinds reach on_provider_stream_event but are not mapped;
            # data that is not JSON there is no reason to fail the stream.
            try:
                payload = json.loads(sse.data)
            except ValueError:
                return None
        if not isinstance(payload, dict):
            return None
        if sse.event != "message" and payload.get("type") != sse.event:
            payload = {**payload, "type": sse.event}
        return payload

    def map(self, event: Any) -> list[AssistantMessageEvent]:
        """Apply one parsed event.

        Raises:
            ProviderStreamError: for an ``error`` event (its raw data is the message).
        """
        kind = event.get("type")
        if self._error_data is not None or kind == "error":
            raise ProviderStreamError(self._error_data or compact_json(event))
        if kind == "content_block_delta":  # the per-token event
            return self._on_content_block_delta(event)
        if kind not in _HANDLED_EVENTS:
            return []
        handler = getattr(self, f"_on_{kind}")
        result: list[AssistantMessageEvent] = handler(event)
        return result

    def finish(self) -> Iterator[AssistantMessageEvent]:
        """The terminal ``done`` event once the body ended.

        Raises:
            ProviderStreamError: the stream ended before ``message_stop`` or without a stop
                reason, or the stop reason is an error (refusal, unknown reason, ...).
        """
        if not self.finished:
            if not self._started:
                raise ProviderStreamError("Anthropic stream ended without a stop reason")
            raise ProviderStreamError("Anthropic stream ended before message_stop")
        if self._stop_error is not None:
            raise ProviderStreamError(self._stop_error)
        if self._stop_reason is None:
            raise ProviderStreamError("Anthropic stream ended without a stop reason")
        yield self._builder.done(self._stop_reason)

    # -- handlers ---------------------------------------------------------------------

    def _on_message_start(self, payload: dict[str, Any]) -> list[AssistantMessageEvent]:
        self._started = True
        message = payload.get("message") or {}
        builder = self._builder
        if message.get("id"):
            builder.response_id = message["id"]
        response_model = message.get("model")
        if response_model and response_model != builder.model:
            builder.response_model = response_model
        self._update_usage(message.get("usage") or {})
        return []

    def _on_message_delta(self, payload: dict[str, Any]) -> list[AssistantMessageEvent]:
        delta = payload.get("delta") or {}
        reason = delta.get("stop_reason")
        self._update_usage(payload.get("usage") or {})
        if reason is not None:
            mapped = _STOP_REASONS.get(reason)
            if mapped is not None:
                self._stop_reason = mapped
                self._builder.stop_reason = mapped
            elif reason in ("refusal", "sensitive"):
                # Reported once the body ended, as upstream does.
                self._stop_error = _stop_reason_error(reason, payload)
            else:
                # An unknown reason fails at once, with this event's usage applied (U23).
                raise ProviderStreamError(_stop_reason_error(reason, payload))
        return []

    def _on_message_stop(self, payload: dict[str, Any]) -> list[AssistantMessageEvent]:
        self.finished = True
        return []

    def _on_content_block_start(self, payload: dict[str, Any]) -> list[AssistantMessageEvent]:
        block = payload.get("content_block") or {}
        kind = block.get("type")
        builder = self._builder
        event: AssistantMessageEvent
        if kind == "text":
            index, event = builder.start_text(block.get("text") or "")
        elif kind == "thinking":
            index, event = builder.start_thinking(
                block.get("thinking") or "", signature=block.get("signature") or ""
            )
        elif kind == "redacted_thinking":
            index, event = builder.start_thinking(
                REDACTED_THINKING_TEXT, signature=block.get("data") or "", redacted=True
            )
        elif kind == "fallback":
            if builder.content:
                raise ProviderStreamError(
                    "Anthropic performed an unsupported mid-output model fallback"
                )
            return []
        elif kind == "tool_use":
            arguments = block.get("input")
            index, event = builder.start_tool_call(
                id=block.get("id") or "",
                name=block.get("name") or "",
                arguments=arguments if isinstance(arguments, dict) else None,
            )
        else:
            return []
        # Redacted thinking takes thinking deltas, as a thinking block does.
        family = "thinking" if kind == "redacted_thinking" else kind
        self._blocks[payload.get("index", 0)] = (index, family)
        return [event]

    def _on_content_block_delta(self, payload: dict[str, Any]) -> list[AssistantMessageEvent]:
        open_block = self._blocks.get(payload.get("index", 0))
        if open_block is None:
            return []
        index, block_kind = open_block
        delta = payload.get("delta") or {}
        kind = delta.get("type")
        builder = self._builder
        # A delta of another kind than its block is ignored.
        if kind == "text_delta" and block_kind == "text":
            return [builder.text_delta(index, delta.get("text") or "")]
        if kind == "thinking_delta" and block_kind == "thinking":
            return [builder.thinking_delta(index, delta.get("thinking") or "")]
        if kind == "input_json_delta" and block_kind == "tool_use":
            return [builder.tool_call_delta(index, delta.get("partial_json") or "")]
        if kind == "signature_delta" and block_kind == "thinking":
            builder.set_thinking_signature(index, delta.get("signature") or "", append=True)
        return []

    def _on_content_block_stop(self, payload: dict[str, Any]) -> list[AssistantMessageEvent]:
        open_block = self._blocks.pop(payload.get("index", 0), None)
        if open_block is None:
            return []
        return [self._builder.end_block(open_block[0])]

    # -- usage ------------------------------------------------------------------------

    def _update_usage(self, usage: dict[str, Any]) -> None:
        fields = {
            "input": "input_tokens",
            "output": "output_tokens",
            "cache_read": "cache_read_input_tokens",
            "cache_write": "cache_creation_input_tokens",
        }
        changed = False
        for ours, theirs in fields.items():
            value = usage.get(theirs)
            if value is not None:
                self._tokens[ours] = int(value)
                changed = True
        details = usage.get("output_tokens_details")
        if isinstance(details, dict) and details.get("thinking_tokens") is not None:
            self._reasoning = int(details["thinking_tokens"])
            changed = True
        creation = usage.get("cache_creation")
        if isinstance(creation, dict):
            long_writes = creation.get("ephemeral_1h_input_tokens")
            if isinstance(long_writes, int | float) and not isinstance(long_writes, bool):
                self._cache_write_1h = int(long_writes)
                changed = True
        billed = provider_billed_total(self._model, usage)
        if billed is not None:
            self._billed = billed
            changed = True
        if changed:
            tokens = self._tokens
            total = sum(tokens.values())
            usage_now = calculate_cost(
                self._model,
                Usage(
                    input=tokens["input"],
                    output=tokens["output"],
                    cache_read=tokens["cache_read"],
                    cache_write=tokens["cache_write"],
                    total_tokens=total,
                    reasoning=self._reasoning,
                ),
                cache_write_1h=self._cache_write_1h,
            )
            self._builder.usage = with_billed_total(usage_now, self._billed)


# ---------------------------------------------------------------------------------------
# Wiring into the shared pipeline


def build_anthropic_request(
    model: Model, context: LlmContext, options: StreamOptions, api_key: str | None
) -> ProviderRequest:
    """The HTTP request of one Anthropic Messages call (``POST {base_url}/v1/messages``).

    The transcript is collapsed (system messages fold into ``system``) and transformed
    for ``model`` first. Cache markers follow ``model.compat["cacheRetention"]``
    (``"short"`` by default, ``"none"`` disables them).
    """
    messages = transform_messages(
        collapse_system_messages(context.messages),
        model,
        lambda tool_call_id, _model, _source: normalize_anthropic_tool_call_id(tool_call_id),
    )
    retention = cache_retention(model)
    body, betas = build_anthropic_body(
        model,
        messages,
        options,
        cache_retention=retention,
        transcript=context.messages,
    )
    headers = {
        "anthropic-version": ANTHROPIC_VERSION,
        "anthropic-dangerous-direct-browser-access": "true",
        "accept": "application/json",
    }
    if betas:
        order = (FINE_GRAINED_TOOL_STREAMING_BETA, INTERLEAVED_THINKING_BETA)
        headers["anthropic-beta"] = ",".join(sorted(betas, key=order.index))
    # U62: session affinity for routers that honour it (on by default for OpenRouter),
    # one header, named after the router's format; none without prompt caching.
    if options.session_id and retention != "none":
        openrouter = is_openrouter(model)
        if compat_value(model, "sendSessionAffinityHeaders", openrouter) is True:
            style = compat_value(
                model, "sessionAffinityFormat", "openrouter" if openrouter else None
            )
            name = "x-session-id" if style == "openrouter" else "x-session-affinity"
            headers[name] = options.session_id
    return ProviderRequest(
        url=f"{model.base_url.rstrip('/')}/v1/messages?beta=true",
        body=body,
        headers=headers,
        auth_headers={"x-api-key": api_key} if api_key else {},
    )


def format_anthropic_http_error(error: HttpError, model: Model) -> str:
    """``<status> <detail>`` as Anthropic's SDK words it.

    The detail is a JSON body's top-level string ``message``, else the whole body as
    compact JSON (never cut), else the body as received; ``status code (no body)`` for
    an empty body.
    """
    body = error.body
    if not body:
        return f"{error.status} status code (no body)"
    try:
        parsed = json.loads(body)
    except ValueError:
        return f"{error.status} {body}"
    if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
        return f"{error.status} {parsed['message']}"
    return f"{error.status} {compact_json(parsed)}"


ANTHROPIC_MESSAGES = HttpApi(
    build_request=build_anthropic_request,
    create_mapper=AnthropicEventMapper,
    format_http_error=format_anthropic_http_error,
    auth_header_names=("authorization", "x-api-key", "cf-aig-authorization"),
)
"""The ``anthropic-messages`` wire API for :func:`~._http.stream_http`."""


def _with_normalized_beta(model: Model, options: StreamOptions) -> StreamOptions:
    # A caller's anthropic-beta (model headers, then option headers: the later wins)
    # replaces the generated one, normalized; it goes into the option headers, the last
    # layer merged.
    value: str | None = None
    for layer in (model.headers, options.headers):
        for name, header in (layer or {}).items():
            if name.lower() == "anthropic-beta":
                value = header
    if value is None:
        return options
    headers: dict[str, str | None] = {
        name: header
        for name, header in (options.headers or {}).items()
        if name.lower() != "anthropic-beta"
    }
    headers["anthropic-beta"] = normalize_anthropic_beta(value) or None
    return attrs.evolve(options, headers=headers)


def stream_anthropic(
    model: Model, context: LlmContext, options: StreamOptions, env: HttpEnv
) -> AsyncGenerator[AssistantMessageEvent, None]:
    """Stream one Anthropic Messages response (the ``anthropic-messages`` API).

    Yields ``start``, block events and one terminal ``done`` or ``error`` event; failures
    (HTTP status, provider ``error`` event, stream ending early, abort) are encoded in
    the terminal event, never raised. Cancelling the consumer's scope raises
    ``trio.Cancelled`` out of the iteration and closes the HTTP response.
    """
    return stream_http(
        ANTHROPIC_MESSAGES, model, context, _with_normalized_beta(model, options), env
    )
