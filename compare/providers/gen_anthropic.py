"""Cases for ``anthropic-messages``: requests from random transcripts, SSE message events.

Requests: every compat switch trio_agent models (cache control on tools, long retention,
temperature, empty signatures, eager tool input streaming, strict tools, adaptive thinking,
session affinity, cache retention), thinking levels and budgets (a budget of 0, level maps),
max tokens against small context windows, small output limits (model and option) with
reasoning, temperature, session ids, model and option
headers (``anthropic-beta`` included), images, tools, cross-model replays, redacted and
unsigned thinking, odd tool-call ids, orphaned calls, failed turns and later system messages.

Responses: text, thinking with signatures, redacted thinking, tool calls with arguments cut
anywhere, every stop reason, usage variants, HTTP errors, retries, stream ``error`` events,
malformed data, disconnects, aborts and SSE framing variants.

``DOCUMENTED`` lists the differences docs/differences.md (or a KEEP row of parity.md)
describes, each as a narrow normalisation of both views.
"""

from __future__ import annotations

import copy
import json
import random
import re
from typing import Any

import gen_common as g

API = "anthropic-messages"

# ---------------------------------------------------------------------------------------
# Model and options


def _model(rng: random.Random) -> dict[str, Any]:
    provider = rng.choice(["anthropic"] * 6 + ["openrouter", "gateway"])
    m = g.model(rng, API, provider)
    m["contextWindow"] = rng.choice([0, 0, 8192, 16000, 60000, 200000])
    # Small limits too: with reasoning, they leave the thinking budget less than its level's.
    m["maxTokens"] = rng.choice([1000, 1024, 1500, 2048, 2500, 4096, 8000, 32000, 64000])
    if rng.random() < 0.05:
        m["baseUrl"] = "/openrouter.ai/api"  # an OpenRouter host, detected by its URL
    compat: dict[str, Any] = {}
    for key, values in (
        ("supportsEagerToolInputStreaming", [False, True]),
        ("supportsLongCacheRetention", [False, True]),
        ("supportsCacheControlOnTools", [False, True]),
        ("supportsTemperature", [False, True]),
        ("allowEmptySignature", [True, False]),
        ("supportsStrictTools", [True, False]),
        ("forceAdaptiveThinking", [True, False]),
        ("sendSessionAffinityHeaders", [True, False]),
        ("sessionAffinityFormat", ["openrouter", "other"]),
        ("cacheRetention", ["none", "short", "long", "long"]),
    ):
        if rng.random() < 0.2:
            compat[key] = rng.choice(values)
    if compat:
        m["compat"] = compat
    if rng.random() < 0.25:
        m["thinkingLevelMap"] = rng.choice(
            [
                {"xhigh": "xhigh"},
                {"xhigh": "xhigh", "max": "max"},
                {"max": "max"},
                {"minimal": None},
                {"minimal": None, "low": "lo"},
                {"off": None},
                {"high": "max", "medium": "medium"},
                {"low": None, "minimal": None},
            ]
        )
    if rng.random() < 0.2:
        m["headers"] = rng.choice(
            [
                {"x-model-header": "m1"},
                {"anthropic-beta": "model-beta-1,model-beta-2"},
                {"X-Trace": "t-1", "anthropic-beta": " a1 ,a1,, b2"},
                {"anthropic-version": "2099-01-01"},
                {"accept": "text/event-stream"},
            ]
        )
    return m


def _options(rng: random.Random, m: dict[str, Any]) -> dict[str, Any]:
    o: dict[str, Any] = {}
    if rng.random() < 0.6:
        # "off" is no level for streamSimple (the agent passes no reasoning instead).
        o["reasoning"] = rng.choice(["minimal", "low", "medium", "high", "xhigh", "max"])
    if rng.random() < 0.4:
        o["maxTokens"] = rng.choice([1, 100, 500, 1000, 1024, 1500, 2048, 5000, 64000, 0])
    if rng.random() < 0.35:
        o["temperature"] = rng.choice([0, 0.2, 0.7, 1])
    if rng.random() < 0.35:
        o["sessionId"] = f"session-{rng.randint(0, 99)}"
    if rng.random() < 0.2:
        o["thinkingBudgets"] = rng.choice(
            [
                {"low": 1024, "medium": 4096, "high": 9000},
                {"minimal": 0, "low": 0, "medium": 0, "high": 0},
                {"medium": 500},
                {"high": 40000},
                {"minimal": 2000},
            ]
        )
    if rng.random() < 0.2:
        o["headers"] = rng.choice(
            [
                {"x-extra": "1"},
                {"anthropic-beta": "foo-1, bar-2,foo-1"},
                {"anthropic-beta": "opt-beta"},
                {"X-Extra": "2", "x-model-header": "from-options"},
                {"anthropic-dangerous-direct-browser-access": None},
                {"x-model-header": None},
                {"x-api-key": "sk-from-header"},
                {"authorization": "Bearer tok-1"},
            ]
        )
    if rng.random() < 0.04:
        # No key: an error event on both sides, unless a header carries the credentials.
        o["apiKey"] = None
        if rng.random() < 0.5:
            o["headers"] = rng.choice([{"x-api-key": "sk-header"}, {"Authorization": "Bearer tok"}, {"cf-aig-authorization": "Bearer cf"}])
    return o


# ---------------------------------------------------------------------------------------
# Transcript


_ODD_IDS = [
    "call.with.dots|fc_x",
    "call_abc|fc_item+/=xyz",
    "toolu_" + "x" * 70,
    "id with spaces",
    "toolu_plain_01",
]


