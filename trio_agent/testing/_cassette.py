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
anything is written (see :mod:`._cassette_file`). The record modes are vcrpy's.
"""

from __future__ import annotations

import builtins
import difflib
import json
import os
import socket
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

import httpx
import trio

from .._redaction import redact, url_secrets
from ._cassette_file import (
    CassetteError,
    Interaction,
    RecordedChunk,
    RecordedError,
    RecordedRequest,
    RecordedResponse,
    _header_pairs,
    _header_secrets,
    _known_secrets,
    _redact_chunks,
    _redact_headers,
    load_cassette,
    redact_request,
    save_cassette,
)

__all__ = [
    "CassetteMismatchError",
    "CassetteTransport",
    "MatchField",
    "RecordMode",
]

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


class CassetteMismatchError(CassetteError):
    """No recorded request matches a request (and the mode does not record).

    The message names the closest recorded request and how it differs. Providers report
    failures in-band, so this error also ends the provider's stream as an ``error``
    event; :meth:`CassetteTransport.aclose` raises it again, so the test fails.
    """


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
        self._closed = False

    async def __aiter__(self) -> Any:
        response = self._response
        for chunk in response.chunks:
            if self._closed:
                # As a real connection: once the response is closed, reading fails at
                # once (instead of replaying the rest at its pace).
                raise httpx.ReadError(
                    f"{self._where}: the response was closed", request=self._request
                )
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
        self._closed = True
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
