"""What ``trio-agent`` prints: streamed text, thinking, tool lines, notices and usage.

The assistant's text goes to stdout unchanged; everything else goes to stderr as one-line
``[tag] ...`` forms, coloured when enabled. Both streams usually share one terminal, so
the renderer ends a half-written line on one stream before it writes to the other.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from .._events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    TextDeltaEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
)
from .._messages import AgentMessage, AssistantMessage, Model, ToolCall, UserMessage
from .._transcript import content_text
from ..serialization import to_json

__all__ = ["Renderer", "Style", "color_wanted", "is_terminal", "one_line", "usage_summary"]

MAX_RESULT_CHARS = 200
MAX_ARGUMENT_CHARS = 120

_RESET = "\x1b[0m"
_CODES = {
    "bold": "\x1b[1m",
    "dim": "\x1b[2m",
    "red": "\x1b[31m",
    "green": "\x1b[32m",
    "yellow": "\x1b[33m",
    "blue": "\x1b[34m",
    "magenta": "\x1b[35m",
    "cyan": "\x1b[36m",
}


def is_terminal(stream: object) -> bool:
    """Whether ``stream`` is a terminal (``False`` for a closed stream or none at all)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except (OSError, ValueError):
        return False


def color_wanted(choice: str, stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """``--color``: ``always``, ``never``, or (``auto``) when ``stream`` is a terminal
    and ``NO_COLOR`` is unset or empty (https://no-color.org)."""
    if choice != "auto":
        return choice == "always"
    environ = os.environ if environ is None else environ
    if environ.get("NO_COLOR") or environ.get("TERM") == "dumb":
        return False
    return is_terminal(stream)


class Style:
    """ANSI colours, or none (``enabled=False``: every method returns its text)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, name: str, text: str) -> str:
        """``text`` in the style ``name`` (bold, dim, red, green, yellow, blue, magenta,
        cyan)."""
        if not self.enabled or not text:
            return text
        return f"{_CODES[name]}{text}{_RESET}"


def one_line(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """``text`` with runs of whitespace as one space, cut to ``limit`` characters."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def _arguments(args: Mapping[str, Any]) -> str:
    return one_line(json.dumps(args, ensure_ascii=False, separators=(",", ":")), MAX_ARGUMENT_CHARS)


def usage_summary(messages: Sequence[AgentMessage], model: Model) -> str | None:
    """One line of token use and cost of a run's assistant messages, and the context use
    of the last one; ``None`` when the run made no request."""
    replies = [m for m in messages if isinstance(m, AssistantMessage)]
    if not replies:
        return None
    tokens_in = sum(m.usage.input + m.usage.cache_read + m.usage.cache_write for m in replies)
    tokens_out = sum(m.usage.output for m in replies)
    cost = sum(m.usage.cost.total for m in replies)
    last = replies[-1].usage
    context = last.input + last.cache_read + last.cache_write + last.output
    parts = [f"{tokens_in:,} in", f"{tokens_out:,} out", f"${cost:.4f}"]
    if model.context_window > 0:
        share = 100 * context / model.context_window
        parts.append(f"context {context:,}/{model.context_window:,} ({share:.1f}%)")
    return ", ".join(parts)


class Renderer:
    """The program's agent listener: writes events to stdout/stderr as they arrive.

    Human form: text deltas to ``stdout`` unchanged; thinking (dimmed), ``[tool call]``,
    ``[tool result]``, ``[tool error]``, ``[error]``, ``[aborted]`` and delivered
    ``[steer]``/``[follow-up]`` lines to ``stderr``. JSON form: every event as one line of
    :func:`~trio_agent.serialization.to_json` on ``stdout``.

    Args:
        stdout: Where the answer goes.
        stderr: Where everything else goes.
        json_lines: Print events as JSON Lines instead.
        color: Colour the ``stderr`` lines.
    """

    def __init__(
        self, stdout: TextIO, stderr: TextIO, *, json_lines: bool, color: bool = False
    ) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.json_lines = json_lines
        self.style = Style(color)
        self.run_aborted = False
        """Set when the program aborts the run: tool calls started after that never ran,
        and are not shown."""
        self.queued: list[tuple[str, AgentMessage]] = []
        """Messages the user queued during a run, shown again when delivered."""
        self._open: TextIO | None = None  # the stream with an unfinished line
        self._labels: dict[str, str] = {}  # tool-call id -> "#n" within a parallel batch
        self._not_run: set[str] = set()
        self._first_user_message = True

    # -- events ---------------------------------------------------------------------------

    def __call__(self, event: AgentEvent) -> None:
        if self.json_lines:
            self.stdout.write(to_json(event) + "\n")
            self.stdout.flush()
            return
        if isinstance(event, MessageUpdateEvent):
            self._update(event)
        elif isinstance(event, AgentStartEvent):
            self._first_user_message = True
        elif isinstance(event, MessageStartEvent) and isinstance(event.message, UserMessage):
            self._user_message(event.message)
        elif isinstance(event, MessageEndEvent) and isinstance(event.message, AssistantMessage):
            self._assistant_end(event.message)
        elif isinstance(event, ToolExecutionStartEvent):
            if self.run_aborted:
                self._not_run.add(event.tool_call_id)
                return
            label = self._labels.get(event.tool_call_id, "")
            self.notice(
                self.style("cyan", f"[tool call{label}] {event.tool_name}")
                + " "
                + self.style("dim", _arguments(event.args))
            )
        elif isinstance(event, ToolExecutionEndEvent):
            self._tool_end(event)
        elif isinstance(event, AgentEndEvent):
            self.end_line()
            self._labels.clear()
            self._not_run.clear()

    def _update(self, event: MessageUpdateEvent) -> None:
        update = event.assistant_message_event
        if isinstance(update, TextStartEvent):
            self.end_line()  # a new text block starts on its own line
        elif isinstance(update, TextDeltaEvent) and update.delta:
            self._write(self.stdout, update.delta, update.delta)
        elif isinstance(update, ThinkingStartEvent):
            self.end_line()
            self._write(self.stderr, self.style("dim", "[thinking] "), "[thinking] ")
        elif isinstance(update, ThinkingDeltaEvent) and update.delta:
            self._write(self.stderr, self.style("dim", update.delta), update.delta)
        elif isinstance(update, ThinkingEndEvent):
            self.end_line()

    def _user_message(self, message: UserMessage) -> None:
        first, self._first_user_message = self._first_user_message, False
        for index, (kind, queued) in enumerate(self.queued):
            if queued == message:
                del self.queued[index]
                self.notice(self.style("magenta", f"[{kind}]") + " " + _text_of(message))
                return
        if not first:  # a message queued by the application, not by the user
            self.notice(self.style("magenta", "[user]") + " " + _text_of(message))

    def _assistant_end(self, message: AssistantMessage) -> None:
        self.end_line()
        calls = [block for block in message.content if isinstance(block, ToolCall)]
        if len(calls) > 1:  # parallel calls: label them so results can be matched
            self._labels.update({call.id: f" #{n}" for n, call in enumerate(calls, 1)})
        if message.stop_reason == "error":
            self.notice(self.style("red", f"[error] {message.error_message or 'unknown error'}"))
        elif message.stop_reason == "aborted":
            self.notice(
                self.style("yellow", f"[aborted] {message.error_message or 'Request was aborted'}")
            )

    def _tool_end(self, event: ToolExecutionEndEvent) -> None:
        if event.tool_call_id in self._not_run:
            self._not_run.discard(event.tool_call_id)
            if event.duration_ms is None:
                return  # answered by the abort without running
        label = self._labels.get(event.tool_call_id, "")
        tag, color = ("tool error", "red") if event.is_error else ("tool result", "green")
        duration = "" if event.duration_ms is None else f" ({_duration(event.duration_ms)})"
        text = one_line(content_text(event.result.content, " ")) or "(no text)"
        self.notice(self.style(color, f"[{tag}{label}] {event.tool_name}{duration}:") + " " + text)

    # -- writing --------------------------------------------------------------------------

    def _write(self, stream: TextIO, text: str, plain: str) -> None:
        """Write ``text`` (``plain`` without its colours) to ``stream``."""
        if self._open is not None and self._open is not stream:
            self.end_line()
        stream.write(text)
        stream.flush()
        self._open = None if plain.endswith("\n") else stream

    def end_line(self) -> None:
        """End the current line (of either stream) if text was written to it."""
        stream, self._open = self._open, None
        if stream is not None:
            stream.write("\n")
            stream.flush()

    def notice(self, line: str) -> None:
        """Write one line to stderr, after ending a pending line."""
        self.end_line()
        self.stderr.write(line + "\n")
        self.stderr.flush()

    def error(self, text: str) -> None:
        """An ``[error]`` notice (a failed command, say)."""
        self.notice(self.style("red", f"[error] {text}"))

    def info(self, tag: str, text: str) -> None:
        """A ``[tag] text`` notice, the tag dimmed."""
        self.notice(self.style("dim", f"[{tag}]") + " " + text)


def _text_of(message: UserMessage) -> str:
    return one_line(content_text(message.content, " ")) or "(no text)"


def _duration(milliseconds: int) -> str:
    if milliseconds < 1000:
        return f"{milliseconds} ms"
    return f"{milliseconds / 1000:.1f} s"