def _transcript(rng: random.Random, m: dict[str, Any]) -> list[dict[str, Any]]:
    messages = g.transcript(rng, m)
    ts = messages[-1]["timestamp"] + 100
    renamed: dict[str, str] = {}
    for msg in messages:
        role = msg["role"]
        if role == "assistant":
            extra: list[dict[str, Any]] = []
            r = rng.random()
            if r < 0.15:
                extra.append({"type": "thinking", "thinking": "[Reasoning redacted]", "thinkingSignature": "opaque-" + str(rng.randint(0, 99)), "redacted": True})
            elif r < 0.25:
                extra.append({"type": "thinking", "thinking": g.text(rng), "thinkingSignature": "   "})
            elif r < 0.32:
                extra.append({"type": "thinking", "thinking": "", "thinkingSignature": "sig-empty-text"})
            elif r < 0.38:
                extra.append({"type": "thinking", "thinking": "  ", "thinkingSignature": ""})
            if rng.random() < 0.15:
                extra.append({"type": "text", "text": "  \n"})
            msg["content"][0:0] = extra
            for block in msg["content"]:
                if block["type"] == "text" and rng.random() < 0.15:
                    block["textSignature"] = json.dumps({"v": 1, "id": "msg_x"})
                elif block["type"] == "toolCall" and rng.random() < 0.15:
                    block["thoughtSignature"] = "thought-sig"
            if rng.random() < 0.3:
                for block in msg["content"]:
                    if block["type"] == "toolCall" and rng.random() < 0.7:
                        new = rng.choice(_ODD_IDS) + str(rng.randint(0, 9))
                        renamed[block["id"]] = new
                        block["id"] = new
        elif role == "toolResult":
            if msg["toolCallId"] in renamed:
                msg["toolCallId"] = renamed[msg["toolCallId"]]
            r = rng.random()
            if r < 0.08:
                msg["content"] = [{"type": "image", "data": g.PNG_1PX, "mimeType": "image/png"}]
            elif r < 0.14:
                msg["content"] = [{"type": "text", "text": "failed"}, {"type": "image", "data": g.PNG_1PX, "mimeType": "image/png"}, {"type": "image", "data": g.PNG_1PX, "mimeType": "image/jpeg"}, {"type": "text", "text": "after"}]
                msg["isError"] = True
            elif r < 0.18:
                msg["content"] = [{"type": "text", "text": "   "}]
            elif r < 0.2:
                msg["content"] = []
            elif r < 0.24:
                msg["content"] = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
        elif role == "user" and rng.random() < 0.1:
            msg["content"] = rng.choice(
                [
                    "   ",
                    [],
                    [{"type": "text", "text": " "}, {"type": "text", "text": "kept"}],
                    [{"type": "image", "data": g.PNG_1PX, "mimeType": "image/png"}],
                ]
            )
        elif role == "system" and msg is not messages[0]:
            r = rng.random()
            if r < 0.3:
                msg["toolsAdded"] = [rng.choice(g.TOOLS)]
            elif r < 0.45:
                msg["toolsRemoved"] = [{"name": rng.choice(g.TOOLS)["name"]}]
            elif r < 0.6:
                msg["sections"] = {"rules": g.text(rng), "gone": None}
    if messages[0]["role"] == "system" and rng.random() < 0.15:
        messages[0]["sections"] = {"rules": "Be brief.", "style": g.text(rng)}
    # A failed turn with a tool call: dropped with its calls (results, if any, see U40).
    if rng.random() < 0.12:
        call_id = f"toolu_err_{rng.randint(0, 999)}"
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "partial"}, {"type": "toolCall", "id": call_id, "name": "noop", "arguments": {}}],
                "api": API,
                "provider": m["provider"],
                "model": m["id"],
                "usage": g.usage(rng),
                "stopReason": rng.choice(["error", "aborted"]),
                "timestamp": ts,
                **({"errorMessage": "boom"} if rng.random() < 0.5 else {}),
            }
        )
        if rng.random() < 0.5:
            messages.append({"role": "toolResult", "toolCallId": call_id, "toolName": "noop", "content": [{"type": "text", "text": "result of errored call"}], "isError": False, "timestamp": ts + 1})
        messages.append({"role": "user", "content": "go on", "timestamp": ts + 2})
    # A constrained (strict) tool declaration.
    if rng.random() < 0.25 and messages[0]["role"] == "system":
        b_schema = rng.choice(
            [
                {"type": "integer"},
                {"type": "integer", "minimum": 0},  # a keyword Anthropic's strict mode rejects
                {"type": "string", "format": "email"},
                {"type": "string", "format": "phone"},
                {"type": "array", "items": {"type": "string"}, "minItems": 1},
                {"type": "array", "items": {"type": "string"}, "minItems": 2},
                {"type": "object", "properties": {"x": {"type": "string"}}},
                {"anyOf": [{"type": "string"}, {"type": "null"}]},
                {"$ref": "#/$defs/b"},
                {"type": ["string", "null"]},
                {"enum": ["x", "y"]},  # a bare enum counts as typed
                {"type": "string", "const": None},  # admits null: no null branch added
                {"enum": ["x", None]},
                {"const": "x"},  # no type: not strict
            ]
        )
        parameters: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}, "b": b_schema}, "required": ["a"]}
        if "$ref" in b_schema:
            parameters["$defs"] = {"b": {"type": "string"}}
        if rng.random() < 0.3:
            parameters["description"] = "Arguments."
        sampling: dict[str, Any] = {"type": "json_schema"}
        if rng.random() < 0.7:
            sampling["strict"] = rng.choice(["prefer", "require"])
        messages[0].setdefault("toolsAdded", []).append(
            {"name": "strict_tool", "description": "Strict.", "parameters": parameters, "constrainedSampling": sampling}
        )
    # Ending with the assistant's turn (a prefill, or calls without results yet).
    if rng.random() < 0.06 and len(messages) >= 2 and messages[-2]["role"] == "assistant" and messages[-1]["role"] == "user":
        messages.pop()
    if messages[0]["role"] == "system" and rng.random() < 0.05:
        messages[0]["content"] = ""
    # A long history, so the context window clamps max_tokens.
    if rng.random() < 0.15:
        messages.insert(
            1 if messages[0]["role"] == "system" else 0,
            {"role": "user", "content": "long " * rng.choice([2000, 6000, 12000]), "timestamp": 1_600_000_000_000},
        )
    return messages


