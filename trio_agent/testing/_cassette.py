"""Cassettes: record real provider traffic once, replay it with its timing on Trio's clock.

A :class:`CassetteTransport` is an httpx transport (``httpx.AsyncClient(transport=...)``).
Recording, it sends each request through a real transport and writes down the request
and its response: status, headers, and every body chunk as it arrived, with its arrival
time in seconds after the request (Trio's clock). Replaying, it answers a matching
request with the same chunks at the same offsets, so the real provider code (SSE framing,
parsing, retries, abort handling) runs over the real bytes with the real chunk boundaries
and pacing; under ``MockClock(autojump_threshold=0)`` a recorded 20 s stream replays in
no wall time while ``trio.current_time()`` advances by exactly the recorded 20 s.

The file is indented JSON (one line per chunk), with keys and tokens redacted before
anything is written (see :func:`redact_request`). The record modes are vcrpy's.
"""

from __future__ import annotations

import base64
import builtins
import difflib
import json
import os
import socket
import ssl
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

import attrs
import httpx
import trio

from .._redaction import (
    _CREDENTIAL_HEADER,  # the credential-header rule of reprs, reused as is
    _CREDENTIAL_NAMES,  # the credential-name rule of query strings, reused for JSON keys
    REDACTED,
    looks_like_secret,
    redact,
    redact_url,
    url_secrets,
)
from ..models._http import ENV_API_KEYS

__all__ = [
    "CASSETTE_VERSION",
    "CassetteError",
    "CassetteMismatchError",
    "CassetteTransport",
    "Interaction",
    "RecordMode",
    "RecordedChunk",
    "RecordedError",
    "RecordedRequest",
    "RecordedResponse",
    "load_cassette",
    "redact_request",
    "save_cassette",
]

CASSETTE_VERSION = 1
"""The version written in (and required of) a cassette file."""

RecordMode: TypeAlias = Literal["once", "none", "new_episodes", "all"]
"""When a :class:`CassetteTransport` records, as in vcrpy:

- ``"once"``: record every request when the file does not exist yet; once it exists,
  replay only (an unmatched request is an error);
- ``"none"``: replay only, never touch the network;
- ``"new_episodes"``: replay what matches, record (and append) what does not;
- ``"all"``: record everything, replay nothing; the file is rewritten.
"""

MatchField: TypeAlias = Literal["method", "url", "path", "query", "body"]

_MODES = ("once", "none", "new_episodes", "all")
_MATCH_FIELDS = ("method", "url", "path", "query", "body")
_PRECISION = 6  # arrival times are kept to the microsecond


class CassetteError(Exception):
    """A cassette file cannot be read, or a cassette cannot answer a request."""


class CassetteMismatchError(CassetteError):
    """No recorded request matches a request (and the mode does not record).

    The message names the closest recorded request and how it differs. Providers report
    failures in-band, so this error also ends the provider's stream as an ``error``
    event; :meth:`CassetteTransport.aclose` raises it again, so the test fails.
    """


# ---------------------------------------------------------------------------------------
# What a cassette holds


@attrs.frozen(kw_only=True)
class RecordedRequest:
    """A request as written in the cassette (redacted)."""

    method: str
    """The HTTP method."""
    url: str
    """The URL, credentials redacted."""
    headers: tuple[tuple[str, str], ...] = ()
    """The headers, in order, credential values redacted."""
    body: bytes = b""
    """The body, secrets redacted."""


@attrs.frozen(kw_only=True)
class RecordedChunk:
    """One piece of a response body as it arrived."""

    at: float
    """Seconds after the request was sent (Trio's clock)."""
    data: bytes
    """The bytes, as the transport delivered them (before content decoding)."""


@attrs.frozen(kw_only=True)
class RecordedError:
    """A transport error: the request failed, or the body broke off."""

    type: str
    """The httpx exception class (``ConnectError``, ``RemoteProtocolError``, ...)."""
    message: str
    """Its message."""
    cause: str | None = None
    """The message of its deepest cause, when it has one (providers quote it)."""
    cause_type: str | None = None
    """The class of that cause (``socket.gaierror``, ``ConnectionRefusedError``, ...);
    replayed as that class when it is a builtin, ``socket`` or ``ssl`` exception."""
    at: float = 0.0
    """Seconds after the request was sent."""


