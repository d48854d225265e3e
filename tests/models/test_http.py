"""The shared HTTP pipeline: helpers, retries and the stream driver with a minimal API."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator
from contextlib import aclosing
from typing import Any

import attrs
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
    client_error_text,
    compat_value,
    connection_error_message,
    merge_headers,
    parse_sse_json,
    redact,
    redact_url,
    retry_delay,
    send_with_retries,
    stream_http,
    truncate_body,
    truncate_json_error,
)
from trio_agent.models._openai_completions import OPENAI_COMPLETIONS
from trio_agent.models._openai_responses import OPENAI_RESPONSES

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
        assert connection_error_message(exc) == "Connection error: refused deep down"
        url = httpx.URL("https://user:pw@api.example.com:8443/v1?key=x")
        assert connection_error_message(exc, url) == (
            "Connection error (api.example.com:8443): refused deep down"
        )
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
        with pytest.raises(ProviderStreamError, match=r"^Connection error \(test\): down$"):
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
    assert error_of(events) == (
        "No API key for provider: deepseek (set DEEPSEEK_API_KEY or pass api_key)"
    )
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


async def test_driver_json_body_with_status_200_is_an_http_error(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    # F17: the body is one JSON document, not a stream; the API words it as an HTTP error.
    sse_server.enqueue(error_response(200, {"error": "busy k-secret-1"}))
    events = await run(http_client, echo_model(sse_server.base_url), api_key="k-secret-1")
    assert [e.type for e in events] == ["start", "error"]
    assert error_of(events) == 'echo 200: {"error": "busy [REDACTED]"}'


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


# ---------------------------------------------------------------------------------------
# Redaction (F2, F11)


def test_redact_escaped_and_encoded_forms() -> None:
    key = "sk-live/0123456789\u00e9/end"
    forms = [
        key,
        "sk-live\\/0123456789\\u00e9\\/end",
        "sk-live\\u002F0123456789\\u00E9\\u002fend",
        "sk-live%2F0123456789%C3%A9%2fend",
        repr(key)[1:-1],
    ]
    for form in forms:
        assert redact(f"x {form} y", key) == "x [REDACTED] y", form
    emoji_key = "key-\U0001f600-0123456789"
    assert redact('"key-\\ud83d\\ude00-0123456789"', emoji_key) == '"[REDACTED]"'


def test_redact_removes_a_prefix_left_by_a_cut() -> None:
    key = "sk-live-0123456789abcdef"
    assert redact("bad sk-live-01234… [truncated 9 chars]", key) == (
        "bad [REDACTED]… [truncated 9 chars]"
    )
    assert redact("bad sk-live-0123", key) == "bad [REDACTED]"
    assert redact("ends sk-live", key) == "ends sk-live"  # too short to tell
    # A cut marker earlier in the text does not hide a prefix at its end.
    assert redact("x sk-live-01234… [truncated 9 chars] y sk-live-0123", key) == (
        "x [REDACTED]… [truncated 9 chars] y [REDACTED]"
    )
    # A cut body never leaves a prefix when redaction comes first.
    body = "x" * 3990 + key
    assert key[:8] not in truncate_body(redact(body, key))


def test_redact_url() -> None:
    key = "sk-live-0123456789abcdef0123"
    assert redact_url(f"http://u:{key}@h:1/v1?api-version=2024-06-01&key={key}") == (
        "http://[REDACTED]@h:1/v1?api-version=2024-06-01&key=[REDACTED]"
    )
    assert redact_url(f"http://h/{key}/v1?token=abc") == "http://h/[REDACTED]/v1?token=[REDACTED]"
    assert redact_url("http://h/openai/deployments/gpt-4o/chat") == (
        "http://h/openai/deployments/gpt-4o/chat"
    )
    assert redact_url("http://h/v1/k-secret-x", "k-secret-x") == "http://h/v1/[REDACTED]"


def test_model_repr_hides_credentials() -> None:
    model = Model(
        id="m",
        name="M",
        api="a",
        provider="p",
        base_url="http://u:sk-live-0123456789abcdef@h/v1?key=sk-live-0123456789abcdef",
        headers={"x-api-key": "sk-live-0123456789abcdef", "X-Title": "app"},
    )
    text = repr(model)
    assert "0123456789" not in text
    assert "base_url='http://[REDACTED]@h/v1?key=[REDACTED]'" in text
    assert "headers={'x-api-key': '[REDACTED]', 'X-Title': 'app'}" in text
    assert model.base_url.startswith("http://u:sk-live")  # the value itself is unchanged


# ---------------------------------------------------------------------------------------
# Retries: U08 (the retry-delay message) and U12 (delays in the past)

RATE_LIMITED = {
    "error": {
        "message": "rate_limit_exceeded happened",
        "type": "rate_limit_exceeded",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}


def test_client_error_text() -> None:
    def text(body: str) -> str:
        return client_error_text(HttpError(status=429, headers={}, body=body))

    assert text('{"error":{"message":"slow"}}') == "429 slow"
    assert text('{"error":{"code":1}}') == '429 {"code":1}'
    assert text("slow down\n") == "429 slow down\n"
    assert text("") == "429 status code (no body)"


@pytest.mark.parametrize(
    ("headers", "cap_ms", "expected"),
    [
        ({"retry-after": "120"}, None, "Server requested 120s retry delay (max: 60s). "),
        ({"retry-after": "120"}, 5000, "Server requested 120s retry delay (max: 5s). "),
        ({"retry-after-ms": "2000"}, 1000, "Server requested 2s retry delay (max: 1s). "),
    ],
)
@pytest.mark.parametrize(
    "api", [OPENAI_COMPLETIONS, OPENAI_RESPONSES], ids=["completions", "responses"]
)
async def test_u08_retry_delay_message_ends_with_the_client_message(
    headers: dict[str, str],
    cap_ms: int | None,
    expected: str,
    api: HttpApi,
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
) -> None:
    sse_server.enqueue(error_response(429, RATE_LIMITED, headers))
    model = Model(
        id="m", name="M", api="x", provider="openai", base_url=sse_server.base_url + "/v1"
    )
    options = StreamOptions(api_key="k", max_retries=1, max_retry_delay_ms=cap_ms)
    api = attrs.evolve(api, format_retry_error=client_error_text)
    stream = stream_http(api, model, CONTEXT, options, HttpEnv(client=http_client))
    async with aclosing(stream):
        events = [event async for event in stream]
    assert error_of(events) == expected + "429 rate_limit_exceeded happened"


async def test_u08_text_body_and_the_default_wording(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(error_response(429, "slow down", {"retry-after": "120"}))
    sse_server.enqueue(error_response(429, "slow down", {"retry-after": "120"}))
    model = echo_model(sse_server.base_url)
    api = attrs.evolve(ECHO, format_retry_error=client_error_text)
    for each_api, expected in [(api, "429 slow down"), (ECHO, "echo 429: slow down")]:
        stream = stream_http(
            each_api,
            model,
            CONTEXT,
            StreamOptions(api_key="k", max_retries=1),
            HttpEnv(client=http_client),
        )
        async with aclosing(stream):
            events = [event async for event in stream]
        assert error_of(events) == f"Server requested 120s retry delay (max: 60s). {expected}"


@pytest.mark.parametrize(
    "headers",
    [
        {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"},
        {"retry-after-ms": "-5"},
        {"retry-after": "-3"},
    ],
)
async def test_u12_a_delay_in_the_past_retries_at_once(
    headers: dict[str, str],
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
    autojump_clock: trio.abc.Clock,
) -> None:
    assert retry_delay(0, headers) == (0.0, True)
    sse_server.enqueue(error_response(503, "busy", headers))
    sse_server.enqueue(sse_response([sse_chunk("a"), sse_chunk("", event="end")]))
    start = trio.current_time()
    events = await run(http_client, echo_model(sse_server.base_url), api_key="k", max_retries=1)
    assert events[-1].type == "done"
    assert trio.current_time() - start == 0
    # Not a number: exponential backoff, as before.
    assert retry_delay(0, {"retry-after-ms": "soon"})[1] is False


def test_u09_truncate_json_error() -> None:
    detail = '{"message":"' + "m" * 5031 + '"}'
    assert len(detail) == 5045
    assert truncate_json_error(detail) == detail[:4000] + "... [truncated 1045 chars]"
    assert truncate_json_error(" short \n") == " short \n"
