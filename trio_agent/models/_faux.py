"""The faux provider: scripted assistant responses streamed like a real model (offline).

A :class:`FauxProvider` holds a FIFO queue of scripted responses. Every call of its
:attr:`~FauxProvider.stream_fn` takes the next one and streams it through the shared
:class:`~trio_agent.models._builder.AssistantMessageBuilder`: ``start``, then for each
content block ``*_start``, the block's text (or its JSON arguments) cut into chunks of a
few "tokens" (4 characters each) with one ``*_delta`` per chunk, ``*_end``, and finally
``done`` (or ``error`` when the scripted stop reason is ``"error"`` / ``"aborted"``).

Everything is deterministic: chunk sizes come from a seeded random generator, pacing
(``tokens_per_second``) runs on Trio's clock, so tests under ``autojump_clock`` are
instant and exact, and usage is estimated from the transcript text as pi's faux
provider does.
"""

from __future__ import annotations

import collections
import copy
import json
import math
import random
import secrets
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, TypeAlias

import attrs
import httpx
import trio

from .._abort import AbortSignal, open_abort_scope
from .._events import AssistantMessageEvent
from .._jsjson import MAX_ARGUMENTS_DEPTH, depth_exceeds
from .._json_stream import TOO_DEEP
from .._messages import (
    AssistantContent,
    AssistantMessage,
    ImageContent,
    Message,
    Model,
    ModelCost,
    StopReason,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolDeclaration,
    ToolResultMessage,
    Usage,
    UserMessage,
    now_ms,
)
from .._streaming import LlmContext, ProviderResponse, StreamOptions
from .._transcript import get_system_message_text
from .._util import maybe_await
from ._builder import AssistantMessageBuilder
from ._request import client_error_text, send_with_retries

__all__ = [
    "FauxConnectionError",
    "FauxHttpError",
    "FauxProvider",
    "FauxRequest",
    "FauxResponse",
    "FauxResponseFactory",
    "FauxState",
    "FauxStep",
    "faux_assistant_message",
    "faux_connection_error",
    "faux_http_error",
    "faux_step",
    "faux_text",
    "faux_thinking",
    "faux_tool_call",
]

DEFAULT_API = "faux"
DEFAULT_PROVIDER = "faux"
DEFAULT_MODEL_ID = "faux-1"
DEFAULT_MODEL_NAME = "Faux Model"
DEFAULT_BASE_URL = "http://localhost:0"
DEFAULT_CONTEXT_WINDOW = 128000
DEFAULT_MAX_TOKENS = 16384

NO_MORE_RESPONSES = "No more faux responses queued"
MISSING_STOP_REASON = "Faux response ended without a stop reason"

_CHARS_PER_TOKEN = 4


# ---------------------------------------------------------------------------------------
# Script helpers


def faux_text(text: str) -> TextContent:
    """A text block for a scripted response."""
    return TextContent(text=text)


def faux_thinking(text: str) -> ThinkingContent:
    """A thinking block for a scripted response."""
    return ThinkingContent(thinking=text)


def faux_tool_call(name: str, arguments: dict[str, Any], *, id: str | None = None) -> ToolCall:
    """A tool-call block for a scripted response.

    Args:
        name: The tool to call.
        arguments: The call's arguments (a JSON object).
        id: The call id; by default a fresh ``tool:<unix ms>:<random>`` id.
    """
    return ToolCall(id=id if id is not None else _random_id("tool"), name=name, arguments=arguments)


def faux_assistant_message(
    content: str | AssistantContent | Sequence[AssistantContent],
    *,
    stop_reason: StopReason = "stop",
    error_message: str | None = None,
    response_id: str | None = None,
) -> AssistantMessage:
    """A scripted assistant message.

    The faux provider re-stamps ``api``, ``provider`` and ``model`` and estimates
    ``usage`` when it streams the message, so those are placeholders here.

    Args:
        content: A string (one text block), a single block, or a list of blocks.
        stop_reason: The final stop reason; ``"error"`` or ``"aborted"`` make the stream
            end with an ``error`` event after the content.
        error_message: The error text for ``"error"`` / ``"aborted"`` (when omitted, the
            stream reports ``"Unknown error"`` / ``"Request was aborted"``).
        response_id: A provider response id to report.
    """
    blocks: list[AssistantContent]
    if isinstance(content, str):
        blocks = [TextContent(text=content)]
    elif isinstance(content, TextContent | ThinkingContent | ToolCall):
        blocks = [content]
    else:
        blocks = list(content)
    return AssistantMessage(
        content=blocks,
        api=DEFAULT_API,
        provider=DEFAULT_PROVIDER,
        model=DEFAULT_MODEL_ID,
        stop_reason=stop_reason,
        error_message=error_message,
        response_id=response_id,
    )


