"""The ``openai-completions`` API: OpenAI Chat Completions and every compatible host.

OpenAI itself, OpenRouter, Groq, DeepSeek, Ollama, vLLM, llama.cpp server and other
servers that speak ``POST {base_url}/chat/completions`` with ``stream: true``. Hosts
differ in small ways; :func:`detect_compat` guesses the differences from the provider id
and base URL, and explicit ``Model.compat`` values (upstream camelCase names, e.g.
``{"supportsStore": False, "maxTokensField": "max_tokens"}``) win, as in pi 1.6.0.

Streaming shape (as upstream): at most one thinking block and one text block per response
(later text deltas append to the same text block, even after tool calls started),
tool-call blocks keyed by the stream's ``index``, and **all** ``*_end`` events after the
body ended, in content order, right before ``done``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import Any, Literal

import attrs

from .._events import AssistantMessageEvent
from .._messages import (
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
)
from .._streaming import LlmContext, StreamOptions
from .._transcript import (
    collapse_system_messages,
    get_system_message_text,
    render_system_message_update,
)
from ._builder import MALFORMED_EVENT_JSON, AssistantMessageBuilder
from ._cost import (
    calculate_cost,
    clamp_max_tokens_to_context,
    provider_billed_total,
    requested_thinking_level,
    with_billed_total,
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
    parse_sse_json,
    stream_http,
)
from ._openai_responses import openai_http_error_parts, short_hash
from ._request import client_error_message, client_error_text
from ._strict_tools import strict_schema_for
from ._transform import sanitize_surrogates, transform_messages

__all__ = [
    "OPENAI_COMPLETIONS",
    "OpenAICompletionsCompat",
    "build_openai_completions_body",
    "detect_compat",
    "format_openai_completions_error",
    "openai_error_text",
    "normalize_openai_tool_call_id",
    "stream_openai_completions",
]

_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
_ASSISTANT_AFTER_TOOLS = "I have processed the tool results."
_TOOL_IMAGES_INTRO = "Attached image(s) from tool result:"


# ---------------------------------------------------------------------------------------
# Compatibility switches


@attrs.frozen(kw_only=True)
class OpenAICompletionsCompat:
    """The host differences :func:`build_openai_completions_body` honours."""

    supports_store: bool = True
    """Send ``store: false``."""
    supports_developer_role: bool = False
    """Send the system prompt as a ``developer`` message to reasoning models."""
    supports_reasoning_effort: bool = True
    """Send the thinking level (``reasoning_effort`` or OpenRouter's ``reasoning``)."""
    supports_usage_in_streaming: bool = True
    """Send ``stream_options: {include_usage: true}``."""
    supports_finish_reason: bool = True
    """A stream without ``finish_reason`` is an error (else the outcome is inferred)."""
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    """The name of the output-limit field."""
    requires_tool_result_name: bool = False
    """Tool messages carry the tool's ``name``."""
    requires_assistant_after_tool_result: bool = False
    """A user message may not directly follow tool results (an assistant line is
    inserted)."""
    requires_non_null_assistant_content: bool = False
    """Assistant messages without text send ``content: ""`` instead of ``null``."""
    requires_tools_with_tool_history: bool = False
    """Send ``tools: []`` when the history has tool calls but no tools are declared."""
    thinking_format: Literal["openai", "openrouter"] = "openai"
    """``reasoning_effort: <level>`` or OpenRouter's ``reasoning: {effort: <level>}``."""
    supports_strict_mode: bool = False
    """Send ``strict`` on function tools."""
    supports_long_cache_retention: bool = True
    """Long prompt-cache retention sends ``prompt_cache_retention: "24h"`` (and a
    ``prompt_cache_key``)."""
    prompt_cache_key_mode: Literal["auto", "enabled", "disabled"] = "auto"
    """``prompt_cache_key``: ``"auto"`` sends it to api.openai.com and with long retention,
    ``"enabled"`` always (with a session id), ``"disabled"`` never."""


def detect_compat(model: Model) -> OpenAICompletionsCompat:
    """Compatibility switches for ``model``: guessed from provider and base URL as pi 1.6.0
    does (substring tests on the base URL), then overridden by every switch
    ``model.compat`` sets (camelCase or snake_case names)."""
    provider, url = model.provider, model.base_url

    def host(*names: str) -> bool:
        return any(name in url for name in names)

    zai = provider in ("zai", "zai-coding-cn") or host("api.z.ai", "open.bigmodel.cn")
    together = provider == "together" or host("api.together.ai", "api.together.xyz")
    moonshot = provider in ("moonshotai", "moonshotai-cn") or host("api.moonshot.")
    openrouter = provider == "openrouter" or host("openrouter.ai")
    cloudflare_workers = provider == "cloudflare-workers-ai" or host("api.cloudflare.com")
    cloudflare_gateway = provider == "cloudflare-ai-gateway" or host("gateway.ai.cloudflare.com")
    nvidia = provider == "nvidia" or host("integrate.api.nvidia.com")
    ant_ling = provider == "ant-ling" or host("api.ant-ling.com")
    cerebras = provider == "cerebras" or host("cerebras.ai")
    deepseek = provider == "deepseek" or "deepseek.com" in url.lower()
    grok = provider == "xai" or host("api.x.ai")
    chutes = host("chutes.ai")
    non_standard = (
        nvidia
        or cerebras
        or grok
        or together
        or chutes
        or deepseek
        or zai
        or moonshot
        or provider == "opencode"
        or host("opencode.ai")
        or cloudflare_workers
        or cloudflare_gateway
        or ant_ling
    )
    max_tokens_field = (
        chutes
        or deepseek
        or moonshot
        or cloudflare_gateway
        or together
        or nvidia
        or ant_ling
        or zai
    )
    detected = OpenAICompletionsCompat(
        supports_store=not non_standard,
        supports_developer_role=provider == "openai" or host("api.openai.com"),
        supports_reasoning_effort=not (
            grok or zai or moonshot or together or cloudflare_gateway or nvidia or ant_ling
        ),
        max_tokens_field="max_tokens" if max_tokens_field else "max_completion_tokens",
        thinking_format="openrouter"
        if openrouter and not (deepseek or zai or together or ant_ling)
        else "openai",
        supports_long_cache_retention=not (
            together or cloudflare_workers or cloudflare_gateway or nvidia or ant_ling
        ),
    )
    overrides: dict[str, Any] = {}
    for field in attrs.fields(OpenAICompletionsCompat):
        head, *rest = field.name.split("_")
        camel = head + "".join(part.title() for part in rest)
        camel = camel.replace("OpenAi", "OpenAI")
        value = compat_value(model, camel)
        if value is not None:
            overrides[field.name] = value
    return attrs.evolve(detected, **overrides)


# ---------------------------------------------------------------------------------------
# Request building


def normalize_openai_tool_call_id(tool_call_id: str, model: Model, source: AssistantMessage) -> str:
    """Make another provider's tool-call id acceptable to Chat Completions.

    Responses-style ids ``<call>|<item>`` become ``<call>_<item>`` with characters outside
    ``[A-Za-z0-9_-]`` replaced by ``_``, shortened to 40 characters with a hash suffix when
    longer (the first 31 characters of the call part, ``_`` and 8 characters of
    :func:`~._openai_responses.short_hash` of the whole id); for provider ``openai`` other
    ids are cut to 40 characters.
    """
    if "|" in tool_call_id:
        call, _, item = tool_call_id.partition("|")
        call = re.sub(r"[^A-Za-z0-9_-]", "_", call)
        item = re.sub(r"[^A-Za-z0-9_-]", "_", item)
        joined = f"{call}_{item}" if item else call
        if len(joined) > 40:
            joined = f"{call[:31]}_{short_hash(tool_call_id)[:8]}"
        return joined
    if model.provider == "openai" and len(tool_call_id) > 40:
        return tool_call_id[:40]
    return tool_call_id


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"},
    }


