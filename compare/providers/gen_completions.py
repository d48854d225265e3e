"""Cases for ``openai-completions``: requests from random models, compat switches and
transcripts; responses of SSE chat-completion chunks, HTTP errors, retries and framing variants.

A case's ``model.baseUrl`` may carry a host name as a path segment (``/openrouter.ai/api/v1``):
both clients detect hosts with a substring test on the base URL, so the loopback server still
answers while the host rules apply.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import gen_common as g

API = "openai-completions"

# (provider, base URL path): provider ids and hosts the compat detection knows, and plain ones.
PROVIDERS: list[tuple[str, str]] = [
    ("openai", "/v1"),
    ("openai", "/api.openai.com/v1"),
    ("local", "/v1"),
    ("local", "/api.openai.com/v1"),
    ("openrouter", "/api/v1"),
    ("local", "/openrouter.ai/api/v1"),
    ("deepseek", "/v1"),
    ("local", "/api.deepseek.com/v1"),
    ("moonshotai", "/v1"),
    ("moonshotai-cn", "/v1"),
    ("local", "/api.moonshot.ai/v1"),
    ("nvidia", "/v1"),
    ("local", "/integrate.api.nvidia.com/v1"),
    ("together", "/v1"),
    ("local", "/api.together.xyz/v1"),
    ("mistral", "/v1"),
    ("local", "/api.mistral.ai/v1"),
    ("zai", "/api/paas/v4"),
    ("local", "/api.z.ai/api/paas/v4"),
    ("groq", "/openai/v1"),
    ("cerebras", "/v1"),
    ("local", "/api.cerebras.ai/v1"),
    ("xai", "/v1"),
    ("local", "/api.x.ai/v1"),
    ("opencode", "/zen/v1"),
    ("opencode-go", "/zen/go/v1"),
    ("local", "/chutes.ai/v1"),
]

# Switches trio_agent implements, with the values a caller may set.
COMPAT_SWITCHES: dict[str, list[Any]] = {
    "supportsStore": [True, False],
    "supportsDeveloperRole": [True, False],
    "supportsReasoningEffort": [True, False],
    "supportsUsageInStreaming": [True, False],
    "supportsFinishReason": [True, False],
    "maxTokensField": ["max_tokens", "max_completion_tokens"],
    "requiresToolResultName": [True, False],
    "requiresAssistantAfterToolResult": [True, False],
    "requiresNonNullAssistantContent": [True, False],
    "requiresToolsWithToolHistory": [True, False],
    "thinkingFormat": ["openai", "openrouter"],
    "supportsStrictMode": [True, False],
    "supportsLongCacheRetention": [True, False],
    "promptCacheKeyMode": ["auto", "enabled", "disabled"],
}
# Switches pi reads and trio_agent does not implement (docs: "not implemented").
UNIMPLEMENTED_SWITCHES: dict[str, list[Any]] = {
    "thinkingFormat": ["deepseek", "zai", "together"],
    "requiresReasoningContentOnAssistantMessages": [True, False],
    "requiresThinkingAsText": [True],
    "sendSessionAffinityHeaders": [True, False],
    "sessionAffinityFormat": ["openai", "openrouter"],
    "cacheControlFormat": ["anthropic"],
}

THINKING_LEVEL_MAPS: list[dict[str, Any]] = [
    {"off": None},
    {"off": "none"},
    {"off": "disabled", "high": "max-effort"},
    {"minimal": None, "low": "lo"},
    {"xhigh": "xhigh"},
    {"xhigh": "extra", "max": "max"},
    {"minimal": "low", "medium": None},
]

# pi-ai's levels: "off" is none of them (pi's agent passes no level for it; trio_agent's
# "off" means the same, and the driver maps no level to no level).
LEVELS = ["minimal", "low", "medium", "high", "xhigh", "max"]
OTHER_SOURCES = [
    ("anthropic-messages", "anthropic", "claude-x"),
    ("openai-responses", "openai", "gpt-x"),
    ("openai-completions", "other", "other-model"),
]
STRICT_TOOLS = [
    {
        "name": "strict_lookup",
        "description": "Strictly typed lookup.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "nested": {"type": "object", "properties": {"x": {"type": "number"}}}},
            "required": ["a"],
        },
        "constrainedSampling": {"type": "json_schema"},
    },
    {
        "name": "loose_union",
        "description": "A schema strict mode cannot express.",
        "parameters": {"type": "object", "properties": {"v": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}},
        "constrainedSampling": {"type": "json_schema", "strict": "prefer"},
    },
]
REASONING_DETAILS_VALID = [
    {"type": "reasoning.encrypted", "data": "ENCDATA", "id": "rd1", "format": "openai-responses-v1", "index": 0},
    {"type": "reasoning.text", "text": "Step one.", "signature": "sig", "format": "anthropic-claude-v1", "index": 0},
    {"type": "reasoning.summary", "summary": "Summary.", "id": None, "format": "unknown", "index": 1},
]


# ---------------------------------------------------------------------------------------
# Model, transcript, options


def make_model(rng: random.Random) -> dict[str, Any]:
    provider, base = rng.choice(PROVIDERS)
    m = g.model(rng, API, provider)
    m["baseUrl"] = base
    if provider == "openrouter" and rng.random() < 0.3:
        m["id"] = rng.choice(["openai/gpt-x", "deepseek/deepseek-r1", "anthropic/claude-x"])
    if rng.random() < 0.05:
        m["maxTokens"] = 0
    if rng.random() < 0.3:
        m["thinkingLevelMap"] = rng.choice(THINKING_LEVEL_MAPS)
    if rng.random() < 0.15:
        m["headers"] = {"x-model-header": "m", "x-both": "model"}
    if rng.random() < 0.6:
        keys = rng.sample(sorted(COMPAT_SWITCHES), rng.randint(1, 4))
        m["compat"] = {k: rng.choice(COMPAT_SWITCHES[k]) for k in keys}
        if rng.random() < 0.2:
            extra = rng.choice(sorted(UNIMPLEMENTED_SWITCHES))
            m["compat"][extra] = rng.choice(UNIMPLEMENTED_SWITCHES[extra])
    return m


def _thinking_signature(rng: random.Random) -> str | None:
    return rng.choice(
        [
            None,
            "reasoning_content",
            "reasoning",
            "reasoning_text",
            "sig123",
            "  ",
            json.dumps(rng.sample(REASONING_DETAILS_VALID, rng.randint(1, 3))),
            json.dumps([{"type": "bogus"}]),
            json.dumps([]),
            "[not json",
        ]
    )


def _tool_call_id(rng: random.Random, api: str) -> str:
    r = rng.random()
    if r < 0.15:
        return f"call_{rng.randint(0, 10**6)}|fc_{rng.randint(0, 10**6)}+/=x"
    if r < 0.25:
        # long ids, unique within a case (a repeated id would pair results with other calls)
        return f"call_{rng.randint(0, 10**6)}_" + "x" * rng.randint(30, 55)
    if r < 0.3:
        return f"call_{rng.randint(0, 99)}|" + "i" * rng.randint(30, 60)
    return g.tool_call_id(rng, api)


def _arguments(rng: random.Random, name: str) -> dict[str, Any]:
    if name == "get_weather":
        args: dict[str, Any] = {"city": g.text(rng, 1, 2)}
        if rng.random() < 0.3:
            args["days"] = rng.randint(1, 9)
        return args
    if name == "search":
        args = {"query": g.text(rng)}
        if rng.random() < 0.3:
            args["filters"] = {"site": "example.org", "recent": rng.random() < 0.5}
        return args
    return {}


def _user(rng: random.Random, ts: int) -> dict[str, Any]:
    r = rng.random()
    content: Any
    if r < 0.55:
        content = g.text(rng)
    elif r < 0.6:
        content = rng.choice(["", "   "])
    else:
        content = []
        for _ in range(rng.randint(0, 3)):
            if rng.random() < 0.35:
                content.append({"type": "image", "data": g.PNG_1PX, "mimeType": "image/png"})
            else:
                content.append({"type": "text", "text": rng.choice([g.text(rng), "", " "])})
    return {"role": "user", "content": content, "timestamp": ts}


def transcript(rng: random.Random, m: dict[str, Any]) -> list[dict[str, Any]]:
    """A random transcript: a system message with tools, then user, assistant (same model or
    another), tool results (some missing), later system messages."""
    messages: list[dict[str, Any]] = []
    ts = 1_700_000_000_000
    pool = g.TOOLS + (STRICT_TOOLS if rng.random() < 0.3 else [])
    tools = rng.sample(pool, rng.randint(0, len(pool)))
    if rng.random() < 0.8 or tools:
        system: dict[str, Any] = {"role": "system", "content": rng.choice([g.text(rng), g.text(rng), ""]), "timestamp": ts}
        if tools:
            system["toolsAdded"] = tools
        messages.append(system)
    for turn in range(rng.randint(1, 4)):
        ts += 1000
        messages.append(_user(rng, ts))
        if turn == 0 and rng.random() < 0.3:
            break
        same = rng.random() < 0.6
        source = (m["api"], m["provider"], m["id"]) if same else rng.choice(OTHER_SOURCES)
        blocks: list[dict[str, Any]] = []
        if rng.random() < 0.45:
            for _ in range(rng.randint(1, 2)):
                block: dict[str, Any] = {"type": "thinking", "thinking": rng.choice([g.text(rng), g.text(rng), "  ", ""])}
                signature = _thinking_signature(rng)
                if signature is not None:
                    block["thinkingSignature"] = signature
                blocks.append(block)
        for _ in range(rng.choice([0, 1, 1, 1, 2])):
            blocks.append({"type": "text", "text": rng.choice([g.text(rng), g.text(rng), " ", ""])})
        calls = []
        if tools and rng.random() < 0.6:
            for _ in range(rng.randint(1, 3)):
                tool = rng.choice(tools)
                call: dict[str, Any] = {
                    "type": "toolCall",
                    "id": _tool_call_id(rng, source[0]),
                    "name": tool["name"],
                    "arguments": _arguments(rng, tool["name"]),
                }
                if rng.random() < 0.1:
                    call["thoughtSignature"] = json.dumps(REASONING_DETAILS_VALID[0])
                calls.append(call)
                blocks.append(call)
        stop = "toolUse" if calls else rng.choice(["stop", "stop", "length"])
        if rng.random() < 0.1:
            stop = rng.choice(["error", "aborted"])
        assistant: dict[str, Any] = {
            "role": "assistant",
            "content": blocks,
            "api": source[0],
            "provider": source[1],
            "model": source[2],
            "usage": g.usage(rng),
            "stopReason": stop,
            "timestamp": ts + 1,
        }
        if stop == "error":
            assistant["errorMessage"] = "boom"
        messages.append(assistant)
        for call in calls:
            if rng.random() < 0.15:
                continue  # orphaned call: the provider adds "No result provided"
            result_content: list[dict[str, Any]] = []
            r = rng.random()
            if r < 0.7:
                result_content.append({"type": "text", "text": g.text(rng)})
            elif r < 0.8:
                result_content.append({"type": "text", "text": "   "})
            if rng.random() < 0.25:
                result_content.append({"type": "image", "data": g.PNG_1PX, "mimeType": "image/png"})
            if rng.random() < 0.15:
                result_content.append({"type": "text", "text": g.text(rng)})
            messages.append(
                {
                    "role": "toolResult",
                    "toolCallId": call["id"],
                    "toolName": call["name"],
                    "content": result_content,
                    "isError": rng.random() < 0.2,
                    "timestamp": ts + 2,
                }
            )
        if rng.random() < 0.15:
            later: dict[str, Any] = {"role": "system", "content": rng.choice([g.text(rng), ""]), "timestamp": ts + 3}
            if rng.random() < 0.3:
                later["toolsAdded"] = [rng.choice(g.TOOLS)]
            if tools and rng.random() < 0.3:
                later["toolsRemoved"] = [{"name": rng.choice(tools)["name"]}]
            messages.append(later)
    if messages[-1]["role"] == "assistant" or rng.random() < 0.5 and messages[-1]["role"] != "user":
        messages.append(_user(rng, ts + 10))
    return messages


def options(rng: random.Random) -> dict[str, Any]:
    o: dict[str, Any] = {}
    if rng.random() < 0.6:
        o["reasoning"] = rng.choice(LEVELS)
    if rng.random() < 0.35:
        o["maxTokens"] = rng.choice([1, 100, 2048, 64000, 0])
    if rng.random() < 0.3:
        o["temperature"] = rng.choice([0, 0.2, 1, 1.5])
    if rng.random() < 0.4:
        o["sessionId"] = rng.choice([f"session-{rng.randint(0, 99)}", "s" * 70, "sess-ünïcødé-" + "é" * 60])
    if rng.random() < 0.3:
        o["cacheRetention"] = rng.choice(["none", "short", "long"])
    if rng.random() < 0.1:
        o["thinkingBudgets"] = {"low": 1024, "medium": 4096, "high": 9000}
    if rng.random() < 0.15:
        o["headers"] = rng.choice(
            [{"x-extra": "1"}, {"x-both": "options"}, {"x-model-header": None}, {"Authorization": "Bearer sk-caller-0000"}]
        )
    return o


# ---------------------------------------------------------------------------------------
# Responses


class _Chunks:
    """Builds the chunk list of one streamed completion."""

    def __init__(self, rng: random.Random, model_id: str) -> None:
        self.rng = rng
        self.items: list[tuple[str | None, Any]] = []
        reported = model_id if rng.random() < 0.8 else rng.choice(["routed-1", ""])
        self.base: dict[str, Any] = {"id": rng.choice(["chatcmpl-1", "gen-abc", ""]), "object": "chat.completion.chunk", "created": 1, "model": reported}
        self.switch_model = rng.random() < 0.1

    def add(self, delta: dict[str, Any] | None = None, *, finish: Any = "<absent>", **extra: Any) -> None:
        choice: dict[str, Any] = {"index": 0, "delta": delta if delta is not None else {}}
        if finish != "<absent>":
            choice["finish_reason"] = finish
        elif self.rng.random() < 0.3:
            choice["finish_reason"] = None
        data = {**self.base, "choices": [choice], **extra}
        if self.switch_model and len(self.items) == 2:
            data["model"] = "routed-2"
        self.items.append((None, data))


def _split(rng: random.Random, s: str) -> list[str]:
    if not s or rng.random() < 0.2:
        return [s]
    n = rng.randint(1, min(len(s), 8))
    points = sorted(rng.sample(range(1, len(s)), min(n - 1, len(s) - 1))) if len(s) > 1 else []
    return [s[a:b] for a, b in zip([0, *points], [*points, len(s)], strict=True)]


def _usage(rng: random.Random, m: dict[str, Any]) -> dict[str, Any] | None:
    r = rng.random()
    if r < 0.15:
        return None
    prompt, completion = rng.randint(0, 500), rng.randint(0, 200)
    u: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if rng.random() < 0.05:
        u = {"prompt_tokens": None, "completion_tokens": completion, "prompt_tokens_details": None, "completion_tokens_details": None}
    if rng.random() < 0.3:
        u["prompt_tokens_details"] = {"cached_tokens": rng.randint(0, prompt)}
        if rng.random() < 0.4:
            u["prompt_tokens_details"]["cache_write_tokens"] = rng.randint(0, prompt // 4)
    elif rng.random() < 0.15:
        u["prompt_cache_hit_tokens"] = rng.randint(0, prompt)
    elif rng.random() < 0.15:
        u["cached_tokens"] = rng.randint(0, prompt)
    if rng.random() < 0.3:
        u["completion_tokens_details"] = {"reasoning_tokens": rng.randint(0, completion)}
    elif rng.random() < 0.1:
        u["reasoning_tokens"] = rng.randint(0, completion)
    if rng.random() < 0.25:
        u["cost"] = rng.choice([0.00123, 0, -1, "0.5"])
        if rng.random() < 0.7:
            u["is_byok"] = rng.choice([True, False])
        if rng.random() < 0.5:
            u["cost_details"] = rng.choice(
                [
                    {"upstream_inference_cost": 0.002},
                    {"upstream_inference_cost": None, "upstream_inference_prompt_cost": 0.001, "upstream_inference_completions_cost": 0.0005},
                    {"upstream_inference_cost": None, "upstream_inference_prompt_cost": None},
                ]
            )
    return u


FINISH_REASONS = ["stop", "stop", "stop", "length", "tool_calls", "function_call", "end", "content_filter", "network_error", "weird_reason", None, "<absent>"]


def stream_body(rng: random.Random, m: dict[str, Any]) -> tuple[list[tuple[str | None, Any]], bool]:
    """The chunks of a streamed completion, and whether ``[DONE]`` follows."""
    c = _Chunks(rng, m["id"])
    if rng.random() < 0.2:
        c.add({"role": "assistant", "content": ""})
    if rng.random() < 0.35:
        field = rng.choice(["reasoning_content", "reasoning", "reasoning_text"])
        both = rng.random() < 0.15
        for piece in g.text(rng, 1, 4).split(" "):
            delta: dict[str, Any] = {field: piece + " "}
            if both:
                delta["reasoning"] = piece + " "
            if rng.random() < 0.1:
                delta["content"] = "x"  # reasoning and answer in one delta (LiteLLM)
            c.add(delta)
    if rng.random() < 0.2:
        details = []
        for _ in range(rng.randint(1, 3)):
            details.append(rng.choice(REASONING_DETAILS_VALID + [{"type": "bogus"}, {"type": "reasoning.text", "text": 5}]))
        c.add({"reasoning_details": details})
    if rng.random() < 0.8:
        for piece in g.text(rng, 1, 6).split(" "):
            c.add({"content": piece + " "})
    finish = rng.choice(FINISH_REASONS)
    if rng.random() < 0.1:
        # complete calls in one delta each, without index (keyed by id)
        for k in range(rng.randint(1, 2)):
            name = rng.choice(["get_weather", "search"])
            c.add({"tool_calls": [{"id": f"call_x{k}", "type": "function", "function": {"name": name, "arguments": json.dumps(_arguments(rng, name))}}]})
        finish = "tool_calls"
    if rng.random() < 0.4:
        n_calls = rng.randint(1, 3)
        for k in range(n_calls):
            name = rng.choice(["get_weather", "search", "noop"])
            args = rng.choice(
                [
                    json.dumps(_arguments(rng, name), ensure_ascii=rng.random() < 0.5),
                    "",
                    "{}",
                    '{"city": "Par',
                    '{"query": "a\\u00e9\\ud83c\\udf89"}',
                    "not json",
                ]
            )
            index = k if rng.random() < 0.9 else None
            first: dict[str, Any] = {"id": f"call_{k}_{rng.randint(0, 999)}", "type": "function", "function": {"name": name, "arguments": ""}}
            late_name = index is not None and rng.random() < 0.1
            if late_name:
                first["function"] = {"arguments": ""}
            if index is not None:
                first["index"] = index
            c.add({"tool_calls": [first]})
            if late_name:
                c.add({"tool_calls": [{"index": index, "function": {"name": name}}]})
            for piece in _split(rng, args):
                entry: dict[str, Any] = {"function": {"arguments": piece}}
                if index is not None:
                    entry["index"] = index
                else:
                    entry["id"] = first["id"]
                c.add({"tool_calls": [entry]})
        if rng.random() < 0.7:
            finish = "tool_calls"
        if rng.random() < 0.15:
            c.add({"content": "after the calls"})
    if rng.random() < 0.05:
        c.items.append((None, [1, 2, 3]))
        c.items.append((None, "str"))
    if rng.random() < 0.05:
        c.items.append((None, {**c.base, "choices": [{"index": 0}]}))  # a choice without delta
    if rng.random() < 0.05:
        c.add({"content": None, "tool_calls": None})
    usage = _usage(rng, m)
    where = rng.random()
    if usage is not None and where < 0.15:
        c.add({}, finish=finish, usage=usage)
    elif usage is not None and where < 0.25:
        c.items.append((None, {**c.base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish if finish != "<absent>" else None, "usage": usage}]}))
    else:
        if finish != "<absent>":
            c.add({}, finish=finish)
        if usage is not None:
            c.items.append((None, {**c.base, "choices": [], "usage": usage}))
    return c.items, rng.random() < 0.85


def frame(rng: random.Random, items: list[tuple[str | None, Any]], done: bool) -> str:
    """SSE text with random framing: CRLF, comments, ``id:`` lines, a BOM, no final blank line."""
    eol = "\r\n" if rng.random() < 0.15 else "\n"
    comments = rng.random() < 0.15
    ids = rng.random() < 0.1
    no_space = rng.random() < 0.1
    split_data = rng.random() < 0.1
    named = rng.random() < 0.05
    out = []
    if comments:
        out.append(": keep-alive" + eol + eol)
    for n, (name, data) in enumerate(items):
        head = f"event: {name}{eol}" if name else ""
        if ids:
            head += f"id: {n}{eol}"
        body = data if isinstance(data, str) and name == "<raw>" else json.dumps(data, ensure_ascii=rng.random() < 0.3)
        if name == "<raw>":
            head = ""
        elif named and not name:
            head = f"event: message{eol}" + head
        if split_data and name != "<raw>" and isinstance(data, dict):
            # the same JSON over two data: lines (joined with a newline, JSON whitespace)
            text = json.dumps(data)
            cut = text.index(",") + 1 if "," in text else len(text)
            out.append(f"{head}data: {text[:cut]}{eol}data: {text[cut:]}{eol}{eol}")
            continue
        out.append(f"{head}data:{'' if no_space else ' '}{body}{eol}{eol}")
        if comments and rng.random() < 0.2:
            out.append(": ping" + eol + eol)
    if done:
        out.append(f"data: [DONE]{eol}{eol}")
    text = "".join(out)
    if rng.random() < 0.1:
        text = text.rstrip("\r\n") + eol  # no blank line after the last event
    if rng.random() < 0.05:
        text = "\ufeff" + text
    return text


def http_error(rng: random.Random, status: int) -> dict[str, Any]:
    kind = rng.choice(["json", "json", "text", "empty", "long", "array", "message", "nested_raw", "no_message", "no_message"])
    headers = {"Content-Type": "application/json"}
    if kind == "json":
        body = json.dumps({"error": {"message": f"bad thing {status}", "type": "invalid_request_error", "param": None, "code": "x"}})
    elif kind == "text":
        headers = {"Content-Type": "text/plain"}
        body = rng.choice(["upstream exploded", "<html><body>Bad Gateway</body></html>\n", "y" * 5000, "  padded  \n"])
    elif kind == "empty":
        body = ""
    elif kind == "long":
        body = json.dumps({"error": {"message": "x" * 5000, "code": 7}})
    elif kind == "array":
        body = "[1,2]"
    elif kind == "message":
        body = json.dumps({"message": "top-level message", "code": 7})
    elif kind == "no_message":
        body = rng.choice(g.NO_MESSAGE_BODIES)
    else:
        body = json.dumps({"error": {"message": "Provider returned error", "code": status, "metadata": {"raw": "raw upstream text"}}})
    return {"status": status, "headers": headers, "body": body, "cuts": g.cuts(rng, body)}


def responses(rng: random.Random, m: dict[str, Any], o: dict[str, Any]) -> tuple[list[dict[str, Any]], int | None]:
    """The server's responses for a case and an optional ``abortAfter``."""
    r = rng.random()
    if r < 0.6:
        items, done = stream_body(rng, m)
        abort = rng.randint(1, 6) if rng.random() < 0.05 else None
        return [g.ok(frame(rng, items, done), rng)], abort
    if r < 0.72:
        status = rng.choice([400, 401, 404, 429, 500, 503])
        first = http_error(rng, status)
        if rng.random() < 0.15:
            first["headers"]["x-should-retry"] = "true"
            first["headers"]["retry-after-ms"] = "0"
            o["maxRetries"] = 1
            items, done = stream_body(rng, m)
            return [first, g.ok(frame(rng, items, done), rng)], None
        return [first], None
    if r < 0.8:
        # a retryable status, then a stream
        status = rng.choice([429, 503, 500])
        first = http_error(rng, status)
        delay = rng.choice(["retry-after-ms", "retry-after", "retry-after-big", None])
        if delay == "retry-after-ms":
            first["headers"]["retry-after-ms"] = str(rng.choice([5, 20]))
        elif delay == "retry-after":
            first["headers"]["retry-after"] = "0"
        elif delay == "retry-after-big":
            first["headers"]["retry-after"] = "120"
        elif rng.random() < 0.2:
            pass  # exponential backoff (about half a second)
        else:
            first["headers"]["retry-after-ms"] = "0"
        if rng.random() < 0.15:
            first["headers"]["x-should-retry"] = rng.choice(["true", "false"])
        o["maxRetries"] = rng.choice([0, 1, 2])
        if rng.random() < 0.3:
            # 0 disables the cap: never with the 120 s delay
            o["maxRetryDelayMs"] = 5000 if delay == "retry-after-big" else rng.choice([0, 5000])
        items, done = stream_body(rng, m)
        return [first, g.ok(frame(rng, items, done), rng)], None
    if r < 0.84:
        body = json.dumps({"error": {"message": "The model is overloaded", "type": "server_error"}})
        return [{"status": 200, "headers": {"Content-Type": "application/json"}, "body": body, "cuts": g.cuts(rng, body)}], None
    items, done = stream_body(rng, m)
    keep = rng.randint(0, max(0, len(items) - 1))
    items = items[:keep]
    kind = rng.choice(["error_chunk", "error_event", "malformed", "disconnect"])
    response: dict[str, Any]
    if kind == "error_chunk":
        err: dict[str, Any] = {"message": "Upstream provider error", "code": 502}
        if rng.random() < 0.5:
            err["metadata"] = {"raw": rng.choice(["raw upstream text", "Upstream provider error"])}
        items.append((None, {"error": err}))
        response = g.ok(frame(rng, items, done), rng)
    elif kind == "error_event":
        items.append(("error", rng.choice([{"error": {"message": "nested boom", "code": "x"}}, {"message": "boom"}])))
        response = g.ok(frame(rng, items, done), rng)
    elif kind == "malformed":
        items.append(("<raw>", rng.choice(["{this is not json}", '{"choices": [', ""])))
        response = g.ok(frame(rng, items, done), rng)
    else:
        text = frame(rng, items, False)
        response = g.ok(text, rng)
        response["disconnect"] = True
    return [response], None


