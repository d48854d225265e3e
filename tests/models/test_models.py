"""The Models runtime, the catalog and the cost/thinking helpers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import attrs
import httpx
import pytest
from sse_server import SseServer, sse_response

from trio_agent import (
    AssistantMessage,
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    LlmContext,
    Message,
    Model,
    ModelCost,
    StartEvent,
    StreamOptions,
    SystemMessage,
    TextContent,
    Usage,
    UserMessage,
)
from trio_agent.models import (
    DEFAULT_THINKING_BUDGETS,
    Models,
    adjust_max_tokens_for_thinking,
    calculate_cost,
    clamp_max_tokens_to_context,
    clamp_thinking_level,
    get_supported_thinking_levels,
)
from trio_agent.models._catalog import load_catalog

CONTEXT = LlmContext(messages=[UserMessage(content="hi", timestamp=0)])


def custom_model(api: str = "custom-api", **changes: Any) -> Model:
    model = Model(id="c1", name="C1", api=api, provider="acme", base_url="http://unused")
    return attrs.evolve(model, **changes)


async def collect(models: Models, model: Model, **options: Any) -> list[AssistantMessageEvent]:
    async with aclosing(models.stream_simple(model, CONTEXT, StreamOptions(**options))) as s:
        return [event async for event in s]


# ---------------------------------------------------------------------------------------
# Catalog and lookup


async def test_get_model_from_catalog() -> None:
    async with Models() as models:
        model = models.get_model("openai", "gpt-4o-mini")
        assert model.api == "openai-responses"
        assert model.base_url == "https://api.openai.com/v1"
        assert model.context_window == 128000
        assert model.cost == ModelCost(input=0.15, output=0.6, cache_read=0.075)
        groq = models.get_model("groq", "llama-3.3-70b-versatile")
        assert groq.api == "openai-completions"
        assert models.get_model("anthropic", "claude-sonnet-4-5").api == "anthropic-messages"
        assert models.get_model("deepseek", "deepseek-chat").provider == "deepseek"
        assert models.get_model("openrouter", "openai/gpt-4o-mini").base_url == (
            "https://openrouter.ai/api/v1"
        )


async def test_unknown_model_raises_key_error() -> None:
    async with Models() as models:
        with pytest.raises(KeyError, match=r"Unknown model: openai/nope"):
            models.get_model("openai", "nope")


def test_catalog_entries_are_complete() -> None:
    catalog = load_catalog()
    providers = {provider for provider, _ in catalog}
    assert providers == {"openai", "anthropic", "openrouter", "groq", "deepseek"}
    for (provider, model_id), model in catalog.items():
        assert model.provider == provider
        assert model.id == model_id
        assert model.context_window > 0
        assert 0 < model.max_tokens <= model.context_window
        assert model.cost.output >= model.cost.input > 0
        assert model.api in {"openai-completions", "openai-responses", "anthropic-messages"}


async def test_register_model_adds_and_replaces() -> None:
    async with Models() as models:
        mine = custom_model()
        models.register_model(mine)
        assert models.get_model("acme", "c1") is mine
        cheaper = attrs.evolve(
            models.get_model("openai", "gpt-4o"), cost=ModelCost(input=1, output=1)
        )
        models.register_model(cheaper)
        assert models.get_model("openai", "gpt-4o") is cheaper
        assert mine in models.get_models("acme")
        assert models.get_models("openai").count(cheaper) == 1


# ---------------------------------------------------------------------------------------
# Dispatch


async def test_unknown_api_is_one_error_event() -> None:
    async with Models() as models:
        events = await collect(models, custom_model(api="nope"))
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, ErrorEvent)
    assert event.reason == "error"
    assert event.error.error_message == "No API provider registered for api: nope"
    assert event.error.content == []
    assert event.error.usage == Usage()
    assert (event.error.api, event.error.provider, event.error.model) == ("nope", "acme", "c1")


async def test_register_api_dispatch_and_api_key() -> None:
    calls: list[tuple[str, str | None]] = []

    async def stream_fn(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        calls.append((model.id, options.api_key))
        message = AssistantMessage(
            content=[TextContent(text="hi")], api=model.api, provider=model.provider, model=model.id
        )
        yield StartEvent(partial=message)
        yield DoneEvent(reason="stop", message=message)

    async with Models(get_api_key=lambda provider: f"key-for-{provider}") as models:
        models.register_api("custom-api", stream_fn)
        events = await collect(models, custom_model())
        assert [e.type for e in events] == ["start", "done"]
        message = await models.complete_simple(custom_model(), CONTEXT, StreamOptions(api_key="x"))
    assert message.content == [TextContent(text="hi")]
    assert calls == [("c1", "key-for-acme"), ("c1", "x")]


async def test_custom_stream_fn_failures_become_error_events() -> None:
    def raising(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        raise RuntimeError("setup failed")

    async def ends_early(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        return
        yield  # pragma: no cover - makes this an async generator

    async def async_key(provider: str) -> str:
        raise ValueError("vault locked")

    async with Models() as models:
        models.register_api("raising", raising)
        models.register_api("empty", ends_early)
        message = await models.complete_simple(custom_model(api="raising"), CONTEXT)
        assert message.stop_reason == "error"
        assert message.error_message == "setup failed"
        message = await models.complete_simple(custom_model(api="empty"), CONTEXT)
        assert message.error_message == "Stream ended without a terminal event"
    async with Models(get_api_key=async_key) as models:
        models.register_api("empty", ends_early)
        message = await models.complete_simple(custom_model(api="empty"), CONTEXT)
        assert message.error_message == "vault locked"


async def test_builtin_api_through_models(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    frames: list[Any] = [
        {"choices": [{"delta": {"content": "Hi there"}, "finish_reason": "stop"}]},
        "[DONE]",
    ]
    sse_server.enqueue(sse_response(frames), sse_response(frames))
    model = custom_model(
        api="openai-completions", provider="acme", base_url=sse_server.base_url + "/v1"
    )
    async with Models(http_client, get_api_key=lambda provider: "from-hook") as models:
        message = await models.complete_simple(model, CONTEXT)
        events = await collect(models, model)
    assert message.content == [TextContent(text="Hi there")]
    assert message.stop_reason == "stop"
    assert [e.type for e in events][-1] == "done"
    assert sse_server.requests[0].headers["authorization"] == "Bearer from-hook"
    # An injected client stays open.
    assert not http_client.is_closed


async def test_models_closes_only_its_own_client() -> None:
    models = Models()
    client = models.http_client
    await models.aclose()
    assert client.is_closed
    async with httpx.AsyncClient() as injected:
        async with Models(injected):
            pass
        assert not injected.is_closed


async def test_stream_simple_is_usable_as_a_stream_fn() -> None:
    # The Agent calls stream_fn(model, context, options) and iterates the result.
    async with Models() as models:
        stream_fn = models.stream_simple
        events = [e async for e in stream_fn(custom_model(api="nope"), CONTEXT, StreamOptions())]
    assert [e.type for e in events] == ["error"]


# ---------------------------------------------------------------------------------------
# Cost and thinking helpers


def test_calculate_cost() -> None:
    model = custom_model(cost=ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75))
    usage = Usage(input=1000, output=500, cache_read=2000, cache_write=100, total_tokens=3600)
    priced = calculate_cost(model, usage)
    assert priced is not usage
    assert usage.cost.total == 0
    assert priced.cost.input == pytest.approx(0.003)
    assert priced.cost.output == pytest.approx(0.0075)
    assert priced.cost.cache_read == pytest.approx(0.0006)
    assert priced.cost.cache_write == pytest.approx(0.000375)
    assert priced.cost.total == pytest.approx(0.011475)
    assert priced.total_tokens == 3600


def test_supported_and_clamped_thinking_levels() -> None:
    plain = custom_model()
    assert get_supported_thinking_levels(plain) == ["off"]
    assert clamp_thinking_level(plain, "high") == "off"
    reasoning = custom_model(reasoning=True)
    assert get_supported_thinking_levels(reasoning) == ["off", "minimal", "low", "medium", "high"]
    assert clamp_thinking_level(reasoning, "max") == "high"
    mapped = custom_model(
        reasoning=True, thinking_level_map={"minimal": None, "xhigh": "x-high", "low": None}
    )
    assert get_supported_thinking_levels(mapped) == ["off", "medium", "high", "xhigh"]
    assert clamp_thinking_level(mapped, "minimal") == "medium"
    assert clamp_thinking_level(mapped, "max") == "xhigh"
    assert clamp_thinking_level(mapped, "xhigh") == "xhigh"


def test_adjust_max_tokens_for_thinking() -> None:
    assert DEFAULT_THINKING_BUDGETS == {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
    assert adjust_max_tokens_for_thinking(8000, 8000, "medium") == (8000, 6976)
    assert adjust_max_tokens_for_thinking(4000, 64000, "low") == (6048, 2048)
    assert adjust_max_tokens_for_thinking(4000, 64000, "max") == (20384, 16384)
    assert adjust_max_tokens_for_thinking(1000, 64000, "low", {"low": 500}) == (1500, 500)
    assert adjust_max_tokens_for_thinking(500, 500, "minimal") == (500, 0)


def test_clamp_max_tokens_to_context() -> None:
    unbounded = custom_model(context_window=0)
    assert clamp_max_tokens_to_context(unbounded, [], 999999) == 999999
    big = custom_model(context_window=200000)
    assert clamp_max_tokens_to_context(big, [], 64000) == 64000
    small = custom_model(context_window=40000)
    # input 0: room = 40000 - 4096 = 35904 >= 32768
    assert clamp_max_tokens_to_context(small, [], 64000) == 35904
    history: list[Message] = [
        SystemMessage(content="x" * 35, timestamp=0),  # 10 tokens at 3.5 chars per token
        AssistantMessage(
            content=[TextContent(text="ok")],
            api="a",
            provider="p",
            model="m",
            usage=Usage(total_tokens=30000),
        ),
        UserMessage(content="y" * 7, timestamp=0),  # 2 more tokens
    ]
    # input 30002: margin 4501; room 5497 < 32768 -> min(32768, 40000 - 30002 - 4096)
    assert clamp_max_tokens_to_context(small, history, 64000) == 5902
    tiny = custom_model(context_window=1000)
    assert clamp_max_tokens_to_context(tiny, history, 64000) == 1
