"""Cases for ``openai-completions``: requests from random transcripts, SSE chat-completion chunks."""

from __future__ import annotations

import random
from typing import Any

import gen_common as g


def make_case(rng: random.Random, case_id: str) -> dict[str, Any]:
    m = g.model(rng, "openai-completions", rng.choice(["openai", "local"]))
    chunks: list[tuple[str | None, Any]] = []
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": m["id"]}
    for word in g.text(rng, 1, 5).split(" "):
        chunks.append((None, {**base, "choices": [{"index": 0, "delta": {"content": word + " "}}]}))
    chunks.append((None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    chunks.append((None, {**base, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}))
    return {
        "id": case_id,
        "model": m,
        "context": {"messages": g.transcript(rng, m)},
        "options": g.options(rng, m),
        "responses": [g.ok(g.sse(chunks, done=True), rng)],
    }
