"""JSON-Schema ``format`` checks and ECMAScript-style ``pattern`` matching, for
:mod:`trio_agent._validation`."""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable
from typing import Any, Final

__all__ = ["FORMATS", "search"]


# ``[0-9]``, not ``\d``: Python's ``\d`` also matches other scripts' digits ("٢٠٢٤").
_DATE: Final = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME: Final = re.compile(
    r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?(?:[zZ]|[+-]([0-9]{2}):([0-9]{2}))?"
)
_EMAIL: Final = re.compile(
    r"[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
    r"(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*"
)
_URI: Final = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:[^\s]*")
_UUID: Final = re.compile(r"(?:urn:uuid:)?[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_HOSTNAME: Final = re.compile(
    r"(?=.{1,253}\.?$)[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
    r"(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*\.?"
)
_DAYS_IN_MONTH: Final = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _is_date(text: str) -> bool:
    match = _DATE.fullmatch(text)
    if match is None:
        return False
    year, month, day = (int(part) for part in match.groups())
    if not 1 <= month <= 12 or day < 1:
        return False
    if month == 2 and day == 29:
        return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return day <= _DAYS_IN_MONTH[month - 1]


def _is_time(text: str, *, require_zone: bool) -> bool:
    match = _TIME.fullmatch(text)
    if match is None:
        return False
    hour, minute, second = int(match[1]), int(match[2]), int(match[3])
    if require_zone and text[-1] not in "zZ" and match[4] is None:
        return False
    if match[4] is not None and (int(match[4]) > 23 or int(match[5]) > 59):
        return False
    return hour <= 23 and minute <= 59 and second <= 60  # 60: leap second


def _is_ip(text: str, version: int) -> bool:
    if "%" in text:  # zone ids are not part of the format
        return False
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return address.version == version


def _is_regex(text: str) -> bool:
    return _compile_pattern(text) is not None


FORMATS: Final[dict[str, Callable[[str], bool]]] = {
    "date-time": lambda s: (
        len(s) > 10 and s[10] in "tT " and _is_date(s[:10]) and _is_time(s[11:], require_zone=True)
    ),
    "date": _is_date,
    "time": lambda s: _is_time(s, require_zone=False),
    "email": lambda s: _EMAIL.fullmatch(s) is not None,
    "uri": lambda s: _URI.fullmatch(s) is not None,
    "uuid": lambda s: _UUID.fullmatch(s) is not None,
    "ipv4": lambda s: _is_ip(s, 4),
    "ipv6": lambda s: _is_ip(s, 6),
    "hostname": lambda s: _HOSTNAME.fullmatch(s) is not None,
    "regex": _is_regex,
}

_NAMED_GROUP: Final = re.compile(r"\(\?<(?=[A-Za-z_])")


def _translate(pattern: str) -> str:
    """Rewrite the ECMAScript constructs whose :mod:`re` meaning differs silently.

    * ``\\d`` is ASCII-only in ECMAScript but matches any Unicode digit in :mod:`re`: it
      becomes ``[0-9]`` (``0-9`` inside a character class).
    * A final ``$`` means the end of the input in ECMAScript (without the ``m`` flag) but
      also matches before a trailing newline in :mod:`re`: it becomes ``\\Z``.

    Everything else is passed through; escapes are copied whole so that ``\\\\d`` (a
    literal backslash and ``d``) and ``\\$`` stay as they are.
    """
    if "\\d" not in pattern and not pattern.endswith("$"):
        return pattern
    out: list[str] = []
    in_class = False
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            escape = pattern[i : i + 2]
            if escape == "\\d":
                escape = "0-9" if in_class else "[0-9]"
            out.append(escape)
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
            # As in :mod:`re`, a ``]`` right after ``[`` or ``[^`` is a literal member.
            start = i + 2 if pattern.startswith("[^", i) else i + 1
            if pattern.startswith("]", start):
                out.append(pattern[i : start + 1])
                i = start + 1
                continue
        elif ch == "$" and i == n - 1:
            ch = "\\Z"
        out.append(ch)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=512)
def _compile_pattern(pattern: str) -> re.Pattern[str] | None:
    """Compile an ECMAScript-style pattern with :mod:`re`; ``None`` if it cannot be."""
    try:
        return re.compile(_NAMED_GROUP.sub("(?P<", _translate(pattern)))
    except (re.error, RecursionError):
        return None


def search(pattern: Any, text: str) -> bool | None:
    """Whether ``pattern`` matches somewhere in ``text``; ``None`` for a bad pattern."""
    compiled = _compile_pattern(pattern) if isinstance(pattern, str) else None
    if compiled is None:
        return None
    return compiled.search(text) is not None
