"""The AG-UI event list (protocol 1.0) and its ordering rules, for the web tests.

The list is the protocol's ``EventType`` enumeration
(https://docs.ag-ui.com/concepts/events); the rules are those the protocol's TypeScript
client checks on every stream it receives (``verifyEvents``): ``RUN_STARTED`` first, no
event after ``RUN_FINISHED`` or ``RUN_ERROR``, every message, tool call and step started
before its content and ended before ``RUN_FINISHED``, never started twice at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SPEC_EVENT_TYPES = frozenset(
    {
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TEXT_MESSAGE_CHUNK",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_CHUNK",
        "TOOL_CALL_RESULT",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "MESSAGES_SNAPSHOT",
        "ACTIVITY_SNAPSHOT",
        "ACTIVITY_DELTA",
        "RAW",
        "CUSTOM",
        "RUN_STARTED",
        "RUN_FINISHED",
        "RUN_ERROR",
        "STEP_STARTED",
        "STEP_FINISHED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_MESSAGE_CHUNK",
        "REASONING_END",
        "REASONING_ENCRYPTED_VALUE",
        "SUBAGENT_STARTED",
        "SUBAGENT_FINISHED",
        "SUBAGENT_ERROR",
    }
)


class GrammarError(AssertionError):
    pass


def check_agui_stream(events: Iterable[dict[str, Any]]) -> None:
    """Raise :class:`GrammarError` naming the first event that breaks a rule."""
    text: set[str] = set()
    reasoning: set[str] = set()
    calls: set[str] = set()
    steps: set[str] = set()
    started = finished = errored = False
    for position, event in enumerate(events):
        kind = event["type"]
        where = f"event {position} ({kind})"
        if kind not in SPEC_EVENT_TYPES:
            raise GrammarError(f"{where}: not an AG-UI event type")
        if errored:
            raise GrammarError(f"{where}: after RUN_ERROR")
        if finished and kind not in ("RUN_STARTED", "RUN_ERROR"):
            raise GrammarError(f"{where}: after RUN_FINISHED")
        if not started and kind not in ("RUN_STARTED", "RUN_ERROR"):
            raise GrammarError(f"{where}: the first event must be RUN_STARTED")
        if kind == "RUN_STARTED":
            if started and not finished:
                raise GrammarError(f"{where}: a run is still active")
            started, finished = True, False
        elif kind == "RUN_FINISHED":
            if text or calls or steps or reasoning:
                raise GrammarError(f"{where}: still open: {text | calls | steps | reasoning}")
            finished = True
        elif kind == "RUN_ERROR":
            errored = True
        elif kind == "TEXT_MESSAGE_START":
            _open(text, event["messageId"], where)
        elif kind == "TEXT_MESSAGE_CONTENT":
            _need(text, event["messageId"], where)
        elif kind == "TEXT_MESSAGE_END":
            _close(text, event["messageId"], where)
        elif kind == "REASONING_MESSAGE_START":
            _open(reasoning, event["messageId"], where)
        elif kind == "REASONING_MESSAGE_CONTENT":
            _need(reasoning, event["messageId"], where)
        elif kind == "REASONING_MESSAGE_END":
            _close(reasoning, event["messageId"], where)
        elif kind == "TOOL_CALL_START":
            _open(calls, event["toolCallId"], where)
        elif kind == "TOOL_CALL_ARGS":
            _need(calls, event["toolCallId"], where)
        elif kind == "TOOL_CALL_END":
            _close(calls, event["toolCallId"], where)
        elif kind == "STEP_STARTED":
            _open(steps, event["stepName"], where)
        elif kind == "STEP_FINISHED":
            _close(steps, event["stepName"], where)


def _open(active: set[str], key: str, where: str) -> None:
    if key in active:
        raise GrammarError(f"{where}: {key!r} is already in progress")
    active.add(key)


def _need(active: set[str], key: str, where: str) -> None:
    if key not in active:
        raise GrammarError(f"{where}: {key!r} was not started")


def _close(active: set[str], key: str, where: str) -> None:
    _need(active, key, where)
    active.discard(key)