def _user_message(message: UserMessage) -> dict[str, Any] | None:
    if isinstance(message.content, str):
        return {"role": "user", "content": sanitize_surrogates(message.content)}
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ImageContent):
            parts.append(_image_part(block))
        elif block.text:
            parts.append({"type": "text", "text": sanitize_surrogates(block.text)})
    return {"role": "user", "content": parts} if parts else None


def _assistant_message(
    message: AssistantMessage, compat: OpenAICompletionsCompat, model: Model
) -> dict[str, Any] | None:
    texts = [b.text for b in message.content if isinstance(b, TextContent) and b.text.strip()]
    thinking = [b for b in message.content if isinstance(b, ThinkingContent)]
    calls = [b for b in message.content if isinstance(b, ToolCall)]
    content: str | None = sanitize_surrogates("".join(texts)) if texts else None
    if content is None and (
        compat.requires_non_null_assistant_content or compat.requires_assistant_after_tool_result
    ):
        content = ""
    result: dict[str, Any] = {"role": "assistant", "content": content}
    details = next(
        (d for d in map(_replayable_details, thinking) if d is not None),
        None,
    )
    if details is None:
        # Encrypted reasoning stored on tool calls by older versions.
        legacy = [d for d in (_legacy_detail(c.thought_signature) for c in calls) if d]
        details = legacy or None
    visible = [b for b in thinking if b.thinking.strip()]
    field = visible[0].thinking_signature if visible else None
    if field == "reasoning" and model.provider == "opencode-go":
        field = "reasoning_content"  # what that host reads back
    if field in _REASONING_FIELDS and details is None:
        result[field] = sanitize_surrogates("\n".join(b.thinking for b in visible))
    if details is not None:
        result["reasoning_details"] = details
    if calls:
        result["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": compact_json(call.arguments)},
            }
            for call in calls
        ]
    if not texts and not calls:
        return None
    return result


