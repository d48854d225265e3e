"""JSON values in JavaScript terms, and the coercions of tool arguments.

Upstream validates tool arguments in JavaScript, so "a number", "an integer" and "equal"
mean what they mean there (``1.0`` is an integer, ``1`` equals ``1.0`` but not ``true``),
and strings become numbers as ``Number(text)`` reads them (as pi 1.6.0 does). The
schema walker of :mod:`trio_agent._validation` applies these per node.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final, TypeGuard

from ._jsjson import js_number

__all__: list[str] = []  # helpers of trio_agent._validation only


class _Unset:
    """Marks "no value" (an unresolved reference, a coercion that does not apply)."""


_UNSET: Final = _Unset()


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_integral(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


def _type_name(value: Any) -> str:
    """The JSON type of a value; integral numbers are ``integer`` (JavaScript has one
    number type, so ``1.0`` counts as an integer, as upstream)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if _is_number(value):
        return "integer" if _is_integral(value) else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _has_type(value: Any, type_name: Any) -> bool:
    if type_name == "number":
        return _is_number(value)
    if type_name == "integer":
        return _is_integral(value)
    return bool(_type_name(value) == type_name)


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value (``1 == 1.0``), booleans distinct from numbers,
    objects regardless of key order."""
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


# ``[0-9]``, not ``\d``: JavaScript's ``Number("١٢")`` is NaN, while Python's ``\d`` (and
# ``int``/``float``) accept the digits of every script.
_NUMERIC: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER_TEXT: Final = re.compile(r"[+-]?[0-9]+")
_PREFIXED: Final = re.compile(r"0(?:[xX]([0-9a-fA-F]+)|[bB]([01]+)|[oO]([0-7]+))")
_BIGINT_TEXT: Final = re.compile(r"([+-]?[0-9]+)n")
_MAX_SAFE_INTEGER: Final = 2**53 - 1
# What JavaScript's ``Number()`` (and ``String.prototype.trim``) treat as white space:
# ECMAScript's WhiteSpace (tab, vertical tab, form feed, U+FEFF and every "Zs" space) and
# LineTerminator characters. Not Python's ``str.strip()``, which also strips U+001C to
# U+001F and U+0085 but keeps U+FEFF.
_JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def _js_trim(text: str) -> str:
    return text.strip(_JS_WHITESPACE)


def _parse_numeric(text: str) -> int | float | _Unset:
    """A string as JavaScript's ``Number(text)`` reads it, or ``_UNSET`` for NaN and the
    infinities (as pi 1.6.0 does).

    Surrounding JavaScript white space is ignored and blank text is ``0``; unsigned
    ``0x``/``0b``/``0o`` prefixes select base 16, 2 or 8; decimal text may carry a sign,
    a fraction and an exponent. Integral text stays an ``int`` (exact, as long as
    JavaScript's would be exact too).
    """
    text = _js_trim(text)
    if not text:
        return 0
    prefixed = _PREFIXED.fullmatch(text)
    if prefixed is not None:
        hex_digits, bin_digits, oct_digits = prefixed.groups()
        if hex_digits is not None:
            number = int(hex_digits, 16)
        elif bin_digits is not None:
            number = int(bin_digits, 2)
        else:
            number = int(oct_digits, 8)
        if number <= _MAX_SAFE_INTEGER:
            return number
        try:
            return float(number)  # JavaScript's Number() rounds to a double
        except OverflowError:
            return _UNSET  # Infinity
    if not _NUMERIC.fullmatch(text):
        return _UNSET
    if _INTEGER_TEXT.fullmatch(text):
        return int(text)
    number_ = float(text)
    return number_ if math.isfinite(number_) else _UNSET


# ---------------------------------------------------------------------------------------
# Conversions


def _convert_primitive(value: Any, type_name: str) -> Any:
    """Pass 2 (TypeBox-style) conversion of a primitive to ``type_name``; returns
    ``value`` unchanged when it already has the type or cannot be converted."""
    if type_name == "string":
        if isinstance(value, bool):
            return "true" if value else "false"
        if _is_number(value):
            return js_number(value)
        if value is None:
            return "null"
    elif type_name in ("number", "integer"):
        number: Any = value
        if isinstance(value, bool):
            number = int(value)
        elif value is None:
            number = 0
        elif isinstance(value, str):
            number = _parse_numeric(value)
            if number is _UNSET:
                lowered = value.lower()
                bigint = _BIGINT_TEXT.fullmatch(value)
                if lowered in ("true", "false"):
                    number = int(lowered == "true")
                elif bigint is not None and abs(int(bigint.group(1))) <= _MAX_SAFE_INTEGER:
                    number = int(bigint.group(1))
                else:
                    return value
        if type_name == "integer" and isinstance(number, float) and math.isfinite(number):
            truncated = math.trunc(number)
            # Beyond 2**53 every float is integral already; keep it a float rather
            # than invent digits.
            return truncated if abs(truncated) <= _MAX_SAFE_INTEGER else number
        return number
    elif type_name == "boolean":
        if isinstance(value, str):
            lowered = value.lower()
            if lowered in ("true", "1"):
                return True
            if lowered in ("false", "0"):
                return False
        elif _is_number(value) and value in (0, 1):
            return value == 1
        elif value is None:
            return False
    elif type_name == "null":
        if value is False or (_is_number(value) and value == 0):
            return None
        if isinstance(value, str) and value.lower() in ("", "0", "null", "undefined"):
            return None
    return value


def _coerce_primitive(value: Any, type_name: Any) -> Any:
    """Pass 3 (AJV-style) coercion of a primitive to ``type_name``; ``_UNSET`` when it
    does not apply."""
    if type_name in ("number", "integer"):
        number: Any = _UNSET
        if value is None:
            number = 0
        elif isinstance(value, bool):
            number = int(value)
        elif isinstance(value, str) and _js_trim(value):
            # Blank text is 0 for a single type (pass 2) but not for a type list (as
            # upstream).
            number = _parse_numeric(value)
        if type_name == "integer" and number is not _UNSET:
            if not _is_integral(number):
                return _UNSET
            return int(number)
        return number
    if type_name == "boolean":
        if value is None or value == "false" or (_is_number(value) and value == 0):
            return False
        if value == "true" or (_is_number(value) and value == 1):
            return True
    elif type_name == "string":
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if _is_number(value):
            return js_number(value)
    elif type_name == "null" and (
        value == "" or value is False or (_is_number(value) and value == 0)
    ):
        return None
    return _UNSET


def _literal_type(literal: Any) -> str | None:
    if literal is None:
        return "null"
    if isinstance(literal, bool):
        return "boolean"
    if _is_number(literal):
        return "number"
    if isinstance(literal, str):
        return "string"
    return None
