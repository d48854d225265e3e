"""Provider logging: what ``trio_agent.models`` logs at which level, and that no key or
credential header ever reaches a log line (httpx's and httpcore's included)."""

from __future__ import annotations

import logging
from contextlib import aclosing

import pytest
import trio
from http_cases import API_CASES, ApiCase
from sse_server import ScriptedResponse, SseServer, error_response

from trio_agent import AbortController, LlmContext, StreamOptions, UserMessage
from trio_agent.models import Models

KEY = "sk-live-0123456789abcdef0123456789abcdef"
CONTEXT = LlmContext(messages=[UserMessage(content="hi", timestamp=0)])
by_api = pytest.mark.parametrize("case", API_CASES, ids=[case.api for case in API_CASES])


def ours(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [
        (record.levelno, record.getMessage())
        for record in caplog.records
        if record.name == "trio_agent.models"
    ]


@by_api
async def test_levels_and_messages(
    case: ApiCase,
    sse_server: SseServer,
    caplog: pytest.LogCaptureFixture,
    autojump_clock: trio.abc.Clock,
) -> None:
    caplog.set_level(logging.DEBUG)
    api, name = case.api, "p/m"
    model = case.model(sse_server.base_url, provider="p")
    echo = f"key {KEY} header Bearer {KEY}"
    first_text = next(i for i, f in enumerate(case.frames) if b"Hello" in f)
    sse_server.enqueue(
        # 1: a stream of two deltas; 2-3: a retried 503, then the stream; 4: a 401
        ScriptedResponse(chunks=list(case.frames)),
        error_response(503, echo, {"retry-after-ms": "10"}),
        ScriptedResponse(chunks=list(case.frames)),
        error_response(401, echo),
        # 5: a stream aborted after its first delta
        ScriptedResponse(chunks=list(case.frames[: first_text + 1]), hang=True),
    )
    async with Models() as models:
        await models.complete_simple(model, CONTEXT, StreamOptions(api_key=KEY))
        await models.complete_simple(model, CONTEXT, StreamOptions(api_key=KEY, max_retries=1))
        failed = await models.complete_simple(model, CONTEXT, StreamOptions(api_key=KEY))
        controller = AbortController()
        options = StreamOptions(api_key=KEY, signal=controller.signal)
        async with aclosing(models.stream_simple(model, CONTEXT, options)) as events:
            async for event in events:
                if event.type == "text_delta":
                    controller.abort()
    retried = failed.error_message
    assert retried is not None
    retried = retried.replace("401", "503")
    debug, warning, error = logging.DEBUG, logging.WARNING, logging.ERROR
    assert ours(caplog) == [
        (debug, f"{api} request for {name}: attempt 1 of 1"),
        (debug, f"{api} response of {name} done: stop"),
        (debug, f"{api} request for {name}: attempt 1 of 2"),
        (warning, f"{api} request for {name}: retrying in 0.010 s (attempt 2 of 2): {retried}"),
        (debug, f"{api} request for {name}: attempt 2 of 2"),
        (debug, f"{api} response of {name} done: stop"),
        (debug, f"{api} request for {name}: attempt 1 of 1"),
        (error, f"{api} request for {name} failed: {failed.error_message}"),
        (debug, f"{api} request for {name}: attempt 1 of 1"),
        (debug, f"{api} request for {name} aborted"),
    ]
    assert "[REDACTED]" in caplog.text
    # Nothing of the key anywhere, at any level, from any logger (httpx and httpcore too).
    assert {record.name.split(".")[0] for record in caplog.records} >= {"httpx", "httpcore"}
    assert KEY[:12] not in caplog.text
    for record in caplog.records:
        assert KEY[:12] not in record.getMessage()
        assert KEY[:12] not in repr(record.args)


@by_api
async def test_custom_auth_headers_are_not_logged(
    case: ApiCase, sse_server: SseServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "cust-0123456789abcdef0123"
    auth = {"anthropic-messages": "x-api-key"}.get(case.api, "authorization")
    sse_server.enqueue(error_response(400, f"echo {auth}: {secret}"))
    model = case.model(sse_server.base_url, provider="p", headers={auth: secret})
    async with Models() as models:
        message = await models.complete_simple(model, CONTEXT)
    assert message.stop_reason == "error"
    assert secret not in str(message.error_message)
    assert sse_server.requests[0].headers[auth] == secret
    assert secret[:10] not in caplog.text
