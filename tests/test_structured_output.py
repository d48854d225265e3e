"""Structured output through the final-result tool: every listed type round-trips, a
wrong answer is retried then fails clearly, and mypy infers the output's type."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Literal, TypedDict

import attrs
import pytest
import trio
import trio.testing
from agent_helpers import make_agent

from trio_agent import (
    AssistantMessage,
    RunResult,
    TextContent,
    ToolResultMessage,
    UserMessage,
    get_current_tools,
)
from trio_agent.models import faux_assistant_message, faux_tool_call


@attrs.frozen
class City:
    """A city.

    Attributes:
        name: Its name.
        population: How many live there.
    """

    name: str
    population: int


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


class Weather(TypedDict):
    city: str
    degrees: int


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


def answer(result: Any, call_id: str = "out") -> AssistantMessage:
    return faux_assistant_message(
        [faux_tool_call("final_result", {"result": result}, id=call_id)],
        stop_reason="toolUse",
    )


@pytest.mark.parametrize(
    ("output_type", "wire", "expected"),
    [
        (City, {"name": "Paris", "population": 2100000}, City("Paris", 2100000)),
        (Point, {"x": 1.5}, Point(1.5, 0.0)),
        (Weather, {"city": "Oslo", "degrees": -3}, {"city": "Oslo", "degrees": -3}),
        (Literal["yes", "no"], "no", "no"),
        (Colour, "blue", Colour.BLUE),
        (list[City], [{"name": "A", "population": 1}], [City("A", 1)]),
        (int | str, "seven", "seven"),
        (int | str, 7, 7),
        (City | None, None, None),
    ],
)
async def test_every_listed_type_round_trips(
    autojump_clock: trio.testing.MockClock, output_type: Any, wire: Any, expected: Any
) -> None:
    agent, _ = make_agent([answer(wire)])
    result = await agent.prompt("answer", output_type=output_type)
    assert (result.ending, result.output) == ("tool_use", expected)
    # The run declares its final_result tool to the model first (a system message).
    assert [m.role for m in result.messages] == ["system", "user", "assistant", "toolResult"]


async def test_a_wrong_answer_is_retried_then_the_right_one_kept(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent, _ = make_agent(
        [answer({"name": "Paris"}, "a"), answer({"name": "Paris", "population": 3}, "b")]
    )
    result = await agent.prompt("answer", output_type=City)
    assert result.output == City("Paris", 3)
    first = next(m for m in result.messages if isinstance(m, ToolResultMessage))
    assert first.is_error
    text = first.content[0]
    assert isinstance(text, TextContent)
    assert text.text.startswith('Validation failed for tool "final_result":')


async def test_a_plain_text_answer_gets_a_reminder(autojump_clock: trio.testing.MockClock) -> None:
    agent, _ = make_agent(
        [faux_assistant_message("Paris, 3 people."), answer({"name": "Paris", "population": 3})]
    )
    result = await agent.prompt("answer", output_type=City)
    assert result.output == City("Paris", 3)
    reminders = [m for m in result.messages if isinstance(m, UserMessage)][1:]
    assert [m.content for m in reminders] == ["Please answer by calling the final_result tool."]


async def test_the_budget_runs_out_clearly(autojump_clock: trio.testing.MockClock) -> None:
    agent, _ = make_agent([answer({"name": 1}, f"c{i}") for i in range(5)])
    result = await agent.prompt("answer", output_type=City, output_retries=1)
    assert (result.ending, result.output, result.error) == (
        "error",
        None,
        "no valid final_result after 2 attempts",
    )
    calls = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert len(calls) == 2 and all(m.is_error for m in calls)


async def test_the_agent_option_applies_to_every_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent, _ = make_agent([answer("red"), answer("blue")], output_type=Colour)
    assert (await agent.prompt("one")).output is Colour.RED
    assert (await agent.prompt("two")).output is Colour.BLUE


def test_an_unsupported_type_is_refused_where_it_is_given() -> None:
    with pytest.raises(TypeError) as info:
        make_agent([], output_type=complex)
    assert str(info.value) == "output_type: unsupported type complex"


async def test_mypy_infers_the_output_type(autojump_clock: trio.testing.MockClock) -> None:
    agent, _ = make_agent([answer({"name": "Rome", "population": 1})])
    result: RunResult[City] = await agent.prompt("answer", output_type=City)
    city = result.output
    assert city is not None
    assert city.name.upper() == "ROME"  # mypy checks .name is a str on City


async def test_a_pydantic_model_round_trips(autojump_clock: trio.testing.MockClock) -> None:
    pydantic = pytest.importorskip("pydantic")

    class Answer(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        text: str
        confidence: float

    agent, faux = make_agent(
        [
            answer({"text": "yes", "confidence": 2}, "a"),
            answer({"text": "yes", "confidence": 0.9}, "b"),
        ]
    )
    result = await agent.prompt("answer", output_type=Answer)
    assert result.output == Answer(text="yes", confidence=2.0)
    declared = get_current_tools(faux.requests[0].context.messages)
    assert [d.name for d in declared] == ["final_result"]
    assert declared[0].parameters["properties"]["result"]["properties"]["confidence"] == {
        "title": "Confidence",
        "type": "number",
    }


async def test_native_mode_reads_the_answer_from_the_text(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent, faux = make_agent(
        [
            faux_assistant_message("Oslo, I think."),
            faux_assistant_message('{"result": {"name": "Oslo", "population": 1}}'),
        ]
    )
    result = await agent.prompt("answer", output_type=City, output_mode="native")
    assert result.output == City("Oslo", 1)
    assert faux.requests[0].options.response_schema is not None
    assert faux.requests[0].options.response_schema["name"] == "final_result"
    assert get_current_tools(faux.requests[0].context.messages) == []


def test_a_bad_output_mode_is_refused() -> None:
    with pytest.raises(ValueError) as info:
        make_agent([], output_mode="json")
    assert str(info.value) == "output_mode must be 'auto', 'tool' or 'native', got 'json'"