def make_case(rng: random.Random, case_id: str) -> dict[str, Any]:
    m = make_model(rng)
    o = options(rng)
    rs, abort = responses(rng, m, o)
    case: dict[str, Any] = {
        "id": case_id,
        "model": m,
        "context": {"messages": transcript(rng, m)},
        "options": o,
        "responses": rs,
    }
    if abort is not None:
        case["abortAfter"] = abort
    return case


# ---------------------------------------------------------------------------------------
# Documented differences (docs/differences.md): (section, normalize(case, kind, pi, ta)).


def pi_compat(m: dict[str, Any]) -> dict[str, Any]:
    """The switches of pi 1.6.0's detection that trio_agent does not implement (documented
    as not implemented), after the model's explicit ``compat``."""
    provider, url = m["provider"], m["baseUrl"]
    deepseek = provider == "deepseek" or "deepseek.com" in url.lower()
    zai = provider in ("zai", "zai-coding-cn") or "api.z.ai" in url or "open.bigmodel.cn" in url
    together = provider == "together" or "api.together.ai" in url or "api.together.xyz" in url
    openrouter = provider == "openrouter" or "openrouter.ai" in url
    detected = {
        "thinkingFormat": "deepseek" if deepseek else "zai" if zai else "together" if together else "openrouter" if openrouter else "openai",
        "requiresReasoningContentOnAssistantMessages": deepseek,
        "sendSessionAffinityHeaders": openrouter,
        "requiresThinkingAsText": False,
        "cacheControlFormat": "anthropic" if provider == "openrouter" and m["id"].startswith("anthropic/") else None,
    }
    return {k: (m.get("compat") or {}).get(k, v) for k, v in detected.items()}


