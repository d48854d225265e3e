"""The request phase of the built-in HTTP APIs: sending with retries, and keeping secrets
out of what httpx logs.

:func:`send_with_retries` sends one provider request and returns the open streaming
response, retrying connection errors and retryable statuses as pi 1.6.0 does. It never
follows a redirect, whatever the client's setting, so no credential header reaches another
origin; it reads at most 64 KiB of an error body (:func:`read_error_body`) and redacts it
before the API's formatter sees (and may cut) it.
Attempts and retries are logged to ``trio_agent.models``.

httpx logs every request's URL at INFO. A filter on the ``httpx`` logger, installed when
this module is imported, shows those URLs without credentials (:func:`redact_url`), also
redacting the keys of the requests in flight (:func:`logged_secrets`).
"""

from __future__ import annotations

import codecs
import json
import logging
import math
import random
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from email.utils import parsedate_to_datetime
from typing import Any

import attrs
import httpx
import trio

from .._jsjson import UNDEFINED, js_stringify, js_truthy
from .._messages import Model
from .._redaction import redact, redact_url
from .._streaming import RetryNotice, StreamOptions
from .._util import maybe_await

__all__ = [
    "DEFAULT_MAX_RETRY_DELAY_MS",
    "ERROR_BODY_READ_LIMIT",
    "HttpError",
    "ProviderStreamError",
    "client_error",
    "client_error_message",
    "client_error_text",
    "connection_error_message",
    "error_text",
    "logged_secrets",
    "logger",
    "read_error_body",
    "retry_delay",
    "send_with_retries",
    "unwind",
]

DEFAULT_MAX_RETRY_DELAY_MS = 60_000
"""Default cap on a server-requested retry delay (``StreamOptions.max_retry_delay_ms``)."""


logger = logging.getLogger("trio_agent.models")
"""The providers' logger (see ``docs/providers.md`` for what is logged at which level)."""
# A library logs, the application decides where to: without a configured handler the
# records are dropped, not printed by logging's last-resort handler.
logger.addHandler(logging.NullHandler())


@attrs.frozen(kw_only=True)
class HttpError:
    """A failed HTTP response, handed to :attr:`~._http.HttpApi.format_http_error`."""

    status: int
    headers: Mapping[str, str]
    body: str
    """The response body as text (at most :data:`ERROR_BODY_READ_LIMIT` bytes of it, see
    :func:`read_error_body`), already redacted (formatters may cut it with
    :func:`~._http.truncate_body` or :func:`~._http.truncate_json_error`)."""


class ProviderStreamError(Exception):
    """Raised by an :class:`~._http.SseMapper` (or a request builder) to end the stream with an
    ``error`` event whose ``error_message`` is the exception's message."""


def error_text(exc: BaseException) -> str:
    """The message of an exception (its class name when ``str()`` is empty)."""
    return str(exc) or type(exc).__name__


def _origin(url: httpx.URL) -> str:
    # The host (with the port when the URL names one); no userinfo, path or query.
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{host}:{url.port}" if url.port is not None else host


def connection_error_message(exc: BaseException, url: httpx.URL | None = None) -> str:
    """The error text of a failed connection: the host and the deepest cause.

    ``Connection error (api.example.com): <cause>``, the host taken from ``url`` or the
    request of an httpx error; a host name that does not resolve reads ``Connection
    error (<host>): the host name cannot be resolved (<cause>)``. Timeouts read
    ``Request timed out.`` as in pi.
    """
    if isinstance(exc, httpx.TimeoutException):
        return "Request timed out."
    if url is None and isinstance(exc, httpx.RequestError):
        try:
            url = exc.request.url
        except RuntimeError:  # an httpx error raised without its request
            url = None
    deepest: BaseException = exc
    unresolved = False
    seen: set[int] = set()
    while id(deepest) not in seen:
        seen.add(id(deepest))
        unresolved = unresolved or isinstance(deepest, socket.gaierror)
        cause = deepest.__cause__ or deepest.__context__
        if isinstance(deepest, BaseExceptionGroup) and deepest.exceptions:
            cause = deepest.exceptions[0]
        if cause is None:
            break
        deepest = cause
    reason = error_text(deepest)
    if unresolved:
        reason = f"the host name cannot be resolved ({reason})"
    where = f" ({_origin(url)})" if url is not None and url.host else ""
    return f"Connection error{where}: {reason}"


# ---------------------------------------------------------------------------------------
# httpx's own log lines

# Secrets of the requests in flight, counted (several requests may share a key).
_active_secrets: Counter[str] = Counter()


@contextmanager
def logged_secrets(secrets: Sequence[str]) -> Iterator[None]:
    # Makes httpx's log lines of this request redact ``secrets`` as well.
    added = [secret for secret in secrets if secret]
    _active_secrets.update(added)
    try:
        yield
    finally:
        _active_secrets.subtract(added)
        for secret in added:
            if _active_secrets[secret] <= 0:
                del _active_secrets[secret]


