"""What ``trio-agent`` prints: streamed text, thinking, tool lines, notices and usage.

The assistant's text goes to stdout unchanged; everything else goes to stderr as one-line
``[tag] ...`` forms, coloured when enabled. Both streams usually share one terminal, so
the renderer ends a half-written line on one stream before it writes to the other.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from .._events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    CompactionEvent,
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

__all__ = [
    "Renderer",
    "Style",
    "color_wanted",
    "compaction_line",
    "is_terminal",
    "last_exchange",
    "model_table",
    "one_line",
    "usage_summary",
]

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


_COMPACTION_REASONS = {
    "manual": "/compact",
    "threshold": "automatic, the context neared the model's window",
    "overflow": "automatic, the model refused the context as too long",
}


def compaction_line(event: CompactionEvent, style: Style) -> str:
    """The status line of a compaction: what started it, and what became of the context
    (``[compaction] /compact: about 12,345 tokens; now a summary and the 4 most recent
    messages``), or why it failed."""
    why = _COMPACTION_REASONS.get(event.reason, event.reason)
    if event.messages is None:
        return style("yellow", f"[compaction] {why}: not done:") + (
            f" {event.error_message or 'unknown error'}"
        )
    kept = sum(1 for m in event.messages if m.role not in ("system", "compactionSummary"))
    recent = "the most recent message" if kept == 1 else f"the {kept} most recent messages"
    return (
        style("blue", f"[compaction] {why}:")
        + f" about {event.tokens_before:,} tokens; now a summary and {recent}"
    )


def last_exchange(messages: Sequence[AgentMessage]) -> list[tuple[str, str]]:
    """``--continue``'s recap: ``[("last prompt", ...), ("last answer", ...)]`` from the
    last user message and the last assistant message after it, each on one line."""
    users = [i for i, message in enumerate(messages) if isinstance(message, UserMessage)]
    if not users:
        return []
    prompt = messages[users[-1]]
    assert isinstance(prompt, UserMessage)
    recap = [("last prompt", _text_of(prompt))]
    replies = [m for m in messages[users[-1] :] if isinstance(m, AssistantMessage)]
    if replies:
        reply = replies[-1]
        answer = one_line(content_text(reply.content, " "))
        if reply.stop_reason in ("error", "aborted"):
            problem = f"({reply.stop_reason}: {reply.error_message or 'no message'})"
            answer = one_line(f"{answer} {problem}" if answer else problem)
        recap.append(("last answer", answer or "(no text)"))
    return recap


def model_table(models: Sequence[Model], *, demo: Model) -> str:
    """``trio-agent models``: a header and one line per model, columns aligned.

    ``demo`` is the offline demo model: it reads only text (it ignores images).
    """
    rows = [("MODEL", "CONTEXT", "INPUT", "THINKING", "$/M IN", "$/M OUT")]
    for model in models:
        inputs = ["text"] if model is demo else model.input
        rows.append(
            (
                f"{model.provider}/{model.id}",
                f"{model.context_window:,}",
                ", ".join(inputs),
                "yes" if model.reasoning else "no",
                f"{model.cost.input:.2f}",
                f"{model.cost.output:.2f}",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    right = {1, 4, 5}  # numbers
    lines = [
        "  ".join(
            cell.rjust(width) if column in right else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    return "".join(line + "\n" for line in lines)


class Renderer:
    """The program's agent listener: writes events to stdout/stderr as they arrive.

    Human form: text deltas to ``stdout`` unchanged; thinking (dimmed), ``[tool call]``,
    ``[tool result]``, ``[tool error]``, ``[error]``, ``[aborted]`` and delivered
    ``[steer]``/``[follow-up]`` lines to ``stderr``. JSON form: every event as one line of
    :func:`~trio_agent.serialization.to_json` on ``stdout``.

    When a reader goes away (``trio-agent run ... | head``), the renderer calls
    :attr:`on_output_gone` and drops every later write: the program ends quietly.

    Args:
        stdout: Where the answer goes.
        stderr: Where everything else goes.
        json_lines: Print events as JSON Lines instead.
        color: Colour the ``stderr`` lines.
        max_retries: The retries of a failed request, named in the error line of a
            rate limit (429); ``None``: not named.
    """

    def __init__(
        self,
        stdout: TextIO,
        stderr: TextIO,
        *,
        json_lines: bool,
        color: bool = False,
        max_retries: int | None = None,
    ) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.json_lines = json_lines
        self.style = Style(color)
        self.max_retries = max_retries
        self.on_output_gone: Callable[[], None] | None = None
        """Called once when a reader went away (a broken pipe)."""
        self._gone = False
        self._answering = False  # an assistant message is streaming
        self._after_answer: list[str] = []  # notices waiting for the answer to end
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
            self._put(self.stdout, to_json(event) + "\n")
            return
        if isinstance(event, MessageUpdateEvent):
            self._update(event)
        elif isinstance(event, AgentStartEvent):
            self._first_user_message = True
        elif isinstance(event, MessageStartEvent) and isinstance(event.message, UserMessage):
            self._user_message(event.message)
        elif isinstance(event, MessageStartEvent) and isinstance(event.message, AssistantMessage):
            self._answering = True
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
        elif isinstance(event, CompactionEvent):
            self.notice(compaction_line(event, self.style))
        elif isinstance(event, AgentEndEvent):
            self._answering = False
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
        self._answering = False
        self.end_line()
        calls = [block for block in message.content if isinstance(block, ToolCall)]
        if len(calls) > 1:  # parallel calls: label them so results can be matched
            self._labels.update({call.id: f" #{n}" for n, call in enumerate(calls, 1)})
        if message.stop_reason == "error":
            text = message.error_message or "unknown error"
            self.notice(self.style("red", f"[error] {text}{self._retry_hint(text)}"))
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

    def _retry_hint(self, error: str) -> str:
        """After a rate limit's error: how many retries were made, and the option."""
        if self.max_retries is None or not _RATE_LIMITED.search(error):
            return ""
        if self.max_retries == 0:
            return " (not retried; --max-retries N retries a rate-limited request)"
        times = "once" if self.max_retries == 1 else f"{self.max_retries} times"
        return f" (retried {times}; a larger --max-retries waits longer for the limit)"

    # -- writing --------------------------------------------------------------------------

    def _put(self, stream: TextIO, text: str) -> None:
        """Write and flush; once a reader went away, write nothing."""
        if self._gone:
            return
        try:
            stream.write(text)
            stream.flush()
        except BrokenPipeError:
            self._gone = True
            _point_at_devnull(stream)
            if self.on_output_gone is not None:
                self.on_output_gone()

    def _write(self, stream: TextIO, text: str, plain: str) -> None:
        """Write ``text`` (``plain`` without its colours) to ``stream``."""
        if self._open is not None and self._open is not stream:
            self.end_line()
        self._open = None if plain.endswith("\n") else stream
        self._put(stream, text)

    def end_line(self) -> None:
        """End the current line (of either stream) if text was written to it; then, unless
        an answer is streaming, show the notices that waited for it
        (:meth:`notice_after_answer`)."""
        stream, self._open = self._open, None
        if stream is not None:
            self._put(stream, "\n")
        if self._answering:
            return
        waiting, self._after_answer = self._after_answer, []
        for line in waiting:
            self._put(self.stderr, line + "\n")

    def finish(self) -> None:
        """The program ends (interrupted, maybe mid-answer): end the line, and show the
        notices still waiting for the answer."""
        self._answering = False
        self.end_line()

    def notice(self, line: str) -> None:
        """Write one line to stderr, after ending a pending line."""
        self.end_line()
        self._put(self.stderr, line + "\n")

    def notice_after_answer(self, line: str) -> None:
        """Like :meth:`notice`, but while an answer is streaming the line waits until the
        answer has ended, and is shown below it (never in the middle of a word)."""
        if self._answering:
            self._after_answer.append(line)
        else:
            self.notice(line)

    def error(self, text: str, *, after_answer: bool = False) -> None:
        """An ``[error]`` notice (a failed command, say); with ``after_answer``, shown as
        :meth:`notice_after_answer` shows it."""
        line = self.style("red", f"[error] {text}")
        if after_answer:
            self.notice_after_answer(line)
        else:
            self.notice(line)

    def info(self, tag: str, text: str) -> None:
        """A ``[tag] text`` notice, the tag dimmed."""
        self.notice(self.style("dim", f"[{tag}]") + " " + text)


_RATE_LIMITED = re.compile(r"(?:^|\. )429\b")
"""An error message of a rate-limited request (also after the retry-delay message)."""


def _point_at_devnull(stream: TextIO) -> None:
    """Point a broken stream's file descriptor at the null device: what is still in its
    buffer (flushed again at exit) then goes nowhere instead of raising again."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def _text_of(message: UserMessage) -> str:
    return one_line(content_text(message.content, " ")) or "(no text)"


def _duration(milliseconds: int) -> str:
    if milliseconds < 1000:
        return f"{milliseconds} ms"
    return f"{milliseconds / 1000:.1f} s"
