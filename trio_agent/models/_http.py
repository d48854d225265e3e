"""The HTTP pipeline shared by the built-in streaming providers.

Each wire API (``openai-completions``, ``anthropic-messages``, ``openai-responses``) is
described by an :class:`HttpApi`: how to build the request (URL, JSON body, headers), how
to word an HTTP error, and a factory for an :class:`SseMapper` that turns the parsed
server-sent events of one response into builder calls. :func:`stream_http` does
everything else, identically for all of them:

1. build the output message through an :class:`~.AssistantMessageBuilder`;
2. resolve the API key (``options.api_key``, else ``HttpEnv.get_api_key(provider)``, else
   the provider's environment variable, see :data:`ENV_API_KEYS`);
3. build the request and merge headers (defaults, the API's headers, ``model.headers``,
   auth headers, ``options.headers``; a ``None`` value deletes a header);
4. call ``on_payload`` (it may return a replacement body; ``stream: true`` is forced
   afterwards);
5. POST through the injected ``httpx.AsyncClient`` with request-phase retries, never
   following a redirect (so no credential reaches another origin; see :mod:`._request`);
6. call ``on_response``, yield ``start``;
7. frame the body as SSE (:class:`~._sse.SseDecoder`, one implementation for all APIs),
   call ``on_provider_stream_event`` for each parsed provider event, and yield what the
   mapper produces; a body that is one JSON document is reported as an HTTP error;
8. after the body ends, let the mapper close its blocks and decide the terminal event;
   the rest of a finished body is drained (bounded) so the connection is reused.

Failures never raise out of the stream: they end it with one ``error`` event (partial
content kept), produced in one place (:meth:`_HttpStream.terminal_for`). An abort through
``options.signal`` ends it with ``stop_reason="aborted"`` and ``Request was aborted``.
Cancellation of the consumer's scope propagates (``trio.Cancelled`` is never caught) and
closes the HTTP response on the way out.

Trio rule kept here: the generator never yields while a cancel scope of its own is open.
Every await (request, body reads, hooks) runs inside a short-lived abort scope
(:func:`~trio_agent._abort.open_abort_scope`); events are yielded outside it.

API keys never appear in events, error messages, reprs or logs: the secrets of a request
are its key and the values of every credential header the caller sets (one rule,
:func:`~trio_agent._redaction.is_credential_header`, the one ``repr(Model)`` uses); error
bodies are redacted before the API's formatter sees (and cuts) them, every error text is
passed through :func:`redact` before it reaches the message (:meth:`_HttpStream.terminal_for`,
the one place a failure becomes the terminal event), and httpx's log lines show URLs
without credentials. Requests are logged to ``trio_agent.models`` (see ``docs/providers.md``).
"""

from __future__ import annotations

import json
import logging
import os
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
)
from typing import Any, Literal, Protocol, TypeAlias

import attrs
import httpx
import trio

from .._abort import open_abort_scope
from .._events import AssistantMessageEvent, DoneEvent, ErrorEvent
from .._json_stream import parse_json_with_repair
from .._messages import Model
from .._redaction import header_secrets, redact, redact_url, url_secrets
from .._streaming import LlmContext, ProviderResponse, StreamOptions
from .._util import maybe_await
from ._builder import AssistantMessageBuilder
from ._request import (
    DEFAULT_MAX_RETRY_DELAY_MS,
    ERROR_BODY_READ_LIMIT,
    HttpError,
    ProviderStreamError,
    client_error_text,
    connection_error_message,
    error_text,
    logged_secrets,
    logger,
    retry_delay,
    send_with_retries,
    unwind,
)
from ._sse import SseDecoder, SseEvent

__all__ = [
    "DEFAULT_MAX_RETRY_DELAY_MS",
    "ENV_API_KEYS",
    "ERROR_BODY_LIMIT",
    "GetApiKey",
    "HttpApi",
    "HttpEnv",
    "HttpError",
    "ProviderRequest",
    "ProviderStreamError",
    "SseEvent",
    "SseMapper",
    "compact_json",
    "compat_value",
    "client_error_text",
    "connection_error_message",
    "env_api_key",
    "error_text",
    "merge_headers",
    "missing_key_message",
    "parse_sse_json",
    "redact",
    "redact_url",
    "retry_delay",
    "send_with_retries",
    "stream_http",
    "truncate_body",
    "truncate_json_error",
]

ERROR_BODY_LIMIT = 4000
"""HTTP error bodies longer than this many characters are truncated in error messages."""