def _replayable_details(block: ThinkingContent) -> list[Any] | None:
    # The reasoning_details stored as a thinking signature, when every entry is valid.
    signature = block.thinking_signature
    if not signature:
        return None
    try:
        details = json.loads(signature)
    except ValueError:
        return None
    if not isinstance(details, list) or not details:
        return None
    if not all(is_valid_reasoning_detail(entry) for entry in details):
        return None
    return details


def _legacy_detail(signature: str | None) -> dict[str, Any] | None:
    # A tool call's signature holding one encrypted reasoning_details entry with an id.
    if not signature:
        return None
    try:
        detail = json.loads(signature)
    except ValueError:
        return None
    if (
        is_valid_reasoning_detail(detail)
        and detail["type"] == "reasoning.encrypted"
        and isinstance(detail.get("id"), str)
        and detail["id"]
        and detail["data"]
    ):
        return dict(detail)
    return None


def _tool_result_text(message: ToolResultMessage) -> str:
    text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    if text.strip():
        return sanitize_surrogates(text)
    has_images = any(isinstance(b, ImageContent) for b in message.content)
    return "(see attached image)" if has_images else "(no tool output)"


def _convert_messages(
    model: Model, messages: Sequence[Message], compat: OpenAICompletionsCompat
) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = []
    system_role = "developer" if model.reasoning and compat.supports_developer_role else "system"
    pending_images: list[dict[str, Any]] = []

    def bridge_after_tool_results() -> None:
        if compat.requires_assistant_after_tool_result and result and result[-1]["role"] == "tool":
            result.append({"role": "assistant", "content": _ASSISTANT_AFTER_TOOLS})

    def flush_images() -> None:
        if pending_images:
            intro = {"type": "text", "text": _TOOL_IMAGES_INTRO}
            bridge_after_tool_results()
            result.append({"role": "user", "content": [intro, *pending_images]})
            pending_images.clear()

    for position, message in enumerate(messages):
        if not isinstance(message, ToolResultMessage):
            flush_images()
        if isinstance(message, SystemMessage):
            text = (
                get_system_message_text(message)
                if position == 0
                else render_system_message_update(message)
            )
            if text:
                result.append({"role": system_role, "content": sanitize_surrogates(text)})
        elif isinstance(message, UserMessage):
            converted = _user_message(message)
            if converted is None:
                continue
            bridge_after_tool_results()
            result.append(converted)
        elif isinstance(message, AssistantMessage):
            converted = _assistant_message(message, compat, model)
            if converted is not None:
                result.append(converted)
        elif isinstance(message, ToolResultMessage):
            tool: dict[str, Any] = {
                "role": "tool",
                "tool_call_id": message.tool_call_id,
                "content": _tool_result_text(message),
            }
            if compat.requires_tool_result_name:
                tool["name"] = message.tool_name
            result.append(tool)
            if "image" in model.input:
                pending_images.extend(
                    _image_part(b) for b in message.content if isinstance(b, ImageContent)
                )
    flush_images()
    return result


