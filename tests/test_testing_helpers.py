from __future__ import annotations

import inspect
import subprocess
import sys
from typing import Any

import pytest
import trio

import trio_agent.models
import trio_agent.testing
from trio_agent import (
    AbortController,
    AgentEndEvent,
    AgentStartEvent,
    LlmContext,
    StreamOptions,
    TurnStartEvent,
    UserMessage,
)
from trio_agent.testing import (
    EventRecorder,
    FauxProvider,
    assert_event_types,
    event_types,
    faux_assistant_message,
)


def test_reexports() -> None:
    for name in (
        "FauxProvider",
        "FauxState",
        "faux_text",
        "faux_thinking",
        "faux_tool_call",
        "faux_assistant_message",
    ):
        assert getattr(trio_agent.testing, name) is getattr(trio_agent.models, name)
    assert EventRecorder.__module__ == "trio_agent.testing"
    assert event_types.__module__ == "trio_agent.testing"
    assert assert_event_types.__module__ == "trio_agent.testing"
    assert FauxProvider.__module__ == "trio_agent.models"


def test_import_trio_agent_does_not_import_testing() -> None:
    code = "import sys, trio_agent; print('trio_agent.testing' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


async def test_recorder_records_events_and_signals() -> None:
    recorder = EventRecorder()
    controller = AbortController()
    start, turn, end = AgentStartEvent(), TurnStartEvent(), AgentEndEvent(messages=[])
    await recorder(start)
    await recorder(turn, controller.signal)
    await recorder(end, None)
    assert recorder.events == [start, turn, end]
    assert recorder.signals == [None, controller.signal, None]
    assert recorder.types == ["agent_start", "turn_start", "agent_end"]
    assert recorder.of_type("turn_start") == [turn]
    assert recorder.of_type("message_end") == []
    assert list(recorder) == [start, turn, end]
    assert len(recorder) == 3
    assert repr(recorder) == "<EventRecorder 3 events>"
    recorder.clear()
    assert (recorder.events, recorder.signals, recorder.types) == ([], [], [])


def test_recorder_takes_event_and_signal() -> None:
    # Agent.subscribe decides from the signature whether to pass the signal.
    parameters = list(inspect.signature(EventRecorder()).parameters)
    assert parameters == ["event", "signal"]


async def test_recorder_is_a_checkpoint_that_keeps_the_event() -> None:
    recorder = EventRecorder()
    event = AgentStartEvent()
    with trio.CancelScope() as scope:
        scope.cancel()
        await recorder(event)
    assert scope.cancelled_caught
    assert recorder.events == [event]


async def test_recorder_records_a_faux_stream() -> None:
    faux = FauxProvider([faux_assistant_message("ok then")], token_size=(1, 1))
    recorder = EventRecorder()
    context = LlmContext(messages=[UserMessage(content="hi")])
    async for event in faux.stream_fn(faux.get_model(), context, StreamOptions()):
        await recorder(event)
    assert_event_types(
        recorder, ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    )
    assert [event.delta for event in recorder.of_type("text_delta")] == ["ok t", "hen"]


def test_event_types_accepts_events_and_strings() -> None:
    assert event_types([AgentStartEvent(), "turn_start"]) == ["agent_start", "turn_start"]
    assert event_types([]) == []
    with pytest.raises(TypeError, match=r"not an event \(no string 'type' attribute\): 42"):
        event_types([42])


def test_assert_event_types_passes_on_equal_sequences() -> None:
    assert_event_types(
        [AgentStartEvent(), AgentEndEvent(messages=[])], ["agent_start", "agent_end"]
    )
    assert_event_types([], [])


@pytest.mark.parametrize(
    ("actual", "expected", "message"),
    [
        (
            ["start", "text_delta", "done"],
            ["start", "done"],
            "event types differ (expected 2, got 3); "
            "first difference at index 1: expected 'done', got 'text_delta'\n"
            "diff (- expected, + actual):\n"
            "    start\n"
            "  + text_delta\n"
            "    done",
        ),
        (
            ["start"],
            ["start", "done"],
            "event types differ (expected 2, got 1); "
            "first difference at index 1: expected 'done', got nothing\n"
            "diff (- expected, + actual):\n"
            "    start\n"
            "  - done",
        ),
        (
            ["start", "done", "error"],
            ["start", "done"],
            "event types differ (expected 2, got 3); "
            "first difference at index 2: expected nothing, got 'error'\n"
            "diff (- expected, + actual):\n"
            "    start\n"
            "    done\n"
            "  + error",
        ),
    ],
)
def test_assert_event_types_explains_the_difference(
    actual: list[Any], expected: list[str], message: str
) -> None:
    with pytest.raises(AssertionError) as info:
        assert_event_types(actual, expected)
    assert str(info.value) == message
