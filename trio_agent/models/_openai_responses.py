"""The ``openai-responses`` API: OpenAI's Responses endpoint over SSE.

Request building, event mapping and the reasoning rules follow pi 1.6.0. The request goes
through the shared pipeline of :mod:`._http` (keys, headers, hooks, retries, SSE framing,
error and abort handling); this module only knows the Responses wire shapes.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import Any, Literal

import httpx

from .._events import AssistantMessageEvent
from .._jsjson import UNDEFINED, js_number, js_stringify, js_truthy
from .._messages import (
    AssistantMessage,
    ImageContent,
    Message,
    Model,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolDeclaration,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .._streaming import LlmContext, StreamOptions
from .._transcript import collapse_system_messages, get_system_message_text
from ._builder import MALFORMED_EVENT_JSON, AssistantMessageBuilder
from ._cost import (
    calculate_cost,
    clamp_max_tokens_to_context,
    is_openrouter,
    requested_thinking_level,
)
from ._http import (
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
    truncate_json_error,
)
from ._request import client_error, client_error_message, client_error_text
from ._strict_tools import strict_schema_for
from ._transform import sanitize_surrogates, transform_messages

__all__ = [
    "OPENAI_RESPONSES",
    "ResponsesEventMapper",
    "build_responses_body",
    "build_responses_request",
    "convert_responses_input",
    "convert_responses_tools",
    "format_responses_http_error",
    "normalize_responses_tool_call_id",
    "openai_http_error_parts",
    "short_hash",
    "split_tool_call_id",
    "stream_openai_responses",
]


_INVALID_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_MAX_ID_LENGTH = 64


_OPENAI_ITEM_ID_PROVIDERS = frozenset({"openai", "openai-codex", "opencode"})


def _imul(a: int, b: int) -> int:
    return (a * b) & 0xFFFFFFFF


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, rest = divmod(number, 36)
        text = digits[rest] + text
        if not number:
            return text


def short_hash(text: str) -> str:
    """Upstream's short id hash: cyrb53 (seed 0) over the UTF-16 code units of ``text``,
    written as base-36 of its second 32-bit half followed by base-36 of its first."""
    h1 = 0xDEADBEEF
    h2 = 0x41C6CE57
    encoded = text.encode("utf-16-le", "surrogatepass")
    for position in range(0, len(encoded), 2):
        unit = encoded[position] | (encoded[position + 1] << 8)
        h1 = _imul(h1 ^ unit, 2654435761)
        h2 = _imul(h2 ^ unit, 1597334677)
    h1 = _imul(h1 ^ (h1 >> 16), 2246822507)
    h1 ^= _imul(h2 ^ (h2 >> 13), 3266489909)
    h2 = _imul(h2 ^ (h2 >> 16), 2246822507)
    h2 ^= _imul(h1 ^ (h1 >> 13), 3266489909)
    return _base36(h2) + _base36(h1)


def _js_string(value: Any) -> str:
    """A JSON value as JavaScript's template literals write it (``undefined`` for a
    missing value, see :data:`UNDEFINED`)."""
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return js_number(value)
    if isinstance(value, list):
        return ",".join("" if item is None else _js_string(item) for item in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# Built once: ``json.loads`` with ``parse_constant`` builds a decoder per call, a cost paid
# per streamed event. (A text starting with a byte order mark fails here as in json.loads.)
_EVENT_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _normalize_id_part(text: str) -> str:
    return _INVALID_ID_CHARS.sub("_", text)[:_MAX_ID_LENGTH].rstrip("_")


# ---------------------------------------------------------------------------------------
# Request


def split_tool_call_id(tool_call_id: str) -> tuple[str, str | None]:
    """Split a ``<call_id>|<item_id>`` tool-call id (ids of other APIs have no item id)."""
    call_id, sep, item_id = tool_call_id.partition("|")
    return call_id, (item_id if sep else None)


def normalize_responses_tool_call_id(tool_call_id: str, model: Model) -> str:
    """Make another model's tool-call id acceptable to ``model``.

    An id part is restricted to ``[A-Za-z0-9_-]`` (other characters become ``_``), cut
    to 64 characters and stripped of trailing ``_``. For providers ``openai``,
    ``openai-codex`` and ``opencode`` the call id is normalised that way and an item id
    becomes ``fc_<short_hash(item id)>``; for every other provider the whole id (``|``
    included) is normalised as one part.
    """
    if model.provider not in _OPENAI_ITEM_ID_PROVIDERS:
        return _normalize_id_part(tool_call_id)
    call_id, item_id = split_tool_call_id(tool_call_id)
    normalized = _normalize_id_part(call_id)
    if item_id is None:
        return normalized
    return f"{normalized}|fc_{short_hash(item_id)}"


def _text_signature_id(signature: str | None) -> tuple[str | None, str | None]:
    """The message item id (and phase) stored in a text signature.

    Only ``{"v":1,"id":<string>}`` (with an optional phase ``commentary`` or
    ``final_answer``) is read as structured; any other signature is a bare id.
    """
    if not signature:
        return None, None
    if signature.startswith("{"):
        try:
            value = json.loads(signature)
        except ValueError:
            value = None
        version = value.get("v") if isinstance(value, dict) else None
        if (
            isinstance(value, dict)
            and version == 1
            and not isinstance(version, bool)
            and isinstance(value.get("id"), str)
        ):
            phase = value.get("phase")
            return value["id"], phase if phase in ("commentary", "final_answer") else None
    return signature, None  # legacy: a bare id


def _system_role(model: Model) -> str:
    supports_developer = compat_value(model, "supportsDeveloperRole")
    return "developer" if model.reasoning and supports_developer is not False else "system"


def _input_image(image: ImageContent) -> dict[str, Any]:
    return {
        "type": "input_image",
        "detail": "auto",
        "image_url": f"data:{image.mime_type};base64,{image.data}",
    }


def _user_item(message: UserMessage) -> dict[str, Any] | None:
    content = message.content
    if isinstance(content, str):
        text = sanitize_surrogates(content)
        return {"role": "user", "content": [{"type": "input_text", "text": text}]}
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "input_text", "text": sanitize_surrogates(block.text)})
        else:
            parts.append(_input_image(block))
    return {"role": "user", "content": parts} if parts else None


def _assistant_items(message: AssistantMessage, ordinal: int, model: Model) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    # Item ids of another model of the same provider and API would pair with reasoning
    # items the target model never produced: its function calls go without ids.
    other_model = (
        message.provider == model.provider
        and message.api == model.api
        and message.model != model.id
    )
    text_count = 0
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if not block.thinking_signature:
                continue
            try:
                item = json.loads(block.thinking_signature)
            except ValueError:
                continue
            if isinstance(item, dict):
                items.append(item)
        elif isinstance(block, TextContent):
            item_id, phase = _text_signature_id(block.text_signature)
            if item_id is None:
                item_id = (
                    f"msg_pi_{ordinal}" if text_count == 0 else f"msg_pi_{ordinal}_{text_count}"
                )
            elif len(item_id) > _MAX_ID_LENGTH:
                item_id = f"msg_{short_hash(item_id)}"
            text_count += 1
            text_item: dict[str, Any] = {
                "type": "message",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": sanitize_surrogates(block.text),
                        "annotations": [],
                    }
                ],
                "status": "completed",
                "id": item_id,
            }
            if phase is not None:
                text_item["phase"] = phase
            items.append(text_item)
        elif isinstance(block, ToolCall):
            call_id, item_id = split_tool_call_id(block.id)
            call: dict[str, Any] = {"type": "function_call"}
            # Another model's item ids were rewritten to fc_<hash> or dropped already.
            if item_id is not None and item_id.startswith("fc_") and not other_model:
                call["id"] = item_id
            call["call_id"] = call_id
            call["name"] = block.name
            call["arguments"] = compact_json(block.arguments)
            items.append(call)
    return items


def _tool_result_item(result: ToolResultMessage, model: Model) -> dict[str, Any]:
    call_id, _ = split_tool_call_id(result.tool_call_id)
    texts = [
        sanitize_surrogates(block.text)
        for block in result.content
        if isinstance(block, TextContent)
    ]
    images = [block for block in result.content if isinstance(block, ImageContent)]
    text = "\n".join(texts)
    output: str | list[dict[str, Any]]
    if images and "image" in model.input:
        output = [{"type": "input_text", "text": text}] if text.strip() else []
        output.extend(_input_image(image) for image in images)
    elif text.strip():
        output = text
    else:
        output = "(see attached image)" if images else "(no tool output)"
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def convert_responses_input(messages: Sequence[Message], model: Model) -> list[dict[str, Any]]:
    """Convert a collapsed, transformed transcript to Responses ``input`` items.

    The leading system message becomes a ``developer`` (reasoning models) or ``system``
    item; assistant messages are replayed item by item (reasoning items from thinking
    signatures, message items with the ids of their text signatures, function calls);
    tool results become ``function_call_output`` items.
    """
    items: list[dict[str, Any]] = []
    # Fallback message item ids count the earlier messages that produced input items
    # (the leading system message aside).
    emitted = 0
    for message in messages:
        produced: list[dict[str, Any]] = []
        if isinstance(message, SystemMessage):
            text = sanitize_surrogates(get_system_message_text(message))
            if text:
                items.append({"role": _system_role(model), "content": text})
            continue
        if isinstance(message, UserMessage):
            item = _user_item(message)
            if item is not None:
                produced.append(item)
        elif isinstance(message, AssistantMessage):
            produced.extend(_assistant_items(message, emitted, model))
        elif isinstance(message, ToolResultMessage):
            produced.append(_tool_result_item(result=message, model=model))
        if produced:
            items.extend(produced)
            emitted += 1
    return items


def convert_responses_tools(tools: Sequence[ToolDeclaration], model: Model) -> list[dict[str, Any]]:
    """Convert tool declarations to Responses function tools.

    Only a model with ``compat.supportsStrictMode`` gets ``strict`` on its tools: a tool
    asking for JSON-schema constrained sampling is then strict, its schema sent in strict
    form (see :mod:`._strict_tools`), and every other tool says ``strict: false``. Without
    the switch no tool carries the field.
    """
    supported = compat_value(model, "supportsStrictMode", False) is True
    converted: list[dict[str, Any]] = []
    for tool in tools:
        strict_schema = strict_schema_for(tool, supported=supported, provider=model.provider)
        entry: dict[str, Any] = {
            "type": "function",
            "name": tool.name,
            "description": sanitize_surrogates(tool.description),
            "parameters": strict_schema or tool.parameters,
        }
        if supported:
            entry["strict"] = strict_schema is not None
        converted.append(entry)
    return converted


def _reasoning_body(model: Model, options: StreamOptions) -> dict[str, Any] | None:
    if not model.reasoning:
        return None
    level_map = model.thinking_level_map or {}
    level = requested_thinking_level(model, options.reasoning)
    if level != "off":
        effort = level_map.get(level) or level
        return {"effort": effort, "summary": "auto"}
    if "off" in level_map and level_map["off"] is None:
        return None  # the model cannot switch reasoning off: leave it to the server
    return {"effort": level_map.get("off") or "none"}


def build_responses_body(
    model: Model,
    messages: Sequence[Message],
    options: StreamOptions,
    *,
    cache_retention: Literal["none", "short", "long"] = "short",
    transcript: Sequence[Message] | None = None,
) -> dict[str, Any]:
    """Build the request body.

    Args:
        model: The target model.
        messages: The transcript, already collapsed (at most one leading system message)
            and transformed for ``model``.
        options: Request options (``reasoning``, ``max_tokens``, ``temperature``,
            ``session_id`` are used here).
        cache_retention: With ``"none"`` no ``prompt_cache_key`` is sent; ``"long"`` adds
            ``prompt_cache_retention: "24h"`` (unless ``compat.supportsLongCacheRetention``
            is false). With ``compat.supportsExplicitPromptCacheMode`` the retention is
            ``prompt_cache_options`` instead: ``{"mode": "explicit"}`` for ``"none"``,
            ``{"ttl": "30m"}`` for ``"long"``.
        transcript: The transcript as given (before collapsing and transforming), from
            which the input size is estimated; ``messages`` when omitted.
    """
    body: dict[str, Any] = {
        "model": model.id,
        "input": convert_responses_input(messages, model),
        "stream": True,
        "store": False,
    }
    if (
        options.session_id
        and cache_retention != "none"
        and compat_value(model, "promptCacheKeyMode") != "disabled"
    ):
        body["prompt_cache_key"] = options.session_id[:64]
    long_supported = compat_value(model, "supportsLongCacheRetention") is not False
    if compat_value(model, "supportsExplicitPromptCacheMode") is True:
        if cache_retention == "none":
            body["prompt_cache_options"] = {"mode": "explicit"}
        elif cache_retention == "long" and long_supported:
            body["prompt_cache_options"] = {"ttl": "30m"}
    elif cache_retention == "long" and long_supported:
        body["prompt_cache_retention"] = "24h"
    max_tokens = clamp_max_tokens_to_context(
        model,
        messages if transcript is None else transcript,
        options.max_tokens or model.max_tokens,
    )
    if max_tokens and compat_value(model, "supportsMaxOutputTokens") is not False:
        # The API rejects max_output_tokens below 16.
        body["max_output_tokens"] = max(16, max_tokens)
    if options.temperature is not None:
        body["temperature"] = options.temperature
    system = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
    tools = list(system.tools_added or ()) if system is not None else []
    if tools:
        body["tools"] = convert_responses_tools(tools, model)
    reasoning = _reasoning_body(model, options)
    if reasoning is not None:
        body["reasoning"] = reasoning
    if model.reasoning and (model.provider == "xai" or (reasoning or {}).get("summary")):
        body["include"] = ["reasoning.encrypted_content"]
    if options.response_schema is not None and compat_value(model, "supportsJsonSchema") is True:
        body["text"] = {
            "format": {
                "type": "json_schema",
                "name": options.response_schema["name"],
                "schema": options.response_schema["schema"],
            }
        }
    return body


# ---------------------------------------------------------------------------------------
# Stream events


class _Item:
    """One output item being streamed (keyed by ``output_index``)."""

    __slots__ = ("content_index", "item_id", "kind")

    def __init__(self, kind: str, content_index: int, item_id: str | None) -> None:
        self.kind = kind
        self.content_index = content_index
        self.item_id = item_id


class ResponsesEventMapper:
    """Maps the SSE events of one Responses stream onto an :class:`AssistantMessageBuilder`
    (an :class:`~._http.SseMapper`).

    Failures raise :class:`~._http.ProviderStreamError`; its message becomes the
    assistant's ``error_message``.
    """

    def __init__(self, builder: AssistantMessageBuilder, model: Model) -> None:
        self.finished = False
        """Set once a terminal response event or ``data: [DONE]`` arrived: nothing after
        it matters."""
        self._terminal = False
        """A terminal response event arrived."""
        self._builder = builder
        self._model = model
        self._items: dict[int, _Item] = {}
        self._reasoning_blocks: dict[str, int] = {}
        """Reasoning item id -> content index, to back-fill encrypted content."""
        self._stop_reason: Literal["stop", "length", "toolUse"] | None = None

    def parse(self, sse: SseEvent) -> Any:
        """The event's JSON (every Responses event carries its ``type``); ``None`` for
        ``data: [DONE]``, which ends the body as the OpenAI client reads it.

        Raises:
            ProviderStreamError: the data is not JSON; or the event is an error as the
                OpenAI client reads it: one with an ``event: error`` line (its ``error``
                member, else the whole data, worded by :func:`client_error_message`), or
                any event whose data has a truthy ``error`` member.
        """
        if sse.data == "[DONE]":
            self.finished = True  # the OpenAI client stops reading here
            return None
        try:
            # Strict, as JSON.parse: no repair, no NaN or Infinity (as pi).
            payload = _EVENT_DECODER.decode(sse.data)
        except ValueError:
            raise ProviderStreamError(MALFORMED_EVENT_JSON) from None
        nested = payload.get("error", UNDEFINED) if isinstance(payload, dict) else UNDEFINED
        if sse.event == "error":
            detail = payload if nested is UNDEFINED or nested is None else nested
            raise ProviderStreamError(client_error_message(detail))
        if nested is not UNDEFINED and js_truthy(nested):
            raise ProviderStreamError(client_error_message(nested))
        if not isinstance(payload, dict):
            return None
        if "type" not in payload and sse.event != "message":
            payload = {**payload, "type": sse.event}
        return payload

    def map(self, event: Any) -> list[AssistantMessageEvent]:
        """Apply one parsed event.

        Raises:
            ProviderStreamError: for an ``error`` or ``response.failed`` event, or an
                incomplete or cancelled response.
        """
        kind = event.get("type")
        builder = self._builder
        if kind == "error":
            code = _js_string(event.get("code", UNDEFINED))
            raise ProviderStreamError(
                f"Error Code {code}: {_js_string(event.get('message', UNDEFINED))}"
            )
        if kind == "response.created":
            self._on_response(event.get("response") or {})
            return []
        if kind == "response.output_item.added":
            return self._on_item_added(event)
        if kind == "response.output_item.done":
            return self._on_item_done(event)
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self.finished = True
            self._on_terminal(kind, event.get("response") or {})
            return []
        item = self._items.get(event.get("output_index", -1))
        if item is None:
            return []
        index = item.content_index
        delta = event.get("delta") or ""
        if item.kind == "reasoning":
            if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
                return [builder.thinking_delta(index, delta)]
            if kind == "response.reasoning_summary_part.done":
                # Summary parts are separate paragraphs of the reasoning text.
                return [builder.thinking_delta(index, "\n\n")]
        elif item.kind == "message":
            if kind in ("response.output_text.delta", "response.refusal.delta"):
                return [builder.text_delta(index, delta)]
        elif kind == "response.function_call_arguments.delta":
            return [builder.tool_call_delta(index, delta)]
        elif kind == "response.function_call_arguments.done" and isinstance(
            event.get("arguments"), str
        ):
            return self._replace_arguments(index, event["arguments"])
        return []

    def finish(self) -> Iterator[AssistantMessageEvent]:
        """Close text and thinking blocks left open, then the terminal ``done`` event.

        Raises:
            ProviderStreamError: the body ended before a terminal response event, without
                a stop reason, or with a tool call still streaming when the stop reason is
                ``toolUse``.
        """
        if not self._terminal:
            raise ProviderStreamError(
                "OpenAI Responses stream ended before a terminal response event"
            )
        if self._stop_reason is None:
            raise ProviderStreamError("OpenAI Responses stream ended without a stop reason")
        builder = self._builder
        content = builder.content
        for index in builder.open_blocks:
            block = content[index]
            # Only calls the agent would run must be complete; a response cut at its
            # length limit keeps its unfinished call (closed below).
            if isinstance(block, ToolCall) and self._stop_reason == "toolUse":
                raise ProviderStreamError(
                    "OpenAI Responses stream completed with an unfinished tool call: "
                    f"{block.name} ({block.id})"
                )
        for index in builder.open_blocks:
            yield builder.end_block(index)
        yield builder.done(self._stop_reason)

    # -- handlers ---------------------------------------------------------------------

    def _on_response(self, response: dict[str, Any]) -> None:
        builder = self._builder
        if response.get("id"):
            builder.response_id = response["id"]
        response_model = response.get("model")
        if response_model and response_model != builder.model:
            builder.response_model = response_model

    def _on_item_added(self, payload: dict[str, Any]) -> list[AssistantMessageEvent]:
        item = payload.get("item") or {}
        kind = item.get("type")
        builder = self._builder
        event: AssistantMessageEvent
        if kind == "reasoning":
            index, event = builder.start_thinking()
            if item.get("id"):
                self._reasoning_blocks[item["id"]] = index
        elif kind == "message":
            index, event = builder.start_text()
        elif kind == "function_call":
            index, event = builder.start_tool_call(
                id=f"{item.get('call_id')}|{item.get('id')}", name=item.get("name") or ""
            )
        else:
            return []
        self._items[payload.get("output_index", -1)] = _Item(kind, index, item.get("id"))
        arguments = item.get("arguments") if kind == "function_call" else None
        if isinstance(arguments, str) and arguments:
            # Arguments that come with the added item count at once (U34).
            return [event, *self._replace_arguments(index, arguments)]
        return [event]

    def _on_item_done(self, payload: dict[str, Any]) -> list[AssistantMessageEvent]:
        item = payload.get("item") or {}
        opened: list[AssistantMessageEvent] = []
        if payload.get("output_index", -1) not in self._items:
            # An item seen only when done: open its block from the done item.
            opened = self._on_item_added(payload)
        tracked = self._items.pop(payload.get("output_index", -1), None)
        if tracked is None:
            return []
        return opened + self._close_item(tracked, item)

    def _close_item(self, tracked: _Item, item: dict[str, Any]) -> list[AssistantMessageEvent]:
        builder = self._builder
        index = tracked.content_index
        if tracked.kind == "reasoning":
            summary = "\n\n".join(
                part.get("text") or ""
                for part in item.get("summary") or []
                if isinstance(part, dict)
            )
            content = "\n\n".join(
                part.get("text") or ""
                for part in item.get("content") or []
                if isinstance(part, dict)
            )
            text = summary or content or None
            return [builder.end_thinking(index, thinking=text, signature=compact_json(item))]
        if tracked.kind == "message":
            text = "".join(
                (part.get("text") if part.get("type") == "output_text" else part.get("refusal"))
                or ""
                for part in item.get("content") or []
                if isinstance(part, dict)
            )
            signature: dict[str, Any] = {"v": 1, "id": item.get("id") or tracked.item_id}
            if item.get("phase"):
                signature["phase"] = item["phase"]
            return [builder.end_text(index, text=text, text_signature=compact_json(signature))]
        events: list[AssistantMessageEvent] = []
        if isinstance(item.get("arguments"), str):
            events.extend(self._replace_arguments(index, item["arguments"]))
        if item.get("call_id") or item.get("id"):
            builder.update_tool_call(
                index, id=f"{item.get('call_id')}|{item.get('id') or tracked.item_id}"
            )
        events.append(builder.end_tool_call(index))
        return events

    def _replace_arguments(self, index: int, full_text: str) -> list[AssistantMessageEvent]:
        event = self._builder.replace_tool_call_arguments(index, full_text)
        return [] if event is None else [event]

    def _on_terminal(self, kind: str, response: dict[str, Any]) -> None:
        self._terminal = True
        self._on_response(response)
        self._update_usage(response.get("usage"))
        if kind != "response.failed":
            self._backfill_reasoning(response.get("output"))
        status = response.get("status")
        details = response.get("incomplete_details") or {}
        reason = details.get("reason") if isinstance(details, dict) else None
        if kind == "response.completed" and status in ("failed", "cancelled"):
            raise ProviderStreamError("An unknown error occurred")
        if kind == "response.failed" or status == "failed":
            error = response.get("error")
            if js_truthy(error):
                fields = error if isinstance(error, dict) else {}
                code = fields.get("code")
                text = fields.get("message")
                message = (
                    f"{_js_string(code) if js_truthy(code) else 'unknown'}: "
                    f"{_js_string(text) if js_truthy(text) else 'no message'}"
                )
            elif js_truthy(reason):
                message = f"incomplete: {reason}"
            else:
                message = "Unknown error (no error details in response)"
            raise ProviderStreamError(message)
        if kind == "response.incomplete" or status == "incomplete":
            if reason == "max_output_tokens":
                self._stop_reason = "length"
                return
            if not reason:
                raise ProviderStreamError("Response incomplete without a provider reason")
            raise ProviderStreamError(f"Response incomplete: {reason}")
        if status == "cancelled":
            raise ProviderStreamError("Response cancelled")
        if status not in (None, "completed", "in_progress", "queued"):
            raise ProviderStreamError(f"Unhandled stop reason: {status}")
        has_tool_call = any(isinstance(block, ToolCall) for block in self._builder.content)
        self._stop_reason = "toolUse" if has_tool_call else "stop"
        self._builder.stop_reason = self._stop_reason

    def _backfill_reasoning(self, output: Any) -> None:
        # Some servers only put the encrypted reasoning into the final response object.
        if not isinstance(output, list):
            return
        content = self._builder.content
        for item in output:
            if not isinstance(item, dict) or item.get("type") != "reasoning":
                continue
            index = self._reasoning_blocks.get(item.get("id") or "")
            if index is None or not item.get("encrypted_content"):
                continue
            block = content[index]
            if not isinstance(block, ThinkingContent):
                continue
            stored: Any = None
            if block.thinking_signature:
                try:
                    stored = json.loads(block.thinking_signature)
                except ValueError:
                    stored = None
            if isinstance(stored, dict) and stored.get("encrypted_content"):
                continue
            merged = (
                {**stored, "encrypted_content": item["encrypted_content"]}
                if isinstance(stored, dict)
                else item
            )
            self._builder.set_thinking_signature(index, compact_json(merged))

    def _update_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        input_details = usage.get("input_tokens_details") or {}
        output_details = usage.get("output_tokens_details") or {}
        cache_read = int(input_details.get("cached_tokens") or 0)
        cache_write = int(input_details.get("cache_write_tokens") or 0)
        input_tokens = max(0, int(usage.get("input_tokens") or 0) - cache_read - cache_write)
        output_tokens = int(usage.get("output_tokens") or 0)
        total = usage.get("total_tokens")
        self._builder.usage = calculate_cost(
            self._model,
            Usage(
                input=input_tokens,
                output=output_tokens,
                cache_read=cache_read,
                cache_write=cache_write,
                total_tokens=(
                    int(total)
                    if total is not None
                    else input_tokens + output_tokens + cache_read + cache_write
                ),
                reasoning=int(output_details.get("reasoning_tokens") or 0),
            ),
        )


# ---------------------------------------------------------------------------------------
# Wiring into the shared pipeline


def _provider_label(model: Model) -> str:
    return "OpenAI" if model.provider == "openai" else model.provider


_OPENCODE_SESSION = "x-opencode-session"


def _is_opencode(model: Model) -> bool:
    if model.provider in ("opencode", "opencode-go"):
        return True
    try:
        return httpx.URL(model.base_url).host == "opencode.ai"
    except httpx.InvalidURL:
        return False


def build_responses_request(
    model: Model, context: LlmContext, options: StreamOptions, api_key: str | None
) -> ProviderRequest:
    """The HTTP request of one Responses call (``POST {base_url}/responses``).

    The transcript is collapsed (system messages fold into the leading instructions) and
    transformed for ``model`` first. With a ``session_id`` (and a cache retention other
    than ``"none"``) the session-affinity headers of ``compat.sessionAffinityFormat`` are
    sent: ``x-session-id`` for ``"openrouter"`` (the default for OpenRouter),
    ``session-id`` and ``x-client-request-id`` for ``"openai"`` (the default otherwise),
    only ``x-client-request-id`` for any other value. OpenCode also gets its
    ``x-opencode-session`` routing header unless the caller sets it.
    """
    messages = transform_messages(
        collapse_system_messages(context.messages),
        model,
        lambda tool_call_id, target, _source: normalize_responses_tool_call_id(
            tool_call_id, target
        ),
    )
    retention = cache_retention(model)
    body = build_responses_body(
        model, messages, options, cache_retention=retention, transcript=context.messages
    )
    headers: dict[str, str] = {}
    session_id = options.session_id
    if session_id and retention != "none":
        affinity = compat_value(model, "sessionAffinityFormat")
        if affinity is None:
            openrouter = is_openrouter(model)
            affinity = "openrouter" if openrouter else "openai"
        if affinity == "openrouter":
            headers["x-session-id"] = session_id
        else:
            if affinity == "openai":
                headers["session-id"] = session_id
            headers["x-client-request-id"] = session_id
    caller_headers = {name.lower() for name in options.headers or {}}
    if session_id and _is_opencode(model) and _OPENCODE_SESSION not in caller_headers:
        headers[_OPENCODE_SESSION] = session_id
    return ProviderRequest(
        url=f"{model.base_url.rstrip('/')}/responses",
        body=body,
        headers=headers,
        auth_headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
    )


def openai_http_error_parts(error: HttpError) -> tuple[str, str | None]:
    """An HTTP error of the OpenAI APIs as pi reads it: the OpenAI client's message (see
    :func:`~._request.client_error`), and the body pi shows in its place, or ``None``.

    The body is the compact JSON of an error that is a non-empty object, cut at 4000
    characters; it is ``None`` when the message already contains it (an error object
    without a message, whose JSON the client quotes) or there is no such object.
    """
    message, detail = client_error(error)
    if not (isinstance(detail, dict) and detail):
        return message, None
    shown = truncate_json_error(js_stringify(detail))
    return message, (None if shown in message else shown)


def format_responses_http_error(error: HttpError, model: Model) -> str:
    """``<Provider> API error (<status>): <text>`` (``OpenAI`` for provider ``openai``), the
    text as the OpenAI client and pi word it (see :func:`openai_http_error_parts`)."""
    message, body = openai_http_error_parts(error)
    return f"{_provider_label(model)} API error ({error.status}): {body or message}"


OPENAI_RESPONSES = HttpApi(
    build_request=build_responses_request,
    create_mapper=ResponsesEventMapper,
    format_http_error=format_responses_http_error,
    format_retry_error=client_error_text,
)
"""The ``openai-responses`` wire API for :func:`~._http.stream_http`."""


def stream_openai_responses(
    model: Model, context: LlmContext, options: StreamOptions, env: HttpEnv
) -> AsyncGenerator[AssistantMessageEvent, None]:
    """Stream one OpenAI Responses response (the ``openai-responses`` API).

    Yields ``start``, block events and one terminal ``done`` or ``error`` event; failures
    (HTTP status, ``error``/``response.failed`` events, stream ending early, abort) are
    encoded in the terminal event, never raised. Cancelling the consumer's scope raises
    ``trio.Cancelled`` out of the iteration and closes the HTTP response.
    """
    return stream_http(OPENAI_RESPONSES, model, context, options, env)
