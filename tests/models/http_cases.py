"""One minimal "Hello world" response per built-in wire API, for tests of the shared HTTP
layer that must hold for all three (framing, redaction, redirects, connection reuse)."""

from __future__ import annotations

import json
from typing import Any

import attrs

from trio_agent import Model

__all__ = ["API_CASES", "ApiCase", "frame"]


def frame(data: Any, event: str | None = None) -> bytes:
    """One SSE frame with a blank line after it."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    prefix = f"event: {event}\n" if event is not None else ""
    return f"{prefix}data: {text}\n\n".encode()


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


_COMPLETIONS = [
    frame(_chunk({"role": "assistant", "content": "Hello"}, id="chatcmpl-1", model="m")),
    frame(_chunk({"content": " world"})),
    frame(_chunk({}, "stop")),
    frame({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3}}),
    frame("[DONE]"),
]


def _anthropic(kind: str, **data: Any) -> bytes:
    return frame({"type": kind, **data}, event=kind)


_ANTHROPIC = [
    _anthropic(
        "message_start",
        message={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 12, "output_tokens": 1},
        },
    ),
    _anthropic("content_block_start", index=0, content_block={"type": "text", "text": ""}),
    _anthropic("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hello"}),
    _anthropic("content_block_delta", index=0, delta={"type": "text_delta", "text": " world"}),
    _anthropic("content_block_stop", index=0),
    _anthropic(
        "message_delta",
        delta={"stop_reason": "end_turn", "stop_sequence": None},
        usage={"output_tokens": 3},
    ),
    _anthropic("message_stop"),
]


def _responses(kind: str, **data: Any) -> bytes:
    return frame({"type": kind, **data}, event=kind)


_MESSAGE_ITEM = {"type": "message", "id": "msg_1", "role": "assistant"}
_RESPONSES = [
    _responses("response.created", response={"id": "resp_1", "model": "m", "status": "x"}),
    _responses("response.output_item.added", output_index=0, item={**_MESSAGE_ITEM, "content": []}),
    _responses(
        "response.content_part.added",
        output_index=0,
        content_index=0,
        part={"type": "output_text", "text": ""},
    ),
    _responses("response.output_text.delta", output_index=0, content_index=0, delta="Hello"),
    _responses("response.output_text.delta", output_index=0, content_index=0, delta=" world"),
    _responses(
        "response.output_item.done",
        output_index=0,
        item={
            **_MESSAGE_ITEM,
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hello world", "annotations": []}],
        },
    ),
    _responses(
        "response.completed",
        response={
            "id": "resp_1",
            "status": "completed",
            "usage": {
                "input_tokens": 12,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 3,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 15,
            },
        },
    ),
]


@attrs.frozen
class ApiCase:
    """A wire API with a model template and its "Hello world" response frames."""

    api: str
    provider: str
    path: str
    """The base URL's path (the API appends its endpoint)."""
    frames: tuple[bytes, ...]

    def model(self, base_url: str, **changes: Any) -> Model:
        """A model of this API at ``base_url`` (plus :attr:`path`)."""
        fields: dict[str, Any] = {
            "id": "m",
            "name": "M",
            "api": self.api,
            "provider": self.provider,
            "base_url": base_url + self.path,
            "max_tokens": 1000,
        }
        fields.update(changes)
        return Model(**fields)

    @property
    def body(self) -> bytes:
        """The whole response body."""
        return b"".join(self.frames)


API_CASES = [
    ApiCase("openai-completions", "custom", "/v1", tuple(_COMPLETIONS)),
    ApiCase("anthropic-messages", "anthropic", "", tuple(_ANTHROPIC)),
    ApiCase("openai-responses", "openai", "/v1", tuple(_RESPONSES)),
]
"""The three built-in HTTP APIs (use with ``pytest.mark.parametrize``)."""