def _tools(
    model: Model,
    messages: Sequence[Message],
    compat: OpenAICompletionsCompat,
    transcript: Sequence[Message],
) -> list[dict[str, Any]] | None:
    # ``transcript`` is the conversation as given: its tool history counts for
    # requires_tools_with_tool_history even when a failed turn is not sent (as upstream).
    head = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
    declarations = (head.tools_added or []) if head is not None else []
    tools: list[dict[str, Any]] = []
    for tool in declarations:
        strict_schema = strict_schema_for(
            tool, supported=compat.supports_strict_mode, provider=model.provider
        )
        function: dict[str, Any] = {
            "name": tool.name,
            "description": sanitize_surrogates(tool.description),
            "parameters": strict_schema or tool.parameters,
        }
        if compat.supports_strict_mode:
            function["strict"] = strict_schema is not None
        tools.append({"type": "function", "function": function})
    if tools:
        return tools
    if compat.requires_tools_with_tool_history and any(
        isinstance(m, ToolResultMessage)
        or (isinstance(m, AssistantMessage) and any(isinstance(b, ToolCall) for b in m.content))
        for m in transcript
    ):
        return []
    return None


def _set_thinking_level(
    body: dict[str, Any], model: Model, options: StreamOptions, compat: OpenAICompletionsCompat
) -> None:
    # The requested level mapped through ``thinking_level_map``.
    level_map = model.thinking_level_map or {}
    level = requested_thinking_level(model, options.reasoning)
    effort = None if level == "off" else level
    if compat.thinking_format == "openrouter":
        # OpenRouter's reasoning object, whatever supports_reasoning_effort says
        if effort is not None:
            mapped = level_map.get(effort)
            body["reasoning"] = {"effort": effort if mapped is None else mapped}
        elif not ("off" in level_map and level_map["off"] is None):
            off = level_map.get("off")
            body["reasoning"] = {"effort": "none" if off is None else off}
    elif compat.supports_reasoning_effort:
        if effort is not None:
            mapped = level_map.get(effort)
            body["reasoning_effort"] = effort if mapped is None else mapped
        elif isinstance(level_map.get("off"), str):
            body["reasoning_effort"] = level_map["off"]


def build_openai_completions_body(
    model: Model, context: LlmContext, options: StreamOptions
) -> dict[str, Any]:
    """The JSON body of a streaming Chat Completions request (before ``on_payload``).

    The transcript is collapsed (one leading system/developer message), prepared by
    :func:`~._transform.transform_messages` and converted; the thinking level becomes
    ``reasoning_effort`` (or OpenRouter's ``reasoning``) after clamping to the model's
    supported levels.
    """
    compat = detect_compat(model)
    collapsed: list[Message] = collapse_system_messages(context.messages)
    messages = transform_messages(collapsed, model, normalize_openai_tool_call_id)
    body: dict[str, Any] = {
        "model": model.id,
        "messages": _convert_messages(model, messages, compat),
        "stream": True,
    }
    if compat.supports_usage_in_streaming:
        body["stream_options"] = {"include_usage": True}
    if compat.supports_store:
        body["store"] = False
    max_tokens = options.max_tokens or model.max_tokens
    if max_tokens > 0:
        # The input size is estimated from the transcript as given, as upstream does.
        body[compat.max_tokens_field] = clamp_max_tokens_to_context(
            model, context.messages, max_tokens
        )
    if options.temperature is not None:
        body["temperature"] = options.temperature
    tools = _tools(model, messages, compat, context.messages)
    if tools is not None:
        body["tools"] = tools
    if model.reasoning:
        _set_thinking_level(body, model, options, compat)
    retention = cache_retention(model)
    long_retention = retention == "long" and compat.supports_long_cache_retention
    key_mode = compat.prompt_cache_key_mode
    if (
        options.session_id
        and retention != "none"
        and (
            key_mode == "enabled"
            or (key_mode == "auto" and ("api.openai.com" in model.base_url or long_retention))
        )
    ):
        body["prompt_cache_key"] = options.session_id[:64]
    if long_retention:
        body["prompt_cache_retention"] = "24h"
    if options.response_schema is not None and compat_value(model, "supportsJsonSchema") is True:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": options.response_schema["name"],
                "schema": options.response_schema["schema"],
            },
        }
    return body


