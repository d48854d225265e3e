"""Keeping secrets out of text: error messages, reprs and log lines.

:func:`redact` replaces known secrets (API keys, credential header values) in a text,
in every form a server or a library may have written them: as they are, JSON-escaped
(``\\/``, ``\\uXXXX``), percent-encoded, or in Python's ``repr`` escapes. It also removes
a prefix of a secret that a cut left at the end of a text or before a ``[truncated N
chars]`` marker.

:func:`redact_url` shows a URL without the credentials it may carry: the userinfo, query
values with credential-like names or key-like values, path segments that look like keys,
and any known secret.

:func:`is_credential_header` is the one rule for which headers carry credentials: their
values are hidden in reprs (:func:`redact_headers_repr`) and redacted from every error text
(:func:`header_secrets`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "header_secrets",
    "is_credential_header",
    "looks_like_secret",
    "redact_headers_repr",
    "redact",
    "redact_url",
    "url_secrets",
]

REDACTED = "[REDACTED]"
"""What a secret is replaced with."""

MIN_SECRET_LENGTH = 8
"""Shorter "keys" are placeholders for local servers (e.g. ``"x"``); replacing them would
garble messages without protecting anything."""

# The shortest prefix of a secret removed before a cut: shorter ones are indistinguishable
# from ordinary text (and reveal too little to matter).
_MIN_PREFIX = 8
_CUT_MARKER = re.compile(r"(?:…|\.\.\.) \[truncated \d+ chars\]")
_CREDENTIAL_NAMES = re.compile(
    r"(?i)(key|token|secret|password|passwd|pwd|auth|sig|signature|credential|session)"
)
_KEY_LIKE = re.compile(r"[A-Za-z0-9_\-.~+/=:]{20,}")


def _char_forms(char: str) -> list[str]:
    # Every spelling of one character that JSON, URL encoding or a repr may produce.
    code = ord(char)
    forms = {re.escape(char)}
    if code > 0xFFFF:
        high = 0xD800 + ((code - 0x10000) >> 10)
        low = 0xDC00 + ((code - 0x10000) & 0x3FF)
        forms.add(rf"\\u(?i:{high:04x})\\u(?i:{low:04x})")
    else:
        forms.add(rf"\\u(?i:{code:04x})")
    if char in '"\\/':
        forms.add(re.escape("\\" + char))
    for encoded in {quote(char, safe=""), quote_plus(char, safe="")}:
        if encoded != char:
            forms.add("".join(f"(?i:{re.escape(part)})" for part in encoded))
    escaped = repr(char)[1:-1]
    if escaped != char:
        forms.add(re.escape(escaped))
    return sorted(forms, key=len, reverse=True)


@functools.lru_cache(maxsize=64)
def _secret_pattern(secret: str) -> re.Pattern[str]:
    return re.compile("".join(f"(?:{'|'.join(_char_forms(char))})" for char in secret))


def _cut_prefix_end(text: str, end: int, secret: str) -> int:
    # The start of the longest prefix of ``secret`` (>= _MIN_PREFIX) ending at ``end``.
    for length in range(min(len(secret) - 1, end), _MIN_PREFIX - 1, -1):
        if text.startswith(secret[:length], end - length):
            return end - length
    return end


def redact(text: str, *secrets: str | None) -> str:
    """Replace every occurrence of each secret in ``text`` with ``[REDACTED]``.

    Escaped and encoded forms count (JSON ``\\/`` and ``\\uXXXX``, percent-encoding,
    Python ``repr`` escapes), and so does a prefix of a secret that ends the text or
    stands before a ``[truncated N chars]`` marker, as a cut leaves it. Secrets shorter
    than :data:`MIN_SECRET_LENGTH` are left alone.
    """
    for secret in secrets:
        if not secret or len(secret) < MIN_SECRET_LENGTH:
            continue
        text = _secret_pattern(secret).sub(REDACTED, text)
        cuts = [match.start() for match in _CUT_MARKER.finditer(text)]
        # From the end backwards: a replacement moves only what comes after it.
        for end in [len(text), *reversed(cuts)]:
            start = _cut_prefix_end(text, end, secret)
            if start < end:
                text = text[:start] + REDACTED + text[end:]
    return text


def looks_like_secret(value: str) -> bool:
    """Whether ``value`` looks like an API key: 20+ URL-safe characters mixing letters and
    digits."""
    return (
        _KEY_LIKE.fullmatch(value) is not None
        and any(char.isdigit() for char in value)
        and any(char.isalpha() for char in value)
    )


def _redact_query(query: str) -> str:
    parts = []
    for item in query.split("&"):
        name, sep, value = item.partition("=")
        if sep and value and (_CREDENTIAL_NAMES.search(name) or looks_like_secret(value)):
            value = REDACTED
        parts.append(f"{name}{sep}{value}")
    return "&".join(parts)


def url_secrets(url: str) -> list[str]:
    """The parts of ``url`` that :func:`redact_url` hides (to redact them elsewhere)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [value for value in (parts.username, parts.password) if value]
    for item in parts.query.split("&"):
        name, sep, value = item.partition("=")
        if sep and value and (_CREDENTIAL_NAMES.search(name) or looks_like_secret(value)):
            found.append(value)
    found += [segment for segment in parts.path.split("/") if looks_like_secret(segment)]
    return found


