"""The shared HTTP pipeline: helpers, retries and the stream driver with a minimal API."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator
from contextlib import aclosing
from typing import Any

import httpx
import pytest
import trio
from sse_server import SseServer, error_response, sse_chunk, sse_response

from trio_agent import (
    AssistantMessageEvent,
    ErrorEvent,
    LlmContext,
    Model,
    StreamOptions,
    TextContent,
    UserMessage,
)
from trio_agent.models._builder import AssistantMessageBuilder
from trio_agent.models._http import (
    HttpApi,
    HttpEnv,
    HttpError,
    ProviderRequest,
    ProviderStreamError,
    SseEvent,
    compat_value,
    connection_error_message,
    merge_headers,
    parse_sse_json,
    redact,
    retry_delay,
    send_with_retries,
    stream_http,
    truncate_body,
)

# ---------------------------------------------------------------------------------------
# A minimal wire API: every SSE event's data is appended as text; event "fail" raises.


class EchoMapper:
    def __init__(self, builder: AssistantMessageBuilder, model: Model) -> None:
        self.finished = False
        self.builder = builder
        self.index: int | None = None
        self.names: list[str] = []

    def parse(self, sse: SseEvent) -> Any:
        self.names.append(sse.event)
        if sse.event == "end":
            self.finished = True
            return None
        return {"event": sse.event, "data": sse.data}

    def map(self, event: Any) -> Iterator[AssistantMessageEvent]:
        if self.index is None:
            self.index, start = self.builder.start_text()
            yield start
        yield self.builder.text_delta(self.index, event["data"])
        if event["event"] == "fail":
            raise ProviderStreamError("mapper failed")

    def finish(self) -> Iterator[AssistantMessageEvent]:
        for index in self.builder.open_blocks:
            yield self.builder.end_block(index)
        if self.builder.content and self.builder.content[0] == TextContent(text="bad-end"):
            raise ProviderStreamError("finish failed")


def echo_request(
    model: Model, context: LlmContext, options: StreamOptions, api_key: str | None
) -> ProviderRequest:
    return ProviderRequest(
        url=model.base_url + "/echo",
        body={"n": len(context.messages)},
        headers={"X-Api": "echo"},
        auth_headers={"X-Key": api_key or ""},
    )


def echo_error(error: HttpError, model: Model) -> str:
    return f"echo {error.status}: {truncate_body(error.body)}"


ECHO = HttpApi(
    build_request=echo_request,
    create_mapper=EchoMapper,
    format_http_error=echo_error,
    auth_header_names=("x-key",),
)
CONTEXT = LlmContext(messages=[UserMessage(content="hi", timestamp=0)])


def echo_model(base_url: str, provider: str = "echo") -> Model:
    return Model(id="e", name="E", api="echo", provider=provider, base_url=base_url)


async def run(
    client: httpx.AsyncClient, model: Model, env: HttpEnv | None = None, **options: Any
) -> list[AssistantMessageEvent]:
    stream = stream_http(
        ECHO, model, CONTEXT, StreamOptions(**options), env or HttpEnv(client=client)
    )
    async with aclosing(stream):
        return [event async for event in stream]


def error_of(events: list[AssistantMessageEvent]) -> str | None:
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    return last.error.error_message


# ---------------------------------------------------------------------------------------
# Helpers


def test_merge_headers() -> None:
    merged = merge_headers(
        {"User-Agent": "a", "Accept": "x"},
        None,
        {"accept": "y", "X-One": "1"},
        {"user-agent": None, "X-Two": "2"},
    )
    assert merged == {"accept": "y", "X-One": "1", "X-Two": "2"}


def test_truncate_and_redact() -> None:
    assert truncate_body("  short \n") == "short"
    assert truncate_body("a" * 4000) == "a" * 4000
    assert truncate_body("a" * 4001) == "a" * 4000 + "… [truncated 1 chars]"
    key = "sk-12345678"
    assert redact(f"key {key} and {key}", key) == "key [REDACTED] and [REDACTED]"
    assert redact("nothing", None) == "nothing"
    # The escaped form that appears in messages about invalid header bytes.
    assert redact("b'Bearer sk-12345678\\n'", "sk-12345678\n") == "b'Bearer [REDACTED]'"
    # Placeholder keys of local servers are too short to be secrets; messages stay intact.
    assert redact("max_tokens is too large", "x") == "max_tokens is too large"


def test_compat_value_accepts_both_spellings() -> None:
    model = Model(
        id="x",
        name="x",
        api="a",
        provider="p",
        base_url="u",
        compat={"supportsStore": False, "max_tokens_field": "max_tokens", "other": None},
    )
    assert compat_value(model, "supportsStore", True) is False
    assert compat_value(model, "maxTokensField") == "max_tokens"
    assert compat_value(model, "other", 7) == 7
    assert compat_value(model, "missing") is None


def test_parse_sse_json() -> None:
    assert parse_sse_json('{"a":"tab\there"}') == {"a": "tab\there"}
    with pytest.raises(ProviderStreamError) as caught:
        parse_sse_json("{oops")
    assert str(caught.value) == (
        "Invalid JSON in stream event: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )


def test_connection_error_message_uses_the_deepest_cause() -> None:
    try:
        try:
            raise OSError("refused deep down")
        except OSError as inner:
            raise httpx.ConnectError("outer") from inner
    except httpx.ConnectError as exc:
        assert connection_error_message(exc) == "Connection error.: refused deep down"
    assert connection_error_message(httpx.ReadTimeout("slow")) == "Request timed out."


def test_retry_delay_sources() -> None:
    assert retry_delay(0, {"retry-after-ms": "250"}) == (0.25, True)
    assert retry_delay(0, {"retry-after": "3"}) == (3.0, True)
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    delay, requested = retry_delay(0, {"retry-after": when})
    assert requested
    assert delay == pytest.approx(30, abs=1.5)
    for _ in range(50):
        first, requested = retry_delay(0, {})
        assert not requested
        assert 0.375 <= first <= 0.5
        capped, _ = retry_delay(6, {"retry-after": "garbage"})
        assert 6 <= capped <= 8


async def test_send_with_retries_retries_connection_errors(
    autojump_clock: trio.abc.Clock,
) -> None:
    attempts: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        attempts.append(1)
        if len(attempts) < 3:
            raise httpx.ConnectError("down", request=request)
        return httpx.Response(200, content=b"")

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        request = client.build_request("POST", "http://test/x")
        model = echo_model("http://test")
        start = trio.current_time()
        response = await send_with_retries(
            client,
            request,
            options=StreamOptions(max_retries=2),
            model=model,
            format_http_error=echo_error,
        )
        await response.aclose()
        assert response.status_code == 200
        elapsed = trio.current_time() - start
        # Backoff 0.5 s then 1 s, each times a factor in (0.75, 1].
        assert 1.125 <= elapsed <= 1.5
        attempts.clear()
        with pytest.raises(ProviderStreamError, match=r"^Connection error\.: down$"):
            await send_with_retries(
                client,
                request,
                options=StreamOptions(),
                model=model,
                format_http_error=echo_error,
            )
        assert len(attempts) == 1


async def test_x_should_retry_true_forces_a_retry(autojump_clock: trio.abc.Clock) -> None:
    statuses = [400, 200]

    def handler(request: httpx.Request) -> httpx.Response:
        status = statuses.pop(0)
        return httpx.Response(status, headers={"x-should-retry": "true", "retry-after-ms": "5"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        request = client.build_request("POST", "http://test/x")
        response = await send_with_retries(
            client,
            request,
            options=StreamOptions(max_retries=1),
            model=echo_model("http://test"),
            format_http_error=echo_error,
        )
        await response.aclose()
    assert response.status_code == 200
    assert statuses == []


# ---------------------------------------------------------------------------------------
# The driver with a minimal API


async def test_driver_request_and_event_names(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    frames = [sse_chunk("a", event="first"), sse_chunk("b"), sse_chunk("", event="end")]
    sse_server.enqueue(sse_response(frames))
    events = await run(http_client, echo_model(sse_server.base_url), api_key="k1")
    assert [e.type for e in events] == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    last = events[-1]
    assert last.type == "done"
    assert last.message.content == [TextContent(text="ab")]
    request = sse_server.requests[0]
    assert request.path == "/echo"
    assert request.json() == {"n": 1, "stream": True}
    assert request.headers["x-api"] == "echo"
    assert request.headers["x-key"] == "k1"


async def test_driver_mapper_failure_keeps_produced_events(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response([sse_chunk("x", event="fail"), sse_chunk("never")]))
    events = await run(http_client, echo_model(sse_server.base_url), api_key="k")
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "error"]
    assert error_of(events) == "mapper failed"
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert last.error.content == [TextContent(text="x")]


async def test_driver_finish_failure_comes_after_the_end_events(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response([sse_chunk("bad-end")]))
    events = await run(http_client, echo_model(sse_server.base_url), api_key="k")
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_end", "error"]
    assert error_of(events) == "finish failed"


async def test_driver_key_from_env_hook_and_missing(
    sse_server: SseServer, http_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "from-env")
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    frames = [sse_chunk("a"), sse_chunk("", event="end")]
    sse_server.enqueue(sse_response(frames), sse_response(frames), sse_response(frames))
    base = sse_server.base_url
    await run(http_client, echo_model(base, provider="groq"))
    assert sse_server.requests[-1].headers["x-key"] == "from-env"

    async def get_api_key(provider: str) -> str | None:
        return f"hook-{provider}"

    env = HttpEnv(client=http_client, get_api_key=get_api_key)
    await run(http_client, echo_model(base, provider="groq"), env=env)
    assert sse_server.requests[-1].headers["x-key"] == "hook-groq"
    events = await run(http_client, echo_model(base, provider="deepseek"))
    assert [e.type for e in events] == ["error"]
    assert error_of(events) == "No API key for provider: deepseek"
    # The API's own auth header name makes a missing key acceptable.
    await run(http_client, echo_model(base, provider="deepseek"), headers={"X-Key": "manual"})
    assert sse_server.requests[-1].headers["x-key"] == "manual"
    assert len(sse_server.requests) == 3


async def test_driver_http_error_uses_the_api_formatter(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(error_response(418, "teapot k-secret"))
    events = await run(http_client, echo_model(sse_server.base_url), api_key="k-secret")
    assert [e.type for e in events] == ["error"]
    assert error_of(events) == "echo 418: teapot [REDACTED]"


async def test_driver_on_response_failure(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response([sse_chunk("a")]))

    def on_response(response: Any, model: Model) -> None:
        raise RuntimeError(f"status {response.status}")

    events = await run(
        http_client, echo_model(sse_server.base_url), api_key="k", on_response=on_response
    )
    assert [e.type for e in events] == ["error"]
    assert error_of(events) == "status 200"


async def test_driver_non_sse_content_type(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(error_response(200, {"not": "sse"}))
    events = await run(http_client, echo_model(sse_server.base_url), api_key="k")
    assert [e.type for e in events] == ["start", "error"]
    assert error_of(events) == (
        "Expected response header Content-Type to contain 'text/event-stream', "
        "got 'application/json'"
    )


async def test_consumer_closing_early_closes_the_connection(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response([sse_chunk("a")], hang=True))
    stream = stream_http(
        ECHO,
        echo_model(sse_server.base_url),
        CONTEXT,
        StreamOptions(api_key="k"),
        HttpEnv(client=http_client),
    )
    async with aclosing(stream):
        async for event in stream:
            if event.type == "text_delta":
                break
    with trio.fail_after(5):
        await sse_server.client_closed.wait()