def _random_id(prefix: str) -> str:
    return f"{prefix}:{now_ms()}:{_base36(secrets.randbits(56))}"


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, rest = divmod(number, 36)
        text = digits[rest] + text
        if number == 0:
            return text


# ---------------------------------------------------------------------------------------
# Provider


@attrs.define(kw_only=True)
class FauxState:
    """Mutable bookkeeping of a :class:`FauxProvider`, also handed to response factories."""

    call_count: int = 0
    """How many times the stream function was called (including failed calls)."""


FauxResponseFactory: TypeAlias = Callable[
    [LlmContext, StreamOptions, FauxState, Model],
    AssistantMessage | Awaitable[AssistantMessage],
]
"""Builds a response at request time: ``(context, options, state, model) -> message``
(a plain function or ``async def``)."""


@attrs.frozen(kw_only=True)
class FauxHttpError:
    """A scripted HTTP error status (see :func:`faux_http_error`)."""

    status: int
    """The status code (>= 400)."""
    body: str = ""
    """The response body (JSON text or plain text)."""
    headers: Mapping[str, str] = attrs.field(factory=dict)
    """Response headers, e.g. ``{"retry-after": "2"}``."""


@attrs.frozen(kw_only=True)
class FauxConnectionError:
    """A scripted connection failure (see :func:`faux_connection_error`)."""

    message: str = "Connection refused"
    """The transport error's message."""


@attrs.frozen(kw_only=True)
class FauxStep:
    """A scripted step with options (see :func:`faux_step`)."""

    response: AssistantMessage | FauxResponseFactory | FauxHttpError | FauxConnectionError
    """What the step answers."""
    delay: float = 0.0
    """Seconds on Trio's clock before the response (its headers) arrives."""


FauxResponse: TypeAlias = (
    AssistantMessage | FauxResponseFactory | FauxStep | FauxHttpError | FauxConnectionError
)
"""One scripted step: a message, a factory that builds it, a scripted HTTP failure, or a
:class:`FauxStep` wrapping one of them with options."""


@attrs.frozen(kw_only=True)
class FauxRequest:
    """One request a :class:`FauxProvider` received (its :attr:`~FauxProvider.requests`)."""

    model: Model
    """The requested model."""
    context: LlmContext
    """The context sent (system prompt, messages, tools)."""
    options: StreamOptions
    """The request's options (``signal``, ``session_id``, ``max_retries``, ...)."""
    attempt: int = 0
    """0 for a call of the stream function, 1, 2, ... for its retries."""


def faux_step(
    response: AssistantMessage | FauxResponseFactory | FauxHttpError | FauxConnectionError,
    *,
    delay: float = 0.0,
) -> FauxStep:
    """A scripted step whose response arrives ``delay`` seconds (Trio's clock) after the
    request, like a server's time to first byte. An abort ends the wait at once."""
    return FauxStep(response=response, delay=delay)


def faux_http_error(
    status: int, body: str = "", *, headers: Mapping[str, str] | None = None
) -> FauxHttpError:
    """A scripted HTTP error response, handled like the HTTP providers handle one.

    It goes through their request phase: retryable statuses (408, 409, 429, >= 500, or
    as ``x-should-retry`` says) are retried ``options.max_retries`` times after the
    delay ``retry-after-ms`` / ``retry-after`` ask for (or backoff), each retry being a
    new request answered by the next scripted step; a requested delay above
    ``options.max_retry_delay_ms`` fails at once. The final failure is one ``error``
    event worded as the OpenAI client words it: ``429 Rate limited`` for the body
    ``{"error": {"message": "Rate limited"}}``, ``503 status code (no body)``.

    Args:
        status: The HTTP status (>= 400).
        body: The body (JSON text or plain text).
        headers: Response headers, e.g. ``{"retry-after": "2"}``.
    """
    if status < 400:
        raise ValueError(f"an HTTP error status is >= 400, not {status}")
    return FauxHttpError(status=status, body=body, headers=dict(headers or {}))


