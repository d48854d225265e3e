"""The event grammar of a run (SPEC §8), checked with messages that name the rule.

:func:`assert_event_grammar` is the check the project's own tests run on every event
sequence; it accepts one run or several runs in a row (an :class:`EventRecorder` kept
across ``prompt()`` calls).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["EventGrammarError", "assert_event_grammar"]

# The rules, by the short name an error message quotes.
RULES: dict[str, str] = {
    "run-start": "a run starts with agent_start",
    "run-end": "a run ends with agent_end, and nothing but the next run's agent_start follows it",
    "turns": "turn_start and turn_end alternate, and every turn is closed before agent_end",
    "in-turn": "every event other than agent_start, agent_end, turn_start and turn_end lies "
    "inside a turn (except the failure report after an aborted run's last turn: its "
    "assistant message_start/message_end directly before agent_end)",
    "messages": "message_start and message_end pair up without nesting, for the same "
    "message (an assistant's end may carry the final object of its partial start), and "
    "every message is closed before turn_end",
    "updates": "message_update only inside an open assistant message",
    "tools": "every tool_execution_start is closed by the tool_execution_end of its call "
    "before turn_end; tool_execution_update only in between; one start per call id",
    "compaction": "compaction comes inside a run, in or outside a turn, never while a "
    "message or a tool execution is open",
}
"""Each rule of the grammar, by name."""

_CONTEXT = 4  # events shown before and after the one that broke a rule


class EventGrammarError(AssertionError):
    """An event sequence broke a rule of the event grammar.

    The message names the event (its index and type), the rule, what was wrong, and
    shows the events around it.
    """

    def __init__(self, message: str, *, index: int, rule: str) -> None:
        super().__init__(message)
        self.index = index
        """The index of the event that broke the rule (the length of the sequence when
        the sequence ended too early)."""
        self.rule = rule
        """The name of the broken rule (a key of the grammar's rule table)."""


def _kind(event: Any) -> str:
    kind = getattr(event, "type", None)
    if not isinstance(kind, str):
        raise TypeError(f"not an event (no string 'type' attribute): {event!r}")
    return kind


def _label(event: Any) -> str:
    kind = _kind(event)
    if kind in ("message_start", "message_update", "message_end"):
        return f"{kind} ({getattr(event.message, 'role', '?')})"
    if kind.startswith("tool_execution_"):
        return f"{kind} ({event.tool_call_id})"
    return kind


class _Checker:
    def __init__(self, events: list[Any]) -> None:
        self.events = events
        self.in_run = False
        self.reset_run()

    def reset_run(self) -> None:
        self.in_turn = False
        self.after_turns = False  # a turn_end happened in this run
        self.open_message: Any = None
        self.open_tools: set[str] = set()
        self.outside_report = False  # the failure report after an aborted run is open

    def fail(self, index: int, rule: str, problem: str) -> EventGrammarError:
        shown = (
            f"event {index} ({_label(self.events[index])})"
            if index < len(self.events)
            else f"the end of the sequence (after {len(self.events)} events)"
        )
        lines = [f"{shown} breaks the rule {rule!r}: {problem}", f"  rule: {RULES[rule]}"]
        start = max(0, index - _CONTEXT)
        stop = min(len(self.events), index + _CONTEXT + 1)
        if start:
            lines.append("    ...")
        for position in range(start, stop):
            marker = ">" if position == index else " "
            lines.append(f"  {marker} {position}: {_label(self.events[position])}")
        if stop < len(self.events):
            lines.append("    ...")
        return EventGrammarError("\n".join(lines), index=index, rule=rule)

    def check(self) -> None:
        if not self.events:
            raise self.fail(0, "run-start", "there are no events")
        for index, event in enumerate(self.events):
            self.step(index, event, _kind(event))
        if self.in_run:
            end = len(self.events)
            raise self.fail(end, "run-end", "the last run has no agent_end")

    def step(self, index: int, event: Any, kind: str) -> None:
        if kind == "agent_start":
            if self.in_run:
                raise self.fail(index, "run-end", "a run starts before the previous agent_end")
            self.reset_run()
            self.in_run = True
            return
        if not self.in_run:
            if index == 0:
                raise self.fail(index, "run-start", f"the first event is {kind}")
            raise self.fail(index, "run-end", f"{kind} comes after agent_end")
        if kind == "agent_end":
            if self.in_turn:
                raise self.fail(index, "turns", "agent_end comes before the open turn's turn_end")
            if self.open_message is not None:
                raise self.fail(index, "messages", "agent_end comes with a message still open")
            self.in_run = False
            return
        if kind == "compaction":
            if self.open_message is not None or self.open_tools:
                raise self.fail(index, "compaction", "compaction comes with a message or tool open")
            return
        if kind == "turn_start":
            if self.in_turn:
                raise self.fail(index, "turns", "a turn starts inside an open turn")
            if self.outside_report:
                raise self.fail(index, "in-turn", "a turn starts inside the failure report")
            self.in_turn = True
            return
        if not self.in_turn and not self.outside_report_allows(index, event, kind):
            raise self.fail(index, "in-turn", f"{kind} outside a turn")
        if kind == "turn_end":
            if self.open_message is not None:
                raise self.fail(index, "messages", "turn_end comes with a message still open")
            if self.open_tools:
                still = ", ".join(sorted(self.open_tools))
                raise self.fail(
                    index, "tools", f"turn_end comes with tool executions open: {still}"
                )
            self.in_turn = False
            self.after_turns = True
        elif kind == "message_start":
            if self.open_message is not None:
                raise self.fail(index, "messages", "a message starts inside an open message")
            self.open_message = event.message
        elif kind == "message_update":
            if self.open_message is None:
                raise self.fail(index, "updates", "no message is open")
            if getattr(self.open_message, "role", None) != "assistant":
                role = getattr(self.open_message, "role", "?")
                raise self.fail(index, "updates", f"the open message is a {role} message")
        elif kind == "message_end":
            self.end_message(index, event)
        elif kind == "tool_execution_start":
            if event.tool_call_id in self.open_tools:
                raise self.fail(
                    index, "tools", f"call {event.tool_call_id} already has an open execution"
                )
            self.open_tools.add(event.tool_call_id)
        elif kind in ("tool_execution_update", "tool_execution_end"):
            if event.tool_call_id not in self.open_tools:
                raise self.fail(
                    index, "tools", f"call {event.tool_call_id} has no open tool_execution_start"
                )
            if kind == "tool_execution_end":
                self.open_tools.remove(event.tool_call_id)
        else:
            raise self.fail(index, "in-turn", f"unknown event type {kind!r}")

    def end_message(self, index: int, event: Any) -> None:
        opened = self.open_message
        if opened is None:
            raise self.fail(index, "messages", "no message is open")
        message = event.message
        role = getattr(message, "role", None)
        if role != getattr(opened, "role", None):
            raise self.fail(
                index, "messages", f"it ends a {role} message, but a {opened.role} message is open"
            )
        if role != "assistant" and message is not opened:
            raise self.fail(index, "messages", "it ends another message than the one started")
        self.open_message = None

    def outside_report_allows(self, index: int, event: Any, kind: str) -> bool:
        # SPEC §8: a failure after the last turn_end of an aborted run is reported by the
        # failure message outside a turn, because an abort never starts a new turn. The
        # failure message is then itself "aborted", and agent_end follows it at once.
        if kind == "message_start":
            self.outside_report = (
                self.after_turns
                and getattr(event.message, "role", None) == "assistant"
                and self.report_follows(index)
            )
            return self.outside_report
        if kind in ("message_update", "message_end") and self.outside_report:
            self.outside_report = kind == "message_update"
            return True
        return False

    def report_follows(self, index: int) -> bool:
        position = index + 1
        while position < len(self.events) and _kind(self.events[position]) == "message_update":
            position += 1
        rest = self.events[position : position + 2]
        return [_kind(e) for e in rest] == ["message_end", "agent_end"] and getattr(
            rest[0].message, "stop_reason", None
        ) == "aborted"


def assert_event_grammar(events: Iterable[Any]) -> None:
    """Assert that ``events`` follow the event grammar of a run (SPEC §8).

    One run is ``agent_start``, then turns, then ``agent_end``; several runs may follow one
    another (an :class:`EventRecorder` kept across runs). The rules:

    - a run starts with ``agent_start`` and ends with ``agent_end``, and nothing but the
      next run's ``agent_start`` follows it;
    - ``turn_start`` and ``turn_end`` alternate; every turn is closed before
      ``agent_end``;
    - every other event lies inside a turn, with one written exception: a failure raised
      after the last ``turn_end`` of an aborted run is reported by an assistant
      ``message_start`` / ``message_end`` (``stop_reason`` ``"aborted"``) directly before
      ``agent_end``;
    - ``message_start`` and ``message_end`` pair up without nesting, for the same message
      object (an assistant's ``message_end`` carries the final message of its partial
      start), closed before ``turn_end``; ``message_update`` only inside an assistant
      message;
    - every ``tool_execution_start`` is closed by the ``tool_execution_end`` of its call
      id before ``turn_end``, with its ``tool_execution_update`` events in between;
    - ``compaction`` (beyond pi's events) comes anywhere inside a run, in or outside a
      turn, but never while a message or a tool execution is open.

    Args:
        events: Agent events, or an :class:`EventRecorder`.

    Raises:
        EventGrammarError: an ``AssertionError`` whose message names the event that
            broke a rule (index and type), the rule, the problem, and the events around
            it. ``TypeError`` for an item that is not an event.
    """
    _Checker(list(events)).check()