def _build_request(
    model: Model, context: LlmContext, options: StreamOptions, api_key: str | None
) -> ProviderRequest:
    return ProviderRequest(
        url=model.base_url.rstrip("/") + "/chat/completions",
        body=build_openai_completions_body(model, context, options),
        auth_headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
    )


# ---------------------------------------------------------------------------------------
# Errors


def openai_error_text(error: HttpError) -> str:
    """An HTTP error as pi words it for Chat Completions: the OpenAI client's message
    (``<status> <message>``, ``<status> <compact JSON>`` for an error object without a
    message, ``<status> <body as received>`` for a body that is not JSON, ``<status>
    status code (no body)``), or ``<status>: <compact JSON>`` for an error object the
    message does not carry, cut at 4000 characters with ``... [truncated N chars]``
    (see :func:`~._openai_responses.openai_http_error_parts`). JSON is re-encoded, so
    escaped forms of a secret come out plain, where redaction finds them.
    """
    message, body = openai_http_error_parts(error)
    return message if body is None else f"{error.status}: {body}"


def format_openai_completions_error(error: HttpError, model: Model) -> str:
    """Word an HTTP error as upstream does (:func:`openai_error_text`); OpenRouter's
    ``error.metadata.raw`` follows on a new line unless the text already contains it."""
    message = openai_error_text(error)
    try:
        parsed = json.loads(error.body) if error.body else None
    except ValueError:
        parsed = None
    detail = parsed.get("error") if isinstance(parsed, dict) else None
    metadata = detail.get("metadata") if isinstance(detail, dict) else None
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if isinstance(raw, str) and raw and raw not in message:
        message += "\n" + raw
    return message


# ---------------------------------------------------------------------------------------
# SSE mapping


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_valid_reasoning_detail(entry: Any) -> bool:
    """Whether ``entry`` is a ``reasoning_details`` entry upstream accepts.

    An object whose ``id`` is absent, null or a string, ``format`` absent or a string,
    ``index`` absent or a number, and which is ``reasoning.summary`` with a string
    ``summary``, ``reasoning.encrypted`` with a string ``data``, or ``reasoning.text``
    with a string ``text`` and a ``signature`` that is absent, null or a string.
    """
    if not isinstance(entry, dict):
        return False
    if entry.get("id") is not None and not isinstance(entry["id"], str):
        return False
    if "format" in entry and not isinstance(entry["format"], str):
        return False
    if "index" in entry and not _is_number(entry["index"]):
        return False
    kind = entry.get("type")
    if kind == "reasoning.summary":
        return isinstance(entry.get("summary"), str)
    if kind == "reasoning.encrypted":
        return isinstance(entry.get("data"), str)
    if kind == "reasoning.text":
        signature = entry.get("signature")
        return isinstance(entry.get("text"), str) and (
            signature is None or isinstance(signature, str)
        )
    return False


_MERGED_FIELD = {"reasoning.text": "text", "reasoning.summary": "summary"}


class _ReasoningDetails:
    """The streamed ``reasoning_details`` entries, merged in linear time.

    Text and summary entries arrive in pieces: a piece of the same kind as the previous
    entry extends it (first non-empty signature kept, missing fields filled). The pieces
    of the last entry are joined only when the entries are read (:meth:`json`).
    """

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self._pieces: list[str] = []  # of the last entry's merged field

    def merge(self, entry: dict[str, Any]) -> None:
        field = _MERGED_FIELD.get(entry["type"])
        last = self.entries[-1] if self.entries else None
        if field is None or last is None or last.get("type") != entry["type"]:
            self._join()
            self.entries.append(dict(entry))
            self._pieces = [entry[field]] if field is not None else []
            return
        _merge_reasoning_detail(last, entry, field, self._pieces)

    def json(self) -> str:
        """The merged entries as compact JSON (the thinking block's signature)."""
        self._join()
        return compact_json(self.entries)

    def _join(self) -> None:
        if len(self._pieces) > 1:
            field = _MERGED_FIELD[self.entries[-1]["type"]]
            self.entries[-1][field] = "".join(self._pieces)
            self._pieces = [self.entries[-1][field]]