def faux_connection_error(message: str = "Connection refused") -> FauxConnectionError:
    """A scripted connection failure: retried like an HTTP provider's (``max_retries``,
    backoff), finally one ``error`` event worded as the HTTP providers word a connection
    error (``Connection error (<host>): <message>``)."""
    return FauxConnectionError(message=message)


class FauxProvider:
    """A scripted, deterministic model provider for tests and offline demos.

    Responses are consumed in FIFO order, one per call of :attr:`stream_fn`. A response
    is an :class:`~trio_agent.AssistantMessage` or a factory
    ``(context, options, state, model) -> AssistantMessage`` (plain or ``async def``) that
    sees the request. Streamed messages are re-stamped with this provider's ``api``,
    ``provider`` and the requested model id, and get an estimated :class:`Usage`.

    Args:
        responses: The initial queue.
        models: The models this provider serves: :class:`~trio_agent.Model` objects
            (re-stamped with ``api`` and ``provider``) or plain ids. By default one model,
            ``faux-1`` ("Faux Model").
        tokens_per_second: Pace the stream on Trio's clock: chunk *k* becomes available
            ``tokens_before_and_including_k / tokens_per_second`` seconds after ``start``,
            like a server streaming at a fixed rate. ``None`` (or <= 0) streams as fast as
            possible (one checkpoint per chunk).
        token_size: ``(min, max)`` tokens per chunk; each chunk is ``4 * k`` characters
            with ``k`` drawn uniformly from that range. ``(1, 1)`` gives 4-character chunks.
        seed: Seed of the chunk-size generator, so runs are reproducible.
        api: The ``api`` stamped on models and messages.
        provider: The ``provider`` stamped on models and messages.
    """

    # A plain class rather than attrs: the default model depends on ``api``/``provider``
    # and the queue is a private deque behind a method API, which attrs would only obscure.

    def __init__(
        self,
        responses: Iterable[FauxResponse] = (),
        *,
        models: Sequence[Model | str] | None = None,
        tokens_per_second: float | None = None,
        token_size: tuple[int, int] = (3, 5),
        seed: int = 0,
        api: str = DEFAULT_API,
        provider: str = DEFAULT_PROVIDER,
    ) -> None:
        self.api = api
        """The ``api`` of this provider's models and messages."""
        self.provider = provider
        """The ``provider`` of this provider's models and messages."""
        self.models: list[Model] = [self._make_model(m) for m in models or [DEFAULT_MODEL_ID]]
        """The served models; :meth:`get_model` picks one."""
        self.state = FauxState()
        """Call counter (also passed to response factories)."""
        self.requests: list[FauxRequest] = []
        """Every request received, oldest first: one per call of :attr:`stream_fn`, and
        one per retry of a scripted HTTP failure."""
        self.tokens_per_second = (
            tokens_per_second if tokens_per_second is not None and tokens_per_second > 0 else None
        )
        # Clamp like upstream: at least one token per chunk, max never below min.
        low, high = token_size
        self._min_tokens = max(1, min(low, high))
        self._max_tokens = max(self._min_tokens, high)
        self._rng = random.Random(seed)
        self._queue: collections.deque[FauxResponse] = collections.deque(responses)
        self._prompt_cache: dict[str, str] = {}

    def _make_model(self, spec: Model | str) -> Model:
        if isinstance(spec, Model):
            return attrs.evolve(spec, api=self.api, provider=self.provider)
        return Model(
            id=spec,
            name=DEFAULT_MODEL_NAME if spec == DEFAULT_MODEL_ID else spec,
            api=self.api,
            provider=self.provider,
            base_url=DEFAULT_BASE_URL,
            reasoning=False,
            input=["text", "image"],
            cost=ModelCost(),
            context_window=DEFAULT_CONTEXT_WINDOW,
            max_tokens=DEFAULT_MAX_TOKENS,
        )

    def __repr__(self) -> str:
        model_ids = [model.id for model in self.models]
        return (
            f"<FauxProvider api={self.api!r} provider={self.provider!r} models={model_ids!r} "
            f"pending={len(self._queue)} calls={self.state.call_count}>"
        )

    # -- queue ----------------------------------------------------------------------

    def get_model(self, model_id: str | None = None) -> Model:
        """Return the model ``model_id``, or the first model when it is ``None``.

        Raises:
            KeyError: if no model has that id.
        """
        if model_id is None:
            return self.models[0]
        for model in self.models:
            if model.id == model_id:
                return model
        raise KeyError(f"no faux model with id {model_id!r}")

    def set_responses(self, responses: Iterable[FauxResponse]) -> None:
        """Replace the queue of pending responses."""
        self._queue = collections.deque(responses)

    def append_responses(self, responses: Iterable[FauxResponse]) -> None:
        """Add responses to the end of the queue."""
        self._queue.extend(responses)

    @property
    def pending_response_count(self) -> int:
        """How many scripted responses are still queued."""
        return len(self._queue)

    # -- request log ----------------------------------------------------------------

    def assert_complete(self) -> None:
        """Assert that every scripted step was used.

        Raises:
            AssertionError: ``<n> scripted faux step(s) left over after <m> request(s):
                <the steps>`` when the queue is not empty.
        """
        if not self._queue:
            return
        left = len(self._queue)
        shown = ", ".join(_describe_step(step) for step in list(self._queue)[:3])
        more = ", ..." if left > 3 else ""
        raise AssertionError(
            f"{left} scripted faux step{'s' if left != 1 else ''} left over after "
            f"{len(self.requests)} request{'s' if len(self.requests) != 1 else ''}: "
            f"{shown}{more}"
        )

    def _take(
        self, model: Model, context: LlmContext, options: StreamOptions, attempt: int
    ) -> FauxResponse | None:
        # One request received: logged, and answered by the next step (None: none left).
        self.requests.append(
            FauxRequest(model=model, context=context, options=options, attempt=attempt)
        )
        return self._queue.popleft() if self._queue else None

    # -- streaming ------------------------------------------------------------------

    async def stream_fn(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions | None = None,
    ) -> AsyncGenerator[AssistantMessageEvent, None]:
        """Stream the next scripted response (a :data:`~trio_agent.StreamFn`).

        When iteration starts, the request is logged in :attr:`requests`, the next step
        is taken from the queue and ``state.call_count`` is incremented. A step's
        ``delay`` (:func:`faux_step`) passes on Trio's clock before the response.
        Scripted HTTP failures (:func:`faux_http_error`, :func:`faux_connection_error`)
        go through the providers' request phase with its retries: each retry is a new
        request answered by the next step, with the ``retry-after`` /
        ``max_retry_delay_ms`` rules and backoff of the HTTP providers. Then
        ``options.on_response`` sees a ``200`` response and a factory is called. Events
        follow the module's description. Failures are in-band, as for every stream
        function: an empty queue gives a single ``error`` event ``No more faux responses
        queued``; an HTTP failure, a factory (or hook) that raises gives a single
        ``error`` event with its message.

        Abort: ``options.signal`` is checked before ``start`` (then the stream is one
        ``error`` event, ``stop_reason`` ``"aborted"``, ``error_message``
        ``"Request was aborted"``), before each block and before each chunk (then the
        ``error`` event carries the partial content; the open block gets no ``*_end``).
        An abort during a delay, a retry wait or a paced wait ends it at once.
        Cancellation of the consumer's scope propagates ``trio.Cancelled``.

        Every event's ``partial`` is an immutable snapshot. The final message keeps the
        scripted ``timestamp`` and gets ``duration_ms`` measured on Trio's clock.
        """
        await trio.lowlevel.checkpoint()
        options = options if options is not None else StreamOptions()
        builder = AssistantMessageBuilder(api=self.api, provider=self.provider, model=model.id)
        step = self._take(model, context, options, 0)
        self.state.call_count += 1
        # The one exit for every abort and failure: the steps raise, this ends the stream
        # with the aborted outcome or the error (partial content kept by the builder).
        try:
            async with aclosing(self._events(builder, step, model, context, options)) as events:
                async for event in events:
                    yield event
        except _Aborted:
            yield builder.aborted()
        except Exception as exc:  # a failure, a bug or an unserializable argument: in-band
            yield builder.error(_error_text(exc))

    async def _events(
        self,
        builder: AssistantMessageBuilder,
        step: FauxResponse | None,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
    ) -> AsyncGenerator[AssistantMessageEvent, None]:
        signal = options.signal
        with open_abort_scope(signal) as scope:
            response = await self._receive(step, model, context, options)
        if scope.cancelled_caught:
            raise _Aborted
        if options.on_response is not None:
            await maybe_await(options.on_response(ProviderResponse(status=200, headers={}), model))
        if response is None:
            builder.usage = self._estimate_usage([], context, options)
            raise _NoMoreResponses(NO_MORE_RESPONSES)
        message = await self._resolve(response, context, options, model)

        # As upstream, the partial is the scripted message with its content still empty.
        builder.usage = message.usage
        builder.response_id = message.response_id
        builder.response_model = message.response_model
        builder.timestamp = message.timestamp
        _check(signal)
        pacer = _Pacer(self.tokens_per_second)
        yield builder.start()
        for block in message.content:
            _check(signal)
            index, start, text, delta = _open_block(builder, block)
            yield start
            for chunk in self._split(text):
                if await pacer.wait(chunk, signal):
                    raise _Aborted
                yield delta(index, chunk)
            yield _close_block(builder, index, block)

        stop = message.stop_reason
        if stop == "pending":
            yield builder.error(MISSING_STOP_REASON)
        elif stop == "error" or stop == "aborted":
            default = "Request was aborted" if stop == "aborted" else "Unknown error"
            yield builder.error(message.error_message or default, aborted=stop == "aborted")
        else:
            yield builder.done(stop)

    async def _receive(
        self, step: FauxResponse | None, model: Model, context: LlmContext, options: StreamOptions
    ) -> AssistantMessage | FauxResponseFactory | None:
        """The request phase: the step's delay, and scripted HTTP failures through the
        providers' retry loop. Returns the step that answers with a stream."""
        delay, response = _unwrap(step)
        if not isinstance(response, FauxHttpError | FauxConnectionError):
            if delay:
                await trio.sleep(delay)
            return response
        transport = _ScriptTransport(self, step, model, context, options)
        async with httpx.AsyncClient(transport=transport) as client:
            request = client.build_request("POST", f"{model.base_url}/faux")
            answer = await send_with_retries(
                client,
                request,
                options=options,
                model=model,
                format_http_error=client_error_text,
            )
            await answer.aclose()
        return transport.answer

    async def _resolve(
        self,
        step: AssistantMessage | FauxResponseFactory,
        context: LlmContext,
        options: StreamOptions,
        model: Model,
    ) -> AssistantMessage:
        if isinstance(step, AssistantMessage):
            message = step
        else:
            message = await maybe_await(step(context, options, self.state, model))
            if not isinstance(message, AssistantMessage):
                raise TypeError(
                    "faux response factory returned "
                    f"{type(message).__name__}, not an AssistantMessage"
                )
        # Arguments nested too deep for a transcript arrive as a real provider's do: empty,
        # with the problem for the tool result. Then a deep copy, so the script can be
        # reused and streamed arguments never alias it.
        content = copy.deepcopy(
            [
                attrs.evolve(block, arguments={}, arguments_error=TOO_DEEP)
                if isinstance(block, ToolCall)
                and depth_exceeds(block.arguments, MAX_ARGUMENTS_DEPTH)
                else block
                for block in message.content
            ]
        )
        return attrs.evolve(
            message,
            content=content,
            api=self.api,
            provider=self.provider,
            model=model.id,
            usage=self._estimate_usage(content, context, options),
        )

    def _split(self, text: str) -> list[str]:
        if not text:
            return [""]
        chunks = []
        index = 0
        while index < len(text):
            size = self._rng.randint(self._min_tokens, self._max_tokens) * _CHARS_PER_TOKEN
            chunks.append(text[index : index + size])
            index += size
        return chunks

    # -- usage estimate -------------------------------------------------------------

    def _estimate_usage(
        self, content: list[AssistantContent], context: LlmContext, options: StreamOptions
    ) -> Usage:
        prompt = _render_prompt(context.messages)
        prompt_tokens = _tokens(prompt)
        output = _tokens(_assistant_text(content))
        input_tokens, cache_read, cache_write = prompt_tokens, 0, 0
        session_id = options.session_id
        if session_id:
            # Simulated prompt cache per session: the prefix shared with the session's
            # previous prompt is read from cache, the rest written (as pi's faux provider does).
            previous = self._prompt_cache.get(session_id, "")
            cache_read = _tokens(prompt[: _common_prefix_length(previous, prompt)])
            cache_write = prompt_tokens - cache_read
            input_tokens = 0
            self._prompt_cache[session_id] = prompt
        return Usage(
            input=input_tokens,
            output=output,
            cache_read=cache_read,
            cache_write=cache_write,
            total_tokens=input_tokens + output + cache_read + cache_write,
        )


