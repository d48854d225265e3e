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
    assistant,
    collect,
    completed,
    ev,
    final_done,
    final_error,
    make_model,
    message_frames,
    request_body,
    server_model,
    types,
)

from trio_agent import (
    AssistantMessageEvent,
    ImageContent,
    LlmContext,
    Message,
    Model,
    StreamOptions,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolResultMessage,
    UserMessage,
)
from trio_agent.models._http import HttpEnv, HttpError
from trio_agent.models._openai_responses import (
    format_responses_http_error,
    short_hash,
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
        (
            400,
            '{"error":null,"detail":"x"}',
            'OpenAI API error (400): 400 {"error":null,"detail":"x"}',
        ),
        (400, "[1,2]", "OpenAI API error (400): 400 [1,2]"),
        (400, '{"error":{}}', "OpenAI API error (400): 400 {}"),
        (400, '"just a string"', "OpenAI API error (400): 400 status code (no body)"),
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


# ---------------------------------------------------------------------------------------
# Request building


def body(model: Model, messages: list[Message], **options: Any) -> dict[str, Any]:
    return request_body(model, messages, StreamOptions(**options))


HI = UserMessage(content="hi", timestamp=1)


# U41 · whitespace-only tool results


def test_a_whitespace_only_tool_result_is_no_tool_output() -> None:
    model = make_model()
    messages: list[Message] = [
        HI,
        assistant([ToolCall(id="call_1|fc_1", name="read", arguments={})], model),
        ToolResultMessage(
            tool_call_id="call_1|fc_1", tool_name="read", content=[TextContent(text="   ")]
        ),
    ]
    assert body(model, messages)["input"][-1] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "(no tool output)",
    }


# U57 · the texts of a tool result with images are joined into one input_text


def test_tool_result_texts_are_joined_before_the_images() -> None:
    model = make_model(input=["text", "image"])
    image = ImageContent(data="AAAA", mime_type="image/png")
    messages: list[Message] = [
        HI,
        assistant([ToolCall(id="call_1|fc_1", name="read", arguments={})], model),
        ToolResultMessage(
            tool_call_id="call_1|fc_1",
            tool_name="read",
            content=[TextContent(text="line one"), TextContent(text="line two"), image, image],
        ),
    ]
    picture = {"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,AAAA"}
    assert body(model, messages)["input"][-1]["output"] == [
        {"type": "input_text", "text": "line one\nline two"},
        picture,
        picture,
    ]


# U58 · replay ids


def test_short_hash_vectors() -> None:
    assert short_hash("") == "k4n83c7h0j2b"
    assert short_hash("abc") == "y0biex7f9bbh"
    assert short_hash("fc_item+/=xyz") == "1mtqnvc1v1ofis"
    assert short_hash("msg_" + "x" * 70) == "1f43gnm1wcb1pr"


def test_a_long_text_signature_id_is_hashed() -> None:
    model = make_model()
    long_id = "msg_" + "x" * 70
    messages: list[Message] = [
        HI,
        assistant([TextContent(text="a", text_signature=long_id)], model, stop_reason="stop"),
        UserMessage(content="more", timestamp=3),
    ]
    assert body(model, messages)["input"][1]["id"] == "msg_1f43gnm1wcb1pr"


def foreign_call_items(target: Model, call_id: str) -> list[dict[str, Any]]:
    other = make_model(provider="anthropic", api="anthropic-messages", id="claude")
    messages: list[Message] = [
        HI,
        assistant([ToolCall(id=call_id, name="read", arguments={})], other),
        ToolResultMessage(tool_call_id=call_id, tool_name="read", content=[TextContent(text="ok")]),
    ]
    items: list[dict[str, Any]] = body(target, messages)["input"][1:]
    return items


@pytest.mark.parametrize("provider", ["openai", "openai-codex", "opencode"])
def test_a_foreign_call_to_openai_keeps_a_hashed_item_id(provider: str) -> None:
    call, output = foreign_call_items(make_model(provider=provider), "call_abc|fc_item+/=xyz")
    assert call["call_id"] == "call_abc"
    assert call["id"] == "fc_1mtqnvc1v1ofis"
    assert output["call_id"] == "call_abc"


def test_a_foreign_call_to_another_provider_is_normalised_whole() -> None:
    call, output = foreign_call_items(make_model(provider="azure"), "call_abc|fc_item+/=xyz")
    assert call["call_id"] == "call_abc_fc_item___xyz"
    assert "id" not in call
    assert output["call_id"] == "call_abc_fc_item___xyz"


def test_a_long_foreign_call_id_is_cut_to_64() -> None:
    call, output = foreign_call_items(make_model(), "c" * 80)
    assert call["call_id"] == "c" * 64
    assert output["call_id"] == "c" * 64
    call, _ = foreign_call_items(make_model(provider="x"), "call.abc..")
    assert call["call_id"] == "call_abc"


# U59 · fallback ids count only the messages that produced input items


def test_fallback_message_ids_count_emitted_messages() -> None:
    model = make_model()
    messages: list[Message] = [
        SystemMessage(content="Sys."),
        UserMessage(content="   "),
        UserMessage(content=[]),
        UserMessage(content=[TextContent(text="")]),
        assistant([TextContent(text="  "), TextContent(text="")], model, stop_reason="stop"),
        assistant([], model, stop_reason="stop"),
        UserMessage(content="real question"),
    ]
    ids = [
        item.get("id") for item in body(model, messages)["input"] if item.get("type") == "message"
    ]
    assert ids == ["msg_pi_2", "msg_pi_2_1"]


# U60 · supportsLongCacheRetention: false


@pytest.mark.parametrize(
    ("compat", "sent"), [({}, True), ({"supportsLongCacheRetention": False}, False)]
)
def test_long_retention_honours_the_switch(compat: dict[str, Any], sent: bool) -> None:
    model = make_model(compat={"cacheRetention": "long", **compat})
    result = body(model, [HI], session_id="s")
    assert ("prompt_cache_retention" in result) is sent
    if sent:
        assert result["prompt_cache_retention"] == "24h"