def _merge_reasoning_detail(
    last: dict[str, Any], entry: dict[str, Any], field: str, pieces: list[str]
) -> None:
    for key, value in entry.items():
        if key == field:
            pieces.append(value)
        elif key == "signature":
            if (not last.get("signature") and value) or "signature" not in last:
                last["signature"] = value
        elif last.get(key) is None:
            last[key] = value


def _map_usage(model: Model, raw: dict[str, Any]) -> Usage:
    def number(value: Any) -> int:
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0

    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    cache_read_raw = prompt_details.get("cached_tokens")
    if cache_read_raw is None:
        cache_read_raw = raw.get("prompt_cache_hit_tokens")
    if cache_read_raw is None:
        cache_read_raw = raw.get("cached_tokens")
    cache_read = number(cache_read_raw)
    cache_write = number(prompt_details.get("cache_write_tokens"))
    input_tokens = max(0, number(raw.get("prompt_tokens")) - cache_read - cache_write)
    output = number(raw.get("completion_tokens"))
    reasoning = number(completion_details.get("reasoning_tokens")) or number(
        raw.get("reasoning_tokens")
    )
    usage = calculate_cost(
        model,
        Usage(
            input=input_tokens,
            output=output,
            cache_read=cache_read,
            cache_write=cache_write,
            total_tokens=input_tokens + output + cache_read + cache_write,
            reasoning=reasoning,
        ),
    )
    # OpenRouter reports what it billed; that beats our price table.
    return with_billed_total(usage, provider_billed_total(model, raw))


def _stream_error_text(error: Any) -> str:
    # An error inside the stream as the OpenAI client words it (no status); upstream adds
    # OpenRouter's ``metadata.raw`` on a new line.
    text = client_error_message(error)
    metadata = error.get("metadata") if isinstance(error, dict) else None
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if isinstance(raw, str) and raw and raw not in text:
        text = f"{text}\n{raw}"
    return text


def _finish_outcome(reason: str) -> tuple[Literal["stop", "length", "toolUse"] | None, str]:
    if reason in ("stop", "end"):
        return "stop", ""
    if reason == "length":
        return "length", ""
    if reason in ("tool_calls", "function_call"):
        return "toolUse", ""
    return None, f"Provider finish_reason: {reason}"


