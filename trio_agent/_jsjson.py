"""JavaScript-compatible formatting: ``String(number)`` and ``JSON.stringify``.

Upstream compares tool declarations by their ``JSON.stringify`` text and words validation
errors with JavaScript number formatting; both need the exact JavaScript output.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final

__all__ = [
    "MAX_ARGUMENTS_DEPTH",
    "MAX_DEPTH",
    "UNDEFINED",
    "depth_exceeds",
    "js_number",
    "js_stringify",
    "js_truthy",
]

MAX_DEPTH: Final = 200
"""The deepest nesting of objects and arrays in one JSON document that trio_agent reads or
writes (a transcript line, a serialized value).

Python's JSON parser, cattrs and every recursive walk over the data use the interpreter's
stack (about 1,000 frames by default, a few per level); below this depth they all have
room to spare, so deeper data is refused with a clear error instead of a
``RecursionError`` half-way.
"""


MAX_ARGUMENTS_DEPTH: Final = 100
"""The deepest nesting of a tool call's arguments (the arguments object is level 1).

Deeper arguments are invalid arguments, reported to the model as such. Half of
:data:`MAX_DEPTH`, so that a message holding them can always be written and read back.
"""


UNDEFINED: Final[Any] = object()
"""A missing member, JavaScript's ``undefined`` (where upstream tells it from ``null``)."""


def js_truthy(value: Any) -> bool:
    """JavaScript truthiness of a JSON value: empty objects and arrays are true;
    :data:`UNDEFINED`, ``None``, ``False``, ``0`` and ``""`` are false."""
    if value is UNDEFINED:
        return False
    if isinstance(value, dict | list):
        return True
    return bool(value)


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests dicts, lists and tuples more than ``limit`` levels deep
    (a scalar is level 0, ``{}`` and ``[]`` are level 1). Iterative, so it works on any
    depth; a cyclic value counts as too deep."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        depth += 1
        if depth > limit:
            return True
        stack.extend((child, depth) for child in children)
    return False


def js_number(value: int | float) -> str:
    """Format a number as JavaScript's ``String(number)`` does (``1.0`` -> ``"1"``,
    ``1e21`` -> ``"1e+21"``, ``1e-7`` -> ``"1e-7"``)."""
    if isinstance(value, int) and abs(value) < 10**21:
        return str(value)
    try:
        number = float(value)
    except OverflowError:  # an int beyond the float range is Infinity in JavaScript
        number = math.inf if value > 0 else -math.inf
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    # repr() gives the shortest digits that round-trip, as JavaScript does; only the
    # layout differs.
    _, digit_tuple, exponent = Decimal(repr(abs(number))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    # value = 0.<digits> * 10**point
    point = len(digit_tuple) + exponent
    k = len(digits)
    if k <= point <= 21:
        text = digits + "0" * (point - k)
    elif 0 < point <= 21:
        text = f"{digits[:point]}.{digits[point:]}"
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    else:
        exp = point - 1
        mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        text = f"{mantissa}e{'+' if exp >= 0 else '-'}{abs(exp)}"
    return sign + text


def _is_array_index(key: str) -> bool:
    return key.isdigit() and key.isascii() and str(int(key)) == key and int(key) < 2**32 - 1


def js_stringify(
    value: Any,
    *,
    indent: int | None = None,
    default: Callable[[Any], Any] | None = None,
    exact_ints: bool = False,
) -> str:
    """Serialize ``value`` as JavaScript's ``JSON.stringify`` would (key order kept).

    JavaScript objects list integer-like keys first in ascending order, so those are
    reordered the same way; ints outside the exact double range are rounded like a JSON
    parser in JavaScript would have done; non-finite floats become ``null``.

    Args:
        value: JSON-like data: ``None``, bools, numbers, strings, mappings with string
            keys, lists and tuples.
        indent: Like ``JSON.stringify(value, null, indent)``: each member on its own line,
            indented by this many spaces per level (at most 10), ``": "`` after keys, and
            ``{}`` / ``[]`` for empty containers. ``None`` or ``0`` gives compact output.
        default: Called with a value of any other type; its result is written instead.
        exact_ints: Write every ``int`` with all its digits, as a JSON parser in Python
            reads it back, instead of rounding those beyond 2**53 to the nearest double.

    Raises:
        TypeError: a mapping key is not a string, or a value has another type and no
            ``default`` is given.
    """
    gap = " " * min(indent, 10) if indent else ""
    return _stringify(value, gap, "\n", default, exact_ints)


def _stringify(
    value: Any,
    gap: str,
    newline: str,
    default: Callable[[Any], Any] | None,
    exact_ints: bool = False,
) -> str:
    """``newline`` is the line break plus the indentation of the current level."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        if exact_ints or abs(value) < 2**53:
            return int.__repr__(value)  # not str(): an IntEnum's str() is its name
        try:
            return js_number(float(value))
        except OverflowError:
            return "null"  # JavaScript would have parsed it as Infinity
    if isinstance(value, float):
        return js_number(value) if math.isfinite(value) else "null"
    inner = newline + gap
    if isinstance(value, Mapping):
        keys = list(value)
        for key in keys:
            if not isinstance(key, str):
                raise TypeError(f"cannot write a non-string key {key!r} as JSON")
        if not keys:
            return "{}"
        index_keys = sorted((k for k in keys if _is_array_index(k)), key=int)
        ordered = index_keys + [k for k in keys if not _is_array_index(k)]
        colon = ": " if gap else ":"
        members = [
            json.dumps(k, ensure_ascii=False)
            + colon
            + _stringify(value[k], gap, inner, default, exact_ints)
            for k in ordered
        ]
        return _wrap("{", members, "}", gap, newline, inner)
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        items = [_stringify(item, gap, inner, default, exact_ints) for item in value]
        return _wrap("[", items, "]", gap, newline, inner)
    if default is not None:
        return _stringify(default(value), gap, newline, default, exact_ints)
    raise TypeError(f"cannot write {type(value).__name__!r} values as JSON")


def _wrap(open_: str, parts: list[str], close: str, gap: str, newline: str, inner: str) -> str:
    if not gap:
        return open_ + ",".join(parts) + close
    return open_ + inner + ("," + inner).join(parts) + newline + close
