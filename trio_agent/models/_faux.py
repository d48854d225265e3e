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
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeAlias

import attrs
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

__all__ = [
    "FauxProvider",
    "FauxResponse",
    "FauxResponseFactory",
    "FauxState",
    "faux_assistant_message",
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

FauxResponse: TypeAlias = AssistantMessage | FauxResponseFactory
"""One scripted step: a message, or a factory that builds it."""


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

    # -- streaming ------------------------------------------------------------------

    async def stream_fn(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions | None = None,
    ) -> AsyncGenerator[AssistantMessageEvent, None]:
        """Stream the next scripted response (a :data:`~trio_agent.StreamFn`).

        When iteration starts, the next response is taken from the queue and
        ``state.call_count`` is incremented; ``options.on_response`` then sees a
        ``200`` response; a factory is called. Events follow the module's description.
        Failures are in-band, as for every stream function: an empty queue gives a single
        ``error`` event ``No more faux responses queued``; a factory (or hook) that raises
        gives a single ``error`` event with its message.

        Abort: ``options.signal`` is checked before ``start`` (then the stream is one
        ``error`` event, ``stop_reason`` ``"aborted"``, ``error_message``
        ``"Request was aborted"``), before each block and before each chunk (then the
        ``error`` event carries the partial content; the open block gets no ``*_end``).
        An abort during a paced wait ends the wait at once. Cancellation of the
        consumer's scope propagates ``trio.Cancelled``.

        Every event's ``partial`` is an immutable snapshot. The final message keeps the
        scripted ``timestamp`` and gets ``duration_ms`` measured on Trio's clock.
        """
        await trio.lowlevel.checkpoint()
        options = options if options is not None else StreamOptions()
        builder = AssistantMessageBuilder(api=self.api, provider=self.provider, model=model.id)
        step = self._queue.popleft() if self._queue else None
        self.state.call_count += 1

        # Setup failures (hook, empty queue, factory) end the stream with a lone `error`.
        try:
            if options.on_response is not None:
                response = ProviderResponse(status=200, headers={})
                await maybe_await(options.on_response(response, model))
            if step is None:
                builder.usage = self._estimate_usage([], context, options)
                message = None
            else:
                message = await self._resolve(step, context, options, model)
        except Exception as exc:
            yield builder.error(_error_text(exc))
            return
        if message is None:
            yield builder.error(NO_MORE_RESPONSES)
            return

        # As upstream, the partial is the scripted message with its content still empty.
        builder.usage = message.usage
        builder.response_id = message.response_id
        builder.response_model = message.response_model
        builder.timestamp = message.timestamp
        signal = options.signal
        if _aborted(signal):
            yield builder.aborted()
            return

        pacer = _Pacer(self.tokens_per_second)
        try:
            yield builder.start()
            for block in message.content:
                if _aborted(signal):
                    yield builder.aborted()
                    return
                if isinstance(block, ThinkingContent):
                    index, thinking_start = builder.start_thinking(redacted=block.redacted)
                    yield thinking_start
                    for chunk in self._split(block.thinking):
                        if await pacer.wait(chunk, signal):
                            yield builder.aborted()
                            return
                        yield builder.thinking_delta(index, chunk)
                    yield builder.end_thinking(
                        index, thinking=block.thinking, signature=block.thinking_signature
                    )
                elif isinstance(block, TextContent):
                    index, text_start = builder.start_text()
                    yield text_start
                    for chunk in self._split(block.text):
                        if await pacer.wait(chunk, signal):
                            yield builder.aborted()
                            return
                        yield builder.text_delta(index, chunk)
                    yield builder.end_text(
                        index, text=block.text, text_signature=block.text_signature
                    )
                else:
                    index, call_start = builder.start_tool_call(id=block.id, name=block.name)
                    yield call_start
                    for chunk in self._split(_compact_json(block.arguments)):
                        if await pacer.wait(chunk, signal):
                            yield builder.aborted()
                            return
                        yield builder.tool_call_delta(index, chunk)
                    if block.thought_signature is not None:
                        builder.update_tool_call(index, thought_signature=block.thought_signature)
                    call_end = builder.end_tool_call(index, arguments=block.arguments)
                    if block.arguments_error is not None:
                        # The builder clears the error when given arguments; a scripted
                        # call that carries one is replayed verbatim.
                        builder.update_tool_call(index, arguments_error=block.arguments_error)
                        call_end = attrs.evolve(
                            call_end, tool_call=block, partial=builder.snapshot()
                        )
                    yield call_end

            stop = message.stop_reason
            if stop == "pending":
                yield builder.error(MISSING_STOP_REASON)
            elif stop == "error" or stop == "aborted":
                default = "Request was aborted" if stop == "aborted" else "Unknown error"
                yield builder.error(message.error_message or default, aborted=stop == "aborted")
            else:
                yield builder.done(stop)
        except Exception as exc:  # a bug or an unserializable argument: still in-band
            yield builder.error(_error_text(exc))

    async def _resolve(
        self, step: FauxResponse, context: LlmContext, options: StreamOptions, model: Model
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
