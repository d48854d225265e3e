from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any, Literal, cast

import attrs
import pytest
import trio
import trio.testing

from trio_agent import (
    AbortController,
    AbortSignal,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    TextContent,
    ToolArgumentsError,
    tool,
)


@attrs.frozen
class Location:
    """A place on Earth.

    Attributes:
        city: City name.
        country: ISO 3166 code,
            upper case.
    """

    city: str
    country: str = "FR"


@attrs.frozen
class Trip:
    stops: list[Location]
    budget: float | None = None


@attrs.frozen
class Box:
    width: int
    height: int
    label: str = ""


@attrs.frozen
class Appointment:
    when: datetime.datetime


def noop_update(partial_result: AgentToolResult) -> None:
    pass


async def run(agent_tool: AgentTool, params: dict[str, Any]) -> AgentToolResult:
    return await agent_tool.execute("call-1", params, AbortController().signal, noop_update)


def params_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


# ---------------------------------------------------------------------------------------
# Schemas


def test_primitive_schemas() -> None:
    @tool
    async def prims(text: str, count: int, ratio: float, flag: bool) -> str:
        return ""

    assert prims.parameters == params_schema(
        {
            "text": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "flag": {"type": "boolean"},
        },
        ["text", "count", "ratio", "flag"],
    )


def test_literal_schemas() -> None:
    @tool
    async def lits(
        unit: Literal["C", "F"], level: Literal[1, 2, 3], mixed: Literal["a", 1, True]
    ) -> str:
        return ""

    assert lits.parameters["properties"] == {
        "unit": {"type": "string", "enum": ["C", "F"]},
        "level": {"type": "integer", "enum": [1, 2, 3]},
        "mixed": {"enum": ["a", 1, True]},
    }


def test_container_schemas() -> None:
    @tool
    async def containers(
        tags: list[str],
        scores: dict[str, float],
        matrix: list[list[int]],
        anything: list,  # type: ignore[type-arg]  # a bare list is a supported annotation
        mapping: dict,  # type: ignore[type-arg]  # likewise a bare dict
    ) -> str:
        return ""

    assert containers.parameters["properties"] == {
        "tags": {"type": "array", "items": {"type": "string"}},
        "scores": {"type": "object", "additionalProperties": {"type": "number"}},
        "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        "anything": {"type": "array"},
        "mapping": {"type": "object"},
    }