class _HttpxUrlFilter(logging.Filter):
    """Shows the URLs in httpx's log lines without credentials (see :func:`redact_url`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and any(isinstance(arg, httpx.URL) for arg in args):
            secrets = list(_active_secrets)
            record.args = tuple(
                redact_url(str(arg), *secrets) if isinstance(arg, httpx.URL) else arg
                for arg in args
            )
        return True


def _install_httpx_log_filter() -> None:
    httpx_logger = logging.getLogger("httpx")
    if not any(isinstance(f, _HttpxUrlFilter) for f in httpx_logger.filters):
        httpx_logger.addFilter(_HttpxUrlFilter())


_install_httpx_log_filter()


# ---------------------------------------------------------------------------------------
# Error bodies


ERROR_BODY_READ_LIMIT = 1 << 16
"""How many bytes of an error body are read (64 KiB). A longer body, or one that never
ends, is cut there and its connection closed; the cut text ends with
``… [error body cut at 65536 bytes]``."""


async def unwind(chunks: AsyncIterator[bytes]) -> None:
    """Finish the body iterator of a closed response.

    httpx reads a body through a chain of nested async generators. Stopping early would
    leave them suspended until the garbage collector finalizes them (a ResourceWarning
    under Trio). With the response already closed, the next read fails at once and the
    failure unwinds the whole chain.
    """
    try:
        async for _ in chunks:
            pass
    except Exception:
        pass


async def read_error_body(response: httpx.Response, secrets: Sequence[str] = ()) -> str:
    """The text of an error response's body, at most :data:`ERROR_BODY_READ_LIMIT` bytes
    of it, redacted (``secrets``); closes the response.

    A body that fails to arrive (a dropped connection) reads as what came before.
    """
    data = bytearray()
    cut = False
    pieces = response.aiter_bytes()
    try:
        async for piece in pieces:
            data += piece
            if len(data) > ERROR_BODY_READ_LIMIT:
                cut = True
                break
    except httpx.TransportError:
        pass
    finally:
        await response.aclose()
        await unwind(pieces)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    # Not final after a cut: a character the cut split is dropped, not replaced.
    text = decoder.decode(bytes(data[:ERROR_BODY_READ_LIMIT]), final=not cut)
    # Redacted before the marker, so that a key the cut split is removed too.
    text = redact(text, *secrets)
    return f"{text}… [error body cut at {ERROR_BODY_READ_LIMIT} bytes]" if cut else text


# ---------------------------------------------------------------------------------------
# Request phase with retries


def _is_retryable(status: int | None, headers: Mapping[str, str]) -> bool:
    should_retry = headers.get("x-should-retry", "").strip().lower()
    if should_retry == "true":
        return True
    if should_retry == "false":
        return False
    return status is None or status in (408, 409, 429) or status >= 500


def retry_delay(attempt: int, headers: Mapping[str, str]) -> tuple[float, bool]:
    """Delay in seconds before retry number ``attempt + 1``, and whether the server chose it.

    ``retry-after-ms`` (milliseconds), else ``retry-after`` (seconds or an HTTP date),
    else exponential backoff ``min(0.5 * 2**attempt, 8)`` seconds times a random factor
    in (0.75, 1]. Any finite server value counts; a negative one (or a date in the past)
    means "retry now" (0 s).
    """
    after_ms = headers.get("retry-after-ms")
    if after_ms is not None:
        try:
            value = float(after_ms)
        except ValueError:
            pass
        else:
            if math.isfinite(value):
                return max(0.0, value / 1000), True
    after = headers.get("retry-after")
    if after is not None:
        try:
            value = float(after)
        except ValueError:
            try:
                when = parsedate_to_datetime(after)
            except (TypeError, ValueError):
                when = None
            if when is not None:
                return max(0.0, when.timestamp() - time.time()), True
        else:
            if math.isfinite(value):
                return max(0.0, value), True
    backoff = min(0.5 * 2**attempt, 8.0)
    return backoff * (1 - random.random() * 0.25), False


def client_error_message(error: Any, status: int | None = None, raw: str | None = None) -> str:
    """The message of the OpenAI client's ``APIError`` for the error value ``error``.

    ``error.message`` when truthy (its JSON when not a string), else the JSON of a truthy
    ``error``, else ``raw``; after ``<status> `` when there is a status. Without any of
    them: ``<status> status code (no body)`` or ``(no status code or body)``. A missing
    ``error`` is :data:`~.._jsjson.UNDEFINED`.
    """
    message = error.get("message") if isinstance(error, dict) else None
    if js_truthy(message):
        text = message if isinstance(message, str) else js_stringify(message)
    elif js_truthy(error):
        text = js_stringify(error)
    else:
        text = raw or ""
    if status is not None:
        return f"{status} {text}" if text else f"{status} status code (no body)"
    return text or "(no status code or body)"


def client_error(error: HttpError) -> tuple[str, Any]:
    """The OpenAI client's view of an HTTP error: its message and its error value.

    The client reads a JSON body's ``error`` member as the error, or the whole value when
    it is an object or array whose ``error`` is null or missing; a body that is not JSON,
    or JSON that is false, null, 0 or "", is kept as raw text (the error value is then
    :data:`~.._jsjson.UNDEFINED`). The message is :func:`client_error_message` with the
    status.
    """
    body = error.body
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = UNDEFINED
    if not js_truthy(parsed):
        return client_error_message(UNDEFINED, error.status, body), UNDEFINED
    if isinstance(parsed, list) or (isinstance(parsed, dict) and parsed.get("error") is None):
        detail = parsed
    else:
        detail = parsed.get("error", UNDEFINED) if isinstance(parsed, dict) else UNDEFINED
    return client_error_message(detail, error.status), detail


def client_error_text(error: HttpError, model: Model | None = None) -> str:
    """The OpenAI client's wording of an HTTP error (:func:`client_error`), e.g.
    ``429 Rate limited`` or ``503 status code (no body)``.

    The retry-delay message of the OpenAI APIs ends with it, as pi's does: it is their
    :attr:`~._http.HttpApi.format_retry_error`. ``model`` is not used.
    """
    return client_error(error)[0]


def _redirect_text(response: httpx.Response, secrets: Sequence[str]) -> str:
    location = response.headers.get("location", "")
    target = redact_url(str(response.request.url.join(location)), *secrets) if location else "?"
    return (
        f"{response.status_code} redirect to {target} not followed: provider requests "
        "never follow redirects, so credentials stay with the model's base_url "
        "(set base_url to the final address)"
    )


async def send_with_retries(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    options: StreamOptions,
    model: Model,
    format_http_error: Callable[[HttpError, Model], str],
    format_retry_error: Callable[[HttpError, Model], str] | None = None,
    secrets: Sequence[str] = (),
) -> httpx.Response:
    """Send ``request`` for streaming and return the open response (status < 300).

    Retries only this request phase, ``options.max_retries`` times (default 0): retryable
    are connection errors and statuses 408, 409, 429 and >= 500, unless the response
    says ``x-should-retry``. Sleeps on Trio's clock. The caller closes the response.
    Redirects are never followed, whatever the client's setting: a ``3xx`` fails, so no
    credential header reaches another origin. Error bodies are read up to
    :data:`ERROR_BODY_READ_LIMIT` and redacted (``secrets``) before the formatters see
    them, so a cut can never leave part of a key.

    Raises:
        ProviderStreamError: with the final error message (HTTP error wording from
            ``format_http_error``, ``Connection error (<host>): <cause>``, the redirect message,
            or ``Server requested <n>s retry delay (max: <m>s). <error>`` when a
            server-requested delay exceeds ``options.max_retry_delay_ms``, where
            ``<error>`` comes from ``format_retry_error`` if given).
    """
    max_retries = max(0, options.max_retries or 0)
    cap_ms = options.max_retry_delay_ms
    if cap_ms is None:
        cap_ms = DEFAULT_MAX_RETRY_DELAY_MS
    attempt = 0
    while True:
        status: int | None = None
        headers: Mapping[str, str] = {}
        error: HttpError | None = None
        logger.debug(
            "%s request for %s/%s: attempt %d of %d",
            model.api,
            model.provider,
            model.id,
            attempt + 1,
            max_retries + 1,
        )
        try:
            response = await client.send(request, stream=True, follow_redirects=False)
        except httpx.TransportError as exc:
            message = connection_error_message(exc, request.url)
        else:
            if response.status_code < 300:
                return response
            status = response.status_code
            headers = response.headers
            if status < 400:
                await response.aclose()
                message = _redirect_text(response, secrets)
                raise ProviderStreamError(message)
            body = await read_error_body(response, secrets)
            error = HttpError(status=status, headers=headers, body=body)
            message = format_http_error(error, model)
        if attempt >= max_retries or not _is_retryable(status, headers):
            raise ProviderStreamError(message)
        delay, requested = retry_delay(attempt, headers)
        if requested and cap_ms > 0 and delay * 1000 > cap_ms:
            if error is not None and format_retry_error is not None:
                message = format_retry_error(error, model)
            message = (
                f"Server requested {math.ceil(delay)}s retry delay "
                f"(max: {math.ceil(cap_ms / 1000)}s). {message}"
            )
            raise ProviderStreamError(message)
        logger.warning(
            "%s request for %s/%s: retrying in %.3f s (attempt %d of %d): %s",
            model.api,
            model.provider,
            model.id,
            delay,
            attempt + 2,
            max_retries + 1,
            redact(message, *secrets),
        )
        if options.on_retry is not None:
            await maybe_await(
                options.on_retry(RetryNotice(status=status, wait=delay, attempt=attempt + 2), model)
            )
        await trio.sleep(delay)
        attempt += 1
