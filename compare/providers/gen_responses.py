"""Cases for ``openai-responses``: requests from random models, transcripts and options, and
Responses SSE streams (reasoning, messages, refusals, function calls, every terminal status),
HTTP errors, retries, aborts and SSE framing variants.

``DOCUMENTED`` lists the differences docs/differences.md documents for this API, each as a
narrow normalize rule (see run_diff.py ``documented_rules``).
"""

from __future__ import annotations

import copy
import json
import random
import re
from typing import Any

import gen_common as g

API = "openai-responses"

# ---------------------------------------------------------------------------------------
# Model and options

PROVIDERS = ["openai"] * 8 + ["openai-codex", "opencode", "openrouter", "azure-openai-responses", "xai", "custom"]
# pi-ai's levels: "off" is none of them (pi's agent passes no level for it; trio_agent's
# "off" means the same, and the driver maps no level to no level).
LEVELS = ["minimal", "low", "medium", "high", "xhigh", "max"]
LEVEL_MAPS: list[dict[str, Any] | None] = [
    None,
    None,
    None,
    {"off": None},
    {"xhigh": "xhigh"},
    {"minimal": None, "low": "lo"},
    {"off": "minimal", "high": "max-effort"},
    {"minimal": None, "off": None, "xhigh": "xhigh"},
    {"max": "max", "xhigh": "xhigh"},
    {"max": "maximum"},
]
CONSTRAINED_TOOL = {
    "name": "sum",
    "description": "Add two numbers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a"],
    },
    "constrainedSampling": {"type": "json_schema", "strict": "prefer"},
}
UNCONVERTIBLE_TOOL = {
    "name": "tree",
    "description": "Takes a tree.",
    "parameters": {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/node"}},
        "$defs": {"node": {"type": "object"}},
    },
    "constrainedSampling": {"type": "json_schema", "strict": "prefer"},
}
ALL_TOOLS = [*g.TOOLS, CONSTRAINED_TOOL, UNCONVERTIBLE_TOOL]


def make_model(rng: random.Random) -> dict[str, Any]:
    provider = rng.choice(PROVIDERS)
    compat: dict[str, Any] = {}
    if rng.random() < 0.1:
        compat["supportsDeveloperRole"] = False
    if rng.random() < 0.1:
        compat["promptCacheKeyMode"] = "disabled"
    if rng.random() < 0.1:
        compat["supportsLongCacheRetention"] = False
    if rng.random() < 0.25:
        compat["supportsStrictMode"] = True
    if rng.random() < 0.1:
        compat["supportsMaxOutputTokens"] = False
    if rng.random() < 0.08:
        compat["sessionAffinityFormat"] = rng.choice(["openai", "openrouter", "none"])
    if rng.random() < 0.08:
        compat["supportsExplicitPromptCacheMode"] = True
    m = g.model(rng, API, provider, compat=compat or None)
    m["id"] = rng.choice(["model-a", "model-b", "gpt-5.5"])
    m["contextWindow"] = rng.choice([0, 8192, 16000, 40000, 128000, 400000])
    m["maxTokens"] = rng.choice([0, 1024, 4096, 32000, 128000])
    if m["reasoning"]:
        level_map = rng.choice(LEVEL_MAPS)
        if level_map is not None:
            m["thinkingLevelMap"] = level_map
    if rng.random() < 0.15:
        m["headers"] = {"x-model-header": "m", "x-both": "from-model"}
    if rng.random() < 0.05:
        m["baseUrl"] = rng.choice(["/openrouter.ai/v1", "/v1/"])
    return m


def make_options(rng: random.Random, traits: set[str]) -> dict[str, Any]:
    o: dict[str, Any] = {}
    if rng.random() < 0.6:
        o["reasoning"] = rng.choice(LEVELS)
    if rng.random() < 0.35:
        o["maxTokens"] = rng.choice([1, 15, 16, 100, 2048, 64000, 200000])
    if rng.random() < 0.3:
        o["temperature"] = rng.choice([0, 0.2, 1, 1.5])
    if rng.random() < 0.35:
        o["sessionId"] = rng.choice([f"session-{rng.randint(0, 99)}", "s" * 70, "x"])
        if rng.random() < 0.08:
            o["sessionId"] = "ünïcødé-" + "🎉" * 60
        if not o["sessionId"].isascii():
            traits.add("non_ascii_header")
    if rng.random() < 0.2:
        o["cacheRetention"] = rng.choice(["none", "short", "long"])
    if rng.random() < 0.15:
        o["headers"] = rng.choice(
            [{"x-extra": "1"}, {"x-both": "from-options"}, {"x-model-header": None}, {"Authorization": "Bearer other"}]
        )
    if rng.random() < 0.05:
        o["thinkingBudgets"] = {"low": 1024, "medium": 4096, "high": 9000}
    if rng.random() < 0.03:
        o["maxTokens"] = 0
    return o


# ---------------------------------------------------------------------------------------
# Transcript


def reasoning_item(rng: random.Random, thinking: str) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "id": f"rs_{rng.randint(0, 10**6)}", "summary": []}
    if thinking and rng.random() < 0.8:
        item["summary"] = [{"type": "summary_text", "text": thinking}]
    if rng.random() < 0.8:
        item["encrypted_content"] = "gAAAA" + "x" * rng.randint(1, 40)
    return item


def call_id(rng: random.Random, source_api: str) -> str:
    n = rng.randint(0, 10**6)
    if source_api == API:
        return rng.choice(
            [
                f"call_{n}|fc_{n}",
                f"call_{n}|fc_{n}",
                f"call_{n}|item_{n}",
                f"call.with.dots{n}|fc_item+/={n}",
                f"c{n:07d}" + "c" * 72 + f"|fc_{n}",
                f"call_{n}|fc_" + "y" * 70,
            ]
        )
    if source_api == "anthropic-messages":
        return f"toolu_{n:06d}"
    return rng.choice([f"call_{n}", f"call:{n}"])


