"""The shared HTTP layer under all three built-in APIs, on the loopback server: SSE framing
(parity rows U01-U06), JSON error bodies with status 200 (F17), redaction (F2, F11),
redirects (F3) and connection reuse (F5)."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from functools import partial
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from http_cases import API_CASES, ApiCase
from httpcore._backends.trio import TrioStream
from sse_server import ScriptedResponse, SseServer, error_response, start_sse_server

from trio_agent import (
    AbortController,
    AssistantMessage,
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    LlmContext,
    Model,
    StreamOptions,
    TextContent,
    UserMessage,
)
from trio_agent.models import Models

KEY = "sk-live-0123456789abcdef0123456789abcdef"
CONTEXT = LlmContext(messages=[UserMessage(content="hi", timestamp=0)])
TEXT_EVENTS = ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]

by_api = pytest.mark.parametrize("case", API_CASES, ids=[case.api for case in API_CASES])


async def collect(
    client: httpx.AsyncClient, model: Model, **options: Any
) -> list[AssistantMessageEvent]:
    options.setdefault("api_key", KEY)
    models = Models(client)
    stream = models.stream_simple(model, CONTEXT, StreamOptions(**options))
    async with aclosing(stream):
        return [event async for event in stream]


def final(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, DoneEvent | ErrorEvent)
    return last.message if isinstance(last, DoneEvent) else last.error


def texts(message: AssistantMessage) -> list[str]:
    return [block.text for block in message.content if isinstance(block, TextContent)]


def assert_hello_world(events: list[AssistantMessageEvent]) -> None:
    assert [event.type for event in events] == TEXT_EVENTS
    message = final(events)
    assert message.stop_reason == "stop"
    assert texts(message) == ["Hello world"]
    assert (message.usage.input, message.usage.output) == (12, 3)


def body_response(body: bytes, **kwargs: Any) -> ScriptedResponse:
    return ScriptedResponse(chunks=[body], **kwargs)


# ---------------------------------------------------------------------------------------
# U01-U06: SSE framing and content type


@by_api
@pytest.mark.parametrize(
    "content_type",
    ["text/event-stream", "application/json", "text/plain", None, "TEXT/EVENT-STREAM"],
)
async def test_u01_the_content_type_is_not_checked(
    case: ApiCase,
    content_type: str | None,
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    sse_server.enqueue(ScriptedResponse(headers=headers, chunks=list(case.frames)))
    assert_hello_world(await collect(http_client, case.model(sse_server.base_url)))


@by_api
@pytest.mark.parametrize("ending", [b"\n", b""], ids=["newline", "no-newline"])
async def test_u02_the_last_event_is_dispatched_at_eof(
    case: ApiCase, ending: bytes, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    body = case.body.removesuffix(b"\n\n") + ending
    sse_server.enqueue(body_response(body))
    assert_hello_world(await collect(http_client, case.model(sse_server.base_url)))


@by_api
async def test_u03_blank_lines_after_an_id_dispatch_nothing(
    case: ApiCase, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    frames = [b"id: 7\n\n\n" + frame + b"\n\n" for frame in case.frames]
    sse_server.enqueue(ScriptedResponse(chunks=[b": comment\n\n", *frames]))
    assert_hello_world(await collect(http_client, case.model(sse_server.base_url)))


@by_api
async def test_u04_a_byte_order_mark_is_skipped(
    case: ApiCase, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    # The BOM is cut across two reads, too.
    body = b"\xef\xbb\xbf" + case.body
    sse_server.enqueue(ScriptedResponse(chunks=[body[:2], body[2:]]))
    assert_hello_world(await collect(http_client, case.model(sse_server.base_url)))


@by_api
@pytest.mark.parametrize("how", ["clean-eof", "dropped"])
async def test_u05_a_body_cut_inside_an_event_fails_keeping_the_text(
    case: ApiCase, how: str, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    # Cut in the middle of the frame after the second text delta: the text is kept.
    frames = list(case.frames)
    second_delta = next(i for i, f in enumerate(frames) if b" world" in f)
    cut = frames[second_delta + 1][:12]
    chunks = [*frames[: second_delta + 1], cut]
    sse_server.enqueue(ScriptedResponse(chunks=chunks, close_early=how == "dropped"))
    events = await collect(http_client, case.model(sse_server.base_url))
    message = final(events)
    assert events[-1].type == "error"
    assert message.stop_reason == "error"
    assert message.error_message
    assert texts(message) == ["Hello world"]


@by_api
async def test_u06_crlf_lines_in_one_byte_reads(
    case: ApiCase, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    # Every CRLF is split across two reads, and so is every UTF-8 sequence and JSON token.
    body = case.body.replace(b"\n", b"\r\n")
    sse_server.enqueue(ScriptedResponse(chunks=[body[i : i + 1] for i in range(len(body))]))
    assert_hello_world(await collect(http_client, case.model(sse_server.base_url)))


# ---------------------------------------------------------------------------------------
# F17: a JSON error body with status 200

OVERLOADED = {"error": {"message": "The model is overloaded, try later", "type": "server_error"}}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            API_CASES[0],
            '200: {"message":"The model is overloaded, try later","type":"server_error"}',
        ),
        (
            API_CASES[1],
            '200 {"error":{"message":"The model is overloaded, try later","type":"server_error"}}',
        ),
        (
            API_CASES[2],
            'OpenAI API error (200): {"message":"The model is overloaded, try later",'
            '"type":"server_error"}',
        ),
    ],
    ids=[case.api for case in API_CASES],
)
async def test_f17_a_200_json_error_body_reports_the_servers_message(
    case: ApiCase, expected: str, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(error_response(200, OVERLOADED))
    events = await collect(http_client, case.model(sse_server.base_url))
    assert [event.type for event in events] == ["start", "error"]
    assert final(events).error_message == expected


# ---------------------------------------------------------------------------------------
# F2: redaction before truncation, and of escaped forms


@by_api
async def test_f2_a_key_across_the_error_cut_is_redacted(
    case: ApiCase, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    body = "bad key: " + "x" * 3955 + KEY + " end"
    sse_server.enqueue(error_response(401, body))
    events = await collect(http_client, case.model(sse_server.base_url))
    message = final(events).error_message
    assert message is not None
    assert KEY[:-4] not in message
    assert KEY[:12] not in message


@by_api
@pytest.mark.parametrize(
    "written",
    [
        "sk-live\\/0123456789abcdef\\/end",
        "sk-live\\u002f0123456789abcdef\\u002Fend",
        "sk-live%2F0123456789abcdef%2fend",
    ],
    ids=["json-slash", "json-unicode", "percent"],
)
async def test_f2_escaped_forms_of_the_key_are_redacted(
    case: ApiCase, written: str, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    key = "sk-live/0123456789abcdef/end"
    body = '{"error":{"message":"bad key ' + written + '"}}'
    sse_server.enqueue(
        ScriptedResponse(
            status=401, headers={"content-type": "application/json"}, chunks=[body.encode()]
        )
    )
    events = await collect(http_client, case.model(sse_server.base_url), api_key=key)
    message = final(events).error_message
    assert message is not None
    assert "[REDACTED]" in message
    assert "0123456789abcdef" not in message


# ---------------------------------------------------------------------------------------
# F3: no credential header to another origin


@by_api
async def test_f3_redirects_are_not_followed_even_by_a_following_client(
    case: ApiCase, sse_server: SseServer, nursery: trio.Nursery
) -> None:
    other = await start_sse_server(nursery)
    target = f"{other.base_url}/collect"
    sse_server.enqueue(
        ScriptedResponse(status=307, headers={"location": target}, chunks=[b""]),
    )
    other.enqueue(ScriptedResponse(chunks=list(case.frames)))
    async with httpx.AsyncClient(follow_redirects=True) as client:
        events = await collect(
            client,
            case.model(sse_server.base_url),
            headers={"X-Custom-Auth": "custom-secret-value"},
        )
    assert other.requests == []
    assert [event.type for event in events] == ["error"]
    assert final(events).error_message == (
        f"307 redirect to {target} not followed: provider requests never follow "
        "redirects, so credentials stay with the model's base_url "
        "(set base_url to the final address)"
    )


# ---------------------------------------------------------------------------------------
# F5: keep-alive connections are reused


@by_api
@pytest.mark.parametrize("framing", ["chunked", "content-length"])
async def test_f5_three_prompts_use_one_connection(
    case: ApiCase, framing: str, sse_server: SseServer
) -> None:
    sse_server.keep_alive = True
    for _ in range(3):
        sse_server.enqueue(
            ScriptedResponse(chunks=list(case.frames), content_length=framing == "content-length")
        )
    async with Models() as models:
        for _ in range(3):
            message = await models.complete_simple(
                case.model(sse_server.base_url), CONTEXT, StreamOptions(api_key=KEY)
            )
            assert texts(message) == ["Hello world"]
    assert len(sse_server.requests) == 3
    assert sse_server.connections == 1


def enqueue_stalled_then_whole(case: ApiCase, server: SseServer) -> None:
    """On one keep-alive connection: a body that stalls after its first text, then the
    whole response."""
    server.keep_alive = True
    first_text = next(i for i, f in enumerate(case.frames) if b"Hello" in f)
    server.enqueue(
        ScriptedResponse(chunks=list(case.frames[: first_text + 1]), hang=True),
        ScriptedResponse(chunks=list(case.frames)),
    )


def abortable_stream(
    models: Models, case: ApiCase, server: SseServer
) -> tuple[AbortController, AsyncGenerator[AssistantMessageEvent, None]]:
    """A stream of ``case`` from ``server`` with an abort signal, and its controller."""
    controller = AbortController()
    stream = models.stream_simple(
        case.model(server.base_url), CONTEXT, StreamOptions(api_key=KEY, signal=controller.signal)
    )
    return controller, stream


async def assert_next_request_answers(models: Models, case: ApiCase, server: SseServer) -> None:
    message = await models.complete_simple(
        case.model(server.base_url), CONTEXT, StreamOptions(api_key=KEY)
    )
    assert texts(message) == ["Hello world"]


@by_api
async def test_f5_an_aborted_stream_drops_its_connection(
    case: ApiCase, sse_server: SseServer
) -> None:
    enqueue_stalled_then_whole(case, sse_server)
    async with Models() as models:
        controller, stream = abortable_stream(models, case, sse_server)
        async with aclosing(stream):
            async for event in stream:
                if event.type == "text_delta":
                    controller.abort()
        assert event.type == "error"
        assert final([event]).stop_reason == "aborted"
        await assert_next_request_answers(models, case, sse_server)
    assert sse_server.connections == 2


@by_api
async def test_f5_an_abort_from_another_task_ends_a_waiting_read(
    case: ApiCase, sse_server: SseServer
) -> None:
    # The body stalls after its first text: the read waits on the socket when the abort
    # comes from another task. The stream ends aborted with the text so far, the server
    # sees its connection closed, and the pool serves the next request on a new one.
    enqueue_stalled_then_whole(case, sse_server)
    events: list[AssistantMessageEvent] = []
    async with Models() as models:
        controller, stream = abortable_stream(models, case, sse_server)

        got_text = trio.Event()

        async def consume() -> None:
            async with aclosing(stream):
                async for event in stream:
                    events.append(event)
                    if event.type == "text_delta":
                        got_text.set()

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume)
                await got_text.wait()
                await trio.testing.wait_all_tasks_blocked()
                controller.abort("enough")
            await sse_server.client_closed.wait()
        assert events[-1].type == "error"
        aborted = final(events)
        assert (aborted.stop_reason, aborted.error_message) == ("aborted", "Request was aborted")
        assert texts(aborted) == ["Hello"]
        await assert_next_request_answers(models, case, sse_server)
    assert sse_server.connections == 2


@by_api
async def test_f5_an_abort_after_the_last_event_keeps_the_connection(
    case: ApiCase, sse_server: SseServer
) -> None:
    # The body is complete when the terminal event is yielded: an abort then must not
    # touch the connection, which goes back to the pool for the next request.
    sse_server.keep_alive = True
    sse_server.enqueue(
        ScriptedResponse(chunks=list(case.frames)), ScriptedResponse(chunks=list(case.frames))
    )
    async with Models() as models:
        controller, stream = abortable_stream(models, case, sse_server)
        async with aclosing(stream):
            async for event in stream:
                if event.type == "done":
                    controller.abort()
        assert event.type == "done"
        await assert_next_request_answers(models, case, sse_server)
    assert sse_server.connections == 1


async def test_f5_an_abort_while_httpx_reads_on_inside_one_read_is_not_missed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The server sends the first text, then only the first byte of the next chunk's size
    # line. The abort lands just as httpx's read returns that byte; h11 needs more, so
    # httpx waits on the socket again inside the same read of the body. The stream must
    # still end at once (the abort closed the socket), not when more bytes come.
    case = API_CASES[0]
    first_text = next(i for i, f in enumerate(case.frames) if b"Hello" in f)
    got_text = trio.Event()
    controller = AbortController()
    real_read = TrioStream.read

    async def read(self: Any, max_bytes: int, **options: Any) -> bytes:  # httpcore's call
        data: bytes = await real_read(self, max_bytes, **options)
        if data == b"1":
            controller.abort()
        return data

    monkeypatch.setattr(TrioStream, "read", read)

    async def serve(stream: trio.SocketStream) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            request += await stream.receive_some()
        head = (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        body = b"".join(
            b"%x\r\n%s\r\n" % (len(frame), frame) for frame in case.frames[: first_text + 1]
        )
        await stream.send_all(head + body)
        await got_text.wait()
        await stream.send_all(b"1")
        await stream.receive_some()  # until the client closes

    events: list[AssistantMessageEvent] = []
    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        async with Models() as models:
            stream = models.stream_simple(
                case.model(f"http://127.0.0.1:{port}"),
                CONTEXT,
                StreamOptions(api_key=KEY, signal=controller.signal),
            )
            with trio.fail_after(5):
                async with aclosing(stream):
                    async for event in stream:
                        events.append(event)
                        if event.type == "text_delta":
                            got_text.set()
        nursery.cancel_scope.cancel()
    aborted = final(events)
    assert (aborted.stop_reason, aborted.error_message) == ("aborted", "Request was aborted")
    assert texts(aborted) == ["Hello"]


@by_api
async def test_f5_garbage_after_the_end_does_not_hang(
    case: ApiCase, sse_server: SseServer, autojump_clock: trio.abc.Clock
) -> None:
    sse_server.keep_alive = True
    sse_server.enqueue(
        ScriptedResponse(chunks=[*case.frames, b"data: garbage\n\n"], hang=True),
        ScriptedResponse(chunks=list(case.frames)),
    )
    async with Models() as models:
        for _ in range(2):
            with trio.fail_after(1):
                message = await models.complete_simple(
                    case.model(sse_server.base_url), CONTEXT, StreamOptions(api_key=KEY)
                )
            assert texts(message) == ["Hello world"]
    assert sse_server.connections == 2


@by_api
async def test_f5_a_large_rest_is_not_drained(case: ApiCase, sse_server: SseServer) -> None:
    # 256 KiB after the end marker: more than is worth reading, so the connection closes.
    sse_server.keep_alive = True
    garbage = b": " + b"x" * (256 * 1024) + b"\n\n"
    sse_server.enqueue(
        ScriptedResponse(chunks=[*case.frames, garbage]),
        ScriptedResponse(chunks=list(case.frames)),
    )
    async with Models() as models:
        for _ in range(2):
            message = await models.complete_simple(
                case.model(sse_server.base_url), CONTEXT, StreamOptions(api_key=KEY)
            )
            assert texts(message) == ["Hello world"]
    assert sse_server.connections == 2


# ---------------------------------------------------------------------------------------
# F11: a key in the base URL


def url_forms(base_url: str) -> dict[str, str]:
    host = base_url.removeprefix("http://")
    return {
        "userinfo": f"http://user:{KEY}@{host}",
        "query": f"{base_url}/gw?key={KEY}",
        "path": f"{base_url}/{KEY}",
    }


@by_api
@pytest.mark.parametrize("form", ["userinfo", "query", "path"])
async def test_f11_a_key_in_the_base_url_is_never_shown(
    case: ApiCase,
    form: str,
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = url_forms(sse_server.base_url)[form]
    model = case.model(url)
    assert KEY not in repr(model)
    assert "[REDACTED]" in repr(model)
    sse_server.enqueue(ScriptedResponse(chunks=list(case.frames)))
    sse_server.enqueue(error_response(401, f"bad request to {url}"))
    caplog.set_level(logging.DEBUG)
    assert_hello_world(await collect(http_client, model))
    events = await collect(http_client, model)
    assert final(events).error_message is not None
    assert KEY not in str(final(events).error_message)
    assert KEY not in caplog.text
    assert any(record.name == "httpx" for record in caplog.records)
    if form == "userinfo":
        # The userinfo travels as Basic auth, as httpx would send it.
        request = sse_server.requests[0]
        assert request.headers["authorization"].startswith("Basic ")


# ---------------------------------------------------------------------------------------
# U39: the Accept header of a stream request


@by_api
async def test_u39_accept_header(
    case: ApiCase, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(ScriptedResponse(chunks=list(case.frames)))
    assert_hello_world(await collect(http_client, case.model(sse_server.base_url)))
    expected = "application/json" if case.api == "anthropic-messages" else "text/event-stream"
    assert sse_server.requests[0].headers["accept"] == expected