ENV_API_KEYS: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "groq": "GROQ_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "cerebras": "CEREBRAS_API_KEY",
    "together": "TOGETHER_API_KEY",
    "fireworks": "FIREWORKS_API_KEY",
    "zai": "ZAI_API_KEY",
    "moonshot": "MOONSHOT_API_KEY",
    "google": "GEMINI_API_KEY",
}
"""Environment variable holding each known provider's API key."""

GetApiKey: TypeAlias = Callable[[str], "str | Awaitable[str | None] | None"]
"""``get_api_key(provider) -> key | None`` (plain function or ``async def``)."""

_USER_AGENT = "trio-agent/0.1.0"

# ---------------------------------------------------------------------------------------
# Values exchanged between the pipeline and a wire API


@attrs.frozen(kw_only=True)
class HttpEnv:
    """What the built-in APIs need from the :class:`~trio_agent.models.Models` runtime."""

    client: httpx.AsyncClient
    """The client every request goes through (transport timeouts are configured on it)."""
    get_api_key: GetApiKey | None = None
    """Consulted when ``options.api_key`` is not set, before the environment."""


@attrs.frozen(kw_only=True)
class ProviderRequest:
    """One HTTP request of a wire API, before hooks and header merging."""

    url: str
    """Absolute URL to POST to."""
    body: dict[str, Any]
    """The JSON body (``stream: true`` is forced after ``on_payload``)."""
    headers: Mapping[str, str] = attrs.field(factory=dict)
    """API-specific default headers (e.g. ``anthropic-version``); merged before
    ``model.headers``."""
    auth_headers: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    """Headers carrying the key; merged after ``model.headers``. Never shown in reprs."""


class SseMapper(Protocol):
    """Maps the SSE events of one response onto an :class:`~.AssistantMessageBuilder`.

    Created per request by :attr:`HttpApi.create_mapper`. The pipeline calls, in order:
    :meth:`parse` for each framed event (then awaits ``on_provider_stream_event`` with the
    result), :meth:`map` with that result, and :meth:`finish` once the body ended or
    :attr:`finished` became true. Raising any exception (typically
    :class:`ProviderStreamError`) from these methods ends the stream with an ``error``
    event carrying the exception's message; events already produced by a generator
    method before it raised are still yielded first.
    """

    finished: bool
    """Set when the provider's end marker arrived (e.g. ``data: [DONE]``); reading stops."""

    def parse(self, sse: SseEvent) -> Any:
        """Return the provider event (usually parsed JSON), or ``None`` to skip it."""
        ...

    def map(self, event: Any) -> Iterable[AssistantMessageEvent]:
        """Apply one provider event; return (or yield) the resulting stream events."""
        ...

    def finish(self) -> Iterable[AssistantMessageEvent]:
        """Close open blocks after the body ended and decide the outcome.

        May end with a terminal event (``builder.done(...)`` or ``builder.error(...)``);
        without one the pipeline appends ``builder.done()``. Raising after yielding the
        ``*_end`` events ends the stream with an error after them.
        """
        ...


@attrs.frozen(kw_only=True)
class HttpApi:
    """Describes one wire API to :func:`stream_http`."""

    build_request: Callable[[Model, LlmContext, StreamOptions, str | None], ProviderRequest]
    """``(model, context, options, api_key) -> ProviderRequest``; ``api_key`` is ``None``
    only when the caller supplied an auth header itself. May raise to fail the stream."""
    create_mapper: Callable[[AssistantMessageBuilder, Model], SseMapper]
    """Creates the mapper of one response."""
    format_http_error: Callable[[HttpError, Model], str]
    """Words the error message of an HTTP error status."""
    format_retry_error: Callable[[HttpError, Model], str] | None = None
    """Words the error that ends a ``Server requested <n>s retry delay ...`` message (the
    client's own wording, e.g. :func:`client_error_text`); ``None`` uses
    :attr:`format_http_error`."""
    auth_header_names: tuple[str, ...] = ("authorization",)
    """Lower-case header names that make a missing API key acceptable when the caller
    supplies one of them (in ``model.headers`` or ``options.headers``)."""


# ---------------------------------------------------------------------------------------
# Small helpers (also used by the wire APIs)


def compat_value(model: Model, name: str, default: Any = None) -> Any:
    """Read a ``model.compat`` switch by its upstream camelCase ``name``.

    The snake_case spelling (``supportsStore`` -> ``supports_store``) is accepted too;
    an explicit ``None`` counts as absent. Returns ``default`` when unset.
    """
    compat = model.compat or {}
    value = compat.get(name)
    if value is None:
        snake = "".join(f"_{ch.lower()}" if ch.isupper() else ch for ch in name)
        value = compat.get(snake)
    return default if value is None else value


