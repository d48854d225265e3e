"""openai-responses: the parity rows (error texts, statuses, events, ids, request details)."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import httpx
import pytest
import trio
from sse_server import ScriptedResponse, SseServer, error_response
from test_openai_responses import collect, final_error, make_model, server_model, types

from trio_agent import AssistantMessageEvent, LlmContext, Model, StreamOptions, UserMessage
from trio_agent.models._http import HttpEnv, HttpError
from trio_agent.models._openai_responses import (
    format_responses_http_error,
    stream_openai_responses,
)


async def run_with_key(
    model: Model, client: httpx.AsyncClient, key: str
) -> list[AssistantMessageEvent]:
    context = LlmContext(messages=[UserMessage(content="Hello")])
    stream = stream_openai_responses(
        model, context, StreamOptions(api_key=key), HttpEnv(client=client)
    )
    async with aclosing(stream):
        return [event async for event in stream]


# ---------------------------------------------------------------------------------------
# U07 · HTTP error texts (and F18: JSON is re-encoded, so escaped keys are redacted)

ERROR_OBJECT = {
    "message": "invalid_request_error happened",
    "type": "invalid_request_error",
    "param": None,
    "code": "invalid_request_error",
}
ERROR_OBJECT_TEXT = (
    '{"message":"invalid_request_error happened","type":"invalid_request_error",'
    '"param":null,"code":"invalid_request_error"}'
)


def raw_response(
    status: int, body: str, content_type: str = "application/json"
) -> ScriptedResponse:
    chunks = [body.encode()] if body else []
    return ScriptedResponse(status=status, headers={"content-type": content_type}, chunks=chunks)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (400, {"error": ERROR_OBJECT}, f"OpenAI API error (400): {ERROR_OBJECT_TEXT}"),
        (404, {"error": ERROR_OBJECT}, f"OpenAI API error (404): {ERROR_OBJECT_TEXT}"),
        (500, {"error": ERROR_OBJECT}, f"OpenAI API error (500): {ERROR_OBJECT_TEXT}"),
        (400, "upstream exploded", "OpenAI API error (400): 400 upstream exploded"),
        (401, "", "OpenAI API error (401): 401 status code (no body)"),
        (400, '{"error":null,"detail":"x"}', 'OpenAI API error (400): {"error":null,"detail":"x"}'),
        (400, "[1,2]", "OpenAI API error (400): 400 [1,2]"),
        (400, '{"error":{}}', "OpenAI API error (400): 400 {}"),
        (400, '"just a string"', 'OpenAI API error (400): 400 "just a string"'),
        (
            400,
            ' {"error":{"message":"caf\\u00e9"}}\n',
            'OpenAI API error (400): {"message":"café"}',
        ),
        (400, "  spaced \n", "OpenAI API error (400): 400   spaced \n"),
    ],
)
async def test_http_error_text(
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
    status: int,
    body: str | dict[str, Any],
    expected: str,
) -> None:
    if isinstance(body, dict):
        sse_server.enqueue(error_response(status, body))
    else:
        sse_server.enqueue(raw_response(status, body, "text/plain"))
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["error"]
    assert final_error(events).error_message == expected


async def test_http_error_text_after_exhausted_retries(
    sse_server: SseServer, autojump_clock: trio.abc.Clock
) -> None:
    sse_server.enqueue(
        error_response(500, {"error": ERROR_OBJECT}),
        error_response(500, {"error": ERROR_OBJECT}),
        raw_response(500, ""),
    )
    async with httpx.AsyncClient(timeout=None) as client:
        events = await collect(server_model(sse_server), client, max_retries=2)
    assert len(sse_server.requests) == 3
    assert final_error(events).error_message == "OpenAI API error (500): 500 status code (no body)"
    sse_server.enqueue(error_response(503, {"error": ERROR_OBJECT}))
    async with httpx.AsyncClient(timeout=None) as client:
        events = await collect(server_model(sse_server), client, max_retries=0)
    assert final_error(events).error_message == f"OpenAI API error (503): {ERROR_OBJECT_TEXT}"


def test_a_long_error_object_is_cut_at_4000_characters() -> None:
    detail = {"message": "x" * 5000}
    error = HttpError(status=400, headers={}, body=f'{{"error":{{"message":"{"x" * 5000}"}}}}')
    text = format_responses_http_error(error, make_model(provider="myhost"))
    full = '{"message":"' + "x" * 5000 + '"}'
    assert detail == {"message": "x" * 5000}
    assert text == f"myhost API error (400): {full[:4000]}... [truncated {len(full) - 4000} chars]"
    long_text = "y" * 5000
    error = HttpError(status=400, headers={}, body=long_text)
    assert format_responses_http_error(error, make_model()) == (
        f"OpenAI API error (400): 400 {long_text}"
    )


async def test_an_escaped_key_in_a_json_error_body_is_redacted(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    key = "sk-live/0123456789abcdef0123456789/end"
    body = '{"error":{"message":"bad key sk-live\\/0123456789abcdef0123456789\\/end"}}'
    sse_server.enqueue(raw_response(401, body))
    model = server_model(sse_server, provider="x")
    events = await run_with_key(model, http_client, key)
    message = final_error(events).error_message
    assert message == 'x API error (401): {"message":"bad key [REDACTED]"}'
    # \u002f is "/" too.
    sse_server.enqueue(raw_response(401, body.replace("sk-live\\/", "sk-live\\u002f")))
    events = await run_with_key(model, http_client, key)
    assert (
        final_error(events).error_message == 'x API error (401): {"message":"bad key [REDACTED]"}'
    )
