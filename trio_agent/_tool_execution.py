"""Tool calls: the one runner of a call, and one turn's tool batch.

As pi 1.6.0 does, on Trio. Tool failures are data (an
``Exception`` from a tool or a tool-level hook becomes an error result); cancellation is an
exception and propagates.

Every execution is a task of the batch's nursery, sequential batches included; the task
that runs the batch (the run's own task) dispatches its children's events, which a memory
channel carries to it (``tool_execution_update`` progress and ``tool_execution_end``). So
listeners are only ever called from the run's task, one event at a time, and a tool's
``on_update`` never blocks it.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import attrs
import trio

from ._abort import OPERATION_ABORTED, AbortSignal
from ._approval import ApproveToolCall, ToolApproval, denial_text, needs_approval
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
from ._messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage
from ._tools import AgentTool, AgentToolResult, AgentToolUpdateCallback
from ._util import error_text, maybe_await
from ._validation import validate_tool_arguments

__all__ = [
    "AfterToolCallHook",
    "AgentToolCallOutcome",
    "BeforeToolCallHook",
    "ExecutionEvents",
    "ToolBatch",
    "error_result",
    "run_tool_call",
]

BeforeToolCallHook = Callable[
    [BeforeToolCallContext, AbortSignal],
    BeforeToolCallResult | Awaitable[BeforeToolCallResult | None] | None,
]
"""``before_tool_call(context, signal)``: return ``BeforeToolCallResult(block=True)`` to
prevent execution."""

AfterToolCallHook = Callable[
    [AfterToolCallContext, AbortSignal],
    AfterToolCallResult | Awaitable[AfterToolCallResult | None] | None,
]
"""``after_tool_call(context, signal)``: return field overrides for the result."""

Emit = Callable[[AgentEvent], Awaitable[None]]

TRUNCATED_TEMPLATE = (
    'Tool call "{name}" was not executed: the response hit the output token limit, so its '
    "arguments may be truncated. Re-issue the tool call with complete arguments."
)


def error_result(text: str, *, terminate: bool | None = None) -> AgentToolResult:
    """An error result made by the loop: ``text`` as its only content, ``details`` ``{}``.

    The error flag is not part of it: it travels beside the result
    (:attr:`AgentToolCallOutcome.is_error`, the event's and the message's ``is_error``).
    """
    return AgentToolResult(content=[TextContent(text=text)], details={}, terminate=terminate)


@attrs.frozen(kw_only=True)
class AgentToolCallOutcome:
    """The outcome of one tool call after its hooks (what :func:`run_tool_call` returns)."""

    tool_call: ToolCall
    """The call, as the model sent it."""
    result: AgentToolResult
    """The final result (after ``after_tool_call``), or the error result the loop made
    (unknown tool, invalid arguments, blocked, failed or aborted)."""
    is_error: bool
    """Whether the model sees the result as an error (``after_tool_call`` may change it)."""
    duration_ms: int | None = None
    """How long ``execute()`` took on Trio's clock; ``None`` when the tool never ran."""


def _immediate(
    tool_call: ToolCall, text: str, terminate: bool | None = None
) -> AgentToolCallOutcome:
    return AgentToolCallOutcome(
        tool_call=tool_call, result=error_result(text, terminate=terminate), is_error=True
    )


def find_tool(tools: Sequence[AgentTool], name: str) -> AgentTool | None:
    """The first tool called ``name``."""
    for tool in tools:
        if tool.name == name:
            return tool
    return None


@attrs.frozen
class _Prepared:
    tool_call: ToolCall
    tool: AgentTool
    args: dict[str, Any]


@attrs.frozen(kw_only=True)
class _Shared:
    """What every call of a batch shares (the message, the context, the call hooks and
    the run's signal)."""

    assistant_message: AssistantMessage
    context: AgentContext
    before_tool_call: BeforeToolCallHook | None
    after_tool_call: AfterToolCallHook | None
    signal: AbortSignal
    approve: ApproveToolCall | None = None
    decided: dict[str, ToolApproval] = attrs.field(factory=dict)