def test_optional_and_default_schemas() -> None:
    @tool
    async def opts(
        required_nullable: int | None,
        note: str | None = None,
        limit: int = 10,
        unit: Literal["C", "F"] = "C",
        tags: list[str] | None = None,
    ) -> str:
        return ""

    assert opts.parameters == params_schema(
        {
            "required_nullable": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "note": {"type": "string"},
            "limit": {"type": "integer", "default": 10},
            "unit": {"type": "string", "enum": ["C", "F"], "default": "C"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        ["required_nullable"],
    )


def test_attrs_class_schemas() -> None:
    @tool
    async def plan(trip: Trip, home: Location | None = None) -> str:
        return ""

    location = params_schema(
        {
            "city": {"type": "string", "description": "City name."},
            "country": {
                "type": "string",
                "default": "FR",
                "description": "ISO 3166 code, upper case.",
            },
        },
        ["city"],
    )
    assert plan.parameters == params_schema(
        {
            "trip": params_schema(
                {
                    "stops": {"type": "array", "items": location},
                    "budget": {"type": "number"},
                },
                ["stops"],
            ),
            "home": location,
        },
        ["trip"],
    )


def test_no_parameters() -> None:
    @tool
    async def ping() -> str:
        return "pong"

    assert ping.parameters == params_schema({}, [])


# ---------------------------------------------------------------------------------------
# Names and descriptions


def test_docstring_descriptions() -> None:
    @tool
    async def get_weather(city: str, unit: Literal["C", "F"] = "C", days: int = 1) -> str:
        """Get the current weather.

        Uses the public forecast service.

        Args:
            city: City name,
                for example "Paris".
            unit (str): Temperature unit.

        Returns:
            A sentence.
        """
        return ""

    assert (
        get_weather.description == "Get the current weather.\n\nUses the public forecast service."
    )
    assert get_weather.parameters["properties"] == {
        "city": {"type": "string", "description": 'City name, for example "Paris".'},
        "unit": {
            "type": "string",
            "enum": ["C", "F"],
            "default": "C",
            "description": "Temperature unit.",
        },
        "days": {"type": "integer", "default": 1},
    }


def test_only_google_section_names_end_the_description() -> None:
    @tool
    async def convert(value: float, unit: str) -> str:
        """Convert a distance.

        Supported units:
            km, mi, nmi

        Args:
            value: The distance.
            unit: Target unit.

        Example:
            convert(1, "km")

        Unknown Header:
            not an entry: ignored.
        """
        return ""

    assert convert.description == "Convert a distance.\n\nSupported units:\n    km, mi, nmi"
    assert convert.parameters["properties"] == {
        "value": {"type": "number", "description": "The distance."},
        "unit": {"type": "string", "description": "Target unit."},
    }


@pytest.mark.parametrize(
    "header",
    [
        "Args",
        "Arguments",
        "Parameters",
        "Params",
        "Attributes",
        "Returns",
        "Return",
        "Raises",
        "Yields",
        "Yield",
        "Example",
        "Examples",
        "Note",
        "Notes",
        "Warning",
        "Warnings",
        "See Also",
        "Todo",
    ],
)
def test_google_section_names_end_the_description(header: str) -> None:
    async def fn(x: int) -> str:
        return ""

    fn.__doc__ = f"Summary.\n\nMore.\n\n{header}:\n    something\n"
    assert tool(fn).description == "Summary.\n\nMore."


def test_forms_and_overrides() -> None:
    async def echo(text: str) -> str:
        """Echo text."""
        return text

    plain = tool(echo)
    assert (plain.name, plain.label, plain.description, plain.execution_mode) == (
        "echo",
        "echo",
        "Echo text.",
        None,
    )

    @tool(name="say", label="Say it", description="Says.", execution_mode="sequential")
    async def speak(text: str) -> str:
        return text

    assert (speak.name, speak.label, speak.description, speak.execution_mode) == (
        "say",
        "Say it",
        "Says.",
        "sequential",
    )

    @tool()
    async def undocumented(text: str) -> str:
        return text

    assert (undocumented.name, undocumented.description) == ("undocumented", "")


# ---------------------------------------------------------------------------------------
# Execution


async def test_execute_string_result() -> None:
    @tool
    async def echo(text: str, times: int = 1) -> str:
        await trio.lowlevel.checkpoint()
        return text * times

    assert await run(echo, {"text": "ab", "times": 2}) == AgentToolResult(
        content=[TextContent(text="abab")]
    )
    assert await run(echo, {"text": "ab"}) == AgentToolResult(content=[TextContent(text="ab")])


async def test_execute_passes_tool_result_through() -> None:
    result = AgentToolResult(content=[TextContent(text="x")], details={"a": 1}, terminate=True)

    @tool
    async def direct() -> AgentToolResult:
        return result

    assert await run(direct, {}) is result


async def test_execute_json_result() -> None:
    @tool
    async def lookup(city: str) -> Any:
        return {"city": Location(city=city), "temps": [1.5, 2], "name": "é"}

    value = {"city": Location(city="Paris"), "temps": [1.5, 2], "name": "é"}
    assert await run(lookup, {"city": "Paris"}) == AgentToolResult(
        content=[
            TextContent(text='{"city":{"city":"Paris","country":"FR"},"temps":[1.5,2],"name":"é"}')
        ],
        details=value,
    )

    @tool
    async def nothing() -> None:
        return None

    assert await run(nothing, {}) == AgentToolResult(content=[TextContent(text="null")])

    @tool
    async def unserializable() -> Any:
        return {1, 2}

    with pytest.raises(TypeError) as info:
        await run(unserializable, {})
    assert str(info.value) == (
        "tool unserializable: cannot convert the return value to JSON: "
        "Object of type set is not JSON serializable"
    )


async def test_attrs_arguments_are_structured() -> None:
    seen: list[Any] = []

    @tool
    async def plan(trip: Trip, home: Location | None = None, ratio: float = 1.0) -> str:
        seen.append((trip, home, ratio))
        return "ok"

    await run(
        plan,
        {
            "trip": {"stops": [{"city": "Lyon"}, {"city": "Bern", "country": "CH"}], "budget": 3},
            "home": None,
            "ratio": 2,
        },
    )
    await run(plan, {"trip": {"stops": []}, "home": {"city": "Nice"}})
    assert seen == [
        (
            Trip(stops=[Location(city="Lyon"), Location(city="Bern", country="CH")], budget=3.0),
            None,
            2.0,
        ),
        (Trip(stops=[]), Location(city="Nice"), 1.0),
    ]
    trip, _, ratio = seen[0]
    assert isinstance(trip.budget, float)
    assert isinstance(ratio, float)


async def test_bad_arguments() -> None:
    @tool
    async def plan(trip: Trip) -> str:
        return "ok"

    with pytest.raises(ToolArgumentsError) as info:
        await run(plan, {"trip": {"stops": []}, "extra": 1})
    assert str(info.value) == "Tool \"plan\" got unknown argument(s) 'extra'"
    with pytest.raises(ToolArgumentsError) as info:
        await run(plan, {})
    assert str(info.value) == "Tool \"plan\" is missing argument(s) 'trip'"
    with pytest.raises(ToolArgumentsError) as info:
        await run(plan, {"trip": {"stops": [], "legs": 2}})
    assert str(info.value) == "unknown field(s) 'legs' for Trip"
    with pytest.raises(ToolArgumentsError) as info:
        await run(plan, {"trip": {"stops": ["Lyon"]}})
    assert str(info.value) == 'expected an object for Location, got "Lyon"'


async def test_missing_nested_fields_are_argument_errors() -> None:
    @tool
    async def pack(trip: Trip, box: Box | None = None) -> str:
        return "ok"

    with pytest.raises(ToolArgumentsError) as info:
        await run(pack, {"trip": {}})
    assert str(info.value) == "missing field(s) 'stops' for Trip"
    with pytest.raises(ToolArgumentsError) as info:
        await run(pack, {"trip": {"stops": [{"country": "CH"}]}})
    assert str(info.value) == "missing field(s) 'city' for Location"
    with pytest.raises(ToolArgumentsError) as info:
        await run(pack, {"trip": {"stops": []}, "box": {"label": "x"}})
    assert str(info.value) == "missing field(s) 'width', 'height' for Box"
    result = await run(pack, {"trip": {"stops": []}, "box": {"width": 1, "height": 2}})
    assert result.content == [TextContent(text="ok")]


async def test_injected_signal_and_on_update() -> None:
    controller = AbortController()
    updates: list[AgentToolResult] = []
    seen: list[Any] = []

    @tool
    async def slow(text: str, signal: AbortSignal, on_update: AgentToolUpdateCallback) -> str:
        on_update(AgentToolResult(content=[TextContent(text="half")]))
        seen.append(signal)
        await signal.wait()
        return f"{text}: {signal.reason}"

    assert slow.parameters == params_schema({"text": {"type": "string"}}, ["text"])
    async with trio.open_nursery() as nursery:
        results: list[AgentToolResult] = []

        async def call() -> None:
            results.append(
                await slow.execute("c", {"text": "t"}, controller.signal, updates.append)
            )

        nursery.start_soon(call)
        await trio.testing.wait_all_tasks_blocked()
        controller.abort("stop")
    assert seen == [controller.signal]
    assert updates == [AgentToolResult(content=[TextContent(text="half")])]
    assert results == [AgentToolResult(content=[TextContent(text="t: stop")])]


async def test_injected_by_name_and_annotation() -> None:
    calls: list[Any] = []

    @tool
    async def a(progress: AgentToolUpdateCallback) -> str:
        progress(AgentToolResult(content=[]))
        return ""

    assert a.parameters == params_schema({}, [])
    updates: list[AgentToolResult] = []
    await a.execute("c", {}, AbortController().signal, updates.append)
    assert updates == [AgentToolResult(content=[])]

    @tool
    async def b(x: int, on_update=None, cancel: AbortSignal | None = None) -> str:  # type: ignore[no-untyped-def]  # on_update is injected by name, unannotated on purpose
        calls.append((on_update, cancel))
        return ""

    assert b.parameters == params_schema({"x": {"type": "integer"}}, ["x"])
    signal = AbortController().signal
    await b.execute("c", {"x": 1}, signal, noop_update)
    assert calls == [(noop_update, signal)]


# ---------------------------------------------------------------------------------------
# Declaration errors


def test_not_async() -> None:
    def sync_tool(text: str) -> str:
        return text

    with pytest.raises(TypeError) as info:
        tool(cast(Any, sync_tool))
    assert str(info.value).startswith(
        "tool sync_tool: expected an async function (async def), got <function "
    )


def test_unsupported_annotations() -> None:
    async def get_weather(when: datetime.datetime) -> str:
        return ""

    async def sets(tags: list[set[int]]) -> str:
        return ""

    async def keys(table: dict[int, str]) -> str:
        return ""

    async def nested(appointment: Appointment) -> str:
        return ""

    async def anything(value: Any) -> str:
        return ""

    async def floats(value: Literal[1.5]) -> str:  # type: ignore[valid-type]  # the error under test
        return ""

    cases: list[tuple[Callable[..., Any], str]] = [
        (get_weather, "parameter 'when' has unsupported annotation datetime.datetime"),
        (sets, "parameter 'tags' has unsupported annotation list[set[int]] (set[int])"),
        (
            keys,
            "parameter 'table' has unsupported annotation dict[int, str] "
            "(dictionary keys must be str)",
        ),
        (
            nested,
            "parameter 'appointment' has unsupported annotation "
            f"{__name__}.Appointment (field 'when': datetime.datetime)",
        ),
        (anything, "parameter 'value' has unsupported annotation typing.Any"),
        (
            floats,
            "parameter 'value' has unsupported annotation typing.Literal[1.5] "
            "(literal value 1.5 is not a str, int or bool)",
        ),
    ]
    for fn, message in cases:
        with pytest.raises(TypeError) as info:
            tool(fn)
        assert str(info.value) == f"tool {fn.__name__}: {message}"


async def test_a_union_of_several_types_takes_the_first_member_that_fits() -> None:
    @tool
    async def describe(value: int | str | list[int]) -> str:
        """Describe a value.

        Args:
            value: What to describe.
        """
        return f"{type(value).__name__}: {value}"

    assert describe.parameters["properties"]["value"] == {
        "anyOf": [
            {"type": "integer"},
            {"type": "string"},
            {"type": "array", "items": {"type": "integer"}},
        ],
        "description": "What to describe.",
    }
    for wire, text in [(3, "int: 3"), ("x", "str: x"), ([1, 2], "list: [1, 2]")]:
        result = await describe.execute("c", {"value": wire}, AbortSignal(), lambda _: None)
        assert result.content == [TextContent(text=text)]


def test_bad_parameters() -> None:
    async def untyped(text) -> str:  # type: ignore[no-untyped-def]  # the error under test
        return ""

    async def star(*texts: str) -> str:
        return ""

    async def double_star(**texts: str) -> str:
        return ""

    async def positional(text: str, /) -> str:
        return ""

    async def two_signals(a: AbortSignal, b: AbortSignal) -> str:
        return ""

    async def two_updates(a: AgentToolUpdateCallback, on_update: AgentToolUpdateCallback) -> str:
        return ""

    cases: list[tuple[Callable[..., Any], str]] = [
        (untyped, "tool untyped: parameter 'text' has no annotation"),
        (star, "tool star: parameter *texts is not supported"),
        (double_star, "tool double_star: parameter **texts is not supported"),
        (positional, "tool positional: positional-only parameter 'text' is not supported"),
        (two_signals, "tool two_signals: more than one AbortSignal parameter"),
        (two_updates, "tool two_updates: more than one on_update parameter"),
    ]
    for fn, message in cases:
        with pytest.raises(TypeError) as info:
            tool(fn)
        assert str(info.value) == message


def test_unresolvable_annotation() -> None:
    async def later(value: NotYetDefined) -> str:  # type: ignore[name-defined]  # noqa: F821  # on purpose
        return ""

    with pytest.raises(TypeError) as info:
        tool(later)
    assert str(info.value) == (
        "tool later: cannot resolve annotations: name 'NotYetDefined' is not defined"
    )