CacheRetention: TypeAlias = Literal["none", "short", "long"]
"""Prompt-cache retention: ``model.compat["cacheRetention"]`` (default ``"short"``)."""


def cache_retention(model: Model) -> CacheRetention:
    """The model's prompt-cache retention (``"short"`` unless ``compat`` says otherwise)."""
    value = compat_value(model, "cacheRetention", "short")
    return value if value in ("none", "short", "long") else "short"


def compact_json(value: Any) -> str:
    """JSON the way ``JSON.stringify`` writes it: no spaces, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def truncate_body(text: str) -> str:
    """Trim an error body and cut it to :data:`ERROR_BODY_LIMIT` characters.

    A longer body ends with ``… [truncated N chars]`` (N = the characters cut).
    """
    text = text.strip()
    if len(text) <= ERROR_BODY_LIMIT:
        return text
    return f"{text[:ERROR_BODY_LIMIT]}… [truncated {len(text) - ERROR_BODY_LIMIT} chars]"


def truncate_json_error(text: str) -> str:
    """Cut the compact JSON of an OpenAI error object to :data:`ERROR_BODY_LIMIT`
    characters, as pi does (parity row U09): a longer text ends with
    ``... [truncated N chars]`` (three ASCII dots, N = the characters cut). Raw bodies
    are never cut or trimmed.
    """
    if len(text) <= ERROR_BODY_LIMIT:
        return text
    return f"{text[:ERROR_BODY_LIMIT]}... [truncated {len(text) - ERROR_BODY_LIMIT} chars]"


def _has_control_character(value: str) -> bool:
    return any(ord(char) < 32 or ord(char) == 127 for char in value)


def parse_sse_json(data: str) -> Any:
    """Parse the JSON of an SSE ``data`` field, repairing common string-literal mistakes.

    Raises:
        ProviderStreamError: ``Invalid JSON in stream event: <reason>`` when the data is
            not JSON even after repair.
    """
    try:
        return parse_json_with_repair(data)
    except ValueError as exc:
        raise ProviderStreamError(f"Invalid JSON in stream event: {exc}") from exc


def merge_headers(*layers: Mapping[str, str | None] | None) -> dict[str, str]:
    """Merge header layers case-insensitively; later layers win, ``None`` deletes.

    The spelling of a name is the one of the layer that set it last.
    """
    merged: dict[str, tuple[str, str]] = {}
    for layer in layers:
        for name, value in (layer or {}).items():
            if value is None:
                merged.pop(name.lower(), None)
            else:
                merged[name.lower()] = (name, value)
    return dict(merged.values())


def missing_key_message(provider: str) -> str:
    """The error of a request without a key: pi's text, then what to set (issue 19).

    ``No API key for provider: openai (set OPENAI_API_KEY or pass api_key)``; a provider
    without a known variable: ``... (pass api_key or get_api_key)``.
    """
    name = ENV_API_KEYS.get(provider)
    hint = f"set {name} or pass api_key" if name else "pass api_key or get_api_key"
    return f"No API key for provider: {provider} ({hint})"


def env_api_key(provider: str) -> str | None:
    """The API key of ``provider`` from its environment variable (:data:`ENV_API_KEYS`)."""
    name = ENV_API_KEYS.get(provider)
    return (os.environ.get(name) or None) if name else None


async def _resolve_api_key(model: Model, options: StreamOptions, env: HttpEnv) -> str | None:
    if options.api_key:
        return options.api_key
    if env.get_api_key is not None:
        key = await maybe_await(env.get_api_key(model.provider))
        if key:
            return key
    return env_api_key(model.provider)


# ---------------------------------------------------------------------------------------
# The stream driver


def _is_terminal(event: AssistantMessageEvent) -> bool:
    return isinstance(event, DoneEvent | ErrorEvent)


_DRAIN_SECONDS = 0.1
"""How long a finished response's rest is waited for before its connection is dropped."""
_DRAIN_BYTES = 1 << 16
"""How much of a finished response's rest is read at most to keep its connection."""


class _Aborted(Exception):
    """Raised inside the stream when ``options.signal`` is found aborted."""


