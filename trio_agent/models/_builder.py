"""Build an assistant message block by block and emit snapshot stream events.

Every provider (the faux one included) streams through an :class:`AssistantMessageBuilder`:
it owns the growing message, hands out one event per change whose ``partial`` is an
immutable snapshot, parses streamed tool-call arguments incrementally, and times the
response on Trio's clock. Sharing it keeps the event shapes and orderings identical across
providers.
"""

from __future__ import annotations

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

__all__ = ["AssistantMessageBuilder"]

ABORTED_MESSAGE = "Request was aborted"


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
        self._open: set[int] = set()

    # -- snapshots ------------------------------------------------------------------

    @property
    def content(self) -> list[AssistantContent]:
        """A copy of the current content blocks."""
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
        return index, TextStartEvent(content_index=index, partial=self.snapshot())

    def text_delta(self, index: int, delta: str) -> TextDeltaEvent:
        """Append ``delta`` to the text block at ``index``."""
        block = self._block(index, TextContent)
        # Direct construction: this runs once per streamed token (attrs.evolve is slower).
        self._content[index] = TextContent(
            text=block.text + delta, text_signature=block.text_signature
        )
        return TextDeltaEvent(content_index=index, delta=delta, partial=self.snapshot())

    def end_text(
        self, index: int, *, text: str | None = None, text_signature: str | None = None
    ) -> TextEndEvent:
        """Close the text block at ``index``; ``text`` replaces the streamed text."""
        block = self._block(index, TextContent)
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
        return index, ThinkingStartEvent(content_index=index, partial=self.snapshot())

    def thinking_delta(self, index: int, delta: str) -> ThinkingDeltaEvent:
        """Append ``delta`` to the thinking block at ``index``."""
        block = self._block(index, ThinkingContent)
        self._content[index] = ThinkingContent(
            thinking=block.thinking + delta,
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

    def end_thinking(
        self, index: int, *, thinking: str | None = None, signature: str | None = None
    ) -> ThinkingEndEvent:
        """Close the thinking block at ``index``."""
        block = self._block(index, ThinkingContent)
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
        return index, ToolCallStartEvent(content_index=index, partial=self.snapshot())

    def tool_call_delta(self, index: int, delta: str) -> ToolCallDeltaEvent:
        """Append raw JSON argument text; the partial shows the best-effort arguments."""
        block = self._block(index, ToolCall)
        arguments = self._args[index].append(delta)
        if arguments is not block.arguments:
            self._content[index] = attrs.evolve(block, arguments=arguments)
        return ToolCallDeltaEvent(content_index=index, delta=delta, partial=self.snapshot())

    def tool_call_arguments_text(self, index: int) -> str:
        """The raw argument text received so far for the tool call at ``index``."""
        return self._args[index].text

    def replace_tool_call_arguments(self, index: int, full_text: str) -> ToolCallDeltaEvent | None:
        """Set the complete argument text of the tool call at ``index`` (a provider resent it).

        When ``full_text`` extends what streamed, only the missing piece is the delta;
        otherwise parsing restarts and the whole text is the delta. Returns ``None`` (no
        event) when nothing changed.
        """
        block = self._block(index, ToolCall)
        stream = self._args[index]
        delta = stream.replace(full_text)
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
        self.stop_reason = reason
        return DoneEvent(reason=reason, message=self.snapshot(duration_ms=self._duration()))

    def error(self, error_message: str, *, aborted: bool = False) -> ErrorEvent:
        """The terminal ``error`` event; partial content is kept."""
        reason: Literal["error", "aborted"] = "aborted" if aborted else "error"
        self.stop_reason = reason
        message = self.snapshot(error_message=error_message, duration_ms=self._duration())
        return ErrorEvent(reason=reason, error=message)

    def aborted(self, error_message: str = ABORTED_MESSAGE) -> ErrorEvent:
        """The terminal event of an aborted request."""
        return self.error(error_message, aborted=True)

    # -- internals ------------------------------------------------------------------

    def _duration(self) -> int:
        return round((trio.current_time() - self._started_at) * 1000)

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
