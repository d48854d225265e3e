"""One turn's tool batch: preparation, validation, hooks, sequential or parallel execution.

Reference: upstream-agent.md §3.5-§3.9; SPEC §6 and §8. Tool failures are data (an
``Exception`` from a tool or a tool-level hook becomes an error result); cancellation is an
exception and propagates. Parallel executions are tasks of one nursery, so nothing outlives
the batch.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import attrs
import trio

from ._abort import AbortSignal
from ._events import (
    AgentEvent,
    MessageEndEvent,
    MessageStartEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
)
from ._hooks import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    BeforeToolCallContext,
    BeforeToolCallResult,
)
from ._messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
)
from ._tools import AgentTool, AgentToolResult, AgentToolUpdateCallback
from ._util import collapse_exception_group, maybe_await
from ._validation import validate_tool_arguments

__all__ = [
    "AfterToolCallHook",
    "AgentToolCallOutcome",
    "BeforeToolCallHook",
    "CallRecord",
    "ToolBatch",
    "aborted_result",
    "error_result",
    "run_tool_call",
]

BeforeToolCallHook = Callable[
    [BeforeToolCallContext, AbortSignal | None],
    BeforeToolCallResult | Awaitable[BeforeToolCallResult | None] | None,
]
"""``before_tool_call(context, signal)``: return ``BeforeToolCallResult(block=True)`` to
prevent execution."""

AfterToolCallHook = Callable[
    [AfterToolCallContext, AbortSignal | None],
    AfterToolCallResult | Awaitable[AfterToolCallResult | None] | None,
]
"""``after_tool_call(context, signal)``: return field overrides for the result."""

Emit = Callable[[AgentEvent], Awaitable[None]]

OPERATION_ABORTED = "Operation aborted"
TRUNCATED_TEMPLATE = (
    'Tool call "{name}" was not executed: the response hit the output token limit, so its '
    "arguments may be truncated. Re-issue the tool call with complete arguments."
)


def error_result(text: str, *, terminate: bool | None = None) -> AgentToolResult:
    """An error result whose only content is ``text`` (``details`` is ``{}``)."""
    return AgentToolResult(
        content=[TextContent(text=text)], details={}, is_error=True, terminate=terminate
    )


def aborted_result() -> AgentToolResult:
    """The result given to tool calls that an abort left without one."""
    return error_result(OPERATION_ABORTED)


def _exception_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


@attrs.frozen(kw_only=True)
class AgentToolCallOutcome:
    """Final outcome of one tool call after hooks (what :func:`run_tool_call` returns)."""

    tool_call: ToolCall
    result: AgentToolResult
    is_error: bool


@attrs.frozen
class _Prepared:
    tool_call: ToolCall
    tool: AgentTool
    args: dict[str, Any]


@attrs.define
class CallRecord:
    """Progress of one tool call of the current batch (read by the loop's abort path)."""

    tool_call: ToolCall
    started: bool = False
    ended: bool = False
    result: AgentToolResult | None = None
    is_error: bool = True
    duration_ms: int | None = None
    execute_started_at: float | None = None
    """Trio time when ``execute()`` was called (``None`` if it never ran)."""
    message: ToolResultMessage | None = None
    message_emitted: bool = False


async def _prepare(
    tool_call: ToolCall,
    *,
    tools: Sequence[AgentTool],
    assistant_message: AssistantMessage,
    context: AgentContext,
    before_tool_call: BeforeToolCallHook | None,
    signal: AbortSignal | None,
) -> _Prepared | AgentToolResult:
    tool = next((t for t in tools if t.name == tool_call.name), None)
    if tool is None:
        return error_result(f"Tool {tool_call.name} not found")
    try:
        prepared_call = tool_call
        if tool.prepare_arguments is not None:
            new_args = await maybe_await(tool.prepare_arguments(tool_call.arguments))
            if new_args is not tool_call.arguments:
                prepared_call = attrs.evolve(tool_call, arguments=new_args)
        args = validate_tool_arguments(tool, prepared_call)
        if before_tool_call is not None:
            decision = await maybe_await(
                before_tool_call(
                    BeforeToolCallContext(
                        assistant_message=assistant_message,
                        tool_call=tool_call,
                        args=args,
                        context=context,
                    ),
                    signal,
                )
            )
            if signal is not None and signal.aborted:
                return aborted_result()
            if decision is not None and decision.block:
                return error_result(
                    decision.reason or "Tool execution was blocked",
                    terminate=True if decision.terminate is True else None,
                )
    except Exception as exc:
        return error_result(_exception_text(exc))
    if signal is not None and signal.aborted:
        return aborted_result()
    return _Prepared(tool_call, tool, args)


async def _execute(
    prepared: _Prepared,
    *,
    signal: AbortSignal | None,
    on_update: Callable[[AgentToolResult], Awaitable[None]] | None,
    nursery: trio.Nursery,
) -> tuple[AgentToolResult, bool, int]:
    """Run ``execute``; updates are emitted in order, all before this returns.

    Update emissions run in a helper task started in ``nursery`` (the batch's) on the first
    ``on_update`` call, so a tool that reports no progress costs no extra task.
    """
    accepting = True
    send_updates: trio.MemorySendChannel[AgentToolResult] | None = None
    drained = trio.Event()

    async def drain(receive: trio.MemoryReceiveChannel[AgentToolResult]) -> None:
        assert on_update is not None
        async with receive:
            async for partial in receive:
                await on_update(partial)
        drained.set()

    def update(partial: AgentToolResult) -> None:
        # Sync and non-blocking for the tool: the emission happens in a helper task,
        # serialized with every other event. Calls after execute() settled are dropped.
        nonlocal send_updates
        if not accepting or on_update is None:
            return
        if send_updates is None:
            send_updates, receive = trio.open_memory_channel[AgentToolResult](math.inf)
            nursery.start_soon(drain, receive)
        send_updates.send_nowait(partial)

    started = trio.current_time()
    try:
        result = await prepared.tool.execute(
            prepared.tool_call.id, prepared.args, _signal_or_dummy(signal), update
        )
        if not isinstance(result, AgentToolResult):
            raise TypeError(
                f"tool {prepared.tool.name!r} returned {type(result).__name__}, "
                "expected AgentToolResult"
            )
        is_error = result.is_error is True
    except Exception as exc:
        result, is_error = error_result(_exception_text(exc)), True
    finally:
        accepting = False
        if send_updates is not None:
            send_updates.close()
    duration_ms = round((trio.current_time() - started) * 1000)
    if send_updates is not None:
        await drained.wait()
    return result, is_error, duration_ms


_DUMMY_SIGNAL = AbortSignal()


def _signal_or_dummy(signal: AbortSignal | None) -> AbortSignal:
    # Tools always receive a signal object; without a run signal it never aborts.
    return signal if signal is not None else _DUMMY_SIGNAL


async def _finalize(
    prepared: _Prepared,
    result: AgentToolResult,
    is_error: bool,
    *,
    assistant_message: AssistantMessage,
    context: AgentContext,
    after_tool_call: AfterToolCallHook | None,
    signal: AbortSignal | None,
) -> tuple[AgentToolResult, bool]:
    if after_tool_call is None:
        return result, is_error
    try:
        override = await maybe_await(
            after_tool_call(
                AfterToolCallContext(
                    assistant_message=assistant_message,
                    tool_call=prepared.tool_call,
                    args=prepared.args,
                    result=result,
                    is_error=is_error,
                    context=context,
                ),
                signal,
            )
        )
    except Exception as exc:
        return error_result(_exception_text(exc)), True
    if override is None:
        return result, is_error
    changes: dict[str, Any] = {}
    if override.content is not None:
        changes["content"] = list(override.content)
        # Replaced content may no longer match the old structured content (reference §2.16).
        changes["structured_content"] = override.structured_content
    elif override.structured_content is not None:
        changes["structured_content"] = override.structured_content
    for name in ("details", "usage", "terminate", "is_error"):
        value = getattr(override, name)
        if value is not None:
            changes[name] = value
    if override.is_error is not None:
        is_error = override.is_error
    return attrs.evolve(result, **changes), is_error


async def run_tool_call(
    tool_call: ToolCall,
    *,
    tools: Sequence[AgentTool],
    assistant_message: AssistantMessage,
    context: AgentContext,
    before_tool_call: BeforeToolCallHook | None = None,
    after_tool_call: AfterToolCallHook | None = None,
    signal: AbortSignal | None = None,
    on_update: AgentToolUpdateCallback | None = None,
) -> AgentToolCallOutcome:
    """Run one tool call through prepare, validate, ``before_tool_call``, execute and
    ``after_tool_call``, without emitting events or touching any transcript.

    Tool and hook failures come back as error outcomes. Cancellation propagates.
    """

    async def forward(partial: AgentToolResult) -> None:
        assert on_update is not None
        on_update(partial)
        await trio.lowlevel.checkpoint()

    prepared = await _prepare(
        tool_call,
        tools=tools,
        assistant_message=assistant_message,
        context=context,
        before_tool_call=before_tool_call,
        signal=signal,
    )
    if isinstance(prepared, AgentToolResult):
        return AgentToolCallOutcome(tool_call=tool_call, result=prepared, is_error=True)
    try:
        async with trio.open_nursery() as nursery:
            result, is_error, _ = await _execute(
                prepared,
                signal=signal,
                on_update=forward if on_update is not None else None,
                nursery=nursery,
            )
    except BaseExceptionGroup as group:
        raise collapse_exception_group(group) from None
    result, is_error = await _finalize(
        prepared,
        result,
        is_error,
        assistant_message=assistant_message,
        context=context,
        after_tool_call=after_tool_call,
        signal=signal,
    )
    return AgentToolCallOutcome(tool_call=tool_call, result=result, is_error=is_error)


def _result_message(record: CallRecord) -> ToolResultMessage:
    result = record.result
    assert result is not None
    return ToolResultMessage(
        tool_call_id=record.tool_call.id,
        tool_name=record.tool_call.name,
        content=list(result.content or []),
        details=result.details,
        usage=result.usage,
        is_error=record.is_error,
        duration_ms=record.duration_ms,
    )


@attrs.define(eq=False)
class ToolBatch:
    """The tool calls of one assistant message and their progress.

    The loop creates one per turn with tool calls and runs it with :meth:`run` (or
    :meth:`refuse_truncated`); after an abort, :meth:`close_aborted` answers every call
    that has no result yet.
    """

    assistant_message: AssistantMessage
    records: list[CallRecord]
    emit: Emit
    """The loop's emitter (already shielded from the run's abort)."""

    @classmethod
    def for_message(cls, message: AssistantMessage, emit: Emit) -> ToolBatch:
        calls = [block for block in message.content if isinstance(block, ToolCall)]
        return cls(message, [CallRecord(call) for call in calls], emit)

    # -- event helpers --------------------------------------------------------------

    async def _start(self, record: CallRecord) -> None:
        record.started = True
        call = record.tool_call
        await self.emit(
            ToolExecutionStartEvent(tool_call_id=call.id, tool_name=call.name, args=call.arguments)
        )

    async def _end(
        self,
        record: CallRecord,
        result: AgentToolResult,
        is_error: bool,
        duration_ms: int | None = None,
    ) -> None:
        record.result, record.is_error, record.duration_ms = result, is_error, duration_ms
        record.ended = True
        call = record.tool_call
        await self.emit(
            ToolExecutionEndEvent(
                tool_call_id=call.id,
                tool_name=call.name,
                result=result,
                is_error=is_error,
                duration_ms=duration_ms,
            )
        )

    async def _publish(self, record: CallRecord) -> None:
        if record.message is None:
            record.message = _result_message(record)
        record.message_emitted = True
        await self.emit(MessageStartEvent(message=record.message))
        await self.emit(MessageEndEvent(message=record.message))

    def _update_emitter(self, record: CallRecord) -> Callable[[AgentToolResult], Awaitable[None]]:
        call = record.tool_call

        async def on_update(partial: AgentToolResult) -> None:
            if record.ended:
                return
            await self.emit(
                ToolExecutionUpdateEvent(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    args=call.arguments,
                    partial_result=partial,
                )
            )

        return on_update

    @property
    def result_messages(self) -> list[ToolResultMessage]:
        """The published result messages, in source order."""
        return [r.message for r in self.records if r.message_emitted and r.message]

    @property
    def terminate(self) -> bool:
        """True when at least one call finished and every finished result terminates."""
        finished = [r for r in self.records if r.result is not None]
        return bool(finished) and all(r.result.terminate is True for r in finished if r.result)

    # -- running ----------------------------------------------------------------------

    async def refuse_truncated(self) -> None:
        """Fail every call without running it: the response hit the output token limit."""
        for record in self.records:
            await self._start(record)
            await self._end(
                record, error_result(TRUNCATED_TEMPLATE.format(name=record.tool_call.name)), True
            )
            await self._publish(record)

    async def run(
        self,
        *,
        mode: Literal["sequential", "parallel"],
        context: AgentContext,
        before_tool_call: BeforeToolCallHook | None,
        after_tool_call: AfterToolCallHook | None,
        signal: AbortSignal | None,
    ) -> None:
        """Execute the batch (reference §3.6)."""
        tools = context.tools

        async def prepare(record: CallRecord) -> _Prepared | AgentToolResult:
            return await _prepare(
                record.tool_call,
                tools=tools,
                assistant_message=self.assistant_message,
                context=context,
                before_tool_call=before_tool_call,
                signal=signal,
            )

        async def execute_and_finalize(
            record: CallRecord, prepared: _Prepared, nursery: trio.Nursery
        ) -> None:
            if signal is not None and signal.aborted:
                await self._end(record, aborted_result(), True)
                return
            record.execute_started_at = trio.current_time()
            result, is_error, duration = await _execute(
                prepared,
                signal=signal,
                on_update=self._update_emitter(record),
                nursery=nursery,
            )
            record.duration_ms = duration
            result, is_error = await _finalize(
                prepared,
                result,
                is_error,
                assistant_message=self.assistant_message,
                context=context,
                after_tool_call=after_tool_call,
                signal=signal,
            )
            await self._end(record, result, is_error, duration)

        # Sequential: each call is prepared, executed and published before the next.
        # Parallel: all calls are prepared first (preflight), then the allowed ones run as
        # tasks of the batch's nursery, and results are published in source order.
        sequential = mode == "sequential"
        async with trio.open_nursery() as nursery:  # tool tasks and update emitters
            deferred: list[tuple[CallRecord, _Prepared]] = []
            for record in self.records:
                await self._start(record)
                prepared = await prepare(record)
                if isinstance(prepared, AgentToolResult):
                    await self._end(record, prepared, True)
                elif sequential:
                    await execute_and_finalize(record, prepared, nursery)
                else:
                    deferred.append((record, prepared))
                if sequential:
                    await self._publish(record)
                if signal is not None and signal.aborted:
                    await trio.lowlevel.checkpoint()  # the run's abort scope stops here
                    break
            for record, prepared in deferred:
                nursery.start_soon(execute_and_finalize, record, prepared, nursery)
        if not sequential:
            for record in self.records:
                if record.ended:
                    await self._publish(record)

    async def close_aborted(self) -> None:
        """Answer, in source order, every call the abort left without a result.

        Must run shielded. Calls that finished but were not yet published get their own
        result message; the others get ``Operation aborted``.
        """
        for record in self.records:
            if record.message_emitted:
                continue
            if not record.started:
                await self._start(record)
            if not record.ended:
                # A call the abort interrupted did run: report how long (SPEC §2.2).
                duration = record.duration_ms
                if duration is None and record.execute_started_at is not None:
                    elapsed = trio.current_time() - record.execute_started_at
                    duration = round(elapsed * 1000)
                await self._end(record, aborted_result(), True, duration)
            await self._publish(record)
