"""The compiled fast path of tool-argument validation agrees with the interpreter.

A plain schema gets a plan (closures compiled once per schema object) that copies
arguments fitting it exactly and leaves everything else to the interpreter. These tests
compare ``validate_tool_arguments`` with the plan against the interpreter alone: on the
existing validation tests (run again with the plan disabled, see ``interpreter_only``),
on fixed cases and on random plain schemas with random JSON arguments.
"""

from __future__ import annotations

import copy
import pathlib
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loop_helpers import make_tool, noop_execute

from trio_agent import ToolArgumentsError, ToolCall, _validation, validate_tool_arguments


def _outcome(schema: dict[str, Any], arguments: Any, *, compiled: bool) -> tuple[str, Any]:
    tool = make_tool("t", noop_execute, parameters=schema)
    call = ToolCall(id="c", name="t", arguments=arguments)
    saved = _validation._compiled
    if not compiled:
        _validation._compiled = lambda schema: None
    try:
        return "ok", validate_tool_arguments(tool, call)
    except ToolArgumentsError as exc:
        return "error", str(exc)
    finally:
        _validation._compiled = saved


def _agree(schema: dict[str, Any], arguments: Any) -> tuple[str, Any]:
    before = copy.deepcopy(arguments)
    expected = _outcome(schema, arguments, compiled=False)
    actual = _outcome(schema, arguments, compiled=True)
    assert actual == expected
    assert repr(actual) == repr(expected)  # 1 and 1.0, True and 1 told apart
    assert arguments == before  # never modified
    return actual


_READ = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "file"},
        "offset": {"type": "integer"},
        "limit": {"type": "number"},
        "mode": {"type": "string", "enum": ["r", "rb"]},
        "flags": {"type": "array", "items": {"type": "boolean"}},
        "meta": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
        "any": {},
    },
    "required": ["path"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "arguments",
    [
        {"path": "a"},
        {"path": "a", "offset": 3, "limit": 2.5, "mode": "rb", "flags": [True, False]},
        {"path": "a", "meta": {"x": "1", "y": None}, "any": {"deep": [1, {"z": None}]}},
        {"path": "a", "offset": 1.0},  # converted to 1 by the interpreter
        {"path": "a", "offset": "7"},  # coerced
        {"path": "a", "offset": True},
        {"path": 3},
        {"path": "a", "mode": "w"},
        {"path": "a", "flags": "true"},  # wrapped and coerced
        {"path": "a", "extra": 1},
        {"path": "a", "offset": None},  # an optional null, dropped
        {"offset": 1},
        {"path": "a", "meta": {"x": 1}},
        {"path": "a", "limit": float("nan")},
        {1: "a", "path": "b"},
        [],
    ],
)
def test_fixed_cases_agree(arguments: Any) -> None:
    _agree(_READ, arguments)


def test_plain_arguments_take_the_plan() -> None:
    plan = _validation._compiled(_READ)
    assert plan is not None
    value: dict[str, Any] = {"path": "a", "any": {"deep": [1, {"z": None}]}}
    copied = plan(value)
    assert copied == value
    assert copied["any"]["deep"][1] is not value["any"]["deep"][1]
    with pytest.raises(_validation._NotPlain):
        plan({"path": "a", "offset": 1.0})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}},
        {"type": "object", "properties": {"a": False}},
        {"type": "object", "properties": {"a": {"type": "string", "format": "email"}}},
        {"type": "object", "properties": {"a": {"enum": [1, "1"]}}},
        {"type": "object", "properties": {"a": {"type": []}}},
        {"type": "object", "required": "a"},
        {"type": "object", "properties": {"a": {"items": [{"type": "string"}]}}},
    ],
)
def test_other_keywords_are_left_to_the_interpreter(schema: dict[str, Any]) -> None:
    assert _validation._compiled(schema) is None


def test_a_schema_changed_in_place_is_compiled_again() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert _agree(schema, {"a": "x", "b": 1})[0] == "ok"
    schema["additionalProperties"] = False
    assert _agree(schema, {"a": "x", "b": 1})[0] == "error"
    schema["properties"]["a"]["type"] = "integer"
    assert _agree(schema, {"a": "x"})[0] == "error"
    assert _agree(schema, {"a": 2})[1] == {"a": 2}


def test_a_cyclic_or_very_deep_schema_is_left_to_the_interpreter() -> None:
    cyclic: dict[str, Any] = {"type": "object", "properties": {}}
    cyclic["properties"]["self"] = cyclic
    for _ in range(2):  # compiled (no plan), then looked up again
        assert _validation._compiled(cyclic) is None
    _agree(cyclic, {"self": {}})
    deep: dict[str, Any] = {"type": "object"}
    for _ in range(3000):
        deep = {"type": "object", "properties": {"a": deep}}
    for _ in range(2):
        assert _validation._compiled(deep) is None


# -- random plain schemas and arguments ------------------------------------------------

_TYPES = ["string", "number", "integer", "boolean", "null", "object", "array"]
_names = st.sampled_from(["a", "b", "c", "d"])
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, 1.5, -2.5, 2.0**60]),
    st.sampled_from(["", "x", "1", "true", "null", "2.5", "a b"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_names, inner, max_size=4)
    ),
    max_leaves=10,
)
_annotations = st.fixed_dictionaries(
    {}, optional={"description": st.just("d"), "default": _scalars, "title": st.just("t")}
)


def _schemas() -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.one_of(
        st.builds(lambda t, extra: {"type": t, **extra}, st.sampled_from(_TYPES), _annotations),
        st.builds(
            lambda ts: {"type": ts},
            st.lists(st.sampled_from(_TYPES[:5]), min_size=1, max_size=3, unique=True),
        ),
        st.builds(
            lambda e: {"type": "string", "enum": e},
            st.lists(st.sampled_from(["x", "1", "true", ""]), min_size=1, max_size=3),
        ),
        st.just({}),
    )

    def nested(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        objects = st.builds(
            lambda props, required, additional: {
                "type": "object",
                "properties": props,
                **({"required": required} if required is not None else {}),
                **({"additionalProperties": additional} if additional is not None else {}),
            },
            st.dictionaries(_names, inner, max_size=3),
            st.none() | st.lists(_names, max_size=2, unique=True),
            st.none() | st.booleans() | inner,
        )
        arrays = st.builds(lambda items: {"type": "array", "items": items}, inner)
        return st.one_of(objects, arrays)

    return st.recursive(leaf, nested, max_leaves=8)


@settings(max_examples=600, deadline=None)
@given(schema=_schemas(), arguments=st.dictionaries(_names, _values, max_size=4))
def test_random_plain_schemas_agree(schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    root = (
        schema
        if schema.get("type") == "object"
        else {"type": "object", "properties": {"a": schema}}
    )
    _agree(root, arguments)


def test_existing_tests_pass_without_the_plan() -> None:
    """The validation tests also pass with the interpreter alone, so both paths give
    what they pin (the plan is on in the normal run of those tests)."""
    here = pathlib.Path(__file__).parent
    code = (
        "import sys, pytest\n"
        "from trio_agent import _validation\n"
        "_validation._compiled = lambda schema: None\n"
        "sys.exit(pytest.main(sys.argv[1:]))\n"
    )
    files = [str(here / "test_validation.py"), str(here / "test_validation_parity.py")]
    done = subprocess.run(
        [sys.executable, "-c", code, "-q", "-p", "no:cacheprovider", *files],
        capture_output=True,
        text=True,
        cwd=here.parent,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
