"""The stream-function contract: ``StreamFn``, ``LlmContext``, ``StreamOptions``
and the process-wide default stream function.

A stream function takes a model, the normalized transcript and options, and returns an
async iterable of :data:`~trio_agent.AssistantMessageEvent` (an ``async def`` generator is
the usual form; an awaitable resolving to one is accepted too). It yields exactly one
terminal event (``done`` or ``error``) carrying the final message, never raises for
provider failures, never swallows ``trio.Cancelled``, and keeps no task running after
the consumer closes it.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Literal, TypeAlias

import attrs

from ._abort import AbortSignal
from ._events import AssistantMessageEvent
from ._exceptions import AgentError
from ._messages import Message, Model, ThinkingLevel

__all__ = [
    "LlmContext",
    "ProviderResponse",
    "StreamFn",
    "StreamOptions",
    "Transport",
    "get_default_stream_fn",
    "iterate_stream",
    "set_default_stream_fn",
]

Transport: TypeAlias = Literal["sse", "websocket", "auto"]
"""Provider transport preference (only some providers honour it)."""


@attrs.frozen(kw_only=True)
class LlmContext:
    """The normalized transcript handed to a stream function.

    The system prompt and the tool declarations live in its system messages.
    """

    messages: list[Message]
    """The request's messages; its system messages carry the prompt and the tool declarations."""


@attrs.frozen(kw_only=True)
class RetryNotice:
    """What ``on_retry`` receives before a failed request phase is tried again."""

    status: int | None
    """The HTTP status that failed (``None``: a connection error)."""
    wait: float
    """Seconds until the next attempt, on Trio's clock."""
    attempt: int
    """The attempt about to be made (2 for the first retry)."""


@attrs.frozen(kw_only=True)
class ProviderResponse:
    """What ``on_response`` receives once the HTTP response headers arrived."""

    status: int
    """The HTTP status code."""
    headers: Mapping[str, str]
    """The response headers, with lower-case names."""


# The request options a user sets by hand, each with what it must be. Checked where the
# value enters: StreamOptions (so attrs.evolve too), the Agent's constructor and setters.
_OPTION_RULES: dict[str, tuple[str, Callable[[Any], bool], Callable[[Any], bool]]] = {
    "max_retries": ("an int >= 0 or None", lambda v: type(v) is int, lambda v: v >= 0),
    "max_retry_delay_ms": ("an int >= 0 or None", lambda v: type(v) is int, lambda v: v >= 0),
    "max_tokens": ("an int >= 0 or None", lambda v: type(v) is int, lambda v: v >= 0),
    "temperature": (
        "a finite number >= 0 or None",
        lambda v: type(v) in (int, float),
        lambda v: math.isfinite(v) and v >= 0,
    ),
}


def check_request_option(where: str, name: str, value: Any) -> None:
    """Raise if ``value`` is not what request option ``name`` must be.

    Args:
        where: Prefix of the message: ``"StreamOptions: "``, ``"Agent(): "``, ``"Agent."``.
        name: ``max_retries``, ``max_retry_delay_ms``, ``max_tokens`` or ``temperature``.

    Raises:
        TypeError: the wrong type (``bool`` is not a number here).
        ValueError: out of range (negative, NaN or infinite).
    """
    if value is None:
        return
    text, type_ok, value_ok = _OPTION_RULES[name]
    if not type_ok(value):
        raise TypeError(f"{where}{name} must be {text}, got {value!r}")
    if not value_ok(value):
        raise ValueError(f"{where}{name} must be {text}, got {value!r}")


def _checked_option(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    check_request_option("StreamOptions: ", attribute.name, value)


@attrs.frozen(kw_only=True)
class StreamOptions:
    """Options of one provider request. Every hook may be a plain function or ``async def``."""

    reasoning: ThinkingLevel | None = None
    """Requested thinking level; ``None`` (or ``"off"``) disables reasoning."""
    api_key: str | None = attrs.field(default=None, repr=False)
    """API key; falls back to the provider's environment variable."""
    signal: AbortSignal | None = None
    """Aborting it ends the stream with the aborted outcome."""
    session_id: str | None = None
    """Prompt-cache / session-affinity key."""
    transport: Transport | None = None
    """Transport preference for stream functions that offer a choice; the built-in providers
    stream over SSE and ignore it."""
    thinking_budgets: dict[str, int] | None = None
    """Token budgets per thinking level for budget-based APIs."""
    max_retry_delay_ms: int | None = attrs.field(default=None, validator=_checked_option)
    """Fail instead of sleeping when the server asks for a longer retry delay (default
    60000; 0 disables the cap)."""
    max_retries: int | None = attrs.field(default=None, validator=_checked_option)
    """Retries of the request phase (default 0)."""
    max_tokens: int | None = attrs.field(default=None, validator=_checked_option)
    """Output token limit of the request; ``None`` uses the model's ``max_tokens``."""
    temperature: float | None = attrs.field(default=None, validator=_checked_option)
    """Sampling temperature; ``None`` leaves the provider's default."""
    headers: Mapping[str, str | None] | None = None
    """Extra headers, merged last; ``None`` deletes a default header."""
    on_payload: Callable[[dict[str, Any], Model], Any] | None = None
    """Sees the request body; may return a replacement."""
    on_response: Callable[[ProviderResponse, Model], Any] | None = None
    """Sees status and headers before the body is read."""
    on_provider_stream_event: Callable[[Any, Model], Any] | None = None
    """Sees every parsed provider event before it is mapped."""
    on_retry: Callable[[RetryNotice, Model], Any] | None = None
    """Told before each retry of the request phase (status, wait, attempt)."""
    response_schema: Mapping[str, Any] | None = None
    """Ask for an answer that is JSON matching ``{"name": ..., "schema": {...}}`` through
    the API's own JSON-schema mode: the built-in Chat Completions and Responses providers
    send it when the model's ``compat["supportsJsonSchema"]`` is true; others ignore it
    (structured output then uses a tool; see ``output_type``)."""


StreamFn: TypeAlias = Callable[
    [Model, LlmContext, StreamOptions],
    AsyncIterable[AssistantMessageEvent] | Awaitable[AsyncIterable[AssistantMessageEvent]],
]
"""``(model, context, options) -> AsyncIterable[AssistantMessageEvent]`` (or an awaitable
of one)."""


async def iterate_stream(
    stream_fn: StreamFn, model: Model, context: LlmContext, options: StreamOptions
) -> AsyncIterator[AssistantMessageEvent]:
    """Call ``stream_fn`` and return an async iterator over its events.

    Accepts both forms of the contract (an async iterable, or an awaitable of one).
    """
    result = stream_fn(model, context, options)
    if isinstance(result, AsyncIterable):
        return aiter(result)
    return aiter(await result)


_default_stream_fn: StreamFn | None = None


def set_default_stream_fn(stream_fn: StreamFn | None) -> None:
    """Install (or with ``None`` remove) the process-wide default stream function.

    Used by :class:`~trio_agent.Agent` and the loop when no ``stream_fn`` is given.
    """
    global _default_stream_fn
    _default_stream_fn = stream_fn


def get_default_stream_fn() -> StreamFn:
    """Return the default stream function.

    Raises:
        AgentError: if none is configured.
    """
    if _default_stream_fn is None:
        raise AgentError(
            "No default stream function configured. "
            "Pass stream_fn explicitly or call set_default_stream_fn()."
        )
    return _default_stream_fn
