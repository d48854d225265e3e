"""openai-responses: the parity rows (error texts, statuses, events, ids, request details)."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import httpx
import pytest
import trio
from sse_server import ScriptedResponse, SseServer, error_response, sse_chunk, sse_response
from test_openai_responses import (
    CREATED,
    collect,
    completed,
    ev,
    final_done,
    final_error,
    make_model,
    message_frames,
    server_model,
    types,
)

from trio_agent import (
    AssistantMessageEvent,
    LlmContext,
    Model,
    StreamOptions,
    TextContent,
    ToolCall,
    ToolCallDeltaEvent,
    UserMessage,
)
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


# ---------------------------------------------------------------------------------------
# U29 · responseModel from response.model (documented)


async def test_response_model_comes_from_the_response(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    created = ev("response.created", response={"id": "r", "model": "routed-model-x"})
    sse_server.enqueue(sse_response([created, *message_frames(0, "ok"), completed()]))
    done = final_done(await collect(server_model(sse_server), http_client))
    assert done.message.response_model == "routed-model-x"


# ---------------------------------------------------------------------------------------
# U30 · terminal statuses


@pytest.mark.parametrize("status", ["in_progress", "queued", None])
async def test_a_completed_response_without_a_final_status_stops(
    sse_server: SseServer, http_client: httpx.AsyncClient, status: str | None
) -> None:
    terminal = ev(
        "response.completed", response={"id": "r", **({"status": status} if status else {})}
    )
    sse_server.enqueue(sse_response([CREATED, *message_frames(0, "ok"), terminal]))
    done = final_done(await collect(server_model(sse_server), http_client))
    assert done.reason == "stop"
    assert done.message.content[0] == TextContent(text="ok", text_signature='{"v":1,"id":"msg_1"}')


@pytest.mark.parametrize(
    ("kind", "response", "expected"),
    [
        ("response.completed", {"status": "cancelled"}, "An unknown error occurred"),
        ("response.completed", {"status": "failed"}, "An unknown error occurred"),
        ("response.completed", {"status": "weird_status"}, "Unhandled stop reason: weird_status"),
        (
            "response.incomplete",
            {"status": "incomplete"},
            "Response incomplete without a provider reason",
        ),
        (
            "response.incomplete",
            {"status": "incomplete", "incomplete_details": {"reason": "content_filter"}},
            "Response incomplete: content_filter",
        ),
        ("response.failed", {"status": "failed"}, "Unknown error (no error details in response)"),
        (
            "response.failed",
            {"status": "failed", "error": {"code": "server_error", "message": "boom"}},
            "server_error: boom",
        ),
    ],
)
async def test_terminal_status_errors(
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
    kind: str,
    response: dict[str, Any],
    expected: str,
) -> None:
    sse_server.enqueue(
        sse_response(
            [CREATED, *message_frames(0, "ok"), ev(kind, response={"id": "r", **response})]
        )
    )
    message = final_error(await collect(server_model(sse_server), http_client))
    assert message.stop_reason == "error"
    assert message.error_message == expected


async def test_max_output_tokens_is_length(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    terminal = ev(
        "response.incomplete",
        response={
            "id": "r",
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
        },
    )
    sse_server.enqueue(sse_response([CREATED, *message_frames(0, "ok"), terminal]))
    assert final_done(await collect(server_model(sse_server), http_client)).reason == "length"


# ---------------------------------------------------------------------------------------
# U31 · the usage of a failed response is kept (documented)


async def test_a_failed_response_keeps_its_usage(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    usage = {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15}
    failed = ev("response.failed", response={"id": "r", "status": "failed", "usage": usage})
    sse_server.enqueue(sse_response([CREATED, failed]))
    message = final_error(await collect(server_model(sse_server), http_client))
    assert message.error_message == "Unknown error (no error details in response)"
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (12, 3, 15)


# ---------------------------------------------------------------------------------------
# U32 · the error event


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (
            sse_chunk(
                {"type": "error", "code": "server_error", "message": "boom", "param": None},
                event="error",
            ),
            "boom",
        ),
        (
            sse_chunk({"error": {"message": "nested boom", "code": "x"}}, event="error"),
            "nested boom",
        ),
        (
            sse_chunk({"type": "error", "code": "server_error", "message": "boom", "param": None}),
            "Error Code server_error: boom",
        ),
    ],
)
async def test_error_event_text(
    sse_server: SseServer, http_client: httpx.AsyncClient, frame: bytes, expected: str
) -> None:
    sse_server.enqueue(sse_response([CREATED, frame]))
    message = final_error(await collect(server_model(sse_server), http_client))
    assert message.error_message == expected


# ---------------------------------------------------------------------------------------
# U33 · nothing after the terminal event is read (documented)


async def test_an_error_after_completion_is_ignored(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    late = sse_chunk({"type": "error", "code": "x", "message": "after completion"}, event="error")
    sse_server.enqueue(sse_response([CREATED, *message_frames(0, "ok"), completed(), late]))
    done = final_done(await collect(server_model(sse_server), http_client))
    assert done.reason == "stop"


# ---------------------------------------------------------------------------------------
# U34 · arguments seen only in output_item.added or .done get a delta (documented)


def call_item(arguments: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "read",
        "arguments": arguments,
    }


async def test_arguments_only_in_the_done_item_get_a_delta(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                CREATED,
                ev("response.output_item.added", output_index=0, item=call_item("")),
                ev(
                    "response.output_item.done",
                    output_index=0,
                    item=call_item('{"path":"/final"}'),
                ),
                completed(),
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    delta = events[2]
    assert isinstance(delta, ToolCallDeltaEvent)
    assert delta.delta == '{"path":"/final"}'
    assert final_done(events).message.content == [
        ToolCall(id="call_1|fc_1", name="read", arguments={"path": "/final"})
    ]


async def test_done_arguments_that_differ_from_the_streamed_ones_win(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                CREATED,
                ev("response.output_item.added", output_index=0, item=call_item("")),
                ev(
                    "response.function_call_arguments.delta",
                    output_index=0,
                    delta='{"path":"/streamed"}',
                ),
                ev(
                    "response.output_item.done",
                    output_index=0,
                    item=call_item('{"path":"/final"}'),
                ),
                completed(),
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    deltas = [e.delta for e in events if isinstance(e, ToolCallDeltaEvent)]
    assert deltas == ['{"path":"/streamed"}', '{"path":"/final"}']
    assert final_done(events).message.content == [
        ToolCall(id="call_1|fc_1", name="read", arguments={"path": "/final"})
    ]


# ---------------------------------------------------------------------------------------
# U35 · an item seen only when done


async def test_a_message_item_seen_only_when_done(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    item = {
        "type": "message",
        "id": "msg_na",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "no added"}],
    }
    sse_server.enqueue(
        sse_response(
            [CREATED, ev("response.output_item.done", output_index=0, item=item), completed()]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "text_start", "text_end", "done"]
    assert final_done(events).message.content == [
        TextContent(text="no added", text_signature='{"v":1,"id":"msg_na"}')
    ]


# ---------------------------------------------------------------------------------------
# U36 · a message item never closed still gets text_end (documented)


async def test_an_unclosed_message_item_gets_text_end(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    frames = message_frames(0, "open")
    opened = [f for f in frames if b"output_item.done" not in f]
    sse_server.enqueue(sse_response([CREATED, *opened, completed()]))
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    assert final_done(events).message.content[0] == TextContent(text="open")


# ---------------------------------------------------------------------------------------
# U37 · total_tokens missing: the sum (documented)


async def test_a_missing_total_is_the_sum(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    terminal = ev(
        "response.completed",
        response={
            "id": "r",
            "status": "completed",
            "usage": {"input_tokens": 100, "output_tokens": 20},
        },
    )
    sse_server.enqueue(sse_response([CREATED, *message_frames(0, "ok"), terminal]))
    done = final_done(await collect(server_model(sse_server), http_client))
    assert done.message.usage.total_tokens == 120


# ---------------------------------------------------------------------------------------
# U38 · malformed event JSON


async def test_malformed_event_json(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    sse_server.enqueue(
        sse_response([CREATED, b"event: response.output_text.delta\ndata: {this is not json}\n\n"])
    )
    message = final_error(await collect(server_model(sse_server), http_client))
    assert message.error_message == "Error reading response: malformed server-sent event JSON."