async def _approved(
    tool_call: ToolCall, tool: AgentTool, hooks: _Shared
) -> AgentToolCallOutcome | None:
    """``None`` when the call may run; else its denial (a decision in the transcript, or
    the inline approver's answer)."""
    decision = hooks.decided.get(tool_call.id) if hooks.decided else None
    if decision is not None:
        approved, reason = decision.approved, decision.reason
    elif hooks.approve is not None and await needs_approval(tool, tool_call):
        answer = await maybe_await(hooks.approve(tool_call, hooks.signal))
        approved = answer is True
        reason = answer if isinstance(answer, str) else None
    else:
        return None
    return None if approved else _immediate(tool_call, denial_text(reason))


async def _prepare(
    tool_call: ToolCall, tool: AgentTool | None, hooks: _Shared
) -> _Prepared | AgentToolCallOutcome:
    """Preparation as pi 1.6.0 does it, with the abort checked first."""
    signal = hooks.signal
    if signal.aborted:
        return _immediate(tool_call, OPERATION_ABORTED)
    if tool is None:
        return _immediate(tool_call, f"Tool {tool_call.name} not found")
    try:
        prepared_call = tool_call
        if tool.prepare_arguments is not None:
            new_args = await maybe_await(tool.prepare_arguments(tool_call.arguments))
            if new_args is not tool_call.arguments:
                prepared_call = attrs.evolve(tool_call, arguments=new_args)
        args = validate_tool_arguments(tool, prepared_call)
        if hooks.decided or (tool.needs_approval and hooks.approve is not None):
            denied = await _approved(tool_call, tool, hooks)
            if denied is not None:
                return denied
        if hooks.before_tool_call is not None:
            decision = await maybe_await(
                hooks.before_tool_call(
                    BeforeToolCallContext(
                        assistant_message=hooks.assistant_message,
                        tool_call=tool_call,
                        args=args,
                        context=hooks.context,
                    ),
                    signal,
                )
            )
            if signal.aborted:
                return _immediate(tool_call, OPERATION_ABORTED)
            if decision is not None and decision.block:
                return _immediate(
                    tool_call,
                    decision.reason or "Tool execution was blocked",
                    True if decision.terminate is True else None,
                )
    except Exception as exc:
        return _immediate(tool_call, error_text(exc))
    if signal.aborted:
        return _immediate(tool_call, OPERATION_ABORTED)
    return _Prepared(tool_call, tool, args)


async def _execute(
    prepared: _Prepared, hooks: _Shared, on_update: AgentToolUpdateCallback | None
) -> AgentToolCallOutcome:
    """``execute`` then ``after_tool_call``. Updates are accepted until ``execute``
    settles; later ``on_update`` calls are ignored."""
    accepting = True

    def update(partial: AgentToolResult) -> None:
        if accepting and on_update is not None:
            on_update(partial)

    tool, call = prepared.tool, prepared.tool_call
    started = trio.current_time()
    try:
        result = await tool.execute(call.id, prepared.args, hooks.signal, update)
        if not isinstance(result, AgentToolResult):
            raise TypeError(
                f"tool {tool.name!r} returned {type(result).__name__}, expected AgentToolResult"
            )
        is_error = result.is_error is True
    except Exception as exc:
        result, is_error = error_result(error_text(exc)), True
    finally:
        accepting = False
    duration_ms = round((trio.current_time() - started) * 1000)
    if hooks.after_tool_call is not None:
        result, is_error = await _after(prepared, result, is_error, hooks)
    return AgentToolCallOutcome(
        tool_call=call, result=result, is_error=is_error, duration_ms=duration_ms
    )


