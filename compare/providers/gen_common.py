"""Random models, transcripts and options in pi's JSON shape, shared by the API generators."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

PNG_1PX = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c63f8cfc0f01f0005000201a1e5a3ee0000000049454e44ae426082"
    )
).decode()

WORDS = ["alpha", "beta", "gamma", "δέλτα", "emoji 🎉", "tab\there", "quote\"s", "new\nline", "日本語", " "]

TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
    {
        "name": "search",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "filters": {
                    "type": "object",
                    "properties": {"site": {"type": "string"}, "recent": {"type": "boolean"}},
                },
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["query"],
        },
    },
    {
        "name": "noop",
        "description": "Takes nothing.",
        "parameters": {"type": "object", "properties": {}},
    },
]

PRICES = {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}

# JSON error bodies without a usable message (issue 18 item 14): error objects whose
# message is missing, empty, null, 0 or an object; empty, string and null documents; and
# an object too long for the message limit.
NO_MESSAGE_BODIES = [
    '{"code":"x","type":"bad"}',
    '{"error":{"code":"x","type":"bad"}}',
    '{"error":{"message":"","code":1}}',
    '{"error":{"message":null,"type":"t","param":null}}',
    '{"error":{"message":0}}',
    '{"error":{"message":{"a":1}}}',
    r'{"error":{"type":"bad","detail":"caf\u00e9 \ud83c\udf89"}}',
    '{"error":null,"code":"x"}',
    "{}",
    '"just a string"',
    "null",
    "0",
    '{"code":"' + "z" * 4100 + '"}',
]


def text(rng: random.Random, lo: int = 1, hi: int = 4) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def usage(rng: random.Random) -> dict[str, Any]:
    return {
        "input": rng.randint(0, 50),
        "output": rng.randint(0, 50),
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def model(
    rng: random.Random,
    api: str,
    provider: str,
    *,
    compat: dict[str, Any] | None = None,
    reasoning: bool | None = None,
) -> dict[str, Any]:
    """A model in pi's JSON shape; ``baseUrl`` is the path appended to the server prefix."""
    m: dict[str, Any] = {
        "id": rng.choice(["model-a", "model-b"]),
        "name": "Model",
        "api": api,
        "provider": provider,
        "baseUrl": "/v1" if api != "anthropic-messages" else "",
        "reasoning": rng.random() < 0.5 if reasoning is None else reasoning,
        "input": ["text", "image"] if rng.random() < 0.6 else ["text"],
        "cost": dict(PRICES),
        "contextWindow": rng.choice([0, 8192, 128000, 200000]),
        "maxTokens": rng.choice([1024, 4096, 32000]),
    }
    if compat:
        m["compat"] = compat
    return m


def tool_call_id(rng: random.Random, api: str) -> str:
    if api == "openai-responses":
        return f"call_{rng.randint(0, 10**6)}|fc_{rng.randint(0, 10**6)}"
    if api == "anthropic-messages":
        return f"toolu_{rng.randint(0, 10**6):06d}"
    return f"call_{rng.randint(0, 10**6)}"