def text_signature(rng: random.Random) -> str | None:
    r = rng.random()
    if r < 0.35:
        return None
    if r < 0.8:
        payload: dict[str, Any] = {"v": 1, "id": f"msg_{rng.randint(0, 10**6)}"}
        if rng.random() < 0.3:
            payload["phase"] = rng.choice(["commentary", "final_answer"])
        return json.dumps(payload, separators=(",", ":"))
    if r < 0.88:
        return f"msg_legacy_{rng.randint(0, 999)}"
    if r < 0.95:
        return json.dumps({"v": 1, "id": "msg_" + "x" * 70}, separators=(",", ":"))
    return rng.choice(['{"id":"msg_nov"}', "{bad json", '{"v":1,"id":7}', '{"v":1,"id":"msg_p","phase":"other"}'])


def arguments_for(rng: random.Random, tool: dict[str, Any]) -> dict[str, Any]:
    if tool["name"] == "get_weather":
        args: dict[str, Any] = {"city": g.text(rng, 1, 2)}
        if rng.random() < 0.5:
            args["days"] = rng.randint(1, 9)
        return args
    if tool["name"] == "search":
        args = {"query": g.text(rng)}
        if rng.random() < 0.4:
            args["filters"] = {"site": "example.org", "recent": rng.random() < 0.5}
        if rng.random() < 0.3:
            args["tags"] = [g.text(rng, 1, 1) for _ in range(rng.randint(0, 3))]
        return args
    if tool["name"] == "sum":
        return {"a": rng.randint(-5, 5), "b": rng.random()}
    if tool["name"] == "tree":
        return {"node": {"kids": []}}
    return {}


def tool_result_content(rng: random.Random) -> list[dict[str, Any]]:
    r = rng.random()
    if r < 0.08:
        return []
    if r < 0.15:
        return [{"type": "text", "text": "   "}]
    content: list[dict[str, Any]] = [{"type": "text", "text": g.text(rng)} for _ in range(rng.randint(1, 2))]
    if rng.random() < 0.25:
        content.append({"type": "image", "data": g.PNG_1PX, "mimeType": "image/png"})
    if rng.random() < 0.1:
        content = [{"type": "image", "data": g.PNG_1PX, "mimeType": "image/png"}]
    return content