# ---------------------------------------------------------------------------------------
# Responses


def _split(rng: random.Random, s: str) -> list[str]:
    """``s`` in random pieces (possibly one, possibly single characters)."""
    if not s or rng.random() < 0.25:
        return [s]
    k = rng.randint(1, min(len(s), 8))
    cuts = sorted(rng.sample(range(1, len(s) + 1), k - 1)) if len(s) > 1 else []
    return [s[a:b] for a, b in zip([0, *cuts], [*cuts, len(s)]) if s[a:b]]


def _args_text(rng: random.Random) -> tuple[str, str]:
    """Tool name and argument JSON text (sometimes empty or invalid)."""
    r = rng.random()
    if r < 0.1:
        return "noop", ""
    if r < 0.15:
        return "noop", "{}"
    if r < 0.22:
        return "get_weather", '{"city": "Par'  # invalid: cut short
    if r < 0.26:
        return "get_weather", '{"city": "Paris", }'
    if r < 0.5:
        return "search", json.dumps({"query": g.text(rng), "filters": {"site": "ex.com", "recent": True}, "tags": ["a", "日本"]}, ensure_ascii=rng.random() < 0.5)
    return "get_weather", json.dumps({"city": g.text(rng, 1, 2), "days": rng.randint(1, 9)}, ensure_ascii=rng.random() < 0.5)


def _usage_start(rng: random.Random) -> dict[str, Any]:
    u: dict[str, Any] = {"input_tokens": rng.randint(0, 500), "output_tokens": rng.randint(0, 5)}
    r = rng.random()
    if r < 0.3:
        u["cache_read_input_tokens"] = rng.randint(0, 300)
        u["cache_creation_input_tokens"] = rng.randint(0, 300)
    elif r < 0.45:
        five, hour = rng.randint(0, 100), rng.randint(0, 100)
        u["cache_creation_input_tokens"] = five + hour
        u["cache_creation"] = {"ephemeral_5m_input_tokens": five, "ephemeral_1h_input_tokens": hour}
    elif r < 0.5:
        u["cache_read_input_tokens"] = None
        u["cache_creation_input_tokens"] = None
    return u


def _usage_delta(rng: random.Random, provider: str) -> dict[str, Any] | None:
    r = rng.random()
    if r < 0.1:
        return None
    u: dict[str, Any] = {"output_tokens": rng.randint(0, 200)}
    if r < 0.25:
        u["input_tokens"] = rng.randint(0, 500)
        u["cache_read_input_tokens"] = rng.randint(0, 50)
        # Never below the one-hour writes message_start reported (a server sends totals).
        u["cache_creation_input_tokens"] = rng.randint(100, 150)
    elif r < 0.35:
        u["cache_creation_input_tokens"] = 400
        u["cache_creation"] = {"ephemeral_1h_input_tokens": rng.randint(0, 400)}
    elif r < 0.45:
        u["output_tokens_details"] = {"thinking_tokens": rng.randint(0, 50)}
    elif r < 0.5:
        u["input_tokens"] = None
    if provider == "openrouter" and rng.random() < 0.5:
        u["cost"] = rng.choice([0.00123, 0.0001])
        u["is_byok"] = rng.choice([True, False])
        if u["is_byok"]:
            u["cost_details"] = {"upstream_inference_cost": 0.002}
    return u


Event = tuple[str | None, Any]