def transcript(rng: random.Random, m: dict[str, Any]) -> list[dict[str, Any]]:
    """A random transcript: system message(s) with tools, then user/assistant/tool turns."""
    messages: list[dict[str, Any]] = []
    ts = 1_700_000_000_000
    tools = rng.sample(TOOLS, rng.randint(0, len(TOOLS)))
    if rng.random() < 0.8 or tools:
        system: dict[str, Any] = {"role": "system", "content": text(rng), "timestamp": ts}
        if tools:
            system["toolsAdded"] = tools
        messages.append(system)
    for turn in range(rng.randint(1, 3)):
        ts += 1000
        content: Any = text(rng)
        if rng.random() < 0.3:
            content = [{"type": "text", "text": text(rng)}]
            if rng.random() < 0.5:
                content.append({"type": "image", "data": PNG_1PX, "mimeType": "image/png"})
        messages.append({"role": "user", "content": content, "timestamp": ts})
        if turn == 0 and rng.random() < 0.4:
            break
        same = rng.random() < 0.6
        source = (
            (m["api"], m["provider"], m["id"]) if same else (rng.choice(["openai-completions", "anthropic-messages", "openai-responses"]), "other", "other-model")
        )
        blocks: list[dict[str, Any]] = []
        if rng.random() < 0.4:
            block: dict[str, Any] = {"type": "thinking", "thinking": text(rng)}
            if rng.random() < 0.5:
                block["thinkingSignature"] = rng.choice(["sig123", json.dumps({"type": "reasoning", "id": "rs_1", "summary": []})])
            blocks.append(block)
        if rng.random() < 0.7:
            blocks.append({"type": "text", "text": text(rng)})
        calls = []
        if tools and rng.random() < 0.6:
            for _ in range(rng.randint(1, 2)):
                tool = rng.choice(tools)
                call = {
                    "type": "toolCall",
                    "id": tool_call_id(rng, source[0]),
                    "name": tool["name"],
                    "arguments": {"city": text(rng, 1, 1)} if tool["name"] == "get_weather" else ({"query": text(rng)} if tool["name"] == "search" else {}),
                }
                calls.append(call)
                blocks.append(call)
        stop = "toolUse" if calls else rng.choice(["stop", "stop", "length", "error", "aborted"])
        assistant: dict[str, Any] = {
            "role": "assistant",
            "content": blocks,
            "api": source[0],
            "provider": source[1],
            "model": source[2],
            "usage": usage(rng),
            "stopReason": stop,
            "timestamp": ts + 1,
        }
        if stop == "error":
            assistant["errorMessage"] = "boom"
        messages.append(assistant)
        for call in calls:
            if rng.random() < 0.15:
                continue  # orphaned call: the provider adds "No result provided"
            result_content: list[dict[str, Any]] = [{"type": "text", "text": text(rng)}]
            if rng.random() < 0.2:
                result_content.append({"type": "image", "data": PNG_1PX, "mimeType": "image/png"})
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
            messages.append({"role": "system", "content": text(rng), "timestamp": ts + 3})
    if messages[-1]["role"] == "assistant":
        messages.append({"role": "user", "content": text(rng), "timestamp": ts + 10})
    return messages


def cuts(rng: random.Random, body: str) -> list[int]:
    """Random byte offsets to split a body at (sometimes none, sometimes many)."""
    size = len(body.encode("utf-8"))
    if size < 2 or rng.random() < 0.3:
        return []
    k = rng.choice([1, 3, 10, size // 4 or 1])
    return sorted(rng.sample(range(1, size), min(k, size - 1)))


def ok(body: str, rng: random.Random, *, content_type: str = "text/event-stream") -> dict[str, Any]:
    return {"status": 200, "headers": {"Content-Type": content_type}, "body": body, "cuts": cuts(rng, body)}


def walk(value: Any, fn: Any) -> Any:
    """Apply ``fn`` to ``value``, then to every member of what it returned, depth first."""
    value = fn(value)
    if isinstance(value, list):
        return [walk(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: walk(v, fn) for k, v in value.items()}
    return value


def half_surrogate(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """Documented rule ("Smaller provider differences: argument errors"): a streamed
    argument preview holds back half a surrogate pair, which a JavaScript string keeps."""

    def cut(value: Any) -> Any:
        if isinstance(value, str) and value and "\ud800" <= value[-1] <= "\udbff":
            return value[:-1]
        return value

    if kind != "events":
        return pi, ta
    return walk(pi, cut), ta


def missing_key_hint(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """Documented rule ("Smaller provider differences: Missing key"): trio_agent's
    ``No API key for provider: <provider>`` goes on with what to set, in parentheses."""
    if kind != "events":
        return pi, ta
    for p_event, t_event in zip(pi.get("events", []), ta.get("events", [])):
        pm, tm = p_event.get("error"), t_event.get("error")
        if not isinstance(pm, dict) or not isinstance(tm, dict):
            continue
        text = pm.get("errorMessage")
        if isinstance(text, str) and text.startswith("No API key for provider: "):
            if str(tm.get("errorMessage", "")).startswith(text + " ("):
                tm["errorMessage"] = text
    return pi, ta
