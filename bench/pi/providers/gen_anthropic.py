"""Cases for ``anthropic-messages``: requests from random transcripts, SSE message events."""

from __future__ import annotations

import random
from typing import Any

import gen_common as g


def make_case(rng: random.Random, case_id: str) -> dict[str, Any]:
    m = g.model(rng, "anthropic-messages", "anthropic")
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": m["id"], "content": [], "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ]
    for word in g.text(rng, 1, 5).split(" "):
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word + " "}}))
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return {
        "id": case_id,
        "model": m,
        "context": {"messages": g.transcript(rng, m)},
        "options": g.options(rng, m),
        "responses": [g.ok(g.sse(events), rng)],
    }