def _message_events(rng: random.Random, m: dict[str, Any]) -> tuple[list[Event], dict[str, Any]]:
    """The events of one response and facts about it (for the documented rules)."""
    facts: dict[str, Any] = {}
    events: list[Event] = []
    model_id = m["id"] if rng.random() < 0.85 else rng.choice(["routed-model-x", "routed-model-x", ""])
    start_message: dict[str, Any] = {
        "id": f"msg_{rng.randint(0, 10**6)}",
        "type": "message",
        "role": "assistant",
        "model": model_id,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _usage_start(rng),
    }
    if rng.random() < 0.03:
        del start_message["usage"]  # a proxy that leaves it out
        facts["no_start_usage"] = True
    events.append(("message_start", {"type": "message_start", "message": start_message}))
    if rng.random() < 0.3:
        events.append(("ping", {"type": "ping"}))
    if rng.random() < 0.05:
        events.append((None, {"type": "ping"}))  # no event: line (U25), a ping either way
    kinds = rng.choices(["text", "thinking", "redacted", "tool", "unknown", "fallback"], weights=[5, 3, 1, 3, 0.5, 0.3], k=rng.randint(0, 4))
    has_tool = False
    offset = rng.choice([0, 0, 0, 1, 5])  # block indexes need not start at 0
    for position, kind in enumerate(kinds):
        index = position + offset
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            initial = g.text(rng, 1, 1) if rng.random() < 0.15 else ""
            block: dict[str, Any] = {"type": "text", "text": initial}
            if rng.random() < 0.05:
                del block["text"]
            for piece in _split(rng, g.text(rng, 1, 6)):
                deltas.append({"type": "text_delta", "text": piece})
            if rng.random() < 0.1:
                deltas.append({"type": "text_delta", "text": ""})
        elif kind == "thinking":
            block = {"type": "thinking", "thinking": "", "signature": ""}
            if rng.random() < 0.1:
                block = {"type": "thinking", "thinking": "Init. "}
            elif rng.random() < 0.1:
                block = {"type": "thinking", "thinking": "", "signature": "start-sig-"}
            for piece in _split(rng, g.text(rng, 1, 6)):
                deltas.append({"type": "thinking_delta", "thinking": piece})
            if rng.random() < 0.85:
                for piece in _split(rng, "EqQBCkgIARABGAIiQL" + str(rng.randint(0, 10**6))):
                    deltas.append({"type": "signature_delta", "signature": piece})
        elif kind == "redacted":
            block = {"type": "redacted_thinking", "data": "EmwKAhgBEgy" + str(rng.randint(0, 10**6))}
            if rng.random() < 0.1:
                del block["data"]
        elif kind == "tool":
            has_tool = True
            name, args = _args_text(rng)
            start_input: dict[str, Any] = {}
            if not args and rng.random() < 0.5:
                start_input = {"path": "/init"}
                facts["start_input_only"] = True
            elif args and rng.random() < 0.1:
                start_input = {"city": "replaced by the deltas"}
            block = {"type": "tool_use", "id": f"toolu_{rng.randint(0, 10**6):06d}", "name": name, "input": start_input}
            if not start_input and rng.random() < 0.1:
                del block["input"]
            if args or rng.random() < 0.5:
                for piece in _split(rng, args) if args else [""]:
                    deltas.append({"type": "input_json_delta", "partial_json": piece})
        elif kind == "fallback":
            # A server-side model fallback: skipped first, a failure after content (U27).
            block = {"type": "fallback", "model": "fallback-model"}
        else:
            block = {"type": rng.choice(["server_tool_use", "web_search_tool_result"]), "id": "srvtoolu_1"}
            deltas.append({"type": "input_json_delta", "partial_json": '{"q":1}'})
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}))
        for delta in deltas:
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
            if rng.random() < 0.03:
                events.append(("ping", {"type": "ping"}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        if rng.random() < 0.03:
            # A delta for a block that already stopped: ignored.
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": "stray"}}))
    if rng.random() < 0.1:
        # A first message_delta with usage only.
        events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": None, "stop_sequence": None}, "usage": {"output_tokens": 1, "input_tokens": 7}}))
    r = rng.random()
    if r < 0.05:
        stop = "pause_turn"
    elif r < 0.1:
        stop = "max_tokens"
    elif r < 0.13:
        stop = "stop_sequence"
    elif r < 0.17:
        stop = "refusal"
    elif r < 0.19:
        stop = "sensitive"
    elif r < 0.22:
        stop = "model_context_window_exceeded_x"
    else:
        stop = "tool_use" if has_tool else "end_turn"
    delta: dict[str, Any] = {"stop_reason": stop, "stop_sequence": None}
    if stop == "refusal" and rng.random() < 0.5:
        delta["stop_details"] = {"type": "refusal", "explanation": "Declined for policy reasons."}
    payload: dict[str, Any] = {"type": "message_delta", "delta": delta}
    usage = _usage_delta(rng, m["provider"])
    if usage is not None:
        payload["usage"] = usage
    facts["stop"] = stop
    facts["delta_usage"] = usage
    events.append(("message_delta", payload))
    events.append(("message_stop", {"type": "message_stop"}))
    return events, facts


def _frame(rng: random.Random, events: list[Event], facts: dict[str, Any]) -> str:
    """SSE text with a random framing variant."""
    eol = "\n"
    variant = rng.random()
    if variant < 0.1:
        eol = "\r\n"
        facts["crlf"] = True
    elif variant < 0.13:
        eol = "\r"
        facts["cr"] = True
    out = []
    for name, data in events:
        lines = []
        if rng.random() < 0.03:
            lines.append(": keep-alive comment")
        if variant > 0.9 and rng.random() < 0.3:
            lines.append(f"id: {rng.randint(0, 99)}")
        if name:
            lines.append(f"event: {name}")
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        if variant > 0.85 and variant <= 0.9 and not isinstance(data, str):
            # The JSON over two data: lines (joined with a newline, still valid JSON).
            text = json.dumps(data, ensure_ascii=False, indent=1)
        lines.extend(f"data: {line}" for line in text.split("\n"))
        if variant > 0.8 and variant <= 0.85:
            lines = [line.replace(": ", ":", 1) if line.startswith(("data: ", "event: ")) else line for line in lines]
        out.append(eol.join(lines) + eol + eol)
        if variant > 0.9 and rng.random() < 0.2:
            out.append(eol)  # an extra blank line
    body = "".join(out)
    if 0.1 <= variant < 0.2:
        body = body[: -len(eol)]  # no blank line after the last event
    if 0.2 <= variant < 0.25:
        body = "\ufeff" + body
    return body


def _ok(rng: random.Random, body: str) -> dict[str, Any]:
    response = g.ok(body, rng)
    if rng.random() < 0.1:
        response["headers"] = {"Content-Type": rng.choice(["application/json", "text/plain", "TEXT/EVENT-STREAM; charset=utf-8"])}
    return response


def _error_body(rng: random.Random, status: int) -> tuple[str, str]:
    """(content type, body) of an HTTP error."""
    kind = {429: "rate_limit_error", 529: "overloaded_error", 401: "authentication_error", 404: "not_found_error"}.get(status, "invalid_request_error" if status < 500 else "api_error")
    r = rng.random()
    if r < 0.45:
        return "application/json", json.dumps({"type": "error", "error": {"type": kind, "message": f"{kind} happened: café"}, "request_id": "req_1"}, ensure_ascii=rng.random() < 0.5)
    if r < 0.55:
        return "application/json", json.dumps({"message": "top-level message", "code": 7})
    if r < 0.65:
        return "text/plain", "upstream exploded"
    if r < 0.7:
        return "text/plain", ""
    if r < 0.75:
        return "text/html", "<html><body>Bad Gateway</body></html>\n"
    if r < 0.82:
        return "text/plain", "x" * 5000
    if r < 0.9:
        return "application/json", json.dumps({"type": "error", "error": {"type": kind, "message": "long " * 1000}})
    if r < 0.95:
        return "text/event-stream", 'data: {"error":{"message":"sse bad"}}\n\n'
    return "application/json", "[1,2]"


def _responses(rng: random.Random, m: dict[str, Any], options: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any], int | None]:
    events, facts = _message_events(rng, m)
    r = rng.random()
    abort_after: int | None = None
    if r < 0.55:
        facts["kind"] = "ok"
        return [_ok(rng, _frame(rng, events, facts))], facts, None
    if r < 0.65:
        facts["kind"] = "http"
        status = rng.choice([400, 401, 403, 404, 413, 429, 500, 503, 529])
        ctype, body = _error_body(rng, status)
        return [{"status": status, "headers": {"Content-Type": ctype}, "body": body, "cuts": g.cuts(rng, body)}], facts, None
    if r < 0.72:
        facts["kind"] = "retry"
        status = rng.choice([429, 500, 503, 529, 408, 409])
        ctype, body = _error_body(rng, status)
        headers = {"Content-Type": ctype}
        rr = rng.random()
        if rr < 0.4:
            headers["retry-after-ms"] = str(rng.choice([0, 5, 20]))
        elif rr < 0.6:
            headers["retry-after"] = "0"
        elif rr < 0.7:
            headers["retry-after"] = "120"
        elif rr < 0.75:
            headers["retry-after-ms"] = "2000"
            options["maxRetryDelayMs"] = 1000
        elif rr < 0.8:
            headers["x-should-retry"] = "false"
            headers["retry-after-ms"] = "1"
        elif rr < 0.85:
            headers["retry-after"] = "Wed, 21 Oct 2015 07:28:00 GMT"
        elif rr < 0.88:
            headers["retry-after"] = "120"
            options["maxRetryDelayMs"] = 0  # no cap: but a 120 s sleep is too long here
            headers["retry-after"] = "0"
        else:
            headers["retry-after-ms"] = "1"
            headers["x-should-retry"] = "true"
        if rng.random() < 0.85:
            options["maxRetries"] = rng.choice([1, 2])
        failing = {"status": status, "headers": headers, "body": body, "cuts": []}
        n = rng.choice([1, 1, 2])
        return [failing] * n + [_ok(rng, _frame(rng, events, facts))], facts, None
    if r < 0.75:
        facts["kind"] = "json200"
        rr = rng.random()
        if rr < 0.6:
            body = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            ctype = "application/json"
        elif rr < 0.8:
            facts["kind"] = "not_a_stream"
            body, ctype = "<html><body>maintenance</body></html>\n", "text/html"
        else:
            facts["kind"] = "not_a_stream"
            body, ctype = "", "text/event-stream"
        return [{"status": 200, "headers": {"Content-Type": ctype}, "body": body, "cuts": g.cuts(rng, body)}], facts, None
    if r < 0.81:
        facts["kind"] = "stream_error"
        at = rng.randint(0, len(events) - 1)
        error = rng.choice(
            [
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
                {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}},
            ]
        )
        data: Any = error if rng.random() < 0.8 else "not json at all"
        events = events[:at] + [("error", data)] + events[at:]
        return [_ok(rng, _frame(rng, events, facts))], facts, None
    if r < 0.86:
        facts["kind"] = "malformed"
        at = rng.randint(0, len(events) - 1)
        name = rng.choice(["content_block_delta", "message_delta", "ping"])
        bad = rng.choice(["{this is not json}", "", "repair"])
        if bad == "repair":
            # Raw control characters and a stray backslash inside strings: repaired.
            name = "content_block_delta"
            bad = '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"tab\there \\H"}}'
            
        events = events[:at] + [(name, bad)] + events[at:]
        return [_ok(rng, _frame(rng, events, facts))], facts, None
    if r < 0.91:
        facts["kind"] = "cut"
        body = _frame(rng, events, facts)
        size = len(body.encode("utf-8"))
        end = rng.randint(1, size - 1)
        piece = body.encode("utf-8")[:end].decode("utf-8", "ignore")
        response = g.ok(piece, rng)
        if rng.random() < 0.6:
            response = g.ok(body, rng)
            response["cuts"] = sorted(set(response["cuts"]) | {end})
            response["body"] = piece
            response["cuts"] = [c for c in response["cuts"] if c < len(piece.encode("utf-8"))]
            response["disconnect"] = True
            facts["kind"] = "disconnect"
        return [response], facts, None
    if r < 0.96:
        facts["kind"] = "abort"
        # One event per chunk, 50 ms apart, so that the abort lands between two chunks on
        # both sides (pi's reader otherwise runs ahead of its consumer).
        body = _frame(rng, events, facts)
        eol = "\r\n\r\n" if facts.get("crlf") else "\r\r" if facts.get("cr") else "\n\n"
        pieces = body.split(eol)
        offsets, at = [], 0
        for piece in pieces[:-1]:
            at += len((piece + eol).encode("utf-8"))
            offsets.append(at)
        response = _ok(rng, body)
        response["cuts"] = offsets
        response["gap_ms"] = 50
        abort_after = rng.randint(2, 8)
        return [response], facts, abort_after
    facts["kind"] = "after_stop"
    late = rng.choice(
        [
            ("error", {"type": "error", "error": {"type": "api_error", "message": "late"}}),
            ("content_block_start", {"type": "content_block_start", "index": 9, "content_block": {"type": "text", "text": "late"}}),
        ]
    )
    events = [*events, late]
    return [_ok(rng, _frame(rng, events, facts))], facts, None