def user_content(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.04:
        return g.text(rng) * rng.choice([500, 3000, 9000])
    if r < 0.6:
        return g.text(rng)
    if r < 0.65:
        return []
    if r < 0.7:
        return "   "
    content: list[dict[str, Any]] = [{"type": "text", "text": g.text(rng)}]
    if rng.random() < 0.5:
        content.append({"type": "image", "data": g.PNG_1PX, "mimeType": "image/png"})
    if rng.random() < 0.2:
        content.append({"type": "text", "text": ""})
    return content


def make_transcript(rng: random.Random, m: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    ts = 1_700_000_000_000
    pool = list(g.TOOLS)
    if rng.random() < 0.15:
        pool.append(CONSTRAINED_TOOL)
    if rng.random() < 0.05:
        pool.append(UNCONVERTIBLE_TOOL)
    tools = rng.sample(pool, rng.randint(0, len(pool)))
    if rng.random() < 0.8 or tools:
        system: dict[str, Any] = {"role": "system", "content": g.text(rng), "timestamp": ts}
        r = rng.random()
        if r < 0.05:
            system["content"] = ""
        elif r < 0.12:
            system["content"] = [{"type": "text", "text": g.text(rng)} for _ in range(rng.randint(1, 2))]
        elif r < 0.17:
            system["sections"] = {"rules": g.text(rng), "empty": None}
        if tools:
            system["toolsAdded"] = tools
        messages.append(system)
    for turn in range(rng.randint(1, 4)):
        ts += 1000
        messages.append({"role": "user", "content": user_content(rng), "timestamp": ts})
        if turn == 0 and rng.random() < 0.3:
            break
        r = rng.random()
        if r < 0.5:
            source = (API, m["provider"], m["id"])
        elif r < 0.65:
            source = (API, m["provider"], "other-model")
        elif r < 0.8:
            source = (API, "other-provider", m["id"])
        else:
            source = (rng.choice(["openai-completions", "anthropic-messages"]), "other", "other-model")
        same = source == (API, m["provider"], m["id"])
        blocks: list[dict[str, Any]] = []
        if rng.random() < 0.45:
            thinking = g.text(rng) if rng.random() < 0.8 else ""
            block: dict[str, Any] = {"type": "thinking", "thinking": thinking}
            if source[0] == API and rng.random() < 0.75:
                block["thinkingSignature"] = json.dumps(reasoning_item(rng, thinking), separators=(",", ":"))
                if rng.random() < 0.1:
                    block["redacted"] = True
            elif not same and rng.random() < 0.5:
                block["thinkingSignature"] = "sig123"
            blocks.append(block)
        for _ in range(rng.choice([0, 1, 1, 1, 2])):
            tblock: dict[str, Any] = {"type": "text", "text": g.text(rng) if rng.random() < 0.9 else "  "}
            sig = text_signature(rng) if source[0] == API else None
            if sig is not None:
                tblock["textSignature"] = sig
            blocks.append(tblock)
        calls = []
        if tools and rng.random() < 0.6:
            for _ in range(rng.randint(1, 3)):
                tool = rng.choice(tools)
                call = {
                    "type": "toolCall",
                    "id": call_id(rng, source[0]),
                    "name": tool["name"],
                    "arguments": arguments_for(rng, tool),
                }
                calls.append(call)
                blocks.append(call)
        if calls:
            stop = rng.choice(["toolUse"] * 8 + ["error", "aborted"])
        else:
            stop = rng.choice(["stop", "stop", "stop", "length", "error", "aborted"])
        total = rng.choice([0, 0, rng.randint(1, 3000), rng.randint(5000, 60000)])
        usage = g.usage(rng)
        usage["totalTokens"] = total
        assistant: dict[str, Any] = {
            "role": "assistant",
            "content": blocks,
            "api": source[0],
            "provider": source[1],
            "model": source[2],
            "usage": usage,
            "stopReason": stop,
            "timestamp": ts + 1,
        }
        if stop == "error":
            assistant["errorMessage"] = "boom"
        messages.append(assistant)
        for call in calls:
            if rng.random() < 0.15:
                continue  # orphaned call: the provider adds "No result provided"
            messages.append(
                {
                    "role": "toolResult",
                    "toolCallId": call["id"],
                    "toolName": call["name"],
                    "content": tool_result_content(rng),
                    "isError": rng.random() < 0.2,
                    "timestamp": ts + 2,
                }
            )
        if rng.random() < 0.15:
            later: dict[str, Any] = {"role": "system", "content": g.text(rng), "timestamp": ts + 3}
            if rng.random() < 0.3:
                extra = rng.choice([t for t in g.TOOLS if t not in tools] or g.TOOLS)
                later["toolsAdded"] = [extra]
                tools.append(extra)
            if tools and rng.random() < 0.2:
                later["toolsRemoved"] = [{"name": tools[0]["name"]}]
            messages.append(later)
        if rng.random() < 0.03:
            messages.append(
                {
                    "role": "toolResult",
                    "toolCallId": f"call_orphan{rng.randint(0, 99)}",
                    "toolName": "noop",
                    "content": [{"type": "text", "text": "result without a call"}],
                    "isError": False,
                    "timestamp": ts + 4,
                }
            )
    last = messages[-1]["role"]
    if last == "assistant" or (last == "toolResult" and rng.random() < 0.5) or last == "system":
        messages.append({"role": "user", "content": g.text(rng), "timestamp": ts + 10})
    return messages


# ---------------------------------------------------------------------------------------
# Response streams


def split(rng: random.Random, text: str, most: int = 6) -> list[str]:
    """``text`` cut into 1..most pieces at code-point boundaries (empty text: one piece)."""
    if len(text) < 2:
        return [text]
    k = rng.randint(1, min(most, len(text)))
    points = sorted(rng.sample(range(1, len(text)), k - 1))
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]


class Stream:
    """Builds the event list of one Responses stream."""

    def __init__(self, rng: random.Random, m: dict[str, Any], traits: set[str]) -> None:
        self.traits = traits
        self.rng = rng
        self.model = m
        self.events: list[tuple[str | None, Any]] = []
        self.output: list[dict[str, Any]] = []
        self.index = 0
        self.seq = 0

    def emit(self, payload: dict[str, Any]) -> None:
        if self.rng.random() < 0.3:
            payload = {**payload, "sequence_number": self.seq}
        self.seq += 1
        self.events.append((payload["type"], payload))

    def reasoning(self) -> None:
        rng = self.rng
        rid = f"rs_{rng.randint(0, 999)}"
        oi = self.index
        self.index += 1
        self.emit({"type": "response.output_item.added", "output_index": oi, "item": {"type": "reasoning", "id": rid, "summary": []}})
        parts = [g.text(rng) for _ in range(rng.choice([0, 1, 1, 2]))]
        use_text = rng.random() < 0.2
        for pi_, part in enumerate(parts):
            if use_text:
                for piece in split(rng, part):
                    self.emit({"type": "response.reasoning_text.delta", "item_id": rid, "output_index": oi, "content_index": pi_, "delta": piece})
                continue
            self.emit({"type": "response.reasoning_summary_part.added", "item_id": rid, "output_index": oi, "summary_index": pi_, "part": {"type": "summary_text", "text": ""}})
            for piece in split(rng, part):
                self.emit({"type": "response.reasoning_summary_text.delta", "item_id": rid, "output_index": oi, "summary_index": pi_, "delta": piece})
            self.emit({"type": "response.reasoning_summary_text.done", "item_id": rid, "output_index": oi, "summary_index": pi_, "text": part})
            self.emit({"type": "response.reasoning_summary_part.done", "item_id": rid, "output_index": oi, "summary_index": pi_, "part": {"type": "summary_text", "text": part}})
        item: dict[str, Any] = {"type": "reasoning", "id": rid, "summary": []}
        if use_text or rng.random() < 0.1:
            item["content"] = [{"type": "reasoning_text", "text": p} for p in parts]
        if not use_text:
            item["summary"] = [{"type": "summary_text", "text": p} for p in parts]
        if parts and rng.random() < 0.05:
            key = "content" if "content" in item else "summary"
            item[key] = [{**item[key][0], "text": "rewritten " + g.text(rng)}, *item[key][1:]]
        encrypted = "gAAAAB" + "e" * rng.randint(0, 30)
        where = rng.random()
        final = dict(item)
        if where < 0.6:
            item["encrypted_content"] = encrypted
            final["encrypted_content"] = encrypted
        elif where < 0.8:
            final["encrypted_content"] = encrypted  # only in response.completed (backfill)
        self.emit({"type": "response.output_item.done", "output_index": oi, "item": item})
        self.output.append(final)

    def message(self) -> None:
        rng = self.rng
        mid = rng.choice(["msg_1", f"msg_{rng.randint(0, 10**6)}", "msg_" + "z" * 70])
        oi = self.index
        self.index += 1
        refusal = rng.random() < 0.1
        phase = rng.choice([None, None, None, "commentary", "final_answer"])
        added: dict[str, Any] = {"type": "message", "id": mid, "role": "assistant", "status": "in_progress", "content": []}
        if phase:
            added["phase"] = phase
        skip_added = rng.random() < 0.05
        if not skip_added:
            self.emit({"type": "response.output_item.added", "output_index": oi, "item": added})
        text = g.text(rng, 1, 6)
        if refusal:
            self.emit({"type": "response.content_part.added", "item_id": mid, "output_index": oi, "content_index": 0, "part": {"type": "refusal", "refusal": ""}})
            for piece in split(rng, text):
                self.emit({"type": "response.refusal.delta", "item_id": mid, "output_index": oi, "content_index": 0, "delta": piece})
            self.emit({"type": "response.refusal.done", "item_id": mid, "output_index": oi, "content_index": 0, "refusal": text})
            part: dict[str, Any] = {"type": "refusal", "refusal": text}
        else:
            self.emit({"type": "response.content_part.added", "item_id": mid, "output_index": oi, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})
            for piece in split(rng, text, 10):
                self.emit({"type": "response.output_text.delta", "item_id": mid, "output_index": oi, "content_index": 0, "delta": piece, "logprobs": []})
            annotations: list[dict[str, Any]] = []
            if rng.random() < 0.15:
                annotation = {"type": "url_citation", "url": "https://example.org", "title": "Example", "start_index": 0, "end_index": 1}
                annotations.append(annotation)
                self.emit({"type": "response.output_text.annotation.added", "item_id": mid, "output_index": oi, "content_index": 0, "annotation_index": 0, "annotation": annotation})
            self.emit({"type": "response.output_text.done", "item_id": mid, "output_index": oi, "content_index": 0, "text": text})
            part = {"type": "output_text", "text": text, "annotations": annotations}
        self.emit({"type": "response.content_part.done", "item_id": mid, "output_index": oi, "content_index": 0, "part": part})
        parts = [part]
        if rng.random() < 0.08:
            second = g.text(rng)
            for piece in split(rng, second):
                self.emit({"type": "response.output_text.delta", "item_id": mid, "output_index": oi, "content_index": 1, "delta": piece})
            parts.append({"type": "output_text", "text": second, "annotations": []})
        if rng.random() < 0.05:
            parts[0] = {**parts[0], ("refusal" if refusal else "text"): "rewritten " + text}
        done = {**added, "status": "completed", "content": parts}
        if rng.random() < 0.05:
            self.traits.add("unclosed_message")
            self.output.append(done)
            return  # never closed (U36)
        self.emit({"type": "response.output_item.done", "output_index": oi, "item": done})
        self.output.append(done)

    def function_call(self, unfinished: bool = False) -> None:
        rng = self.rng
        tool = rng.choice(ALL_TOOLS)
        n = rng.randint(0, 999)
        fid, cid = f"fc_{n}", f"call_{n}"
        oi = self.index
        self.index += 1
        kind = rng.random()
        if kind < 0.1:
            args_text = ""
        elif kind < 0.15:
            args_text = '{"city": "Par'  # invalid JSON
        elif kind < 0.2:
            args_text = "{}"
        else:
            args_text = json.dumps(arguments_for(rng, tool), ensure_ascii=rng.random() < 0.3)
        mode = rng.random()
        added = {"type": "function_call", "id": fid, "call_id": cid, "name": tool["name"], "arguments": "", "status": "in_progress"}
        final_args = args_text
        if mode < 0.12:
            self.traits.add("arguments_in_item")
        if mode < 0.06:
            added["arguments"] = args_text  # only in .added (U34)
            self.emit({"type": "response.output_item.added", "output_index": oi, "item": added})
        elif mode < 0.08:
            pass  # seen only in output_item.done (U35), its arguments with it (U34)
        else:
            self.emit({"type": "response.output_item.added", "output_index": oi, "item": added})
            if mode >= 0.12:
                for piece in split(rng, args_text, 12) if args_text else []:
                    self.emit({"type": "response.function_call_arguments.delta", "item_id": fid, "output_index": oi, "delta": piece})
                if rng.random() < 0.8:
                    self.emit({"type": "response.function_call_arguments.done", "item_id": fid, "output_index": oi, "arguments": args_text})
        if rng.random() < 0.05 and mode >= 0.12:
            final_args = json.dumps({"city": "Final"})  # the done item says otherwise (U34)
            self.traits.add("arguments_in_item")
        done = {**added, "arguments": final_args, "status": "completed"}
        if rng.random() < 0.1:
            done.pop("arguments")
        if unfinished:
            self.output.append(done)
            return
        self.emit({"type": "response.output_item.done", "output_index": oi, "item": done})
        self.output.append(done)

    def usage(self) -> dict[str, Any] | None:
        rng = self.rng
        if rng.random() < 0.1:
            return None
        inp, out = rng.randint(0, 5000), rng.randint(0, 2000)
        u: dict[str, Any] = {"input_tokens": inp, "output_tokens": out}
        if rng.random() < 0.85:
            u["total_tokens"] = inp + out
        else:
            self.traits.add("no_total_tokens")
        if rng.random() < 0.7:
            details: dict[str, Any] = {"cached_tokens": rng.choice([0, inp // 2, inp // 2, inp + 10])}
            if rng.random() < 0.2:
                details["cache_write_tokens"] = inp // 4
            u["input_tokens_details"] = details
        if rng.random() < 0.6:
            u["output_tokens_details"] = {"reasoning_tokens": rng.choice([0, out // 3])}
        return u

    def response(self, status: str | None, **extra: Any) -> dict[str, Any]:
        r: dict[str, Any] = {"id": "resp_1", "object": "response", "model": self.model["id"], "output": self.output}
        if status is not None:
            r["status"] = status
        usage = self.usage()
        if usage is not None:
            r["usage"] = usage
        if self.rng.random() < 0.2:
            r["service_tier"] = self.rng.choice(["default", "flex", "priority"])
            self.traits.add("service_tier")
        if self.rng.random() < 0.05:
            r["model"] = "routed-model-x"
            self.traits.add("routed_model")
        r.update(extra)
        return r


def stream_events(
    rng: random.Random, m: dict[str, Any], traits: set[str]
) -> tuple[list[tuple[str | None, Any]], bool]:
    """A Responses event list; the flag says whether it ends the response cleanly."""
    s = Stream(rng, m, traits)
    s.emit({"type": "response.created", "response": {"id": "resp_1", "object": "response", "status": "in_progress", "model": m["id"], "output": []}})
    if rng.random() < 0.05:
        s.emit({"type": "response.queued", "response": {"id": "resp_1", "status": "queued", "model": m["id"]}})
    if rng.random() < 0.05:
        s.emit({"type": "response.something_new", "x": 1})
    if rng.random() < 0.5:
        s.emit({"type": "response.in_progress", "response": {"id": "resp_1", "status": "in_progress", "model": m["id"], "output": []}})
    plan = []
    if rng.random() < 0.4:
        plan.append("reasoning")
    if rng.random() < 0.8:
        plan.append("message")
    if rng.random() < 0.4:
        plan += ["call"] * rng.randint(1, 3)
    if rng.random() < 0.1:
        plan.insert(rng.randint(0, len(plan)), "reasoning")
    unfinished_at = rng.randrange(len(plan)) if plan and rng.random() < 0.04 and "call" in plan else None
    if rng.random() < 0.05:
        plan.insert(rng.randint(0, len(plan)), "unknown")
    for i, step in enumerate(plan):
        if step == "unknown":
            item = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
            s.emit({"type": "response.output_item.added", "output_index": s.index, "item": item})
            s.emit({"type": "response.output_item.done", "output_index": s.index, "item": item})
            s.output.append(item)
            s.index += 1
        elif step == "reasoning":
            s.reasoning()
        elif step == "message":
            s.message()
        else:
            s.function_call(unfinished=unfinished_at is not None and i >= unfinished_at)
    ending = rng.random()
    if ending < 0.6:
        s.emit({"type": "response.completed", "response": s.response("completed")})
    elif ending < 0.66:
        s.emit({"type": "response.completed", "response": s.response(rng.choice([None, "in_progress", "queued"]))})
    elif ending < 0.7:
        s.emit({"type": "response.completed", "response": s.response(rng.choice(["cancelled", "failed", "weird_status"]))})
    elif ending < 0.78:
        reason = rng.choice(["max_output_tokens", "max_output_tokens", "content_filter", None])
        details = {"reason": reason} if reason else None
        s.emit({"type": "response.incomplete", "response": s.response("incomplete", incomplete_details=details)})
    elif ending < 0.85:
        error = rng.choice(
            [
                {"code": "server_error", "message": "The server had an error"},
                {"code": None, "message": "no code"},
                None,
            ]
        )
        extra: dict[str, Any] = {"error": error}
        if error is None and rng.random() < 0.5:
            extra["incomplete_details"] = {"reason": "max_output_tokens"}
        s.emit({"type": "response.failed", "response": s.response("failed", **extra)})
        traits.add("failed")
    elif ending < 0.92:
        payload = rng.choice(
            [
                {"type": "error", "code": "server_error", "message": "boom", "param": None},
                {"type": "error", "code": None, "message": "rate limited", "param": None},
                {"type": "error", "error": {"message": "nested boom", "code": "x"}},
            ]
        )
        s.events.append(("error" if rng.random() < 0.7 else None, payload))
    elif ending < 0.96:
        pass  # the body ends before a terminal event
    else:
        s.emit({"type": "response.completed", "response": s.response("completed")})
        s.events.append(("error", {"type": "error", "code": "late", "message": "after completion", "param": None}))
        traits.add("late_error")
    if rng.random() < 0.03:
        for _, payload in s.events:
            payload.pop("output_index", None)  # a server that leaves it out
    return s.events, ending < 0.6


def frame(rng: random.Random, events: list[tuple[str | None, Any]], plain: bool = False) -> str:
    """SSE text with random framing: event lines or not, CRLF, comments, ``id:`` lines, BOM,
    a missing final blank line."""
    named = plain or rng.random() < 0.9
    crlf = not plain and rng.random() < 0.1
    comments = not plain and rng.random() < 0.1
    ids = not plain and rng.random() < 0.1
    out = []
    for n, (name, data) in enumerate(events):
        lines = []
        if comments and rng.random() < 0.3:
            lines.append(": keep-alive")
        if ids:
            lines.append(f"id: {n}")
        if name and (named or name == "error"):
            lines.append(f"event: {name}")
        lines.append("data: " + json.dumps(data, ensure_ascii=rng.random() < 0.2))
        out.append("\n".join(lines) + "\n\n")
    if not plain and rng.random() < 0.05:
        out.insert(rng.choice([len(out), len(out), rng.randrange(1, len(out) + 1)]), "data: [DONE]\n\n")
    text = "".join(out)
    if plain:
        return text
    if rng.random() < 0.08:
        text = text[:-1]  # last event without its blank line
    if crlf:
        text = text.replace("\n", "\r\n")
    if rng.random() < 0.05:
        text = "\ufeff" + text
    return text


def http_error(rng: random.Random, status: int | None = None) -> dict[str, Any]:
    status = status or rng.choice([400, 401, 404, 429, 500, 503])
    kind = rng.random()
    headers = {"Content-Type": "application/json"}
    if kind < 0.5:
        err = {"message": f"error {status} " + g.text(rng), "type": "invalid_request_error", "param": None, "code": rng.choice([None, "bad"])}
        body = json.dumps({"error": err})
    elif kind < 0.6:
        body = json.dumps({"error": {"message": "x" * 5000, "type": "big"}})
    elif kind < 0.8:
        headers = {"Content-Type": "text/plain"}
        body = rng.choice(["upstream exploded", "<html><body>Bad Gateway</body></html>\n", "y" * 5000, "  spaced \n"])
    elif kind < 0.85:
        body = ""
    elif kind < 0.9:
        body = rng.choice(["[1,2]", '{"error":null,"detail":"x"}', '{"error":{}}', '"just a string"'])
    else:
        body = rng.choice(g.NO_MESSAGE_BODIES)
    return {"status": status, "headers": headers, "body": body, "cuts": g.cuts(rng, body)}


def make_responses(
    rng: random.Random, m: dict[str, Any], opts: dict[str, Any], case: dict[str, Any], traits: set[str]
) -> list[dict[str, Any]]:
    r = rng.random()
    if r < 0.1:
        return [http_error(rng)]
    if r < 0.17:
        status = rng.choice([429, 503, 500, 429, 503, 500, 408, 409, 502, 400, 404])
        first = http_error(rng, status)
        delay = rng.random()
        if delay < 0.4:
            first["headers"]["retry-after-ms"] = str(rng.choice([1, 20]))
        elif delay < 0.6:
            first["headers"]["retry-after"] = "0"
        elif delay < 0.75:
            first["headers"]["retry-after"] = "120"  # above the limit: fails at once
        elif delay < 0.8:
            first["headers"]["retry-after-ms"] = "2000"
            opts["maxRetryDelayMs"] = 1000
        elif delay < 0.85:
            first["headers"]["retry-after"] = rng.choice(["Wed, 21 Oct 2015 07:28:00 GMT", "soon"])
            if first["headers"]["retry-after"] == "soon":
                first["headers"]["retry-after-ms"] = "-5"
        else:
            first["headers"]["x-should-retry"] = rng.choice(["true", "false"])
            first["headers"]["retry-after-ms"] = "5"
        if rng.random() < 0.8:
            opts["maxRetries"] = rng.randint(1, 2)
        events, _ = stream_events(rng, m, traits)
        if rng.random() < 0.3:
            return [first, copy.deepcopy(first), g.ok(frame(rng, events), rng)]
        return [first, g.ok(frame(rng, events), rng)]
    if r < 0.2:
        body = json.dumps({"error": {"message": "The model is overloaded", "type": "server_error"}})
        traits.add("json_200")
        return [{"status": 200, "headers": {"Content-Type": "application/json"}, "body": body, "cuts": []}]
    if r < 0.21:
        return [g.ok(rng.choice(["", "\n\n", ": ping\n\n"]), rng)]
    events, _ = stream_events(rng, m, traits)
    if r >= 0.32 and "unclosed_message" not in traits and rng.random() < 0.04:
        for _, payload in events:
            if payload.get("type", "").startswith("response.output_text"):
                payload.pop("type")  # only the event: line names it
                traits.add("typeless_events")
    if r < 0.23:
        bad = rng.randrange(1, len(events))  # before the terminal event (after it: U33)
        events.insert(bad, ("response.output_text.delta", {"type": "response.output_text.delta"}))
        bad_data = rng.choice(
            [
                "{this is not json}",
                '{"type": "response.output_text.delta", "output_index": 0, "delta": "raw\ttab"}',
                '{"type": "response.output_text.delta", "output_index": 0, "delta": "bad \\H escape"}',
            ]
        )
        text = frame(rng, events).replace('data: {"type": "response.output_text.delta"}', "data: " + bad_data, 1)
        return [g.ok(text, rng)]
    text = frame(rng, events)
    response = g.ok(text, rng)
    if r < 0.27:
        size = len(text.encode("utf-8"))
        response["body"] = text.encode("utf-8")[: rng.randint(1, size - 1)].decode("utf-8", "ignore")
        response["cuts"] = g.cuts(rng, response["body"])
        response["disconnect"] = True
        traits.add("disconnect")
    elif r < 0.32 and "arguments_in_item" not in traits:  # U34 deltas would shift the count
        # One event per chunk with a pause after each, so that the abort lands before
        # the next event arrives on both sides.
        text = frame(rng, events, plain=True)
        response = g.ok(text, rng)
        blocks = text.split("\n\n")[:-1]
        offsets, at = [], 0
        for block in blocks:
            at += len((block + "\n\n").encode("utf-8"))
            offsets.append(at)
        response["cuts"] = offsets[:-1]
        response["gap_ms"] = 40
        case["abortAfter"] = rng.randint(1, 6)
        traits.add("abort")
    if rng.random() < 0.05:
        response["headers"] = {"Content-Type": rng.choice(["application/json", "text/plain"])}
    return [response]


def make_case(rng: random.Random, case_id: str) -> dict[str, Any]:
    traits: set[str] = set()
    m = make_model(rng)
    opts = make_options(rng, traits)
    case: dict[str, Any] = {"id": case_id, "model": m, "context": {"messages": make_transcript(rng, m)}, "options": opts}
    case["responses"] = make_responses(rng, m, opts, case, traits)
    case["traits"] = sorted(traits)
    return case


# ---------------------------------------------------------------------------------------
# Documented differences (docs/differences.md), as narrow normalize rules


def _final(record: Any) -> dict[str, Any] | None:
    """The final message of an events record (of its ``done`` or ``error`` event)."""
    if not isinstance(record, dict) or not record.get("events"):
        return None
    last = record["events"][-1]
    message = last.get("message") or last.get("error")
    return message if isinstance(message, dict) else None


def _has(case: dict[str, Any], trait: str) -> bool:
    return trait in case.get("traits", [])


def _u40(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """pi sends the results of a dropped error/aborted turn's tool calls; trio_agent drops
    them: leave out of pi's input the outputs whose call is not in it."""
    if kind != "request":
        return pi, ta
    dropped_calls: set[str] = set()
    for message in case["context"]["messages"]:
        if message["role"] == "assistant" and message["stopReason"] in ("error", "aborted"):
            for block in message["content"]:
                if block.get("type") == "toolCall":
                    whole = re.sub(r"[^A-Za-z0-9_-]", "_", block["id"])[:64].rstrip("_")
                    part = re.sub(r"[^A-Za-z0-9_-]", "_", block["id"].split("|")[0])[:64].rstrip("_")
                    dropped_calls |= {block["id"].split("|")[0], whole, part}
    for request in pi:
        items = (request.get("body") or {}).get("input")
        if not isinstance(items, list):
            continue
        calls = {i.get("call_id") for i in items if isinstance(i, dict) and i.get("type") == "function_call"}
        kept, dropped = [], 0
        for item in items:
            if (
                isinstance(item, dict)
                and item.get("type") == "function_call_output"
                and item.get("call_id") not in calls
                and item.get("call_id") in dropped_calls
            ):
                dropped += 1  # each was one tool-result message, counted by msg_pi_<n>
                continue
            fallback = re.fullmatch(r"msg_pi_(\d+)(_\d+)?", str(item.get("id", ""))) if isinstance(item, dict) else None
            if fallback and dropped:
                item["id"] = f"msg_pi_{int(fallback.group(1)) - dropped}{fallback.group(2) or ''}"
            kept.append(item)
        request["body"]["input"] = kept
    return pi, ta


def _u37(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """Usage without total_tokens: pi's totalTokens is 0, trio_agent's the sum."""
    p, t = _final(pi), _final(ta)
    if kind == "events" and _has(case, "no_total_tokens") and p and t:
        pu, tu = p.get("usage") or {}, t.get("usage") or {}
        total = sum(tu.get(k, 0) for k in ("input", "output", "cacheRead", "cacheWrite"))
        if pu.get("totalTokens") == 0 and tu.get("totalTokens") == total:
            tu["totalTokens"] = 0
    return pi, ta


_TIERS = {"flex": 0.5, "priority": 2.0}


def _service_tier(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """Service-tier price multipliers are not implemented: apply pi's to trio_agent's cost."""
    p, t = _final(pi), _final(ta)
    if kind != "events" or not _has(case, "service_tier") or not (p and t):
        return pi, ta
    body = case["responses"][-1].get("body", "")
    tiers = [tier for tier in _TIERS if f'"service_tier": "{tier}"' in body]
    cost = (t.get("usage") or {}).get("cost")
    if len(tiers) != 1 or not isinstance(cost, dict):
        return pi, ta
    factor = _TIERS[tiers[0]]
    if tiers[0] == "priority" and case["model"]["id"] == "gpt-5.5":
        factor = 2.5
    for key in ("input", "output", "cacheRead", "cacheWrite"):
        cost[key] *= factor
    cost["total"] = cost["input"] + cost["output"] + cost["cacheRead"] + cost["cacheWrite"]
    return pi, ta


def _u31(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """A failed response: pi's usage stays zero, trio_agent keeps the reported usage."""
    p, t = _final(pi), _final(ta)
    if kind == "events" and _has(case, "failed") and p and t and p.get("stopReason") == "error":
        usage = p.get("usage") or {}
        if usage.get("totalTokens") == 0 and usage.get("input") == 0 and usage.get("output") == 0:
            t["usage"] = copy.deepcopy(usage)
    return pi, ta


def _u33(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """An error event after response.completed: pi fails with its text, trio_agent is done."""
    if kind != "events" or not _has(case, "late_error") or not (_final(pi) and _final(ta)):
        return pi, ta
    last_pi, last_ta = pi["events"][-1], ta["events"][-1]
    if last_pi.get("type") == last_ta.get("type") == "error":
        last_ta["error"]["errorMessage"] = last_pi["error"].get("errorMessage")
    if last_pi.get("type") == "error" and last_ta.get("type") == "done":
        message = dict(last_ta["message"], stopReason="error", errorMessage=last_pi["error"].get("errorMessage"))
        ta["events"][-1] = {"type": "error", "reason": "error", "error": message}
    return pi, ta


def _u34(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """Arguments seen only in output_item.added or .done: trio_agent adds a toolcall_delta."""
    if kind != "events" or not _has(case, "arguments_in_item") or not isinstance(ta, dict) or not isinstance(pi, dict):
        return pi, ta
    pi_deltas = [(e.get("contentIndex"), e.get("delta")) for e in pi.get("events", []) if e.get("type") == "toolcall_delta"]
    kept = []
    for event in ta.get("events", []):
        if event.get("type") == "toolcall_delta":
            key = (event.get("contentIndex"), event.get("delta"))
            if key in pi_deltas:
                pi_deltas.remove(key)
            else:
                continue
        kept.append(event)
    ta["events"] = kept
    return pi, ta


def _u36(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """A message item never closed: trio_agent emits its text_end, pi does not."""
    if kind != "events" or not _has(case, "unclosed_message") or not isinstance(pi, dict) or not isinstance(ta, dict):
        return pi, ta
    ended = {e.get("contentIndex") for e in pi.get("events", []) if e.get("type") == "text_end"}
    ta["events"] = [
        e for e in ta.get("events", []) if not (e.get("type") == "text_end" and e.get("contentIndex") not in ended)
    ]
    return pi, ta


def _length_cut_call(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """A tool call left unfinished by a length-cut response: pi leaves it open, trio_agent
    ends it (toolcall_end) and sets argumentsError when its partial arguments are not JSON."""
    p, t = _final(pi), _final(ta)
    if kind != "events" or not (p and t) or p.get("stopReason") != "length" or t.get("stopReason") != "length":
        return pi, ta
    ended = {e.get("contentIndex") for e in pi["events"] if e.get("type") == "toolcall_end"}
    opened = {e.get("contentIndex") for e in pi["events"] if e.get("type") == "toolcall_start"}
    unfinished = opened - ended
    ta["events"] = [
        e for e in ta["events"] if not (e.get("type") == "toolcall_end" and e.get("contentIndex") in unfinished)
    ]
    content = t.get("content") or []
    pi_content = p.get("content") or []
    for index in unfinished:
        if isinstance(index, int) and index < len(content) and isinstance(content[index], dict):
            if content[index].pop("argumentsError", None) is not None and index < len(pi_content):
                # trio_agent's arguments are the strict parse: empty when it failed
                content[index]["arguments"] = pi_content[index].get("arguments")
    return pi, ta


def _typeless(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """Events whose JSON has no type: trio_agent maps them by their event: line, pi skips
    them (text deltas missing, the text still comes with the done item)."""
    if kind != "events" or not _has(case, "typeless_events") or not isinstance(pi, dict) or not isinstance(ta, dict):
        return pi, ta
    pi_deltas = [(e.get("contentIndex"), e.get("delta")) for e in pi.get("events", []) if e.get("type") == "text_delta"]
    kept = []
    removed: dict[Any, str] = {}
    for event in ta.get("events", []):
        if event.get("type") == "text_delta":
            key = (event.get("contentIndex"), event.get("delta"))
            if key not in pi_deltas:
                removed[key[0]] = removed.get(key[0], "") + (key[1] or "")
                continue
            pi_deltas.remove(key)
        kept.append(event)
    ta["events"] = kept
    # A stream that fails before the done item: pi's block holds only what it mapped.
    p, t = _final(pi), _final(ta)
    if p and t and p.get("stopReason") == t.get("stopReason") == "error":
        p_content, t_content = p.get("content") or [], t.get("content") or []
        for index, extra in removed.items():
            if isinstance(index, int) and index < min(len(p_content), len(t_content)):
                pb, tb = p_content[index], t_content[index]
                if pb.get("type") == tb.get("type") == "text" and tb.get("text") == pb.get("text", "") + extra:
                    tb["text"] = pb.get("text", "")
    return pi, ta


def _same_error_text(trait: str, pi_prefix: str | None = None, ta_prefix: str | None = None) -> Any:
    """Both fail; only the error texts differ (optionally: only texts with these prefixes)."""

    def normalize(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
        p, t = _final(pi), _final(ta)
        if kind != "events" or not _has(case, trait) or not (p and t):
            return pi, ta
        if p.get("stopReason") != t.get("stopReason") or t.get("stopReason") not in ("error", "aborted"):
            return pi, ta
        text_pi, text_ta = p.get("errorMessage") or "", t.get("errorMessage") or ""
        if (pi_prefix is None or text_pi.startswith(pi_prefix)) and (ta_prefix is None or text_ta.startswith(ta_prefix)):
            t["errorMessage"] = text_pi
        return pi, ta

    return normalize


def _arguments_error(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """argumentsError has Python's JSON error wording; the received arguments agree."""
    if kind != "events" or not isinstance(pi, dict) or not isinstance(ta, dict):
        return pi, ta

    def errors(value: Any, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if isinstance(value, dict):
            if isinstance(value.get("argumentsError"), str):
                found.append(value)
            for child in value.values():
                errors(child, found)
        elif isinstance(value, list):
            for child in value:
                errors(child, found)
        return found

    marker = "\n\nReceived arguments:\n"
    for a, b in zip(errors(pi, []), errors(ta, [])):
        if marker in a["argumentsError"] and marker in b["argumentsError"]:
            if a["argumentsError"].split(marker, 1)[1] == b["argumentsError"].split(marker, 1)[1]:
                b["argumentsError"] = a["argumentsError"]
    return pi, ta


def _u29(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """responseModel from response.model: pi never sets it for this API."""
    if kind != "events" or not _has(case, "routed_model") or not isinstance(ta, dict):
        return pi, ta
    for event in ta.get("events", []):
        for key in ("message", "error"):
            if isinstance(event.get(key), dict):
                event[key].pop("responseModel", None)
    return pi, ta


def _abort(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """An abort while the body streams: pi reports that the stream ended before a
    terminal event, trio_agent that the request was aborted."""
    p, t = _final(pi), _final(ta)
    if kind == "events" and _has(case, "abort") and p and t and p.get("stopReason") == t.get("stopReason") == "aborted":
        if p.get("errorMessage") == "OpenAI Responses stream ended before a terminal response event" and t.get("errorMessage") == "Request was aborted":
            t["errorMessage"] = p["errorMessage"]
    return pi, ta


def _zero_limit(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """A limit of 0 (maxTokens 0, or none and a model limit of 0): without a context window
    pi raises it to 1 and sends max_output_tokens 16; trio_agent sends no limit (from a
    model limit of 0) or the model's limit (U42)."""
    options, model = case.get("options", {}), case["model"]
    zero = options.get("maxTokens") == 0 or ("maxTokens" not in options and model["maxTokens"] == 0)
    if kind == "request" and zero and model["contextWindow"] <= 0:
        for p in pi:
            if (p.get("body") or {}).get("max_output_tokens") == 16:
                del p["body"]["max_output_tokens"]
    return pi, ta


def _u42(case: dict[str, Any], kind: str, pi: Any, ta: Any) -> tuple[Any, Any]:
    """maxTokens 0: pi sends no limit, trio_agent the model's (clamped) limit."""
    if kind == "request" and case.get("options", {}).get("maxTokens") == 0:
        for p, t in zip(pi, ta):
            if "max_output_tokens" not in (p.get("body") or {}):
                (t.get("body") or {}).pop("max_output_tokens", None)
    return pi, ta


DOCUMENTED: list[tuple[str, Any]] = [
    ("Smaller provider differences: Missing key", g.missing_key_hint),
    ("A limit of 0 without a context window (Responses)", _zero_limit),
    ("U42 · max_tokens=0 means the model's limit (all APIs)", _u42),
    ("U40 · Tool results of a dropped failed turn are not sent (all APIs)", _u40),
    ("U37 · totalTokens is the sum when total_tokens is missing (Responses)", _u37),
    ("Smaller provider differences (no Responses service-tier multipliers)", _service_tier),
    ("U31 · A failed response keeps its usage (Responses)", _u31),
    ("U33 · Nothing after the terminal event is read (Responses)", _u33),
    ("U34 · Arguments seen only in output_item.added or .done get a delta (Responses)", _u34),
    ("U36 · An unclosed message item gets text_end (Responses)", _u36),
    ("Events whose JSON has no type (Responses)", _typeless),
    ("A tool call left unfinished by a length-cut response ends (Responses)", _length_cut_call),
    ("F17 · A 200 response whose body is JSON, not a stream", _same_error_text("json_200")),
    ("U05 · A body cut inside an event, or a dropped connection", _same_error_text("disconnect")),
    ("Smaller provider differences (argumentsError wording)", _arguments_error),
    ("Smaller provider differences: argument errors (half surrogate pairs)", g.half_surrogate),
    ("U29 · responseModel from response.model (Responses)", _u29),
    ("An abort while the body streams (Responses)", _abort),
    (
        "A header value outside ASCII",
        _same_error_text("non_ascii_header", "Cannot convert argument to a ByteString", "'ascii' codec can't encode"),
    ),
]