def redact_url(url: str, *secrets: str | None) -> str:
    """``url`` without the credentials it may carry (for reprs, logs and messages).

    Hides the userinfo, query values whose name suggests a credential or whose value
    looks like a key, path segments that look like keys, and every known ``secret``.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url, *secrets)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    path = "/".join(
        REDACTED if looks_like_secret(segment) else segment for segment in parts.path.split("/")
    )
    shown = urlunsplit((parts.scheme, netloc, path, _redact_query(parts.query), parts.fragment))
    return redact(shown, *secrets)


# Authorization, Proxy-Authorization, cf-aig-authorization, x-api-key, api-key (Azure),
# x-goog-api-key, Ocp-Apim-Subscription-Key, X-Auth-Token, x-amz-security-token, Cookie...
_CREDENTIAL_HEADER = re.compile(
    r"(?i)(auth|key|token|secret|cookie|passw(or)?d|credential|signature)"
)
# An auth scheme before the credential: "Bearer KEY", "Basic ...", "token KEY".
_AUTH_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*[ ]+(\S.*)")


def is_credential_header(name: str) -> bool:
    """Whether a header named ``name`` carries a credential.

    The one rule for headers: a name containing ``auth``, ``key``, ``token``, ``secret``,
    ``cookie``, ``password``/``passwd``, ``credential`` or ``signature`` (any case), e.g.
    ``Authorization``, ``x-api-key``, Azure's ``api-key``, ``Ocp-Apim-Subscription-Key``,
    ``X-Auth-Token``. Their values are hidden in reprs and redacted from error texts.
    """
    return _CREDENTIAL_HEADER.search(name) is not None


def header_secrets(headers: Mapping[str, str | None] | None) -> list[str]:
    """The secrets of the credential headers (:func:`is_credential_header`) in ``headers``:
    each value, and for a value with an auth scheme (``Bearer KEY``) the part after it,
    which a server may echo alone."""
    found: list[str] = []
    for name, value in (headers or {}).items():
        if not value or not is_credential_header(name):
            continue
        found.append(value)
        scheme = _AUTH_SCHEME.fullmatch(value)
        if scheme is not None:
            found.append(scheme.group(1))
    return found


def redact_headers_repr(headers: Mapping[str, str | None] | None) -> str:
    """The ``repr`` of a header mapping with the values of credential headers
    (:func:`is_credential_header`) hidden."""
    if headers is None:
        return "None"
    shown = {
        name: REDACTED if is_credential_header(name) else value for name, value in headers.items()
    }
    return repr(shown)
