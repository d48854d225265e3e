"""Build an assistant message block by block and emit snapshot stream events.

Every provider (the faux one included) streams through an :class:`AssistantMessageBuilder`:
it owns the growing message, hands out one event per change whose ``partial`` is an
immutable snapshot, parses streamed tool-call arguments incrementally, and times the
response on Trio's clock. Sharing it keeps the event shapes and orderings identical across
providers.

Streaming costs time linear in the size of the answer. A snapshot holds its own copy of each
block's text, so refreshing a long block on every delta would copy the whole text each time
(quadratic). A block's snapshot is therefore exact while the block is short (up to
:data:`EXACT_SNAPSHOT_CHARS` characters), and beyond that it is refreshed once the text not
yet shown reaches 1/:data:`SNAPSHOT_LAG_DIVISOR` of the text shown, so every character is
copied a bounded number of times. The same holds for the parsed preview of a tool call's
arguments. Deltas always carry every piece, and the end events, ``done`` and ``error``
carry the complete blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs
import trio

from .._events import (
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from .._json_stream import ToolCallArgumentsStream
from .._messages import (
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    now_ms,
)

__all__ = [
    "EXACT_SNAPSHOT_CHARS",
    "MALFORMED_EVENT_JSON",
    "SNAPSHOT_LAG_DIVISOR",
    "AssistantMessageBuilder",
]

ABORTED_MESSAGE = "Request was aborted"

MALFORMED_EVENT_JSON = "Error reading response: malformed server-sent event JSON."
"""The error text for stream event data that is not JSON (the OpenAI APIs)."""

EXACT_SNAPSHOT_CHARS = 65536
"""Blocks up to this many characters show every delta in their snapshots."""
SNAPSHOT_LAG_DIVISOR = 16
"""Beyond that, a snapshot lags by less than 1/16 of the text it shows."""


def _refresh_due(length: int, shown: int) -> bool:
    # Exact while short; then once the unshown part reaches 1/SNAPSHOT_LAG_DIVISOR of the
    # shown part, so each character is copied at most about SNAPSHOT_LAG_DIVISOR + 1 times.
    return length <= EXACT_SNAPSHOT_CHARS or (length - shown) * SNAPSHOT_LAG_DIVISOR >= shown


class _GrowingText:
    """The streamed text of one text or thinking block and how much snapshots show."""

    __slots__ = ("_parts", "length", "shown")

    def __init__(self, initial: str) -> None:
        self._parts = [initial] if initial else []
        self.length = len(initial)
        self.shown = self.length

    def add(self, piece: str) -> bool:
        """Add ``piece``; return whether the snapshot should show the text now."""
        if piece:
            self._parts.append(piece)
            self.length += len(piece)
        return _refresh_due(self.length, self.shown)

    @property
    def behind(self) -> bool:
        """Whether the snapshot misses some of the text."""
        return self.shown != self.length

    def text(self) -> str:
        """The whole text, from now on shown."""
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        self.shown = self.length
        return self._parts[0] if self._parts else ""


class _PendingArguments:
    """Argument text of one tool call not yet given to its parser."""

    __slots__ = ("_parts", "length", "shown")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self.length = 0
        self.shown = 0

    def add(self, piece: str) -> bool:
        """Add ``piece``; return whether the preview should be refreshed now."""
        if piece:
            self._parts.append(piece)
            self.length += len(piece)
        return _refresh_due(self.length, self.shown)

    @property
    def behind(self) -> bool:
        """Whether some text waits for the parser."""
        return self.shown != self.length

    def take(self) -> str:
        """The waiting text, from now on given to the parser."""
        text = "".join(self._parts)
        self._parts = []
        self.shown = self.length
        return text

    def restart(self, length: int) -> None:
        """The parser was given ``length`` characters as a whole."""
        self._parts = []
        self.length = self.shown = length


class AssistantMessageBuilder:
    """The growing assistant message of one provider response.

    Methods that change the message return the matching event; the caller yields it.
    Block methods take the ``content_index`` returned by the ``start_*`` method.
    Must be created inside a Trio run (it reads Trio's clock for ``duration_ms``).
    """

    def __init__(self, *, api: str, provider: str, model: str) -> None:
        self.api = api
        self.provider = provider
        self.model = model
        self.usage = Usage()
        """Current usage; providers assign a new :class:`Usage` as numbers arrive."""
        self.stop_reason: StopReason = "pending"
        self.response_id: str | None = None
        self.response_model: str | None = None
        self.timestamp = now_ms()
        self._started_at = trio.current_time()
        self._content: list[AssistantContent] = []
        self._args: dict[int, ToolCallArgumentsStream] = {}
        self._texts: dict[int, _GrowingText] = {}
        self._pending: dict[int, _PendingArguments] = {}
        self._signatures: dict[int, Callable[[], str]] = {}
        self._open: set[int] = set()

    # -- snapshots ------------------------------------------------------------------

    @property
    def content(self) -> list[AssistantContent]:
        """A copy of the current content blocks (complete, even where snapshots lag)."""
        self._catch_up()
        return list(self._content)

    @property
    def open_blocks(self) -> list[int]:
        """Indices of blocks started but not ended, in content order."""
        return sorted(self._open)

    def snapshot(self, **changes: Any) -> AssistantMessage:
        """The message as it is now (an immutable snapshot), with optional overrides."""
        if not changes:  # the per-token path
            return AssistantMessage(
                content=list(self._content),
                api=self.api,
                provider=self.provider,
                model=self.model,
                usage=self.usage,
                stop_reason=self.stop_reason,
                response_id=self.response_id,
                response_model=self.response_model,
                timestamp=self.timestamp,
            )
        fields: dict[str, Any] = {
            "content": list(self._content),
            "api": self.api,
            "provider": self.provider,
            "model": self.model,
            "usage": self.usage,
            "stop_reason": self.stop_reason,
            "response_id": self.response_id,
            "response_model": self.response_model,
            "timestamp": self.timestamp,
        }
        fields.update(changes)
        return AssistantMessage(**fields)

    def start(self) -> StartEvent:
        """The ``start`` event."""
        return StartEvent(partial=self.snapshot())

    # -- text -----------------------------------------------------------------------

    def start_text(self, text: str = "") -> tuple[int, TextStartEvent]:
        """Open a text block (with optional initial text)."""
        index = self._append(TextContent(text=text))
        self._texts[index] = _GrowingText(text)
        return index, TextStartEvent(content_index=index, partial=self.snapshot())

    def text_delta(self, index: int, delta: str) -> TextDeltaEvent:
        """Append ``delta`` to the text block at ``index``."""
        block = self._content[index]
        if type(block) is not TextContent:  # the check of _block, off the per-token path
            block = self._block(index, TextContent)
        growing = self._texts[index]
        if growing.add(delta):
            # Direct construction: this runs once per streamed token (attrs.evolve is slower).
            self._content[index] = TextContent(
                text=growing.text(), text_signature=block.text_signature
            )
        return TextDeltaEvent(content_index=index, delta=delta, partial=self.snapshot())

    def end_text(
        self, index: int, *, text: str | None = None, text_signature: str | None = None
    ) -> TextEndEvent:
        """Close the text block at ``index``; ``text`` replaces the streamed text."""
        block = self._block(index, TextContent)
        growing = self._texts.pop(index, None)
        if text is None and growing is not None and growing.behind:
            text = growing.text()
        if text is not None:
            block = attrs.evolve(block, text=text)
        if text_signature is not None:
            block = attrs.evolve(block, text_signature=text_signature)
        self._content[index] = block
        self._open.discard(index)
        return TextEndEvent(content_index=index, content=block.text, partial=self.snapshot())

    # -- thinking -------------------------------------------------------------------

    def start_thinking(
        self,
        thinking: str = "",
        *,
        signature: str | None = None,
        redacted: bool | None = None,
    ) -> tuple[int, ThinkingStartEvent]:
        """Open a thinking block."""
        block = ThinkingContent(thinking=thinking, thinking_signature=signature, redacted=redacted)
        index = self._append(block)
        self._texts[index] = _GrowingText(thinking)
        return index, ThinkingStartEvent(content_index=index, partial=self.snapshot())

    def thinking_delta(self, index: int, delta: str) -> ThinkingDeltaEvent:
        """Append ``delta`` to the thinking block at ``index``."""
        block = self._block(index, ThinkingContent)
        growing = self._texts[index]
        if growing.add(delta):
            self._content[index] = ThinkingContent(
                thinking=growing.text(),
                thinking_signature=block.thinking_signature,
                redacted=block.redacted,
            )
        return ThinkingDeltaEvent(content_index=index, delta=delta, partial=self.snapshot())

    def set_thinking_signature(self, index: int, signature: str, *, append: bool = False) -> None:
        """Set (or append to) the signature of the thinking block at ``index`` (no event)."""
        block = self._block(index, ThinkingContent)
        if append:
            signature = (block.thinking_signature or "") + signature
        self._content[index] = attrs.evolve(block, thinking_signature=signature)

    def defer_thinking_signature(self, index: int, source: Callable[[], str]) -> None:
        """Let ``source()`` give the signature of the thinking block at ``index`` when the
        block ends or the message is read whole (not in every snapshot): for a signature
        that grows with the stream, so that keeping it costs linear time."""
        self._block(index, ThinkingContent)
        self._signatures[index] = source

    def end_thinking(
        self, index: int, *, thinking: str | None = None, signature: str | None = None
    ) -> ThinkingEndEvent:
        """Close the thinking block at ``index``."""
        block = self._block(index, ThinkingContent)
        source = self._signatures.pop(index, None)
        if signature is None and source is not None:
            signature = source()
        growing = self._texts.pop(index, None)
        if thinking is None and growing is not None and growing.behind:
            thinking = growing.text()
        if thinking is not None:
            block = attrs.evolve(block, thinking=thinking)
        if signature is not None:
            block = attrs.evolve(block, thinking_signature=signature)
        self._content[index] = block
        self._open.discard(index)
        return ThinkingEndEvent(
            content_index=index, content=block.thinking, partial=self.snapshot()
        )

    # -- tool calls -----------------------------------------------------------------

    def start_tool_call(
        self, *, id: str, name: str, arguments: dict[str, Any] | None = None
    ) -> tuple[int, ToolCallStartEvent]:
        """Open a tool-call block."""
        index = self._append(ToolCall(id=id, name=name, arguments=dict(arguments or {})))
        self._args[index] = ToolCallArgumentsStream()
        self._pending[index] = _PendingArguments()
        return index, ToolCallStartEvent(content_index=index, partial=self.snapshot())

    def tool_call_delta(self, index: int, delta: str) -> ToolCallDeltaEvent:
        """Append raw JSON argument text; the partial shows the best-effort arguments."""
        self._block(index, ToolCall)
        if self._pending[index].add(delta):
            self._feed_arguments(index)
        return ToolCallDeltaEvent(content_index=index, delta=delta, partial=self.snapshot())

    def tool_call_arguments_text(self, index: int) -> str:
        """The raw argument text received so far for the tool call at ``index``."""
        self._feed_arguments(index)
        return self._args[index].text

    def replace_tool_call_arguments(self, index: int, full_text: str) -> ToolCallDeltaEvent | None:
        """Set the complete argument text of the tool call at ``index`` (a provider resent it).

        When ``full_text`` extends what streamed, only the missing piece is the delta;
        otherwise parsing restarts and the whole text is the delta. Returns ``None`` (no
        event) when nothing changed.
        """
        self._feed_arguments(index)
        block = self._block(index, ToolCall)
        stream = self._args[index]
        delta = stream.replace(full_text)
        self._pending[index].restart(len(full_text))
        if not delta:
            return None
        if stream.arguments is not block.arguments:
            self._content[index] = attrs.evolve(block, arguments=stream.arguments)
        return ToolCallDeltaEvent(content_index=index, delta=delta, partial=self.snapshot())

    def update_tool_call(self, index: int, **changes: Any) -> None:
        """Change fields (e.g. ``id`` or ``name``) of the tool call at ``index`` (no event)."""
        self._content[index] = attrs.evolve(self._block(index, ToolCall), **changes)

    def end_tool_call(
        self, index: int, *, arguments: dict[str, Any] | None = None
    ) -> ToolCallEndEvent:
        """Close the tool call at ``index``.

        Without ``arguments`` the streamed text is parsed; text that is not a JSON object
        sets ``arguments_error`` (validation then reports it to the model).
        """
        self._feed_arguments(index)
        block = self._block(index, ToolCall)
        if arguments is not None:
            block = attrs.evolve(block, arguments=arguments, arguments_error=None)
        elif self._args[index].text.strip():
            parsed, error = self._args[index].finish()
            block = attrs.evolve(block, arguments=parsed, arguments_error=error)
        self._content[index] = block
        self._open.discard(index)
        return ToolCallEndEvent(content_index=index, tool_call=block, partial=self.snapshot())

    def end_block(self, index: int) -> TextEndEvent | ThinkingEndEvent | ToolCallEndEvent:
        """Close the block at ``index`` with what streamed, whatever its kind."""
        block = self._content[index]
        if isinstance(block, TextContent):
            return self.end_text(index)
        if isinstance(block, ThinkingContent):
            return self.end_thinking(index)
        return self.end_tool_call(index)

    # -- terminal events --------------------------------------------------------------

    def done(self, reason: Literal["stop", "length", "toolUse"] | None = None) -> DoneEvent:
        """The terminal ``done`` event; ``reason`` defaults to the current stop reason,
        else ``toolUse`` when a tool call exists, else ``stop``."""
        if reason is None:
            if self.stop_reason in ("stop", "length", "toolUse"):
                reason = self.stop_reason
            elif any(isinstance(block, ToolCall) for block in self._content):
                reason = "toolUse"
            else:
                reason = "stop"
        assert reason is not None
        self._catch_up()
        self.stop_reason = reason
        return DoneEvent(reason=reason, message=self.snapshot(duration_ms=self._duration()))

    def error(self, error_message: str, *, aborted: bool = False) -> ErrorEvent:
        """The terminal ``error`` event; partial content is kept."""
        reason: Literal["error", "aborted"] = "aborted" if aborted else "error"
        self._catch_up()
        self.stop_reason = reason
        message = self.snapshot(error_message=error_message, duration_ms=self._duration())
        return ErrorEvent(reason=reason, error=message)

    def aborted(self, error_message: str = ABORTED_MESSAGE) -> ErrorEvent:
        """The terminal event of an aborted request."""
        return self.error(error_message, aborted=True)

    # -- internals ------------------------------------------------------------------

    def _duration(self) -> int:
        return round((trio.current_time() - self._started_at) * 1000)

    def _feed_arguments(self, index: int) -> None:
        # Give the parser the argument text it has not seen, and show the new preview.
        pending = self._pending[index]
        if not pending.behind:
            return
        block = self._block(index, ToolCall)
        arguments = self._args[index].append(pending.take())
        if arguments is not block.arguments:
            self._content[index] = attrs.evolve(block, arguments=arguments)

    def _catch_up(self) -> None:
        # Make every lagging snapshot block complete (before a terminal event).
        for index, growing in self._texts.items():
            if growing.behind:
                text = growing.text()
                block = self._content[index]
                if isinstance(block, TextContent):
                    self._content[index] = attrs.evolve(block, text=text)
                elif isinstance(block, ThinkingContent):
                    self._content[index] = attrs.evolve(block, thinking=text)
        for index in self._pending:
            self._feed_arguments(index)
        for index, source in self._signatures.items():
            block = self._content[index]
            assert isinstance(block, ThinkingContent)
            self._content[index] = attrs.evolve(block, thinking_signature=source())

    def _append(self, block: AssistantContent) -> int:
        self._content.append(block)
        index = len(self._content) - 1
        self._open.add(index)
        return index

    def _block(self, index: int, kind: type[Any]) -> Any:
        block = self._content[index]
        if not isinstance(block, kind):
            raise TypeError(f"content block {index} is {type(block).__name__}, not {kind.__name__}")
        return block