def make_case(rng: random.Random, case_id: str) -> dict[str, Any]:
    m = _model(rng)
    options = _options(rng, m)
    responses, facts, abort_after = _responses(rng, m, options)
    case: dict[str, Any] = {
        "id": case_id,
        "model": m,
        "context": {"messages": _transcript(rng, m)},
        "options": options,
        "responses": responses,
        "facts": facts,
    }
    if abort_after is not None:
        case["abortAfter"] = abort_after
    return case


# ---------------------------------------------------------------------------------------
# Documented differences

_KNOWN_STOPS = {"end_turn", "max_tokens", "tool_use", "pause_turn", "stop_sequence", "refusal", "sensitive"}
_INVALID_ID = re.compile(r"[^A-Za-z0-9_-]")


def _bodies(pi: Any, ta: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The request bodies of both sides, pairwise (only where both are JSON objects)."""
    return [
        (p["body"], t["body"])
        for p, t in zip(pi, ta)
        if isinstance(p.get("body"), dict) and isinstance(t.get("body"), dict)
    ]


def _last(record: Any) -> dict[str, Any] | None:
    """The final event of a record, if any."""
    events = (record or {}).get("events") or []
    return events[-1] if events else None


def _final_message(record: Any) -> dict[str, Any] | None:
    event = _last(record)
    if event is None:
        return None
    message = event.get("message") or event.get("error")
    return message if isinstance(message, dict) else None


def _u61_level_without_reasoning(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # pi applies a level to a model without reasoning: more max_tokens, no temperature.
    if kind != "request" or case["model"]["reasoning"] or not case["options"].get("reasoning"):
        return pi, ta
    for p, t in _bodies(pi, ta):
        if "temperature" in t and "temperature" not in p and "thinking" not in p:
            del t["temperature"]
        if "max_tokens" in t and "thinking" not in p:
            p["max_tokens"] = t["max_tokens"]
    return pi, ta


def _u42_zero_max_tokens(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # maxTokens 0: pi computes from 0, trio_agent from the model's limit.
    if kind != "request" or case["options"].get("maxTokens") != 0:
        return pi, ta
    for p, t in _bodies(pi, ta):
        if "max_tokens" in t:
            p["max_tokens"] = t["max_tokens"]
        pt, tt = p.get("thinking"), t.get("thinking")
        if isinstance(pt, dict) and isinstance(tt, dict) and "budget_tokens" in pt and "budget_tokens" in tt:
            pt["budget_tokens"] = tt["budget_tokens"]
    return pi, ta


def _u40_results_of_failed_turns(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # pi still sends the tool results of a dropped error/aborted assistant message.
    if kind != "request":
        return pi, ta
    dropped = {
        block["id"]
        for msg in case["context"]["messages"]
        if msg["role"] == "assistant" and msg["stopReason"] in ("error", "aborted")
        for block in msg["content"]
        if block["type"] == "toolCall"
    }
    if not dropped:
        return pi, ta
    for p, _t in _bodies(pi, ta):
        kept = []
        for message in p.get("messages", []):
            content = message.get("content")
            if message.get("role") == "user" and isinstance(content, list):
                content = [b for b in content if not (b.get("type") == "tool_result" and b.get("tool_use_id") in dropped)]
                if not content:
                    continue
                message["content"] = content
            kept.append(message)
        p["messages"] = kept
    return pi, ta


def _u52_same_model_ids(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # pi sends same-model tool-call ids as they are; trio_agent normalises every id.
    if kind != "request":
        return pi, ta
    for p, _t in _bodies(pi, ta):
        for message in p.get("messages", []):
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_use":
                    block["id"] = _INVALID_ID.sub("_", block["id"])[:64]
                elif block.get("type") == "tool_result":
                    block["tool_use_id"] = _INVALID_ID.sub("_", block["tool_use_id"])[:64]
    return pi, ta


def _u24_start_input(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # A tool_use start input without (non-empty) deltas: pi's arguments become {} (at its
    # first delta or at the block's end), trio_agent keeps the input.
    if kind != "events" or not case.get("facts", {}).get("start_input_only"):
        return pi, ta

    def calls(record: Any) -> list[dict[str, Any]]:
        found = [e["toolCall"] for e in (record or {}).get("events", []) if e.get("type") == "toolcall_end"]
        message = _final_message(record)
        return found + [b for b in (message or {}).get("content", []) if b.get("type") == "toolCall"]

    for p, t in zip(calls(pi), calls(ta)):
        if p.get("id") == t.get("id") and p.get("arguments") == {} and t.get("arguments") == {"path": "/init"}:
            t["arguments"] = {}
    return pi, ta


def _error_text(pi: Any, ta: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Both final error messages, when both streams ended with an error."""
    p, t = _last(pi), _last(ta)
    if p is None or t is None or p.get("type") != "error" or t.get("type") != "error":
        return None
    return p["error"], t["error"]


def _u05_dropped_connection(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # The text of a dropped connection comes from each side's HTTP stack.
    if kind != "events" or case.get("facts", {}).get("kind") != "disconnect":
        return pi, ta
    both = _error_text(pi, ta)
    if both and str(both[1].get("errorMessage", "")).startswith("Connection error ("):
        both[1]["errorMessage"] = both[0].get("errorMessage")
    return pi, ta


def _f17_json_200(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # A 200 whose body is JSON is reported as the error it carries.
    if kind != "events" or case.get("facts", {}).get("kind") != "json200":
        return pi, ta
    both = _error_text(pi, ta)
    if both and both[0].get("errorMessage") == "Anthropic stream ended without a stop reason" and str(both[1].get("errorMessage", "")).startswith("200 "):
        both[1]["errorMessage"] = both[0]["errorMessage"]
    return pi, ta


_PARSE_ERROR = re.compile(r"^(Could not parse Anthropic SSE event [^:]*: ).*?(; data=.*)$", re.S)


def _u28_parser_wording(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # The parser's own message inside "Could not parse Anthropic SSE event" is Python's.
    if kind != "events":
        return pi, ta
    both = _error_text(pi, ta)
    if both:
        mp = _PARSE_ERROR.match(str(both[0].get("errorMessage", "")))
        mt = _PARSE_ERROR.match(str(both[1].get("errorMessage", "")))
        if mp and mt and mp.group(1) == mt.group(1) and mp.group(2) == mt.group(2):
            both[1]["errorMessage"] = both[0]["errorMessage"]
    return pi, ta


_RECEIVED = "\n\nReceived arguments:\n"


def _arguments_error_wording(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # argumentsError: Python's JSON error wording before the received arguments.
    if kind != "events":
        return pi, ta

    def errors(record: Any) -> list[dict[str, Any]]:
        found = []
        for event in (record or {}).get("events", []):
            if isinstance(event.get("toolCall"), dict):
                found.append(event["toolCall"])
            for key in ("message", "error"):
                for block in (event.get(key) or {}).get("content", []):
                    if block.get("type") == "toolCall":
                        found.append(block)
        return found

    for p, t in zip(errors(pi), errors(ta)):
        pe, te = p.get("argumentsError"), t.get("argumentsError")
        if isinstance(pe, str) and isinstance(te, str) and _RECEIVED in pe and _RECEIVED in te:
            if pe.split(_RECEIVED, 1)[1] == te.split(_RECEIVED, 1)[1]:
                t["argumentsError"] = pe
    return pi, ta


def _u23_unknown_stop_usage(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # An unknown stop reason: trio_agent applies that message_delta's usage first.
    if kind != "events" or case.get("facts", {}).get("stop") in _KNOWN_STOPS:
        return pi, ta
    both = _error_text(pi, ta)
    if both and both[0].get("errorMessage", "").startswith("Unhandled stop reason: "):
        both[0]["usage"] = copy.deepcopy(both[1].get("usage"))
    return pi, ta


_MESSAGE_STOP_LINE = re.compile(r'data: ?\{"type": "message_stop"\}(\r\n|\r|\n)')


def _u26_after_message_stop(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # pi reads past message_stop: a late block or error event changes its outcome, and so
    # does a connection dropped after it.
    if kind != "events":
        return pi, ta
    if case.get("facts", {}).get("kind") == "disconnect":
        p_last, t_last = _last(pi), _last(ta)
        if _MESSAGE_STOP_LINE.search(case["responses"][-1]["body"]) and p_last and t_last:
            if p_last.get("type") == "error" and t_last.get("type") == "done":
                pi["events"][-1] = copy.deepcopy(t_last)
        return pi, ta
    if case.get("facts", {}).get("kind") != "after_stop":
        return pi, ta
    t_last, t_message = _last(ta), _final_message(ta)
    if t_last is None or t_message is None:
        return pi, ta
    events = pi.get("events", [])
    n = len(t_message["content"])
    # A late text block: its text_start, and the block in the final message.
    events = [e for e in events if not (e.get("type") == "text_start" and e.get("contentIndex") == n)]
    last = events[-1] if events else None
    p_message = _final_message({"events": events})
    if p_message is not None and len(p_message["content"]) == n + 1:
        p_message["content"].pop()
    # A late error event: pi fails with its raw data.
    if last and last.get("type") == "error" and '"late"' in str(last["error"].get("errorMessage")):
        events[-1] = copy.deepcopy(t_last)
    pi["events"] = events
    return pi, ta


def _abort_text(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # An abort while the body is awaited: pi reports the fetch API's AbortError text.
    if kind != "events" or "abortAfter" not in case:
        return pi, ta
    both = _error_text(pi, ta)
    if both and both[0].get("stopReason") == "aborted" == both[1].get("stopReason"):
        if both[0].get("errorMessage") == "This operation was aborted" and both[1].get("errorMessage") == "Request was aborted":
            both[1]["errorMessage"] = both[0]["errorMessage"]
    return pi, ta


def _start_without_usage(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # message_start without usage: pi fails reading it, trio_agent counts zeros.
    if kind != "events" or not case.get("facts", {}).get("no_start_usage"):
        return pi, ta
    both = _error_text(pi, {"events": [{"type": "error", "error": {}}]})
    if both and both[0].get("errorMessage") == "Cannot read properties of undefined (reading 'input_tokens')":
        pi["events"] = copy.deepcopy(ta.get("events", []))
    return pi, ta


_U06_ERROR = re.compile(r"^Could not parse Anthropic SSE event \S+: Unexpected end of JSON input; data=; raw=(.*\\n)?event: \S+$")


def _u06_split_crlf(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # pi's defect: a CRLF cut between two reads ends the line at the CR, and the LF opening
    # the next read dispatches the event before its data line.
    if kind != "events" or not case.get("facts", {}).get("crlf"):
        return pi, ta
    response = case["responses"][-1]
    data = response.get("body", "").encode("utf-8")
    if not any(data[c - 1 : c + 1] == b"\r\n" for c in response.get("cuts", []) if 0 < c < len(data)):
        return pi, ta
    last = _last(pi)
    if last is None or last.get("type") != "error" or not _U06_ERROR.match(str(last["error"].get("errorMessage"))):
        return pi, ta
    before = pi["events"][:-1]
    if ta.get("events", [])[: len(before)] == before:
        pi["events"] = copy.deepcopy(ta["events"])
    return pi, ta


_REQUIRE = re.compile(r'^(Tool "[^"]+" requires JSON-schema constrained sampling, but )(.*)\.$', re.S)


def _strict_reason_wording(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # A required strict tool whose schema cannot be converted: the reason names the path.
    if kind != "events":
        return pi, ta
    both = _error_text(pi, ta)
    if both:
        mp = _REQUIRE.match(str(both[0].get("errorMessage", "")))
        mt = _REQUIRE.match(str(both[1].get("errorMessage", "")))
        if mp and mt and mt.group(2).startswith("its schema cannot be made strict ("):
            both[1]["errorMessage"] = both[0]["errorMessage"]
    return pi, ta


def _cloudflare_header_only(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # Only a cf-aig-authorization header: pi's Anthropic client refuses to send the request.
    options = case["options"]
    if options.get("apiKey", "x") or "cf-aig-authorization" not in (options.get("headers") or {}):
        return pi, ta
    if kind == "request" and pi == [] and ta:
        return pi, []
    if kind == "events":
        events = pi.get("events", [])
        if len(events) == 1 and str(events[0].get("error", {}).get("errorMessage")).startswith("Could not resolve authentication method."):
            pi["events"] = copy.deepcopy(ta.get("events", []))
    return pi, ta


def _empty_server_fields(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # An empty model name sets no responseModel; redacted thinking without data gets "".
    if kind != "events":
        return pi, ta
    for p_event, t_event in zip(pi.get("events", []), ta.get("events", [])):
        for key in ("message", "error"):
            pm, tm = p_event.get(key), t_event.get(key)
            if not isinstance(pm, dict) or not isinstance(tm, dict):
                continue
            if pm.get("responseModel") == "" and "responseModel" not in tm:
                del pm["responseModel"]
            for pb, tb in zip(pm.get("content", []), tm.get("content", [])):
                if pb.get("redacted") and "thinkingSignature" not in pb and tb.get("thinkingSignature") == "":
                    del tb["thinkingSignature"]
    return pi, ta


DOCUMENTED: list[tuple[str, Any]] = [
    ("Smaller provider differences: Missing key", g.missing_key_hint),
    ("A cf-aig-authorization header is enough (Anthropic)", _cloudflare_header_only),
    ("Why a required strict tool cannot be strict (all APIs)", _strict_reason_wording),
    ("U06 · CRLF split across two reads (parity.md KEEP, pi defect)", _u06_split_crlf),
    ("A message_start without usage counts zeros (Anthropic)", _start_without_usage),
    ("An abort always reads Request was aborted (Anthropic)", _abort_text),
    ("U61 · A thinking level is ignored when reasoning=False (Anthropic)", _u61_level_without_reasoning),
    ("U42 · max_tokens=0 means the model's limit (all APIs)", _u42_zero_max_tokens),
    ("U40 · Tool results of a dropped failed turn are not sent (all APIs)", _u40_results_of_failed_turns),
    ("U52 · Same-model tool-call ids are normalised (Anthropic)", _u52_same_model_ids),
    ("U24 · A tool call's start input is kept (Anthropic)", _u24_start_input),
    ("U05 · A body cut inside an event, or a dropped connection", _u05_dropped_connection),
    ("F17 · A 200 response whose body is JSON, not a stream", _f17_json_200),
    ("U28 · An unparsable Anthropic event quotes Python's JSON message", _u28_parser_wording),
    ("Smaller provider differences: Argument errors", _arguments_error_wording),
    ("Smaller provider differences: argument errors (half surrogate pairs)", g.half_surrogate),
    ("U23 · Usage is kept when the stop reason is unknown (Anthropic)", _u23_unknown_stop_usage),
    ("U26 · Nothing after message_stop is read (Anthropic)", _u26_after_message_stop),
    ("Empty fields from the server (Anthropic)", _empty_server_fields),
]