class _CompletionsMapper:
    """Maps Chat Completions chunks onto the builder (one per response)."""

    def __init__(self, builder: AssistantMessageBuilder, model: Model) -> None:
        self.finished = False
        self._builder = builder
        self._model = model
        self._compat = detect_compat(model)
        self._text: int | None = None
        self._thinking: int | None = None
        self._tools: dict[Any, int] = {}
        self._reasoning_details = _ReasoningDetails()
        self._finish_reason: str | None = None

    def parse(self, sse: SseEvent) -> Any:
        if sse.data.strip() == "[DONE]":
            self.finished = True
            return None
        if not sse.data.strip():
            return None
        try:
            parsed = parse_sse_json(sse.data)
        except ProviderStreamError:
            raise ProviderStreamError(MALFORMED_EVENT_JSON) from None
        if sse.event == "error":
            # A named error event fails the response with its error (or its data).
            detail = parsed.get("error") if isinstance(parsed, dict) else None
            raise ProviderStreamError(_stream_error_text(parsed if detail is None else detail))
        return parsed

    def map(self, chunk: Any) -> Iterator[AssistantMessageEvent]:
        builder = self._builder
        if not isinstance(chunk, dict):
            if isinstance(chunk, list) and not builder.response_id:
                builder.response_id = None  # an array has no id (an empty one is dropped)
            return  # upstream skips chunks that are not objects
        error = chunk.get("error")
        if error:
            raise ProviderStreamError(_stream_error_text(error))
        if not builder.response_id:
            # The first id, as upstream keeps it (an empty id until a non-empty one).
            chunk_id = chunk.get("id")
            builder.response_id = chunk_id if isinstance(chunk_id, str) else None
        reported_model = chunk.get("model")
        if (
            builder.response_model is None
            and isinstance(reported_model, str)
            and reported_model
            and reported_model != self._model.id
        ):
            builder.response_model = reported_model
        choices = chunk.get("choices") or []
        choice = choices[0] if choices and isinstance(choices[0], dict) else {}
        usage = chunk.get("usage") or choice.get("usage")
        if isinstance(usage, dict):
            builder.usage = _map_usage(self._model, usage)
        delta = choice.get("delta") or {}
        for field in _REASONING_FIELDS:
            value = delta.get(field)
            if isinstance(value, str) and value:
                if self._thinking is None:
                    signature = field
                    if field == "reasoning" and self._model.provider == "opencode-go":
                        signature = "reasoning_content"  # that host reads it back there
                    self._thinking, start = builder.start_thinking(signature=signature)
                    yield start
                yield builder.thinking_delta(self._thinking, value)
                break
        details = delta.get("reasoning_details")
        if isinstance(details, list):
            for entry in details:
                if not is_valid_reasoning_detail(entry):
                    continue
                if self._thinking is None:
                    self._thinking, start = builder.start_thinking(signature="reasoning_details")
                    yield start
                self._reasoning_details.merge(entry)
                # Read when the block ends or the message is read whole, so a response
                # that fails later keeps them too.
                builder.defer_thinking_signature(self._thinking, self._reasoning_details.json)
        content = delta.get("content")
        if isinstance(content, str) and content:
            if self._text is None:
                self._text, start_text = builder.start_text()
                yield start_text
            yield builder.text_delta(self._text, content)
        for call in delta.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            key = call.get("index")
            if key is None:
                key = call.get("id")
            function = call.get("function") or {}
            raw_name = function.get("name")
            name = raw_name if isinstance(raw_name, str) else ""
            index = self._tools.get(key)
            if index is None:
                index, start_call = builder.start_tool_call(id=call.get("id") or "", name=name)
                self._tools[key] = index
                yield start_call
            elif name:
                block = builder.content[index]
                if isinstance(block, ToolCall) and not block.name:
                    builder.update_tool_call(index, name=name)
            arguments = function.get("arguments")
            yield builder.tool_call_delta(index, arguments if isinstance(arguments, str) else "")
        finish_reason = choice.get("finish_reason")
        if isinstance(finish_reason, str) and finish_reason:
            self._finish_reason = finish_reason

    def finish(self) -> Iterator[AssistantMessageEvent]:
        builder = self._builder
        for index in builder.open_blocks:
            yield builder.end_block(index)
        has_tool_calls = bool(self._tools)
        if self._finish_reason is None:
            if self._compat.supports_finish_reason:
                raise ProviderStreamError("Stream ended without finish_reason")
            yield builder.done("toolUse" if has_tool_calls else "stop")
            return
        outcome, error = _finish_outcome(self._finish_reason)
        if outcome is None:
            raise ProviderStreamError(error)
        yield builder.done(outcome)


OPENAI_COMPLETIONS = HttpApi(
    build_request=_build_request,
    create_mapper=_CompletionsMapper,
    format_http_error=format_openai_completions_error,
    format_retry_error=client_error_text,
)
"""The ``openai-completions`` wire API for :func:`~._http.stream_http`."""


def stream_openai_completions(
    model: Model, context: LlmContext, options: StreamOptions, env: HttpEnv
) -> AsyncGenerator[AssistantMessageEvent, None]:
    """Stream one Chat Completions response (a built-in API of :class:`Models`).

    Returns the async generator of :func:`~._http.stream_http` (see there for the event
    contract, failures, abort and cancellation); close it when stopping early.
    """
    return stream_http(OPENAI_COMPLETIONS, model, context, options, env)
