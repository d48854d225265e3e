"""Error texts issue 18 item 14 compared with pi-ai 1.6.0: a Chat Completions error object
without a message is quoted after ``<status> `` (the OpenAI client's own message, which
already carries the body), as pi shows it."""

from __future__ import annotations

import httpx
import pytest
from sse_server import ScriptedResponse, SseServer
from test_openai_completions import collect, final, make_model, types

from trio_agent.models._openai_completions import format_openai_completions_error
from trio_agent.models._request import HttpError


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"code":"x","type":"bad"}', '400 {"code":"x","type":"bad"}'),
        ('{"error":{"code":"x","type":"bad"}}', '400 {"code":"x","type":"bad"}'),
        ('{"error":{"message":"","code":1}}', '400 {"message":"","code":1}'),
        ('{"error":{"message":null,"code":1}}', '400 {"message":null,"code":1}'),
        ('{"error":{"message":0}}', '400 {"message":0}'),
        # A message: the client's text is "400 m", which does not carry the body.
        ('{"error":{"message":"m","code":1}}', '400: {"message":"m","code":1}'),
        ('{"message":"top","code":7}', '400: {"message":"top","code":7}'),
        ('{"error":{"message":{"a":1}}}', '400: {"message":{"a":1}}'),
        # Not an object: the client's text.
        ('"just text"', "400 status code (no body)"),
        ("[1,2]", "400 [1,2]"),
        ("{}", "400 {}"),
        ("null", "400 null"),
    ],
)
async def test_an_error_object_without_a_message(
    sse_server: SseServer, http_client: httpx.AsyncClient, body: str, expected: str
) -> None:
    sse_server.enqueue(
        ScriptedResponse(
            status=400, headers={"content-type": "application/json"}, chunks=[body.encode()]
        )
    )
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["error"]
    assert final(events).error_message == expected


def test_a_long_error_object_without_a_message_is_cut() -> None:
    # The client's message carries the whole object, the cut body does not: pi shows the cut.
    detail = '{"code":"' + "z" * 5031 + '"}'
    error = HttpError(status=400, headers={}, body=detail)
    assert format_openai_completions_error(error, make_model("http://x")) == (
        f"400: {detail[:4000]}... [truncated {len(detail) - 4000} chars]"
    )
