"""What a cassette holds and how it is written: the recorded values, their redaction,
and the JSON file (indented, one line per body chunk).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx

from .._redaction import (
    _CREDENTIAL_NAMES,  # the credential-name rule of query strings, reused for JSON keys
    REDACTED,
    is_credential_header,
    looks_like_secret,
    redact,
    redact_url,
    url_secrets,
)
from ..models._http import ENV_API_KEYS

__all__ = [
    "CASSETTE_VERSION",
    "CassetteError",
    "Interaction",
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


class CassetteError(Exception):
    """A cassette file cannot be read, or a cassette cannot answer a request."""


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
        if is_credential_header(name) and value:
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
        (name, REDACTED if is_credential_header(name) else redact(value, *secrets))
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