def _arguments_error(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # "Argument errors": the JSON parser's wording before "Received arguments:" differs.
    def cut(value: Any) -> Any:
        if isinstance(value, dict) and isinstance(value.get("argumentsError"), str):
            head, sep, tail = value["argumentsError"].partition("\n\nReceived arguments:")
            if sep:
                value = {**value, "argumentsError": "<parse error>" + sep + tail}
        return value

    if kind != "events":
        return pi, ta
    return g.walk(pi, cut), g.walk(ta, cut)


def _terminal(record: Any) -> dict[str, Any] | None:
    if isinstance(record, dict) and record.get("events"):
        last = record["events"][-1]
        return last.get("error") if last.get("type") == "error" else None
    return None


def _json_body_200(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # F17: a 200 answer whose body is JSON is reported with the server's message.
    if kind != "events" or not any(r["status"] == 200 and r.get("body", "").lstrip().startswith("{") for r in case["responses"]):
        return pi, ta
    p, t = _terminal(pi), _terminal(ta)
    if not (t and t["errorMessage"].startswith("200: ") and not t["content"]):
        return pi, ta
    if p and p["errorMessage"] == "Stream ended without finish_reason":
        t["errorMessage"] = p["errorMessage"]
    elif pi["events"][-1]["type"] == "done" and not pi["events"][-1]["message"]["content"]:
        # without supportsFinishReason pi reports the empty stream as a finished answer
        ta["events"][-1] = pi["events"][-1]
    return pi, ta


def _drop_ends_before_error(record: Any) -> None:
    events = record["events"]
    while len(events) >= 2 and events[-2]["type"] in ("text_end", "thinking_end", "toolcall_end"):
        del events[-2]


def _dropped_connection(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # U05: a dropped connection; texts differ, and pi closes no block before the error.
    if kind != "events" or not any(r.get("disconnect") for r in case["responses"]):
        return pi, ta
    p, t = _terminal(pi), _terminal(ta)
    if p and t and re.match(r"Connection error \([^)]*\): peer closed connection", t["errorMessage"]):
        t["errorMessage"] = p["errorMessage"]
        _drop_ends_before_error(ta)
        _drop_ends_before_error(pi)
    return pi, ta


def _dropped_turn_results(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # U40: pi still sends the results of an error/aborted assistant message it dropped
    # (and the image message and bridge that follow them when trio_agent sends none).
    if kind != "request":
        return pi, ta
    for request, other in zip(pi, ta):
        messages = (request.get("body") or {}).get("messages")
        theirs = (other.get("body") or {}).get("messages") or []
        if not isinstance(messages, list):
            continue
        known: set[str] = set()
        kept: list[Any] = []
        dropped_run = False
        for message in messages:
            role = message.get("role")
            if role == "assistant":
                known.update(c["id"] for c in message.get("tool_calls") or [])
            if role == "tool" and message.get("tool_call_id") not in known:
                dropped_run = True
                continue
            if dropped_run and role != "tool":
                at = len(kept)
                counterpart = theirs[at] if at < len(theirs) else None
                if counterpart != message:
                    content = message.get("content")
                    if role == "assistant" and content == "I have processed the tool results.":
                        continue
                    if role == "user" and isinstance(content, list) and content and content[0].get("text") == "Attached image(s) from tool result:":
                        continue
            if role not in ("tool", "assistant") or (role == "assistant" and message.get("content") != "I have processed the tool results."):
                dropped_run = False
            kept.append(message)
        request["body"]["messages"] = kept
    return pi, ta


def _not_implemented(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # "Not implemented": the deepseek/zai/together thinking formats,
    # requiresReasoningContentOnAssistantMessages and session-affinity headers.
    if kind != "request":
        return pi, ta
    m = case["model"]
    compat = pi_compat(m)
    for p, t in zip(pi, ta):
        pb, tb = p.get("body") or {}, t.get("body") or {}
        if compat["thinkingFormat"] in ("deepseek", "zai", "together") and m["reasoning"]:
            pb.pop("thinking", None)
            if compat["thinkingFormat"] == "together":
                pb.pop("reasoning", None)
            pb.pop("reasoning_effort", None)
            tb.pop("reasoning_effort", None)
        retention = case["options"].get("cacheRetention", "short")
        if compat["cacheControlFormat"] == "anthropic" and retention != "none":
            _strip_cache_control(pb, tb)
        for header in ("x-session-id", "session_id", "x-client-request-id", "x-session-affinity", "x-opencode-session"):
            if header in p["headers"] and header not in t["headers"]:
                if header != "x-opencode-session" or m["provider"] in ("opencode", "opencode-go"):
                    if header == "x-opencode-session" or compat["sendSessionAffinityHeaders"]:
                        del p["headers"][header]
    return pi, ta


def _not_implemented_messages(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # "Not implemented", per message (after U40 so that the messages line up):
    # requiresThinkingAsText and requiresReasoningContentOnAssistantMessages.
    if kind != "request":
        return pi, ta
    m = case["model"]
    compat = pi_compat(m)
    for p, t in zip(pi, ta):
        pb, tb = p.get("body") or {}, t.get("body") or {}
        if compat["requiresThinkingAsText"] and isinstance(pb.get("messages"), list):
            # pi sends thinking as a text part (an assistant message of thinking only too)
            theirs = tb.get("messages") or []
            kept: list[Any] = []
            for pm in pb["messages"]:
                tm = theirs[len(kept)] if len(kept) < len(theirs) else {}
                if pm.get("role") == "assistant" and isinstance(pm.get("content"), list):
                    if tm.get("role") != "assistant":
                        continue
                    pm = tm
                kept.append(pm)
            pb["messages"] = kept
        if compat["requiresReasoningContentOnAssistantMessages"] and m["reasoning"]:
            for pm, tm in zip(pb.get("messages") or [], tb.get("messages") or []):
                if pm.get("role") == "assistant" and pm.get("reasoning_content") == "" and "reasoning_content" not in tm:
                    del pm["reasoning_content"]
    return pi, ta


def _strip_cache_control(pb: dict[str, Any], tb: dict[str, Any]) -> None:
    # cacheControlFormat "anthropic": pi marks the system prompt, the last tool and the last
    # message with cache_control, turning their string content into one text part.
    for tool in pb.get("tools") or []:
        tool.pop("cache_control", None)
    user_strings = {m["content"] for m in tb.get("messages") or [] if m.get("role") == "user" and isinstance(m.get("content"), str)}
    theirs = tb.get("messages") or []
    aligned = len(theirs) == len(pb.get("messages") or [])
    for position, pm in enumerate(pb.get("messages") or []):
        content = pm.get("content")
        if isinstance(content, list):
            marked = any(isinstance(part, dict) and "cache_control" in part for part in content)
            for part in content:
                if isinstance(part, dict):
                    part.pop("cache_control", None)
            if marked and len(content) == 1:
                text = content[0].get("text")
                # pi turned string content into one marked part; a user's own list stays
                own_list = aligned and isinstance(theirs[position].get("content"), list)
                if not own_list and (pm.get("role") != "user" or text in user_strings):
                    pm["content"] = text


def _empty_data(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # An empty data: line is skipped (Completions); pi fails on it as malformed JSON.
    import re

    if kind != "events" or not any(re.search(r"(^|\n|\ufeff)data: ?\r?\n", r.get("body", "")) for r in case["responses"]):
        return pi, ta
    p, t = _terminal(pi), _terminal(ta)
    if p and p["errorMessage"] == "Error reading response: malformed server-sent event JSON.":
        events = ta["events"]
        n = len(pi["events"]) - 1
        ta["events"] = events[:n] + [pi["events"][-1]]
    return pi, ta


def _abort(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # An abort ends the stream at once: trio_agent closes no block, and how many events
    # arrive after the abort depends on timing on both sides.
    n = case.get("abortAfter")
    if kind != "events" or n is None:
        return pi, ta
    p, t = _terminal(pi), _terminal(ta)
    if p and t and t["stopReason"] == "aborted" and p["stopReason"] == "error":
        # pi had read the whole body (and failed on it) before the abort was seen;
        # trio_agent saw the abort first, with the same events before it
        seen = len(ta["events"]) - 1
        if seen >= n and ta["events"][:seen] == pi["events"][:seen]:
            ta["events"] = pi["events"]
        return pi, ta
    if p and t and p["stopReason"] == t["stopReason"] == "aborted":
        for record in (pi, ta):
            last = record["events"][-1]
            error = {k: v for k, v in last["error"].items() if k not in ("content", "usage", "responseId", "responseModel")}
            record["events"] = record["events"][:n] + [{**last, "error": error}]
    return pi, ta


def _bridge(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # pi bridges after tool results even before a user message it then leaves out.
    if kind != "request":
        return pi, ta
    for request in pi:
        messages = (request.get("body") or {}).get("messages")
        if not isinstance(messages, list):
            continue
        kept = []
        for n, message in enumerate(messages):
            following = messages[n + 1] if n + 1 < len(messages) else None
            if (
                message.get("role") == "assistant"
                and message.get("content") == "I have processed the tool results."
                and (following is None or following.get("role") != "user")
            ):
                continue
            kept.append(message)
        request["body"]["messages"] = kept
    return pi, ta


def _zero_max_tokens(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    # U42 and "A zero limit sends no limit field": an explicit maxTokens of 0 means the
    # model's limit; a model limit of 0 sends no field (pi sends 1 without a window).
    explicit = case["options"].get("maxTokens") == 0
    model_zero = case["model"]["maxTokens"] == 0 and not case["options"].get("maxTokens")
    if kind != "request" or not (explicit or model_zero):
        return pi, ta
    for p, t in zip(pi, ta):
        for field in ("max_tokens", "max_completion_tokens"):
            pb, tb = p.get("body") or {}, t.get("body") or {}
            if explicit and field in tb and pb.get(field) in (None, 1):
                del tb[field]
                pb.pop(field, None)
            elif model_zero and pb.get(field) == 1 and field not in tb:
                del pb[field]
    return pi, ta


DOCUMENTED: list[tuple[str, Any]] = [
    ("Smaller provider differences: Missing key", g.missing_key_hint),
    # first: it undoes request changes of switches trio_agent does not implement
    ("Smaller provider differences: not implemented", _not_implemented),
    ("U42 · max_tokens=0 means the model's limit; a zero model limit sends none", _zero_max_tokens),
    ("The bridge after tool results precedes a user message (Completions)", _bridge),
    ("Smaller provider differences: argument errors", _arguments_error),
    ("Smaller provider differences: argument errors (half surrogate pairs)", g.half_surrogate),
    ("F17 · A 200 response whose body is JSON, not a stream", _json_body_200),
    ("U05 · A body cut inside an event, or a dropped connection", _dropped_connection),
    ("U40 · Tool results of a dropped failed turn are not sent", _dropped_turn_results),
    ("Smaller provider differences: not implemented (per message)", _not_implemented_messages),
    ("An empty data: line is skipped (Completions)", _empty_data),
    ("An aborted stream ends at once (Completions)", _abort),
]