@attrs.frozen(kw_only=True)
class RecordedResponse:
    """A response: status and headers when they arrived, then the body's chunks."""

    status: int
    """The status code."""
    headers: tuple[tuple[str, str], ...] = ()
    """The headers, in order (secrets redacted)."""
    at: float = 0.0
    """Seconds after the request was sent when the headers arrived."""
    chunks: tuple[RecordedChunk, ...] = ()
    """The body, piece by piece."""
    error: RecordedError | None = None
    """The transport error that broke the body off after the chunks."""
    complete: bool = True
    """False when the recording stopped reading before the body ended (the client
    stopped early): replaying further than the chunks fails with ``httpx.ReadError``."""


@attrs.frozen(kw_only=True)
class Interaction:
    """One request and what answered it: a response, or a transport error."""

    request: RecordedRequest
    """The request."""
    response: RecordedResponse | None = None
    """The response (``None`` when the request failed before one arrived)."""
    error: RecordedError | None = None
    """The transport error of a request that got no response."""


# ---------------------------------------------------------------------------------------
# Redaction


def _header_pairs(headers: httpx.Headers) -> list[tuple[str, str]]:
    # As sent or received, with the names' spelling kept.
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, value in headers.raw]


def _header_secrets(headers: Iterable[tuple[str, str]]) -> list[str]:
    found = []
    for name, value in headers:
        if _CREDENTIAL_HEADER.search(name) and value:
            found.append(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.lower() in ("bearer", "basic", "token"):
                found.append(token)
    return found


def _known_secrets(extra: Sequence[str]) -> list[str]:
    # The keys of the environment the providers would read, and the caller's own.
    env = [os.environ.get(name, "") for name in ENV_API_KEYS.values()]
    return [secret for secret in (*extra, *env) if secret]


def _redact_headers(
    headers: Iterable[tuple[str, str]], secrets: Sequence[str]
) -> tuple[tuple[str, str], ...]:
    return tuple(
        (name, REDACTED if _CREDENTIAL_HEADER.search(name) else redact(value, *secrets))
        for name, value in headers
    )


def _redact_json(value: Any) -> Any:
    # Key-like string values under credential-like names (``api_key``, ``token``, ...).
    if isinstance(value, dict):
        return {
            key: REDACTED
            if isinstance(item, str) and _CREDENTIAL_NAMES.search(key) and looks_like_secret(item)
            else _redact_json(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_redact_json(item) for item in value]
    return value


def _redact_body(body: bytes, secrets: Sequence[str]) -> bytes:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body  # binary: no text secret can be found in it
    text = redact(text, *secrets)
    try:
        parsed = json.loads(text)
    except ValueError:
        return text.encode("utf-8")
    redacted = _redact_json(parsed)
    if redacted == parsed:
        return text.encode("utf-8")
    return json.dumps(redacted, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def redact_request(request: httpx.Request, secrets: Sequence[str] = ()) -> RecordedRequest:
    """The request as a cassette writes it, with its credentials redacted.

    Redacted (replaced by ``[REDACTED]``), with trio_agent's redaction rules: the values
    of credential headers (``Authorization``, ``x-api-key``, names with ``token``,
    ``secret``, ``cookie``, ``password``); the URL's userinfo, credential-like query
    values and key-like path segments; and everywhere (headers, URL, body) every known
    secret in any escaped or encoded form: those credential values, ``secrets``, and the
    API keys of the providers' environment variables (``OPENAI_API_KEY``, ...). In a JSON
    body, key-like strings under credential-like names are redacted too.

    The request's body must have been read (``await request.aread()``).
    """
    headers = _header_pairs(request.headers)
    url = str(request.url)
    found = [*_header_secrets(headers), *url_secrets(url), *_known_secrets(secrets)]
    return RecordedRequest(
        method=request.method,
        url=redact_url(url, *found),
        headers=_redact_headers(headers, found),
        body=_redact_body(request.content, found),
    )


def _redact_chunks(
    chunks: Sequence[RecordedChunk], secrets: Sequence[str]
) -> tuple[RecordedChunk, ...]:
    # A secret may straddle chunks: such chunks are merged (at the later arrival time)
    # before redaction, so no part of it survives on either side of a boundary.
    if not secrets:
        return tuple(chunks)

    def redacted(data: bytes) -> bytes:
        text = data.decode("utf-8", errors="surrogateescape")
        return redact(text, *secrets).encode("utf-8", errors="surrogateescape")

    merged: list[RecordedChunk] = []
    for chunk in chunks:
        if merged:
            previous = merged[-1]
            joined = previous.data + chunk.data
            if redacted(joined) != redacted(previous.data) + redacted(chunk.data):
                merged[-1] = RecordedChunk(at=chunk.at, data=joined)
                continue
        merged.append(chunk)
    return tuple(RecordedChunk(at=chunk.at, data=redacted(chunk.data)) for chunk in merged)


# ---------------------------------------------------------------------------------------
# The file


def _encode_bytes(data: bytes, *, json_ok: bool = False) -> dict[str, Any]:
    if not data:
        return {"text": ""}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}
    if json_ok:
        try:
            value = json.loads(text)
        except ValueError:
            pass
        else:
            if json.dumps(value, separators=(",", ":"), ensure_ascii=False) == text:
                return {"json": value}
    return {"text": text}


def _decode_bytes(fields: dict[str, Any]) -> bytes:
    if "json" in fields:
        return json.dumps(fields["json"], separators=(",", ":"), ensure_ascii=False).encode()
    if "base64" in fields:
        return base64.b64decode(fields["base64"])
    return str(fields.get("text", "")).encode("utf-8")


def _error_to_json(error: RecordedError) -> dict[str, Any]:
    fields: dict[str, Any] = {"type": error.type, "message": error.message}
    if error.cause is not None:
        fields["cause"] = error.cause
    if error.cause_type is not None:
        fields["cause_type"] = error.cause_type
    fields["at"] = error.at
    return fields


def _error_from_json(fields: dict[str, Any]) -> RecordedError:
    return RecordedError(
        type=fields["type"],
        message=fields["message"],
        cause=fields.get("cause"),
        cause_type=fields.get("cause_type"),
        at=float(fields.get("at", 0.0)),
    )


def _interaction_to_json(interaction: Interaction) -> dict[str, Any]:
    request = interaction.request
    document: dict[str, Any] = {
        "request": {
            "method": request.method,
            "url": request.url,
            "headers": [list(pair) for pair in request.headers],
            **_encode_bytes(request.body, json_ok=True),
        }
    }
    response = interaction.response
    if response is not None:
        fields: dict[str, Any] = {
            "status": response.status,
            "headers": [list(pair) for pair in response.headers],
            "at": response.at,
            "chunks": [{"at": c.at, **_encode_bytes(c.data)} for c in response.chunks],
        }
        if response.error is not None:
            fields["error"] = _error_to_json(response.error)
        if not response.complete:
            fields["complete"] = False
        document["response"] = fields
    if interaction.error is not None:
        document["error"] = _error_to_json(interaction.error)
    return document


def _interaction_from_json(fields: dict[str, Any]) -> Interaction:
    request = fields["request"]
    response = fields.get("response")
    error = fields.get("error")
    return Interaction(
        request=RecordedRequest(
            method=request["method"],
            url=request["url"],
            headers=tuple((name, value) for name, value in request.get("headers", [])),
            body=_decode_bytes(request),
        ),
        response=None
        if response is None
        else RecordedResponse(
            status=int(response["status"]),
            headers=tuple((name, value) for name, value in response.get("headers", [])),
            at=float(response.get("at", 0.0)),
            chunks=tuple(
                RecordedChunk(at=float(chunk["at"]), data=_decode_bytes(chunk))
                for chunk in response.get("chunks", [])
            ),
            error=None if response.get("error") is None else _error_from_json(response["error"]),
            complete=bool(response.get("complete", True)),
        ),
        error=None if error is None else _error_from_json(error),
    )


def _render(value: Any, indent: str = "", key: str | None = None) -> str:
    # Indented JSON, except that each chunk and each header pair stays on one line.
    inner = indent + "  "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {_render(v, inner, k)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and value:
        if key in ("chunks", "headers"):
            items = [inner + json.dumps(item, ensure_ascii=False) for item in value]
        else:
            items = [inner + _render(item, inner) for item in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    return json.dumps(value, ensure_ascii=False)


def save_cassette(path: str | os.PathLike[str], interactions: Iterable[Interaction]) -> None:
    """Write ``interactions`` to the cassette file ``path`` (parent folders created).

    Synchronous on purpose: a worker thread would let an autojump clock run ahead while
    the file is written, and cassettes are small.
    """
    document = {
        "version": CASSETTE_VERSION,
        "interactions": [_interaction_to_json(item) for item in interactions],
    }
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_render(document) + "\n", encoding="utf-8")


def load_cassette(path: str | os.PathLike[str]) -> list[Interaction]:
    """Read the interactions of the cassette file ``path``.

    Raises:
        FileNotFoundError: when there is no such file.
        CassetteError: when the file is not a cassette of this version.
    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        document = json.loads(text)
        if document.get("version") != CASSETTE_VERSION:
            raise CassetteError(
                f"cassette {os.fspath(path)}: version {document.get('version')!r}, "
                f"expected {CASSETTE_VERSION}"
            )
        return [_interaction_from_json(item) for item in document["interactions"]]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CassetteError(f"cassette {os.fspath(path)} is malformed: {exc!r}") from exc


# ---------------------------------------------------------------------------------------
# Matching


def _parsed_body(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return body


def _field(request: RecordedRequest, name: str) -> Any:
    if name == "method":
        return request.method
    if name == "url":
        return request.url
    if name in ("path", "query"):
        url = httpx.URL(request.url)
        return url.path if name == "path" else url.query.decode("ascii", errors="replace")
    return _parsed_body(request.body)


def _first_difference(recorded: Any, got: Any, path: str = "$") -> tuple[str, str, str] | None:
    missing = "(missing)"
    if isinstance(recorded, dict) and isinstance(got, dict):
        for key in [*recorded, *(k for k in got if k not in recorded)]:
            if key not in got or key not in recorded:
                return (
                    f"{path}.{key}",
                    _short(recorded[key]) if key in recorded else missing,
                    _short(got[key]) if key in got else missing,
                )
            found = _first_difference(recorded[key], got[key], f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(got, list):
        for index, (left, right) in enumerate(zip(recorded, got, strict=False)):
            found = _first_difference(left, right, f"{path}[{index}]")
            if found is not None:
                return found
        if len(recorded) != len(got):
            return (f"{path} (length)", str(len(recorded)), str(len(got)))
        return None
    if recorded == got and type(recorded) is type(got):
        return None
    return (path, _short(recorded), _short(got))


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value) if isinstance(value, str | bytes) else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe_difference(name: str, recorded: Any, got: Any) -> str:
    if name == "body":
        found = _first_difference(recorded, got)
        if found is not None:
            where, left, right = found
            return f"body at {where}: recorded {left}, got {right}"
    return f"{name}: recorded {_short(recorded, 200)}, got {_short(got, 200)}"


def _distance(recorded: RecordedRequest, got: RecordedRequest, fields: Sequence[str]) -> float:
    differing = [name for name in fields if _field(recorded, name) != _field(got, name)]
    # Whole fields first; among equals, the more similar body.
    similarity = difflib.SequenceMatcher(None, recorded.body, got.body).quick_ratio()
    return len(differing) + (1 - similarity)


# ---------------------------------------------------------------------------------------
# The transport


class _Entry:
    """An interaction of the cassette and whether it was played."""

    __slots__ = ("interaction", "played")

    def __init__(self, interaction: Interaction) -> None:
        self.interaction = interaction
        self.played = False


class _Recording:
    """An interaction being recorded (its response body still arriving)."""

    def __init__(self, request: RecordedRequest, secrets: list[str], start: float) -> None:
        self.request = request
        self.secrets = secrets
        self.start = start
        self.status = 0
        self.headers: tuple[tuple[str, str], ...] = ()
        self.at = 0.0
        self.chunks: list[RecordedChunk] = []
        self.error: RecordedError | None = None
        self.request_error: RecordedError | None = None
        self.complete = False

    def elapsed(self) -> float:
        return round(trio.current_time() - self.start, _PRECISION)

    @property
    def answered(self) -> bool:
        """Whether the response (or the request's error) arrived."""
        return self.status != 0 or self.request_error is not None

    def interaction(self) -> Interaction:
        if self.request_error is not None:
            return Interaction(request=self.request, error=self.request_error)
        chunks = _redact_chunks(self.chunks, self.secrets)
        headers = list(self.headers)
        if chunks != tuple(self.chunks):
            # Redaction changed the body: keep a stated length true.
            size = str(sum(len(chunk.data) for chunk in chunks))
            headers = [(n, size if n.lower() == "content-length" else v) for n, v in headers]
        return Interaction(
            request=self.request,
            response=RecordedResponse(
                status=self.status,
                headers=_redact_headers(headers, self.secrets),
                at=self.at,
                chunks=chunks,
                error=self.error,
                complete=self.complete,
            ),
        )


def _recorded_error(exc: Exception, at: float, secrets: Sequence[str]) -> RecordedError:
    # What the providers quote: the message, and that of the deepest cause, found as
    # ``connection_error_message`` finds it (a group's first exception counts).
    deepest: BaseException = exc
    seen: set[int] = set()
    while id(deepest) not in seen:
        seen.add(id(deepest))
        cause = deepest.__cause__ or deepest.__context__
        if isinstance(deepest, BaseExceptionGroup) and deepest.exceptions:
            cause = deepest.exceptions[0]
        if cause is None:
            break
        deepest = cause
    cause_text = cause_type = None
    if deepest is not exc:
        cause_text = redact(str(deepest) or type(deepest).__name__, *secrets)
        kind = type(deepest)
        cause_type = (
            kind.__qualname__
            if kind.__module__ == "builtins"
            else (f"{kind.__module__}.{kind.__qualname__}")
        )
    return RecordedError(
        type=type(exc).__name__,
        message=redact(str(exc), *secrets),
        cause=cause_text,
        cause_type=cause_type,
        at=at,
    )


class _Cause(Exception):
    """The recorded deepest cause of a replayed transport error (its class unknown)."""


# Where a recorded cause's class may come from; anything else replays as _Cause.
_CAUSE_MODULES = {"builtins": builtins, "socket": socket, "ssl": ssl}


def _replayed_cause(error: RecordedError) -> BaseException:
    text = error.cause or ""
    module_name, _, name = (error.cause_type or "").rpartition(".")
    module = _CAUSE_MODULES.get(module_name or "builtins")
    kind = getattr(module, name, None) if module is not None else None
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            return kind(text)
        except Exception:
            pass
    return _Cause(text)


def _replayed_error(error: RecordedError, request: httpx.Request) -> httpx.TransportError:
    cls = getattr(httpx, error.type, None)
    if not (isinstance(cls, type) and issubclass(cls, httpx.TransportError)):
        cls = httpx.TransportError
    exc = cls(error.message, request=request)
    if error.cause is not None:
        exc.__cause__ = _replayed_cause(error)
    return exc


class _RecordingStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, recording: _Recording) -> None:
        self._inner = inner
        self._recording = recording

    async def __aiter__(self) -> Any:
        recording = self._recording
        try:
            async for chunk in self._inner:
                recording.chunks.append(RecordedChunk(at=recording.elapsed(), data=bytes(chunk)))
                yield chunk
        except httpx.TransportError as exc:
            recording.error = _recorded_error(exc, recording.elapsed(), recording.secrets)
            recording.complete = True
            raise
        recording.complete = True

    async def aclose(self) -> None:
        await self._inner.aclose()


class _ReplayStream(httpx.AsyncByteStream):
    def __init__(
        self,
        response: RecordedResponse,
        start: float,
        request: httpx.Request,
        pace: bool,
        where: str,
    ) -> None:
        self._response = response
        self._start = start
        self._request = request
        self._pace = pace
        self._where = where

    async def __aiter__(self) -> Any:
        response = self._response
        for chunk in response.chunks:
            await _wait_until(self._start + chunk.at, self._pace)
            yield chunk.data
        if response.error is not None:
            await _wait_until(self._start + response.error.at, self._pace)
            raise _replayed_error(response.error, self._request)
        if not response.complete:
            await trio.lowlevel.checkpoint()
            raise httpx.ReadError(
                f"{self._where}: the recording of this response stopped after "
                f"{len(response.chunks)} chunks (the recording client stopped reading)",
                request=self._request,
            )

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def _wait_until(deadline: float, pace: bool) -> None:
    if pace:
        await trio.sleep_until(deadline)
    else:
        await trio.lowlevel.checkpoint()


class CassetteTransport(httpx.AsyncBaseTransport):
    """An httpx transport that records requests and responses to a cassette file and
    replays them with their timing on Trio's clock.

    Use it as ``httpx.AsyncClient(transport=CassetteTransport(path))`` and hand that
    client to :class:`~trio_agent.models.Models`. What it records is written when the
    transport closes (the client's ``aclose()``), which also raises the first
    :class:`CassetteMismatchError` of the session.

    Each recorded interaction answers one request: identical requests are answered in
    recorded order. Replay is faithful: the status and headers arrive ``at`` seconds
    after the request, each chunk at its recorded offset (``trio.sleep_until`` on Trio's
    clock, so an abort or a cancellation interrupts it like a real read), a body that
    broke off raises the recorded transport error, and a request that failed raises its
    recorded error.

    Args:
        path: The cassette file (JSON).
        mode: The :data:`RecordMode`; ``"once"`` by default.
        transport: The transport that reaches the network when recording; by default an
            ``httpx.AsyncHTTPTransport()``. It is closed with this one.
        match_on: What must be equal for a recorded request to match: ``"method"``,
            ``"url"`` (the whole redacted URL), ``"path"``, ``"query"``, ``"body"`` (JSON
            bodies compared as values).
        secrets: More secrets to redact when recording (the credential headers, the URL's
            credentials and the providers' environment keys are always redacted).
        pace: Replay at the recorded times (default); ``False`` replays as fast as
            possible (one checkpoint per chunk).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mode: RecordMode = "once",
        transport: httpx.AsyncBaseTransport | None = None,
        match_on: Sequence[MatchField] = ("method", "url", "body"),
        secrets: Sequence[str] = (),
        pace: bool = True,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {', '.join(_MODES)}, not {mode!r}")
        unknown = [name for name in match_on if name not in _MATCH_FIELDS]
        if unknown:
            raise ValueError(f"unknown match_on fields {unknown}; known: {_MATCH_FIELDS}")
        self.path = Path(path)
        """The cassette file."""
        self.mode: RecordMode = mode
        """The record mode."""
        self.match_on: tuple[MatchField, ...] = tuple(match_on)
        """The fields a recorded request must share with a request to answer it."""
        self.pace = pace
        """Whether replay follows the recorded times."""
        self._inner = transport
        self._secrets = list(secrets)
        self._existed = self.path.exists()
        loaded = load_cassette(self.path) if self._existed and mode != "all" else []
        self._entries = [_Entry(interaction) for interaction in loaded]
        self._recordings: list[_Recording] = []
        self._errors: list[CassetteMismatchError] = []
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"<CassetteTransport {os.fspath(self.path)!r} mode={self.mode!r} "
            f"played={self.play_count}/{len(self._entries)} recorded={len(self._recordings)}>"
        )

    @property
    def interactions(self) -> list[Interaction]:
        """The loaded interactions, then those recorded so far (a request still waiting
        for its response is left out)."""
        return [entry.interaction for entry in self._entries] + [
            recording.interaction() for recording in self._recordings if recording.answered
        ]

    @property
    def play_count(self) -> int:
        """How many recorded interactions have answered a request."""
        return sum(entry.played for entry in self._entries)

    @property
    def recording(self) -> bool:
        """Whether a request without a match is recorded (rather than an error)."""
        return self.mode in ("all", "new_episodes") or (self.mode == "once" and not self._existed)

    def assert_all_played(self) -> None:
        """Assert that every loaded interaction answered a request.

        Raises:
            AssertionError: naming the interactions never played.
        """
        unplayed = [
            f"#{index} {entry.interaction.request.method} {entry.interaction.request.url}"
            for index, entry in enumerate(self._entries)
            if not entry.played
        ]
        if unplayed:
            raise AssertionError(
                f"cassette {os.fspath(self.path)}: {len(unplayed)} recorded "
                f"interaction(s) never played: {', '.join(unplayed)}"
            )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Answer ``request`` from the cassette, or record it (see the class)."""
        if self._closed:
            raise RuntimeError("the cassette transport is closed")
        await request.aread()
        redacted = redact_request(request, self._secrets)
        if self.mode != "all":
            entry = self._find(redacted)
            if entry is not None:
                entry.played = True
                return await self._replay(entry.interaction, request)
        if not self.recording:
            error = self._mismatch(redacted)
            self._errors.append(error)
            raise error
        return await self._record(request, redacted)

    async def aclose(self) -> None:
        """Close the recording transport, write what was recorded, and raise the first
        :class:`CassetteMismatchError` of the session, if there was one."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._inner is not None:
                await self._inner.aclose()
            else:
                await trio.lowlevel.checkpoint()
        finally:
            if self._recordings:
                save_cassette(self.path, self.interactions)
        if self._errors:
            raise self._errors[0]

    # -- replay ---------------------------------------------------------------------

    def _find(self, request: RecordedRequest) -> _Entry | None:
        for entry in self._entries:
            if not entry.played and all(
                _field(entry.interaction.request, name) == _field(request, name)
                for name in self.match_on
            ):
                return entry
        return None

    def _mismatch(self, request: RecordedRequest) -> CassetteMismatchError:
        where = f"cassette {os.fspath(self.path)}"
        head = (
            f"{where} (mode {self.mode!r}) has no recorded response for "
            f"{request.method} {request.url}"
        )
        if not self._entries:
            reason = "it holds no interactions" if self._existed else "the file does not exist"
            return CassetteMismatchError(f"{head}: {reason}")
        index, entry = min(
            enumerate(self._entries),
            key=lambda item: _distance(item[1].interaction.request, request, self.match_on),
        )
        closest = entry.interaction.request
        differences = [
            _describe_difference(name, _field(closest, name), _field(request, name))
            for name in self.match_on
            if _field(closest, name) != _field(request, name)
        ]
        if not differences:
            differences = [
                "none, but it was already played (each recorded response answers one "
                "request; record again with mode 'new_episodes' or 'all')"
            ]
        lines = [head, f"closest recorded request: #{index} {closest.method} {closest.url}"]
        lines += [f"difference: {text}" for text in differences]
        return CassetteMismatchError("\n".join(lines))

    async def _replay(self, interaction: Interaction, request: httpx.Request) -> httpx.Response:
        start = trio.current_time()
        if interaction.response is None:
            error = interaction.error or RecordedError(type="TransportError", message="")
            await _wait_until(start + error.at, self.pace)
            raise _replayed_error(error, request)
        response = interaction.response
        await _wait_until(start + response.at, self.pace)
        stream = _ReplayStream(response, start, request, self.pace, f"cassette {self.path}")
        return httpx.Response(
            response.status, headers=list(response.headers), stream=stream, request=request
        )

    # -- recording ------------------------------------------------------------------

    async def _record(self, request: httpx.Request, redacted: RecordedRequest) -> httpx.Response:
        if self._inner is None:
            self._inner = httpx.AsyncHTTPTransport()
        headers = _header_pairs(request.headers)
        url = str(request.url)
        secrets = [*_header_secrets(headers), *url_secrets(url), *_known_secrets(self._secrets)]
        recording = _Recording(redacted, secrets, trio.current_time())
        self._recordings.append(recording)
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.TransportError as exc:
            recording.request_error = _recorded_error(exc, recording.elapsed(), secrets)
            raise
        recording.status = response.status_code
        recording.headers = tuple(_header_pairs(response.headers))
        recording.at = recording.elapsed()
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_RecordingStream(response.stream, recording),
            extensions=response.extensions,
            request=request,
        )
