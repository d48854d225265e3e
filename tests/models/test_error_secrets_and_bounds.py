"""Error texts of the three built-in APIs against loopback servers: a credential in any
credential header (one rule, :func:`~trio_agent._redaction.is_credential_header`) never
reaches ``error_message``, the log or the trace; an error body that never ends is read up to
a bound; connection errors name the host; a missing key names its variable."""

from __future__ import annotations

import json
import logging
import tracemalloc
from contextlib import aclosing
from typing import Any

import httpx
import pytest
import trio
from http_cases import API_CASES, ApiCase
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sse_server import RecordedRequest, ScriptedResponse, SseServer

from trio_agent import (
    Agent,
    AgentInitialState,
    AssistantMessage,
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    LlmContext,
    Model,
    StreamOptions,
    UserMessage,
)
from trio_agent._redaction import header_secrets, is_credential_header, redact_headers_repr
from trio_agent.models import Models
from trio_agent.otel import instrument_agent

KEY = "azure-0123456789abcdef0123456789abcdef"
CONTEXT = LlmContext(messages=[UserMessage(content="hi", timestamp=0)])
by_api = pytest.mark.parametrize("case", API_CASES, ids=[case.api for case in API_CASES])


async def collect(
    client: httpx.AsyncClient, model: Model, **options: Any
) -> list[AssistantMessageEvent]:
    stream = Models(client).stream_simple(model, CONTEXT, StreamOptions(**options))
    async with aclosing(stream):
        return [event async for event in stream]


def final(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, DoneEvent | ErrorEvent)
    return last.message if isinstance(last, DoneEvent) else last.error


# ---------------------------------------------------------------------------------------
# One rule for credential headers


@pytest.mark.parametrize(
    "name",
    [
        "Authorization",
        "Proxy-Authorization",
        "cf-aig-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "Ocp-Apim-Subscription-Key",
        "X-Auth-Token",
        "x-amz-security-token",
        "Cookie",
        "X-Client-Secret",
        "x-password",
    ],
)
def test_credential_headers(name: str) -> None:
    assert is_credential_header(name)
    assert redact_headers_repr({name: KEY, "X-Title": "app"}) == repr(
        {name: "[REDACTED]", "X-Title": "app"}
    )


@pytest.mark.parametrize(
    "name", ["X-Title", "HTTP-Referer", "anthropic-version", "anthropic-beta", "Accept"]
)
def test_other_headers(name: str) -> None:
    assert not is_credential_header(name)


def test_header_secrets_include_the_credential_after_a_scheme() -> None:
    headers = {"Authorization": f"Bearer {KEY}", "api-key": KEY, "X-Title": "a", "x-key": None}
    assert header_secrets(headers) == [f"Bearer {KEY}", KEY, KEY]


def _echo_headers(request: RecordedRequest) -> bytes:
    # An error body quoting the request's headers, as some proxies and servers do.
    body = {"error": {"message": f"unauthorized; request headers: {request.headers}"}}
    return json.dumps(body).encode()


ECHO_401 = ScriptedResponse(
    status=401, headers={"content-type": "application/json"}, body_for=_echo_headers
)


