"""JavaScript-compatible formatting: ``String(number)`` and ``JSON.stringify``.

Upstream compares tool declarations by their ``JSON.stringify`` text and words validation
errors with JavaScript number formatting; both need the exact JavaScript output.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

__all__ = ["js_number", "js_stringify"]


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


def js_stringify(value: Any) -> str:
    """Serialize ``value`` as JavaScript's ``JSON.stringify`` would (compact, key order kept).

    JavaScript objects list integer-like keys first in ascending order, so those are
    reordered the same way; ints outside the exact double range are rounded like a JSON
    parser in JavaScript would have done.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        if abs(value) < 2**53:
            return str(value)
        try:
            return js_number(float(value))
        except OverflowError:
            return "null"  # JavaScript would have parsed it as Infinity
    if isinstance(value, float):
        return js_number(value) if math.isfinite(value) else "null"
    if isinstance(value, Mapping):
        keys = list(value)
        for key in keys:
            if not isinstance(key, str):
                raise TypeError(f"cannot write a non-string key {key!r} as JSON")
        index_keys = sorted((k for k in keys if _is_array_index(k)), key=int)
        ordered = index_keys + [k for k in keys if not _is_array_index(k)]
        members = (f"{json.dumps(k, ensure_ascii=False)}:{js_stringify(value[k])}" for k in ordered)
        return "{" + ",".join(members) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_stringify(item) for item in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__!r} values as JSON")