async def _after(
    prepared: _Prepared, result: AgentToolResult, is_error: bool, hooks: _Shared
) -> tuple[AgentToolResult, bool]:
    assert hooks.after_tool_call is not None
    try:
        override = await maybe_await(
            hooks.after_tool_call(
                AfterToolCallContext(
                    assistant_message=hooks.assistant_message,
                    tool_call=prepared.tool_call,
                    args=prepared.args,
                    result=result,
                    is_error=is_error,
                    context=hooks.context,
                ),
                hooks.signal,
            )
        )
    except Exception as exc:
        return error_result(error_text(exc)), True
    if override is None:
        return result, is_error
    changes: dict[str, Any] = {}
    if override.content is not None:
        changes["content"] = list(override.content)
        # Replaced content may no longer match the old structured content.
        changes["structured_content"] = override.structured_content
    elif override.structured_content is not None:
        changes["structured_content"] = override.structured_content
    for name in ("details", "usage", "terminate"):
        value = getattr(override, name)
        if value is not None:
            changes[name] = value
    # The is_error override changes the flag beside the result, not the result.
    if override.is_error is not None:
        is_error = override.is_error
    return (attrs.evolve(result, **changes) if changes else result), is_error


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

    Tool and hook failures come back as error outcomes; an aborted ``signal`` gives the
    ``Operation aborted`` outcome. Cancellation propagates.
    """
    hooks = _Shared(
        assistant_message=assistant_message,
        context=context,
        before_tool_call=before_tool_call,
        after_tool_call=after_tool_call,
        signal=signal if signal is not None else AbortSignal(),
    )
    prepared = await _prepare(tool_call, find_tool(tools, tool_call.name), hooks)
    if isinstance(prepared, AgentToolCallOutcome):
        return prepared
    return await _execute(prepared, hooks, on_update)


@attrs.define(eq=False)
class _Call:
    """Where one call of the batch is. Each flag turns true when its event was handed to
    the sink, whatever the listeners then did."""

    tool_call: ToolCall
    tool: AgentTool | None
    started: bool = False
    outcome: AgentToolCallOutcome | None = None
    ended: bool = False
    executing_since: float | None = None
    message: ToolResultMessage | None = None
    published: bool = False
    awaiting_approval: bool = False


@attrs.frozen
class ExecutionEvents:
    """The channel that carries the events of tool executions (nursery tasks) to the
    run's task, which hands them on. One per run: a batch ends only once its executions'
    events were all handed on. Unbounded, so ``on_update`` never blocks a tool; the run
    closes it when it ends."""

    send: trio.MemorySendChannel[tuple[_Call, AgentEvent]]
    receive: trio.MemoryReceiveChannel[tuple[_Call, AgentEvent]]

    @classmethod
    def open(cls) -> ExecutionEvents:
        send, receive = trio.open_memory_channel[tuple[_Call, AgentEvent]](math.inf)
        return cls(send, receive)

    def close(self) -> None:
        """Close both ends (synchronously: the run may be ending under cancellation)."""
        self.send.close()
        self.receive.close()


@attrs.define(eq=False)
class ToolBatch:
    """The tool calls of one assistant message and their progress.

    The loop makes one per turn with tool calls and runs it (:meth:`run` or
    :meth:`refuse_truncated`); a run that ends badly closes it with :meth:`close`.
    """

    assistant_message: AssistantMessage
    calls: list[_Call]
    emit: Emit
    """The run's emitter."""
    _events: ExecutionEvents | None = None

    @classmethod
    def for_message(
        cls,
        message: AssistantMessage,
        tools: Sequence[AgentTool],
        emit: Emit,
        events: ExecutionEvents | None = None,
    ) -> ToolBatch:
        """A batch for the tool calls of ``message``, each looked up once in ``tools``.

        ``events`` carries the executions' events to the batch's task (see
        :class:`ExecutionEvents`); without it the batch opens its own when it runs.
        """
        calls = [
            _Call(block, find_tool(tools, block.name))
            for block in message.content
            if isinstance(block, ToolCall)
        ]
        return cls(message, calls, emit, events)

    def runs_sequentially(self, configured: Literal["sequential", "parallel"]) -> bool:
        """Whether the batch runs sequentially: configured so, or one of its tools asks."""
        return configured == "sequential" or any(
            call.tool is not None and call.tool.execution_mode == "sequential"
            for call in self.calls
        )

    @property
    def awaiting_approval(self) -> bool:
        """Some calls were left for a deferred decision (no inline approver)."""
        return any(call.awaiting_approval for call in self.calls)

    @property
    def result_messages(self) -> list[ToolResultMessage]:
        """The published result messages, in source order."""
        return [call.message for call in self.calls if call.published and call.message]

    @property
    def terminate(self) -> bool:
        """True when at least one call finished and every finished result terminates."""
        finished = [call.outcome for call in self.calls if call.outcome is not None]
        return bool(finished) and all(o.result.terminate is True for o in finished)

    # -- events -------------------------------------------------------------------------

    async def _start(self, call: _Call) -> None:
        call.started = True
        tool_call = call.tool_call
        await self.emit(
            ToolExecutionStartEvent(
                tool_call_id=tool_call.id, tool_name=tool_call.name, args=tool_call.arguments
            )
        )

    def _end_event(self, call: _Call) -> ToolExecutionEndEvent:
        outcome = call.outcome
        assert outcome is not None
        return ToolExecutionEndEvent(
            tool_call_id=outcome.tool_call.id,
            tool_name=outcome.tool_call.name,
            result=outcome.result,
            is_error=outcome.is_error,
            duration_ms=outcome.duration_ms,
        )

    async def _end(self, call: _Call, outcome: AgentToolCallOutcome) -> None:
        call.outcome = outcome
        call.ended = True
        await self.emit(self._end_event(call))

    async def _publish(self, call: _Call) -> None:
        outcome = call.outcome
        assert outcome is not None
        if call.message is None:
            call.message = ToolResultMessage(
                tool_call_id=outcome.tool_call.id,
                tool_name=outcome.tool_call.name,
                content=list(outcome.result.content or []),
                details=outcome.result.details,
                usage=outcome.result.usage,
                is_error=outcome.is_error,
                duration_ms=outcome.duration_ms,
            )
            await self.emit(MessageStartEvent(message=call.message))
        call.published = True
        await self.emit(MessageEndEvent(message=call.message))

    # -- running ------------------------------------------------------------------------

    async def refuse_truncated(self) -> None:
        """Fail every call without running it: the response hit the output token limit."""
        for call in self.calls:
            await self._start(call)
            text = TRUNCATED_TEMPLATE.format(name=call.tool_call.name)
            await self._end(call, _immediate(call.tool_call, text))
            await self._publish(call)

    async def run(
        self,
        *,
        sequential: bool,
        context: AgentContext,
        before_tool_call: BeforeToolCallHook | None,
        after_tool_call: AfterToolCallHook | None,
        signal: AbortSignal,
        refuse_execution: Callable[[], str | None] | None = None,
        approve: ApproveToolCall | None = None,
        decided: dict[str, ToolApproval] | None = None,
    ) -> None:
        """Execute the batch.

        Sequential: each call is prepared, executed and published before the next.
        Parallel: every call is prepared first (preflight), then the prepared ones run as
        tasks of one nursery, and results are published in source order. Either way this
        task dispatches the executions' events as they arrive; an abort stops the batch at
        the next checkpoint, and the run's close path answers what is left.
        """
        hooks = _Shared(
            assistant_message=self.assistant_message,
            context=context,
            before_tool_call=before_tool_call,
            after_tool_call=after_tool_call,
            signal=signal,
            approve=approve,
            decided=decided or {},
        )
        if self._events is None:
            self._events = ExecutionEvents.open()
        send = self._events.send

        async def execute(call: _Call, prepared: _Prepared) -> None:
            tool_call = call.tool_call

            def on_update(partial: AgentToolResult) -> None:
                update = ToolExecutionUpdateEvent(
                    tool_call_id=tool_call.id,
                    tool_name=tool_call.name,
                    args=tool_call.arguments,
                    partial_result=partial,
                )
                send.send_nowait((call, update))

            call.executing_since = trio.current_time()
            call.outcome = await _execute(prepared, hooks, on_update)
            send.send_nowait((call, self._end_event(call)))

        async with trio.open_nursery() as nursery:
            deferred: list[tuple[_Call, _Prepared]] = []
            for call in self.calls:
                if (
                    call.tool is not None
                    and call.tool.needs_approval  # False or None: nothing to await
                    and approve is None
                    and call.tool_call.id not in hooks.decided
                    and await needs_approval(call.tool, call.tool_call)
                ):
                    # Deferred: no events, no result; the run ends after this turn.
                    call.awaiting_approval = True
                    continue
                await self._start(call)
                # An abort (say, in a tool_execution_start listener) stops the batch
                # before the call's preparation.
                await trio.lowlevel.checkpoint_if_cancelled()
                prepared = await _prepare(call.tool_call, call.tool, hooks)
                if isinstance(prepared, AgentToolCallOutcome):
                    await self._end(call, prepared)
                elif refuse_execution is not None and (refusal := refuse_execution()):
                    # A usage limit: this call gets the refusal as its error result.
                    await self._end(call, _immediate(call.tool_call, refusal))
                elif sequential:
                    nursery.start_soon(execute, call, prepared)
                    await self._dispatch(1)
                else:
                    deferred.append((call, prepared))
                if sequential:
                    await self._publish(call)
                await trio.lowlevel.checkpoint_if_cancelled()
            for call, prepared in deferred:
                nursery.start_soon(execute, call, prepared)
            await self._dispatch(len(deferred))
        if not sequential:
            for call in self.calls:
                if not call.awaiting_approval:
                    await self._publish(call)

    async def _dispatch(self, running: int) -> None:
        """Hand on the executions' events until ``running`` of them have ended."""
        assert self._events is not None
        receive = self._events.receive
        while running:
            try:
                call, event = receive.receive_nowait()
            except trio.WouldBlock:
                call, event = await receive.receive()
            if await self._hand_on(call, event):
                running -= 1

    async def _hand_on(self, call: _Call, event: AgentEvent) -> bool:
        """Hand an execution's event to the run; whether it ended that execution."""
        ended = isinstance(event, ToolExecutionEndEvent)
        if ended:
            call.ended = True
        await self.emit(event)
        return ended

    # -- closing ------------------------------------------------------------------------

    def committed(self, message: object) -> None:
        """The run committed ``message`` (a result message a failure left open)."""
        for call in self.calls:
            if call.message is message:
                call.published = True

    async def close(self, failure: str | None) -> None:
        """Close the batch of a run that ended badly; its executions have stopped.

        After an abort (``failure`` is ``None``) every call gets exactly one result, in
        source order: what the executions reported is delivered first, calls that finished
        keep their outcome, the others end with ``Operation aborted``. After a failure,
        executions cut short end with the failure's text and their calls stay unanswered.
        """
        if failure is not None:
            for call in self.calls:
                if call.started and not call.ended:
                    await self._end(call, _immediate(call.tool_call, failure))
            return
        if self._events is not None:
            receive = self._events.receive
            while True:
                try:
                    call, event = receive.receive_nowait()
                except trio.WouldBlock:
                    break
                await self._hand_on(call, event)
        for call in self.calls:
            if call.published:
                continue
            if not call.started:
                await self._start(call)
            if not call.ended:
                if call.outcome is None:
                    outcome = _immediate(call.tool_call, OPERATION_ABORTED)
                    if call.executing_since is not None:
                        # A call the abort interrupted did run: report for how long.
                        elapsed = trio.current_time() - call.executing_since
                        outcome = attrs.evolve(outcome, duration_ms=round(elapsed * 1000))
                    call.outcome = outcome
                await self._end(call, call.outcome)
            await self._publish(call)
