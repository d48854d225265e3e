"""Cases for ``openai-responses``: requests from random transcripts, SSE response events."""

from __future__ import annotations

import random
from typing import Any

import gen_common as g


def make_case(rng: random.Random, case_id: str) -> dict[str, Any]:
    m = g.model(rng, "openai-responses", "openai")
    words = g.text(rng, 1, 5)
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
    events: list[tuple[str | None, Any]] = [
        ("response.created", {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "model": m["id"]}}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
        ("response.content_part.added", {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": ""}}),
    ]
    for word in words.split(" "):
        events.append(("response.output_text.delta", {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": word + " "}))
    full = "".join(w + " " for w in words.split(" "))
    done_item = {**item, "status": "completed", "content": [{"type": "output_text", "text": full, "annotations": []}]}
    events += [
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": done_item}),
        ("response.completed", {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "model": m["id"], "output": [done_item], "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "input_tokens_details": {"cached_tokens": 0}}}}),
    ]
    return {
        "id": case_id,
        "model": m,
        "context": {"messages": g.transcript(rng, m)},
        "options": g.options(rng, m),
        "responses": [g.ok(g.sse(events), rng)],
    }