@by_api
async def test_a_credential_header_echoed_in_an_error_body_is_redacted_everywhere(
    case: ApiCase, sse_server: SseServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sse_server.enqueue(ECHO_401)
    # The Azure style: the key in an ``api-key`` header, and the model's key a placeholder.
    model = case.model(sse_server.base_url, headers={"api-key": KEY})
    async with httpx.AsyncClient() as client:
        agent = Agent(
            AgentInitialState(model=model),
            stream_fn=Models(client).stream_simple,
            get_api_key=lambda provider: "unused",
        )
        instrument_agent(agent, tracer_provider=provider)
        await agent.prompt("hi")
    provider.shutdown()

    assert sse_server.requests[0].headers["api-key"] == KEY
    message = agent.state.error_message
    assert message is not None
    assert "'api-key': '[REDACTED]'" in message
    assert KEY not in message
    assert KEY[:12] not in message
    records = [r for r in caplog.records if r.name == "trio_agent.models"]
    failed = [r.getMessage() for r in records if r.levelno == logging.ERROR]
    assert len(failed) == 1
    assert "'api-key': '[REDACTED]'" in failed[0]
    assert all(KEY[:12] not in record.getMessage() for record in caplog.records)
    statuses = [span.status.description or "" for span in exporter.get_finished_spans()]
    assert any("'api-key': '[REDACTED]'" in status for status in statuses)
    assert all(KEY[:12] not in status for status in statuses)


@by_api
async def test_an_echoed_credential_header_is_redacted_in_retry_warnings(
    case: ApiCase,
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    echo_503 = ScriptedResponse(
        status=503,
        headers={"content-type": "application/json", "retry-after-ms": "0"},
        body_for=_echo_headers,
    )
    sse_server.enqueue(echo_503, echo_503)
    model = case.model(sse_server.base_url)
    options = {"api_key": "unused", "max_retries": 1, "headers": {"Ocp-Apim-Subscription-Key": KEY}}
    message = final(await collect(http_client, model, **options)).error_message
    assert message is not None
    assert "'ocp-apim-subscription-key': '[REDACTED]'" in message
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("retrying in" in text and "[REDACTED]" in text for text in warnings)
    assert all(KEY[:12] not in record.getMessage() for record in caplog.records)


@by_api
async def test_the_credential_of_a_bearer_header_is_redacted_when_echoed_alone(
    case: ApiCase, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    def echo_token(request: RecordedRequest) -> bytes:
        return f"bad token {request.headers['x-auth-token'].split()[1]}".encode()

    sse_server.enqueue(
        ScriptedResponse(status=401, headers={"content-type": "text/plain"}, body_for=echo_token)
    )
    model = case.model(sse_server.base_url)
    events = await collect(
        http_client, model, api_key="unused", headers={"X-Auth-Token": f"Token {KEY}"}
    )
    message = final(events).error_message
    assert message is not None
    assert message.endswith("bad token [REDACTED]")


# ---------------------------------------------------------------------------------------
# An error body that never ends


@by_api
async def test_an_endless_error_body_is_read_up_to_a_bound(
    case: ApiCase, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        ScriptedResponse(
            status=500, headers={"content-type": "text/plain"}, chunks=[b"x" * 8192], endless=True
        )
    )
    model = case.model(sse_server.base_url)
    tracemalloc.start()
    try:
        with trio.fail_after(10):
            events = await collect(http_client, model, api_key="unused")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The bound is 64 KiB; the peak counts the body a few times over (bytes, text, message).
    assert peak < 2_000_000
    message = final(events).error_message
    assert message is not None
    assert message.endswith("x" * 100 + "… [error body cut at 65536 bytes]")
    assert len(message) < 70_000
    with trio.fail_after(5):
        await sse_server.client_closed.wait()


# ---------------------------------------------------------------------------------------
# Connection errors and a missing key say what to do


async def test_a_host_name_that_does_not_resolve_is_named(http_client: httpx.AsyncClient) -> None:
    model = API_CASES[0].model("http://no-such-host.invalid:8080")
    with trio.fail_after(30):
        events = await collect(http_client, model, api_key="unused")
    message = final(events).error_message
    assert message is not None
    prefix = "Connection error (no-such-host.invalid:8080): the host name cannot be resolved ("
    assert message.startswith(prefix)
    assert message.endswith(")")


async def test_a_connection_dropped_mid_stream_names_the_host(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    case = API_CASES[1]
    sse_server.enqueue(ScriptedResponse(chunks=list(case.frames[:3]), close_early=True))
    events = await collect(http_client, case.model(sse_server.base_url), api_key="unused")
    assert final(events).error_message == (
        f"Connection error (127.0.0.1:{sse_server.port}): peer closed connection without "
        "sending complete message body (incomplete chunked read)"
    )


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        ("openai", "No API key for provider: openai (set OPENAI_API_KEY or pass api_key)"),
        ("groq", "No API key for provider: groq (set GROQ_API_KEY or pass api_key)"),
        ("my-proxy", "No API key for provider: my-proxy (pass api_key or get_api_key)"),
    ],
)
async def test_a_missing_key_names_what_to_set(
    provider: str,
    expected: str,
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OPENAI_API_KEY", "GROQ_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    model = API_CASES[0].model(sse_server.base_url, provider=provider)
    events = await collect(http_client, model)
    assert [event.type for event in events] == ["error"]
    assert final(events).error_message == expected
    assert sse_server.requests == []
