"""The :class:`Models` runtime: model lookup and streaming dispatch by wire API.

Built-in APIs stream over the runtime's ``httpx.AsyncClient`` (see :mod:`._http`); their
stream functions take one extra argument, the :class:`~._http.HttpEnv`. To add a built-in
API, add one entry to :data:`BUILTIN_APIS`. Applications add their own APIs with
:meth:`Models.register_api` (a plain :data:`~trio_agent.StreamFn`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from types import TracebackType
from typing import Any, TypeAlias

import attrs
import httpx
import trio

from .._events import AssistantMessageEvent, DoneEvent, ErrorEvent
from .._messages import AssistantMessage, Model
from .._streaming import LlmContext, StreamFn, StreamOptions, iterate_stream
from .._util import maybe_await
from ._anthropic import stream_anthropic
from ._builder import AssistantMessageBuilder
from ._catalog import load_catalog
from ._http import GetApiKey, HttpEnv, error_text
from ._openai_completions import stream_openai_completions
from ._openai_responses import stream_openai_responses

__all__ = ["BUILTIN_APIS", "BuiltinStreamFn", "Models"]

BuiltinStreamFn: TypeAlias = Callable[
    [Model, LlmContext, StreamOptions, HttpEnv], AsyncGenerator[AssistantMessageEvent, None]
]
"""``(model, context, options, env) -> events``: a built-in API's stream function."""

BUILTIN_APIS: dict[str, BuiltinStreamFn] = {
    "openai-completions": stream_openai_completions,
    "anthropic-messages": stream_anthropic,
    "openai-responses": stream_openai_responses,
}
"""The built-in wire APIs, by ``Model.api``."""

_DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=30.0)
"""For a client the runtime creates: reasoning models may think for minutes before the
first byte of the body, so the read timeout is long (as the vendors' SDKs default to)."""


def _error_event(model: Model, message: str) -> ErrorEvent:
    # A failure before the provider produced anything: an empty message, zero usage.
    builder = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
    return builder.error(message)


class Models:
    """Model catalog plus streaming dispatch on :attr:`Model.api`.

    ``Models`` owns the ``httpx.AsyncClient`` it creates (when none is given) and closes
    it in :meth:`aclose` or at the end of ``async with``; an injected client is left
    open. Transport timeouts belong to the client. Its keep-alive connections are reused
    from one request to the next; provider requests never follow redirects, whatever
    the client's setting (so no key reaches another origin).

    Args:
        http_client: The client every built-in API uses. Default: a new client with a
            30 s connect and 600 s read timeout.
        get_api_key: ``get_api_key(provider) -> key | None`` (plain or ``async def``),
            consulted when ``StreamOptions.api_key`` is not set, before the provider's
            environment variable.

    Example::

        async with Models() as models:
            model = models.get_model("openai", "gpt-4o-mini")
            message = await models.complete_simple(model, LlmContext(messages=[...]))
    """

    def __init__(
        self,
        http_client: httpx.AsyncClient | None = None,
        *,
        get_api_key: GetApiKey | None = None,
    ) -> None:
        self._owns_client = http_client is None
        self._client = (
            http_client if http_client is not None else httpx.AsyncClient(timeout=_DEFAULT_TIMEOUT)
        )
        self._get_api_key = get_api_key
        self._models: dict[tuple[str, str], Model] = {}
        self._apis: dict[str, StreamFn] = {}

    @property
    def http_client(self) -> httpx.AsyncClient:
        """The client the built-in APIs use."""
        return self._client

    # -- lifecycle ------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP client if this runtime created it. A checkpoint."""
        if self._owns_client:
            await self._client.aclose()
        else:
            await trio.lowlevel.checkpoint()

    async def __aenter__(self) -> Models:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- models ---------------------------------------------------------------------

    def get_model(self, provider: str, model_id: str) -> Model:
        """Look up a registered or catalog model (registered ones win).

        Raises:
            KeyError: ``Unknown model: <provider>/<model_id>``.
        """
        key = (provider, model_id)
        model = self._models.get(key) or load_catalog().get(key)
        if model is None:
            raise KeyError(f"Unknown model: {provider}/{model_id}")
        return model

    def get_models(self, provider: str | None = None) -> list[Model]:
        """Every known model (catalog order, then registered ones), optionally of one
        provider. A registered model replaces the catalog entry of the same key."""
        merged = {**load_catalog(), **self._models}
        return [m for m in merged.values() if provider is None or m.provider == provider]

    def register_model(self, model: Model) -> None:
        """Add ``model``, replacing any model with the same provider and id."""
        self._models[(model.provider, model.id)] = model

    def register_api(self, api: str, stream_fn: StreamFn) -> None:
        """Stream models whose ``api`` is ``api`` with ``stream_fn`` (overrides a built-in).

        ``stream_fn`` receives ``options`` with ``api_key`` filled from ``get_api_key``
        when the runtime has one and the caller gave no key.
        """
        self._apis[api] = stream_fn

    # -- streaming ------------------------------------------------------------------

    def _env(self) -> HttpEnv:
        return HttpEnv(client=self._client, get_api_key=self._get_api_key)

    async def stream_simple(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions | None = None,
    ) -> AsyncGenerator[AssistantMessageEvent, None]:
        """Stream one response of ``model`` (usable directly as an Agent ``stream_fn``).

        Dispatches on ``model.api``: a registered API first, then a built-in one. An unknown
        API yields one ``error`` event ``No API provider registered for api: <api>``.
        Setup failures (a raising ``get_api_key`` or stream function) become one ``error``
        event too; exactly one terminal event is always yielded. Cancellation propagates.
        """
        options = options if options is not None else StreamOptions()
        custom = self._apis.get(model.api)
        if custom is not None:
            forward = self._forward_custom(custom, model, context, options)
            async with aclosing(forward) as events:
                async for event in events:
                    yield event
            return
        builtin = BUILTIN_APIS.get(model.api)
        if builtin is None:
            yield _error_event(model, f"No API provider registered for api: {model.api}")
            return
        async with aclosing(builtin(model, context, options, self._env())) as events:
            async for event in events:
                yield event

    async def _forward_custom(
        self, stream_fn: StreamFn, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncGenerator[AssistantMessageEvent, None]:
        terminal = False
        iterator: AsyncIterator[AssistantMessageEvent] | None = None
        try:
            if options.api_key is None and self._get_api_key is not None:
                key = await maybe_await(self._get_api_key(model.provider))
                if key:
                    options = attrs.evolve(options, api_key=key)
            iterator = await iterate_stream(stream_fn, model, context, options)
            async for event in iterator:
                terminal = isinstance(event, DoneEvent | ErrorEvent)
                yield event
                if terminal:
                    return
        except Exception as exc:
            if not terminal:
                yield _error_event(model, error_text(exc))
            return
        finally:
            aclose: Any = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()
        if not terminal:
            yield _error_event(model, "Stream ended without a terminal event")

    async def complete_simple(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions | None = None,
    ) -> AssistantMessage:
        """Run :meth:`stream_simple` to the end and return the final message.

        Failures are in the message (``stop_reason`` ``"error"``/``"aborted"`` and
        ``error_message``), never raised; cancellation propagates.
        """
        async with aclosing(self.stream_simple(model, context, options)) as events:
            async for event in events:
                if isinstance(event, DoneEvent):
                    return event.message
                if isinstance(event, ErrorEvent):
                    return event.error
        return _error_event(model, "Stream ended without a terminal event").error