def _own_socket(response: httpx.Response) -> trio.socket.SocketType | None:
    """The socket of ``response``'s connection when it is an HTTP/1.1 connection of
    httpx's own Trio transport (one response at a time); ``None`` for any other
    transport."""
    if response.http_version != "HTTP/1.1" or not isinstance(
        response.stream, httpx.AsyncByteStream
    ):
        return None
    get_extra_info = getattr(response.extensions.get("network_stream"), "get_extra_info", None)
    if get_extra_info is None:
        return None
    try:
        socket = get_extra_info("socket")
    except Exception:  # a network stream of another shape
        return None
    return socket if isinstance(socket, trio.socket.SocketType) else None


async def stream_http(
    api: HttpApi,
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    env: HttpEnv,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    """Stream one response of ``api``; the body of every built-in provider's stream function.

    Yields ``start``, block events and exactly one terminal event; or a single ``error``
    event when the request fails before the response body (missing key, hook failure,
    HTTP error status, connection error, abort). See the module docstring for the steps.

    Cancellation of the consumer's scope raises ``trio.Cancelled`` out of the iteration
    and closes the HTTP response; an abort of ``options.signal`` ends the stream with the
    aborted outcome instead.
    """
    stream = _HttpStream(api, model, context, options, env)
    # The one exit for every failure and abort: whatever the steps below raise (an
    # ordinary exception, never a cancellation) ends the stream with one terminal event,
    # once the response is closed. Events the steps produced before raising have already
    # been yielded. The steps are this generator's own body (no generator of their own
    # between the socket and the consumer), and no yield happens inside an abort scope.
    failure: Exception | None = None
    response: httpx.Response | None = None
    chunks: AsyncIterator[bytes] | None = None
    try:
        try:
            stream.check_abort()
            with open_abort_scope(options.signal):
                response = await stream.send()
            # The scope swallowed the cancellation of an abort; the response (if any)
            # closes in the ``finally``.
            stream.check_abort()
            assert response is not None
            with open_abort_scope(options.signal):
                if options.on_response is not None:
                    status = ProviderResponse(
                        status=response.status_code, headers=dict(response.headers)
                    )
                    await maybe_await(options.on_response(status, model))
            stream.check_abort()
            mapper = api.create_mapper(stream.builder, model)
            stream.started = True
            yield stream.builder.start()
            # Without a Content-Encoding the decoded bytes are the raw ones: reading them raw
            # saves aiter_bytes' generator per piece. (A body already read, as a test
            # transport's, is served by aiter_bytes.)
            raw_body = (
                not response.is_stream_consumed and "content-encoding" not in response.headers
            )
            stream.socket = _own_socket(response) if raw_body else None
            if stream.socket is not None:
                # The connection stays this response's until ``response.aclose()`` below
                # (aiter_raw would hand it back to the pool inside the read that ends the
                # body), so an abort may close its socket while the body is incomplete.
                assert isinstance(response.stream, httpx.AsyncByteStream)
                stream.url = response.request.url
                chunks = aiter(response.stream)
            else:
                chunks = response.aiter_raw() if raw_body else response.aiter_bytes()
            # The body's events, read through ``mapper``, ending with the terminal event.
            on_event = options.on_provider_stream_event
            decoder = SseDecoder()
            pending: deque[SseEvent] = deque()
            ended = False
            while not mapper.finished:
                if not pending:
                    if ended:
                        break
                    piece = await stream.read(chunks)
                    if piece is None:
                        ended = True
                        pending.extend(decoder.end())
                    else:
                        pending.extend(decoder.feed(piece))
                    if decoder.json_text is not None:
                        raise await stream.json_body_error(response, chunks, decoder, ended)
                    continue
                raw = mapper.parse(pending.popleft())
                if raw is None:
                    continue
                if on_event is not None:
                    with open_abort_scope(options.signal):
                        await maybe_await(on_event(raw, model))
                    stream.check_abort()
                for event in mapper.map(raw):
                    if _is_terminal(event):
                        await stream.drain(chunks)
                        stream.log_end(event)  # type: ignore[arg-type]
                        yield event
                        return
                    yield event
            if not ended:
                await stream.drain(chunks)
            stream.check_abort()
            terminal = False
            for event in mapper.finish():
                terminal = _is_terminal(event)
                if terminal:
                    stream.log_end(event)  # type: ignore[arg-type]
                yield event
            if not terminal:
                done = stream.builder.done()
                stream.log_end(done)
                yield done
        finally:
            if stream.remove_abort_callback is not None:
                stream.remove_abort_callback()
            if response is not None:
                await response.aclose()
            if chunks is not None:
                await unwind(chunks)
    except Exception as exc:
        failure = exc
    if failure is not None:
        yield stream.terminal_for(failure)


class _HttpStream:
    """The state and steps of :func:`stream_http` for one request; what the steps
    raise, :func:`stream_http` turns into the terminal event (:meth:`terminal_for`)."""

    def __init__(
        self,
        api: HttpApi,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        env: HttpEnv,
    ) -> None:
        self.api = api
        self.model = model
        self.context = context
        self.options = options
        self.env = env
        self.builder = AssistantMessageBuilder(
            api=model.api, provider=model.provider, model=model.id
        )
        self.secrets: list[str] = []  # the key and the caller's credential header values
        self.started = False  # the response arrived and ``start`` was yielded
        # The body is read in many short awaits: one abort callback for the whole stream
        # cancels whichever read is waiting (a callback per read cost a third of the time
        # per event on streams of one event per chunk).
        self._reading: trio.CancelScope | None = None
        self.remove_abort_callback: Callable[[], None] | None = None
        # The socket of an HTTP/1.1 response read straight from its connection, until
        # the body is complete: an abort closes it, so the reads need no cancel scope
        # (see ``read``).
        self.socket: trio.socket.SocketType | None = None
        self.url: httpx.URL | None = None

    def aborted(self) -> bool:
        signal = self.options.signal
        return signal is not None and signal.aborted

    def check_abort(self) -> None:
        if self.aborted():
            raise _Aborted

    def log_end(self, event: DoneEvent | ErrorEvent) -> None:
        """Log the terminal event a mapper produced (DEBUG, or WARNING for an error)."""
        model = self.model
        if isinstance(event, DoneEvent):
            logger.debug(
                "%s response of %s/%s done: %s",
                model.api,
                model.provider,
                model.id,
                event.message.stop_reason,
            )
        elif event.error.stop_reason == "aborted":
            logger.debug("%s request for %s/%s aborted", model.api, model.provider, model.id)
        else:
            message = redact(event.error.error_message or "", *self.secrets)
            logger.warning(
                "%s response of %s/%s failed: %s", model.api, model.provider, model.id, message
            )

    def terminal_for(self, exc: Exception) -> ErrorEvent:
        """The terminal event for a stream that ended by raising ``exc``."""
        model = self.model
        if self.aborted():
            logger.debug("%s request for %s/%s aborted", model.api, model.provider, model.id)
            return self.builder.aborted()
        message = redact(error_text(exc), *self.secrets)
        # HTTP error statuses and other failures of the request are errors a user acts on
        # (a wrong key, a bad request); failures inside a started stream are warnings.
        level = logging.WARNING if self.started else logging.ERROR
        logger.log(
            level, "%s request for %s/%s failed: %s", model.api, model.provider, model.id, message
        )
        return self.builder.error(message)

    async def read(self, chunks: AsyncIterator[bytes]) -> bytes | None:
        """The next piece of the body (``None`` at its end), ended by an abort of
        ``options.signal``.

        Trio interrupts a waiting read through a cancel scope, which costs about as much
        as the rest of a small read. When the body is read straight from its own HTTP/1.1
        connection (:attr:`socket`), the read enters none: the stream's one abort
        callback closes the socket, so a read waiting on it, or any later one (httpx may
        read again for the rest of a chunk), fails at once; the check after the read, or
        before the next one, turns that into the abort. An aborted response's connection
        is closed anyway; the socket is released (no longer closed by an abort) as soon
        as the body is complete, before httpx can hand the connection back to its pool.
        Otherwise each read enters a bare cancel scope that the callback cancels.
        """
        signal = self.options.signal
        if signal is None:
            return await self._next_piece(chunks)
        if signal.aborted:
            raise _Aborted
        if self.remove_abort_callback is None:
            self.remove_abort_callback = signal.add_abort_callback(self._cancel_reading)
        piece: bytes | None = None
        if self.socket is not None:
            try:
                piece = await self._next_piece(chunks)
            except ProviderStreamError:
                if signal.aborted:
                    raise _Aborted from None
                raise
            if piece is None:
                self.socket = None  # the body is complete (see above)
        else:
            self._reading = scope = trio.CancelScope()
            try:
                with scope:
                    piece = await self._next_piece(chunks)
            finally:
                self._reading = None
        if signal.aborted:
            raise _Aborted
        return piece

    def _cancel_reading(self) -> None:
        if self.socket is not None:
            self.socket.close()
        elif self._reading is not None:
            signal = self.options.signal
            assert signal is not None
            self._reading.cancel(reason=f"aborted: {signal.reason!r}")

    async def _next_piece(self, chunks: AsyncIterator[bytes]) -> bytes | None:
        try:
            return await anext(chunks)
        except StopAsyncIteration:
            return None
        except httpx.TransportError as exc:
            raise ProviderStreamError(connection_error_message(exc, self.url)) from exc

    async def drain(self, chunks: AsyncIterator[bytes]) -> None:
        """Read what is left of a finished response, so that httpx can keep its
        connection alive for the next request.

        Bounded in time and size: a rest that is not there at once, or is large, is not
        waited for; closing the response then closes the connection, so no stale bytes
        can reach the next response.
        """
        read = 0
        self.socket = None  # the rest may complete the body (see ``read``)
        with trio.move_on_after(_DRAIN_SECONDS), open_abort_scope(self.options.signal):
            try:
                async for piece in chunks:
                    read += len(piece)
                    if read > _DRAIN_BYTES:
                        break
            except httpx.HTTPError:
                pass

    async def json_body_error(
        self,
        response: httpx.Response,
        chunks: AsyncIterator[bytes],
        decoder: SseDecoder,
        ended: bool,
    ) -> ProviderStreamError:
        """The error for a body that is one JSON document instead of a stream: the
        API's HTTP error wording, with the response's status."""
        size = 0
        while not ended and size <= ERROR_BODY_READ_LIMIT:
            try:
                piece = await self.read(chunks)
            except ProviderStreamError:
                break
            if piece is None:
                ended = True
                decoder.end()
            else:
                size += len(piece)
                decoder.feed(piece)
        body = redact(decoder.json_text or "", *self.secrets)
        error = HttpError(status=response.status_code, headers=response.headers, body=body)
        return ProviderStreamError(self.api.format_http_error(error, self.model))

    async def send(self) -> httpx.Response:
        """Resolve the key, build the request, run the hooks and send it (with retries).

        Runs inside an abort scope.
        """
        model, options, api = self.model, self.options, self.api
        api_key = await _resolve_api_key(model, options, self.env)
        caller_headers = merge_headers(model.headers, options.headers)
        # Every credential header the caller sets is a secret (one rule, the one reprs
        # use); only the API's auth headers make a missing key acceptable, as in pi.
        self.secrets.extend(header_secrets(caller_headers))
        if api_key is not None:
            self.secrets.append(api_key)
        has_auth_header = any(
            name.lower() in api.auth_header_names and value
            for name, value in caller_headers.items()
        )
        if api_key is None and not has_auth_header:
            raise ProviderStreamError(missing_key_message(model.provider))
        if any(_has_control_character(secret) for secret in self.secrets):
            # httpx would reject the header with the key in its message.
            raise ProviderStreamError(
                f"Invalid API key for provider: {model.provider} (it contains a control character)"
            )
        spec = api.build_request(model, self.context, options, api_key)
        body: Any = spec.body
        if options.on_payload is not None:
            replacement = await maybe_await(options.on_payload(body, model))
            if replacement is not None:
                body = replacement
        if not isinstance(body, Mapping):
            raise ProviderStreamError("on_payload must return a dict or None")
        body = {**body, "stream": True}
        headers = merge_headers(
            {
                "User-Agent": _USER_AGENT,
                "Content-Type": "application/json",
                "Accept": "text/event-stream",
            },
            spec.headers,
            model.headers,
            spec.auth_headers,
            options.headers,
        )
        # The last resort against lone surrogates is a replacement character: the
        # providers already strip them (sanitize_surrogates) from every text they send.
        content = compact_json(body).encode("utf-8", errors="replace")
        client = self.env.client
        url = httpx.URL(spec.url)
        self.secrets.extend(url_secrets(spec.url))
        if url.userinfo:
            # httpx would send the userinfo as Basic auth but also log the URL with it:
            # send the same header from a URL without credentials.
            basic = httpx.BasicAuth(url.username, url.password)
            basic_header = next(basic.auth_flow(httpx.Request("GET", url))).headers
            headers["Authorization"] = basic_header["Authorization"]
            self.secrets.append(basic_header["Authorization"].removeprefix("Basic "))
            url = url.copy_with(userinfo=b"")
        request = client.build_request("POST", url, content=content, headers=headers)
        with logged_secrets(self.secrets):
            return await send_with_retries(
                client,
                request,
                options=options,
                model=model,
                format_http_error=api.format_http_error,
                format_retry_error=api.format_retry_error,
                secrets=self.secrets,
            )