class _Aborted(Exception):
    """Raised inside the stream when ``options.signal`` is found aborted."""


class _NoMoreResponses(Exception):
    """The queue was empty when a request (or a retry) arrived."""


def _check(signal: AbortSignal | None) -> None:
    if _aborted(signal):
        raise _Aborted


def _unwrap(
    step: FauxResponse | None,
) -> tuple[
    float, AssistantMessage | FauxResponseFactory | FauxHttpError | FauxConnectionError | None
]:
    if isinstance(step, FauxStep):
        return step.delay, step.response
    return 0.0, step


def _describe_step(step: FauxResponse) -> str:
    delay, response = _unwrap(step)
    if isinstance(response, AssistantMessage):
        text = repr(_assistant_text(response.content))
        shown = f"message {text[:40] + '...' if len(text) > 40 else text} ({response.stop_reason})"
    elif isinstance(response, FauxHttpError):
        shown = f"HTTP {response.status}"
    elif isinstance(response, FauxConnectionError):
        shown = f"connection error {response.message!r}"
    else:
        shown = f"factory {getattr(response, '__qualname__', repr(response))}"
    return f"{shown} after {delay} s" if delay else shown


_DeltaFn: TypeAlias = Callable[[int, str], AssistantMessageEvent]


def _open_block(
    builder: AssistantMessageBuilder, block: AssistantContent
) -> tuple[int, AssistantMessageEvent, str, _DeltaFn]:
    """Start ``block``: its index, start event, streamed text and delta event maker."""
    if isinstance(block, ThinkingContent):
        index, thinking_start = builder.start_thinking(redacted=block.redacted)
        return index, thinking_start, block.thinking, builder.thinking_delta
    if isinstance(block, TextContent):
        index, text_start = builder.start_text()
        return index, text_start, block.text, builder.text_delta
    index, call_start = builder.start_tool_call(id=block.id, name=block.name)
    return index, call_start, _compact_json(block.arguments), builder.tool_call_delta


