"""The response bodies of scenario S6: one streamed answer per wire API, as server-sent events.

``events(api, kind, n)`` returns the SSE events (one ``bytes`` each) of a response that
streams ``n`` text deltas (``kind="text"``, each a short word, as tokens are) or one tool
call whose JSON arguments arrive in ``n`` pieces (``kind="tool"``). The shapes are the
providers' own (OpenAI Chat Completions, Anthropic Messages, OpenAI Responses), as the
provider differential check (``../providers``) sends them.
"""

from __future__ import annotations

import json
from typing import Any

APIS = ("openai-completions", "anthropic-messages", "openai-responses")
KINDS = ("text", "tool")
WORDS = [" the", " quick", " brown", " fox", " jumps", " over", " a", " lazy", " dog", "."]
TOOL_NAME = "write"


def words(n: int) -> list[str]:
    return [WORDS[i % len(WORDS)] for i in range(n)]


def tool_arguments(n: int) -> tuple[dict[str, Any], list[str]]:
    """The arguments of the tool call and their JSON text cut into ``n`` pieces."""
    arguments = {"path": "notes/fox.txt", "content": "".join(words(n * 2)), "append": False}
    text = json.dumps(arguments)
    size = -(-len(text) // n)
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    while len(pieces) < n:  # ceil division may leave fewer pieces; split the last ones
        longest = max(range(len(pieces)), key=lambda i: len(pieces[i]))
        piece = pieces[longest]
        pieces[longest : longest + 1] = [piece[: len(piece) // 2], piece[len(piece) // 2 :]]
    return arguments, pieces


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _completions(kind: str, n: int) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({"id": "chatcmpl-s6", "object": "chat.completion.chunk", "created": 1, "model": "model-a",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    out = [chunk({"role": "assistant", "content": ""})]
    if kind == "text":
        out += [chunk({"content": w}) for w in words(n)]
        finish = "stop"
    else:
        _, pieces = tool_arguments(n)
        out.append(chunk({"tool_calls": [{"index": 0, "id": "call_s6", "type": "function",
                                          "function": {"name": TOOL_NAME, "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
        finish = "tool_calls"
    out.append(chunk({}, finish))
    out.append(_sse({"id": "chatcmpl-s6", "object": "chat.completion.chunk", "created": 1, "model": "model-a",
                     "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": n + 10}}))
    out.append(b"data: [DONE]\n\n")
    return out


def _anthropic(kind: str, n: int) -> list[bytes]:
    out = [_sse({"type": "message_start", "message": {
        "id": "msg_s6", "type": "message", "role": "assistant", "model": "model-a", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}},
        "message_start")]
    if kind == "text":
        out.append(_sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                        "content_block_start"))
        out += [_sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}},
                     "content_block_delta") for w in words(n)]
        stop = "end_turn"
    else:
        _, pieces = tool_arguments(n)
        out.append(_sse({"type": "content_block_start", "index": 0,
                         "content_block": {"type": "tool_use", "id": "toolu_s6", "name": TOOL_NAME, "input": {}}},
                        "content_block_start"))
        out += [_sse({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta",
                                                                          "partial_json": p}},
                     "content_block_delta") for p in pieces]
        stop = "tool_use"
    out.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    out.append(_sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                     "usage": {"output_tokens": n}}, "message_delta"))
    out.append(_sse({"type": "message_stop"}, "message_stop"))
    return out


def _responses(kind: str, n: int) -> list[bytes]:
    def ev(data: dict[str, Any]) -> bytes:
        return _sse(data, data["type"])

    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": n,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": n + 10}
    base = {"id": "resp_s6", "object": "response", "created_at": 1, "model": "model-a", "output": []}
    out = [ev({"type": "response.created", "sequence_number": 0, "response": {**base, "status": "in_progress"}})]
    if kind == "text":
        text = "".join(words(n))
        out.append(ev({"type": "response.output_item.added", "output_index": 0, "item": {
            "type": "message", "id": "msg_s6", "role": "assistant", "status": "in_progress", "content": []}}))
        out.append(ev({"type": "response.content_part.added", "item_id": "msg_s6", "output_index": 0,
                       "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}))
        out += [ev({"type": "response.output_text.delta", "item_id": "msg_s6", "output_index": 0,
                    "content_index": 0, "delta": w}) for w in words(n)]
        out.append(ev({"type": "response.output_text.done", "item_id": "msg_s6", "output_index": 0,
                       "content_index": 0, "text": text}))
        part = {"type": "output_text", "text": text, "annotations": []}
        out.append(ev({"type": "response.content_part.done", "item_id": "msg_s6", "output_index": 0,
                       "content_index": 0, "part": part}))
        item = {"type": "message", "id": "msg_s6", "role": "assistant", "status": "completed", "content": [part]}
    else:
        arguments, pieces = tool_arguments(n)
        text = json.dumps(arguments)
        out.append(ev({"type": "response.output_item.added", "output_index": 0, "item": {
            "type": "function_call", "id": "fc_s6", "call_id": "call_s6", "name": TOOL_NAME, "arguments": "",
            "status": "in_progress"}}))
        out += [ev({"type": "response.function_call_arguments.delta", "item_id": "fc_s6", "output_index": 0,
                    "delta": p}) for p in pieces]
        out.append(ev({"type": "response.function_call_arguments.done", "item_id": "fc_s6", "output_index": 0,
                       "arguments": text}))
        item = {"type": "function_call", "id": "fc_s6", "call_id": "call_s6", "name": TOOL_NAME,
                "arguments": text, "status": "completed"}
    out.append(ev({"type": "response.output_item.done", "output_index": 0, "item": item}))
    out.append(ev({"type": "response.completed", "response": {**base, "status": "completed", "output": [item],
                                                               "usage": usage}}))
    return out


def events(api: str, kind: str, n: int) -> list[bytes]:
    build = {"openai-completions": _completions, "anthropic-messages": _anthropic, "openai-responses": _responses}
    return build[api](kind, n)


def model(api: str, base_url: str) -> dict[str, Any]:
    """The model in pi's JSON shape (trio_agent reads the same with ``from_dict``)."""
    return {
        "id": "model-a", "name": "Model A", "api": api,
        "provider": "anthropic" if api == "anthropic-messages" else "openai",
        "baseUrl": base_url, "reasoning": False, "input": ["text"],
        "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
        "contextWindow": 200000, "maxTokens": 32000,
    }


def expected(kind: str, n: int) -> Any:
    """What the final message must hold: the text, or the tool call's arguments."""
    return "".join(words(n)) if kind == "text" else tool_arguments(n)[0]