def _close_block(
    builder: AssistantMessageBuilder, index: int, block: AssistantContent
) -> AssistantMessageEvent:
    """The end event of ``block``, with the scripted signatures and argument errors."""
    if isinstance(block, ThinkingContent):
        return builder.end_thinking(
            index, thinking=block.thinking, signature=block.thinking_signature
        )
    if isinstance(block, TextContent):
        return builder.end_text(index, text=block.text, text_signature=block.text_signature)
    if block.thought_signature is not None:
        builder.update_tool_call(index, thought_signature=block.thought_signature)
    call_end = builder.end_tool_call(index, arguments=block.arguments)
    if block.arguments_error is None:
        return call_end
    # The builder clears the error when given arguments; a scripted call that carries
    # one is replayed verbatim.
    builder.update_tool_call(index, arguments_error=block.arguments_error)
    return attrs.evolve(call_end, tool_call=block, partial=builder.snapshot())


class _ScriptTransport(httpx.AsyncBaseTransport):
    """Answers the attempts of one request phase with scripted steps: the first with the
    step already taken, each retry with the next one from the queue (a new request)."""

    def __init__(
        self,
        provider: FauxProvider,
        step: FauxResponse | None,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
    ) -> None:
        self._provider = provider
        self._step = step
        self._request = (model, context, options)
        self._attempt = 0
        self.answer: AssistantMessage | FauxResponseFactory | None = None
        """The step that answered with a stream (after the failures)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._attempt:
            model, context, options = self._request
            self._step = self._provider._take(model, context, options, self._attempt)
        self._attempt += 1
        delay, response = _unwrap(self._step)
        if delay:
            await trio.sleep(delay)
        else:
            await trio.lowlevel.checkpoint()
        if response is None:
            raise _NoMoreResponses(NO_MORE_RESPONSES)
        if isinstance(response, FauxConnectionError):
            raise httpx.ConnectError(response.message, request=request)
        if isinstance(response, FauxHttpError):
            return httpx.Response(
                response.status, headers=response.headers, content=response.body.encode()
            )
        self.answer = response
        return httpx.Response(200, headers={"content-type": "text/event-stream"})


class _Pacer:
    """Waits for chunk *k* until ``t0 + tokens_so_far / tokens_per_second``.

    Deadlines are computed from the integer token count rather than by adding per-chunk
    sleeps, so float rounding never accumulates: 40 characters at 10 tokens/s end at
    exactly ``t0 + 1.0`` under a mock clock.
    """

    def __init__(self, tokens_per_second: float | None) -> None:
        self._rate = tokens_per_second
        self._start = trio.current_time()
        self._tokens = 0

    async def wait(self, chunk: str, signal: AbortSignal | None) -> bool:
        """Wait until ``chunk`` is due; return True if the stream was aborted."""
        if _aborted(signal):
            return True
        if self._rate is None:
            await trio.lowlevel.checkpoint()
        else:
            self._tokens += _tokens(chunk)
            with open_abort_scope(signal):
                await trio.sleep_until(self._start + self._tokens / self._rate)
        return _aborted(signal)


def _aborted(signal: AbortSignal | None) -> bool:
    return signal is not None and signal.aborted


def _error_text(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def _tokens(text: str) -> int:
    return math.ceil(len(text) / _CHARS_PER_TOKEN)


def _common_prefix_length(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


def _compact_json(value: Any) -> str:
    # JSON.stringify's compact form; non-ASCII kept as is.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _declaration_json(tool: ToolDeclaration) -> str:
    fields: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    }
    if tool.constrained_sampling is not None:
        fields["constrainedSampling"] = tool.constrained_sampling
    # `default=str` keeps an estimate from failing on an odd schema value.
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"), default=str)


def _blocks_text(blocks: Iterable[TextContent | ImageContent]) -> list[str]:
    return [
        block.text
        if isinstance(block, TextContent)
        else f"[image:{block.mime_type}:{len(block.data)}]"
        for block in blocks
    ]


def _assistant_text(content: Iterable[AssistantContent]) -> str:
    parts = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ThinkingContent):
            parts.append(block.thinking)
        else:
            parts.append(f"{block.name}:{_compact_json(block.arguments)}")
    return "\n".join(parts)


def _message_text(message: Message) -> str:
    if isinstance(message, SystemMessage):
        parts = [get_system_message_text(message)]
        parts.extend(
            f"tool-:{_compact_json({'name': ref.name})}" for ref in message.tools_removed or ()
        )
        parts.extend(f"tool+:{_declaration_json(tool)}" for tool in message.tools_added or ())
        return "\n".join(part for part in parts if part)
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            return message.content
        return "\n".join(_blocks_text(message.content))
    if isinstance(message, AssistantMessage):
        return _assistant_text(message.content)
    if isinstance(message, ToolResultMessage):
        return "\n".join([message.tool_name, *_blocks_text(message.content)])
    return ""  # not a provider message: contributes its role only


def _render_prompt(messages: Iterable[Message]) -> str:
    """The text the usage estimate counts: ``<role>:<text>`` per message, blank-line
    separated."""
    return "\n\n".join(f"{message.role}:{_message_text(message)}" for message in messages)
