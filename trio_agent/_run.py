"""The run: one run = turns of (streamed assistant response + its tool batch).

The loop does what pi 1.6.0's loop does, step for step, on Trio.

A run is a nursery with a cancel scope for abort: its work (provider request, hooks, tool
executions) happens inside one cancel scope linked to the run's
:class:`~trio_agent.AbortSignal`, so an abort interrupts whatever is being awaited at once.
Events go to the sink from the run's own task, one at a time (parallel tools' events reach
it through a memory channel); an event whose listeners do not await costs no cancel scope
and no task switch, and one that awaits is shielded from the abort. Every run ends with
``agent_end``: a run that does not end normally is finished by one close path
(:meth:`_Run.close`) that knows where the run is.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Literal

import attrs
import trio

from ._abort import OPERATION_ABORTED, REQUEST_ABORTED, AbortSignal, open_abort_scope
from ._approval import ApproveToolCall, decisions, pending_approvals
from ._compaction import (
    CompactionFailure,
    CompactionResult,
    CompactionSettings,
    CompactionSummary,
    ContextTracker,
    compact_after_overflow,
    compact_if_needed,
    summary_to_user_message,
)
from ._compaction import compact as compact_messages
from ._events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    AssistantMessageEvent,
    CompactionEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from ._hooks import (
    AgentContext,
    AgentLoopTurnUpdate,
    AgentRequestUpdate,
    AgentTurnContext,
    AgentTurnDecision,
    PrepareRequestContext,
)
from ._messages import (
    BUILT_IN_MESSAGE_CLASSES,
    UNKNOWN_MODEL,
    AgentMessage,
    AssistantContent,
    AssistantMessage,
    Message,
    Model,
    SystemMessage,
    TextContent,
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from ._overflow import is_context_overflow
from ._run_result import LimitReached, UsageLimits
from ._sink import AgentEventSink
from ._streaming import (
    LlmContext,
    StreamFn,
    StreamOptions,
    get_default_stream_fn,
    iterate_stream,
)
from ._tool_execution import (
    AfterToolCallHook,
    BeforeToolCallHook,
    ExecutionEvents,
    ToolBatch,
)
from ._transcript import declare_tool_changes
from ._util import collapse_errors, collapse_exception_group, error_text, maybe_await

__all__ = [
    "CLOSING_GRACE_SECONDS",
    "AgentLoopConfig",
    "Position",
    "Run",
    "default_convert_to_llm",
]

logger = logging.getLogger("trio_agent.loop")
logger.addHandler(logging.NullHandler())  # silent until the application configures logging


CLOSING_GRACE_SECONDS = 2.0
"""How long, on Trio's clock, listeners may take over the closing events of a run that the
caller's cancellation or a ``BaseException`` ends. An abort never bounds listeners; this
bound exists so that no listener can hold a cancelled caller forever."""


def default_convert_to_llm(messages: list[AgentMessage]) -> list[Message]:
    """Keep the messages a provider understands (system, user, assistant, toolResult); a
    compaction summary becomes the user message pi sends for it."""
    # A class check: application messages have their own classes (and roles).
    return [
        m if isinstance(m, BUILT_IN_MESSAGE_CLASSES) else summary_to_user_message(m)
        for m in messages
        if isinstance(m, _FOR_THE_MODEL)
    ]


_FOR_THE_MODEL = (*BUILT_IN_MESSAGE_CLASSES, CompactionSummary)


def _check_model(model: object) -> None:
    if not isinstance(model, Model):
        raise TypeError(f"AgentLoopConfig.model must be a Model, got {model!r}")


@attrs.frozen(kw_only=True)
class AgentLoopConfig:
    """Everything a run needs besides the context. Hooks may be sync or ``async def``.

    Hooks are fixed for the run when it starts. Hooks that receive ``signal`` get the run's
    :class:`~trio_agent.AbortSignal` (the loop makes one when the caller gives none).
    """

    model: Model = attrs.field(validator=lambda _, __, model: _check_model(model))
    """The initial model; ``prepare_request`` and ``prepare_next_turn`` may replace it."""
    stream_options: StreamOptions = attrs.field(factory=StreamOptions)
    """The options of every request: the loop fills in ``signal``, the thinking level of
    the turn as ``reasoning`` (``None`` when off) and the key from ``get_api_key``, and
    hands the rest to the stream function as given. ``reasoning`` is the run's initial
    thinking level."""
    convert_to_llm: Callable[[list[AgentMessage]], Any] = default_convert_to_llm
    """``(messages) -> list[Message]`` before every request."""
    transform_context: Callable[[list[AgentMessage], AbortSignal], Any] | None = None
    """``(messages, signal) -> messages`` applied before ``convert_to_llm`` (request only)."""
    get_api_key: Callable[[str], Any] | None = None
    """``(provider) -> key | None`` before every request; falls back to
    ``stream_options.api_key``."""
    finish_turn: Callable[[AgentTurnContext, AbortSignal], Any] | None = None
    """``(turn, signal) -> AgentTurnDecision | None``; runs before ``turn_end``, also once
    for a response that an abort ended (under the cancelled scope: an ``async def`` hook
    is interrupted at its first checkpoint, and its decision is ignored)."""
    prepare_request: Callable[[PrepareRequestContext, AbortSignal], Any] | None = None
    """``(request, signal) -> AgentRequestUpdate | None``; before every request."""
    prepare_next_turn: Callable[[AgentTurnContext], Any] | None = None
    """``(turn) -> AgentLoopTurnUpdate | None``; before every turn but the first."""
    get_steering_messages: Callable[[], Any] | None = None
    """``() -> list[AgentMessage]``: polled at startup and after every turn."""
    get_follow_up_messages: Callable[[], Any] | None = None
    """``() -> list[AgentMessage]``: polled when the run would otherwise stop."""
    tool_execution: Literal["sequential", "parallel"] = "parallel"
    """How a turn's tool calls run: concurrently (``"parallel"``, the default) or one after
    another (``"sequential"``). A tool whose ``execution_mode`` is ``"sequential"`` makes
    its whole batch sequential."""
    before_tool_call: BeforeToolCallHook | None = None
    """Called for each validated call before it runs; may block it (see
    :data:`~trio_agent.loop.BeforeToolCallHook`)."""
    after_tool_call: AfterToolCallHook | None = None
    """Called for each call that ran; may override fields of its result (see
    :data:`~trio_agent.loop.AfterToolCallHook`)."""
    compaction: CompactionSettings | None = None
    """Compact the transcript when it would not fit the model's context window: checked
    before every request, and once more after a provider refuses a request as too long
    (which is then retried once). ``None``: never (see :mod:`trio_agent.compaction`)."""
    approve_tool_call: ApproveToolCall | None = None
    """The inline approver of calls to tools with ``needs_approval``; without one such
    calls are left for a deferred decision and the run ends after their turn (see
    :class:`~trio_agent.ToolApproval`)."""
    usage_limits: UsageLimits | None = None
    """Limits checked before each request and each tool execution; one that is reached
    aborts the run with a :class:`~trio_agent.LimitReached` reason (see
    :class:`~trio_agent.UsageLimits`)."""


@attrs.define(eq=False)
class Position:
    """Where a run is: what it has handed to the sink. One value, tracked from the events
    by :meth:`track` and reset per turn by :meth:`next_turn`, so the close path reads one
    object."""

    started: bool = False
    """``agent_start`` was handed on."""
    turn_open: bool = False
    """Between a ``turn_start`` and its ``turn_end``."""
    ended: bool = False
    """``agent_end`` was handed on: nothing may follow."""
    handed_on: int = 0
    """Events other than ``message_update`` handed on (the close path's progress)."""
    open_message: AgentMessage | None = None
    """A message between its ``message_start`` and ``message_end``."""
    # Per turn (reset by next_turn):
    requested: bool = False
    """The turn's provider request was sent."""
    partial: AssistantMessage | None = None
    """The streaming assistant message."""
    response: AssistantMessage | None = None
    """The turn's final assistant message."""
    finish_turn_called: bool = False
    """``finish_turn`` saw this turn's response."""
    batch: ToolBatch | None = None
    """The turn's tool batch."""

    def next_turn(self) -> None:
        """Forget the previous turn's request, response and tool batch."""
        self.requested = self.finish_turn_called = False
        self.partial = self.response = None
        self.batch = None

    def track(self, event: AgentEvent) -> None:
        """Note that ``event`` (not a ``message_update``) was handed on."""
        self.handed_on += 1
        if event.type == "message_start":
            self.open_message = event.message
        elif event.type == "message_end":
            self.open_message = None
        elif event.type == "turn_start":
            self.turn_open = True
        elif event.type == "turn_end":
            self.turn_open = False
        elif event.type == "agent_start":
            self.started = True
        elif event.type == "agent_end":
            self.ended = True


class Run:
    """One run: the loop, and the one close path of a run that ends early.

    :attr:`at` (a :class:`Position`) is where the run is: what it has handed to the sink.
    :meth:`close` reads only it (and the failure it is reporting) to finish a run that did
    not end normally.
    """

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        sink: AgentEventSink,
        signal: AbortSignal | None,
        stream_fn: StreamFn | None,
    ) -> None:
        self.context = context
        self.config = config
        self.options = config.stream_options
        self.model = config.model
        self.thinking_level: ThinkingLevel = self.options.reasoning or "off"
        self.sink = sink
        self.signal = signal if signal is not None else AbortSignal()
        self.stream_fn = stream_fn
        self.new_messages: list[AgentMessage] = []
        self.last_turn: AgentTurnContext | None = None
        self.at = Position()
        self.failure: AssistantMessage | None = None
        self.execution_events: ExecutionEvents | None = None
        self.tool_limit_reached: LimitReached | None = None
        self.tracker = ContextTracker() if config.compaction is not None else None
        self.overflowed: AssistantMessage | None = None  # to compact for, before a retry
        self.overflow_retried = False
        self.compaction_result: CompactionResult | CompactionFailure | None = None
        self._request: tuple[str | None, ThinkingLevel, StreamOptions] | None = None
        # Closing under the caller's cancellation or a BaseException.
        self.grace_deadline: float | None = None
        self.shield: trio.CancelScope | None = None
        self.nursery: trio.Nursery | None = None
        self.watcher: trio.CancelScope | None = None
        # The caches below assume only the loop changes its working transcript, and only
        # by appending; a hook that receives the live context may edit it in place.
        self.hooks_see_context = any(
            hook is not None
            for hook in (
                config.prepare_next_turn,
                config.prepare_request,
                config.finish_turn,
                config.before_tool_call,
                config.after_tool_call,
            )
        )
        self._declared_key: tuple[int, int, list[int]] | None = None
        self._declared_upto = 0
        self._llm_cache: (
            tuple[list[AgentMessage], int, AgentMessage | None, list[Message]] | None
        ) = None

    # -- the one emit path ---------------------------------------------------------------

    async def emit(self, event: AgentEvent) -> None:
        """Hand ``event`` to the sink; await it only when the sink says it must."""
        if event.type != "message_update":
            self.at.track(event)
            if event.type == "message_end":
                self.new_messages.append(event.message)
        try:
            self.sink.send_nowait(event)
        except trio.WouldBlock:
            await self._send_shielded(event)

    async def _send_shielded(self, event: AgentEvent) -> None:
        # Listeners are outside the run's work scope: an abort never interrupts them. The
        # caller's cancellation reaches them only through the grace deadline, which the
        # watcher sets (a shielded task cannot see that cancellation itself).
        if self.watcher is None and self.nursery is not None:
            self.watcher = trio.CancelScope()
            self.nursery.start_soon(self._watch, self.watcher)
        with trio.CancelScope(shield=True) as shield:
            if self.grace_deadline is not None:
                shield.deadline = self.grace_deadline
            self.shield = shield
            try:
                await self.sink.send(event)
            finally:
                self.shield = None

    async def _watch(self, scope: trio.CancelScope) -> None:
        with scope:
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                if not scope.cancel_called:  # the caller's scope, not the run's end
                    self._bound_closing("cancelled")
                raise

    def _bound_closing(self, reason: Any) -> None:
        """The run must now end soon: abort it and bound the listeners' time."""
        self.signal._abort(reason)
        if self.grace_deadline is None:
            self.grace_deadline = trio.current_time() + CLOSING_GRACE_SECONDS
        if self.shield is not None:
            self.shield.deadline = min(self.shield.deadline, self.grace_deadline)

    # -- running -------------------------------------------------------------------------

    async def run(
        self, initial: Sequence[AgentMessage], *, compact_only: str | None = None
    ) -> list[AgentMessage]:
        """The run in its nursery (which holds the watcher, when a listener awaits).

        With ``compact_only`` (the instructions, ``""`` for none) the run only compacts:
        ``agent_start``, ``compaction``, ``agent_end``.
        """
        error: BaseException | None = None
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                try:
                    await self._run(initial, compact_only)
                finally:
                    if self.watcher is not None:
                        self.watcher.cancel()
                    if self.execution_events is not None:
                        self.execution_events.close()
        except BaseExceptionGroup as group:
            error = collapse_exception_group(group)
        if error is not None:
            raise error  # after the except clause: its own cause and context stay
        return self.new_messages

    async def _run(self, initial: Sequence[AgentMessage], compact_only: str | None) -> None:
        cause: BaseException | None = None
        try:
            with open_abort_scope(self.signal) as work:
                error: BaseException | None = None
                try:
                    await self.emit(AgentStartEvent())
                    if compact_only is not None:
                        await self.compact("manual", compact_only or None)
                        await self.emit(AgentEndEvent(messages=self.new_messages))
                        return
                    await self.emit(TurnStartEvent())
                    await self.commit_messages(initial)
                    await self.main_loop()
                except BaseExceptionGroup as group:
                    error = collapse_exception_group(group)
                if error is not None:
                    raise error
        except BaseException as exc:
            cause = exc
        else:
            if not work.cancelled_caught:
                return
        await self.close(cause)

    async def commit_messages(self, messages: Sequence[AgentMessage]) -> None:
        """Commit messages to the transcript (start and end events), stopping at an abort."""
        for message in messages:
            await trio.lowlevel.checkpoint_if_cancelled()
            await self.emit(MessageStartEvent(message=message))
            await self.emit(MessageEndEvent(message=message))
            self.context.messages.append(message)

    async def poll(self, source: Callable[[], Any] | None) -> list[AgentMessage]:
        # No queue poll after an abort: a sync hook or a listener before this
        # point never checkpointed, so the abort may not have been observed yet.
        await trio.lowlevel.checkpoint_if_cancelled()
        if source is None:
            return []
        return list(await maybe_await(source()) or [])

    async def main_loop(self) -> None:
        config = self.config
        pending = await self.poll(config.get_steering_messages)
        explicit_continuation = False
        while True:
            has_more_tool_calls = True
            while has_more_tool_calls or pending:
                prepared: list[AgentMessage] = []
                if self.last_turn is not None:
                    if config.prepare_next_turn is not None:
                        update = await maybe_await(config.prepare_next_turn(self.last_turn))
                        if update is not None:
                            prepared = self.apply_turn_update(update)
                    if not pending:
                        pending = await self.poll(config.get_steering_messages)
                    # An abort in prepare_next_turn (or a spent usage limit) ends the run
                    # before a new turn starts and before drained messages are delivered.
                    self.check_limit("exhausted")
                    await trio.lowlevel.checkpoint_if_cancelled()
                    self.at.next_turn()
                    await self.emit(TurnStartEvent())
                await self.commit_messages(self.declare_tool_changes(prepared + pending))
                pending = []
                await trio.lowlevel.checkpoint_if_cancelled()
                if self.last_turn is None:
                    await self.run_decided_calls()

                if config.prepare_request is not None:
                    request_update = await maybe_await(
                        config.prepare_request(
                            PrepareRequestContext(
                                context=self.context,
                                model=self.model,
                                thinking_level=self.thinking_level,
                            ),
                            self.signal,
                        )
                    )
                    if request_update is not None:
                        self.apply_turn_update(request_update)

                message = await self.stream_assistant_response()
                # An abort that ended the response (cancelling the stream, or a stream
                # that honoured the signal itself) closes the run.
                await trio.lowlevel.checkpoint_if_cancelled()

                tool_results: list[ToolResultMessage] = []
                has_more_tool_calls = False
                if message.stop_reason not in ("error", "aborted") and any(
                    isinstance(block, ToolCall) for block in message.content
                ):
                    if self.execution_events is None:
                        self.execution_events = ExecutionEvents.open()
                    batch = self.at.batch = ToolBatch.for_message(
                        message, self.context.tools, self.emit, self.execution_events
                    )
                    if message.stop_reason == "length":
                        await batch.refuse_truncated()
                    else:
                        await batch.run(
                            sequential=batch.runs_sequentially(config.tool_execution),
                            context=self.context,
                            before_tool_call=config.before_tool_call,
                            after_tool_call=config.after_tool_call,
                            signal=self.signal,
                            refuse_execution=self.refuse_tool_call,
                            approve=config.approve_tool_call,
                        )
                    tool_results = batch.result_messages
                    has_more_tool_calls = not batch.terminate
                    self.context.messages.extend(tool_results)

                decision = await self.finish_turn(message, tool_results)
                if self.at.batch is not None and self.at.batch.awaiting_approval:
                    decision = AgentTurnDecision(action="end")  # until the decisions come
                await self.emit(TurnEndEvent(message=message, tool_results=tool_results))
                if self.retries_overflow(message, decision):
                    has_more_tool_calls = True  # one more turn, compacted first
                elif message.stop_reason in ("error", "aborted") or (
                    decision is not None and decision.action == "end"
                ):
                    await self.emit(AgentEndEvent(messages=self.new_messages))
                    return
                explicit_continuation = decision is not None and decision.action == "continue"
                pending = await self.poll(config.get_steering_messages)
                if has_more_tool_calls or pending:
                    explicit_continuation = False

            follow_ups = await self.poll(config.get_follow_up_messages)
            if follow_ups:
                explicit_continuation = False
                pending = follow_ups
                continue
            if explicit_continuation:
                explicit_continuation = False
                continue
            break
        await self.emit(AgentEndEvent(messages=self.new_messages))

    async def finish_turn(
        self, message: AssistantMessage, tool_results: list[ToolResultMessage]
    ) -> AgentTurnDecision | None:
        self.last_turn = AgentTurnContext(
            message=message,
            tool_results=tool_results,
            context=self.context,
            new_messages=self.new_messages,
        )
        self.at.finish_turn_called = True
        if self.config.finish_turn is None:
            return None
        decision: AgentTurnDecision | None = await maybe_await(
            self.config.finish_turn(self.last_turn, self.signal)
        )
        return decision

    def declare_tool_changes(self, pending: list[AgentMessage]) -> list[AgentMessage]:
        """:func:`declare_tool_changes` on the working context, skipped when nothing can
        have changed since the last check: nothing pending, the same context, list and
        tool objects, and no system message appended since. Replaying the whole transcript
        every turn would make long runs quadratic."""
        context = self.context
        messages = context.messages
        key = (id(context), id(messages), [id(tool) for tool in context.tools])
        checked = self._declared_upto
        if (
            not self.hooks_see_context
            and not pending
            and key == self._declared_key
            and checked <= len(messages)
            and not any(isinstance(m, SystemMessage) for m in messages[checked:])
        ):
            self._declared_upto = len(messages)
            return pending
        result = declare_tool_changes(messages, pending, context.tools)
        self._declared_key = key
        self._declared_upto = len(messages)
        return result

    def convert_incrementally(self, messages: list[AgentMessage]) -> list[Message]:
        """:func:`default_convert_to_llm` of the working transcript, converting only what
        was appended since the previous request (the loop only appends to its working
        list between requests). Falls back to a full conversion when the list was
        replaced or its converted prefix changed."""
        cached = self._llm_cache
        if cached is not None:
            source, upto, last, converted = cached
            if (
                source is messages
                and upto <= len(messages)
                and (upto == 0 or messages[upto - 1] is last)
            ):
                converted.extend(default_convert_to_llm(messages[upto:]))
            else:
                cached = None
        if cached is None:
            converted = default_convert_to_llm(messages)
        self._llm_cache = (messages, len(messages), messages[-1] if messages else None, converted)
        return list(converted)

    async def run_decided_calls(self) -> None:
        """Run the calls of the transcript's last assistant message that were decided on
        since (:class:`~trio_agent.ToolApproval`): approved ones once, denied ones answered
        with the denial. Their events and results come first in the run's first turn."""
        messages = self.context.messages
        decided = decisions(messages)
        calls = [call for call in pending_approvals(messages) if call.id in decided]
        if not calls:
            return
        owner = next(m for m in reversed(messages) if isinstance(m, AssistantMessage))
        if self.execution_events is None:
            self.execution_events = ExecutionEvents.open()
        batch = self.at.batch = ToolBatch.for_message(
            attrs.evolve(owner, content=list[AssistantContent](calls)),
            self.context.tools,
            self.emit,
            self.execution_events,
        )
        await batch.run(
            sequential=batch.runs_sequentially(self.config.tool_execution),
            context=self.context,
            before_tool_call=self.config.before_tool_call,
            after_tool_call=self.config.after_tool_call,
            signal=self.signal,
            refuse_execution=self.refuse_tool_call,
            decided=decided,
        )
        self.context.messages.extend(batch.result_messages)
        self.at.batch = None

    # -- compaction ------------------------------------------------------------------------

    def retries_overflow(
        self, message: AssistantMessage, decision: AgentTurnDecision | None
    ) -> bool:
        """Whether a response the provider refused as too long is retried (once per run,
        after compacting), rather than ending the run."""
        if (
            self.tracker is None
            or self.overflow_retried
            or message.stop_reason != "error"
            or (decision is not None and decision.action == "end")
            or not is_context_overflow(message, self.model.context_window)
        ):
            return False
        self.overflow_retried = True
        self.overflowed = message
        return True

    async def compact_before_request(self) -> None:
        """Compact if the next request would not fit (or the last one overflowed)."""
        assert self.tracker is not None and self.config.compaction is not None
        if self.overflowed is not None:
            await self.compact("overflow", None)
        elif self.tracker.needs_compaction(
            self.context.messages, self.model, self.config.compaction
        ):
            await self.compact("threshold", None)

    async def compact(
        self, reason: Literal["threshold", "overflow", "manual"], instructions: str | None
    ) -> None:
        """Compact the working transcript and tell the sink (a ``compaction`` event)."""
        settings = self.config.compaction or CompactionSettings()
        tracker = self.tracker if self.tracker is not None else ContextTracker()
        options = self.options
        if options.response_schema is not None:  # the summary is text, not the run's answer
            options = attrs.evolve(options, response_schema=None)
        if self.config.get_api_key is not None:
            key = await maybe_await(self.config.get_api_key(self.model.provider))
            options = attrs.evolve(options, api_key=key or options.api_key)
        stream_fn = self.stream_fn if self.stream_fn is not None else get_default_stream_fn()
        messages = self.context.messages
        outcome: CompactionResult | CompactionFailure | None
        if reason == "overflow" and self.overflowed is not None:
            failed, self.overflowed = self.overflowed, None
            kept = [message for message in messages if message is not failed]
            outcome = await compact_after_overflow(
                tracker,
                kept,
                failed,
                self.model,
                stream_fn,
                options,
                settings=settings,
                signal=self.signal,
            )
        elif reason == "manual":
            outcome = await compact_messages(
                messages,
                self.model,
                stream_fn,
                options,
                settings=settings,
                instructions=instructions,
                signal=self.signal,
            )
        else:
            outcome = await compact_if_needed(
                tracker,
                messages,
                self.model,
                stream_fn,
                options,
                settings=settings,
                signal=self.signal,
            )
        # An abort during the summary request ends the run, as before any request.
        await trio.lowlevel.checkpoint_if_cancelled()
        self.compaction_result = outcome
        if outcome is None:
            return
        if isinstance(outcome, CompactionFailure):
            logger.warning("compaction failed: %s", outcome.error_message)
            await self.emit(
                CompactionEvent(
                    reason=reason,
                    messages=None,
                    tokens_before=outcome.tokens_before,
                    error_message=outcome.error_message,
                )
            )
            return
        self.context = AgentContext(messages=list(outcome.messages), tools=self.context.tools)
        await self.emit(
            CompactionEvent(
                reason=reason,
                messages=list(outcome.messages),
                summary=outcome.summary,
                first_kept_index=outcome.first_kept_index,
                tokens_before=outcome.tokens_before,
                usage=outcome.usage,
            )
        )

    def check_limit(self, check: Literal["exhausted", "before_request"]) -> None:
        """Abort the run (the caller then checkpoints) if the usage limits forbid a
        request (``before_request`` also counts it), or a tool call was refused."""
        limits = self.config.usage_limits
        reached = self.tool_limit_reached
        if reached is None and limits is not None:
            reached = limits.exhausted() if check == "exhausted" else limits.before_request()
        if reached is not None:
            self.signal._abort(reached)

    def refuse_tool_call(self) -> str | None:
        """Count a tool execution against the usage limits; the refusal text if it is one
        too many (the run then ends after this turn)."""
        limits = self.config.usage_limits
        reached = limits.before_tool_call() if limits is not None else None
        if reached is None:
            return None
        self.tool_limit_reached = reached
        return str(reached)

    def apply_turn_update(
        self, update: AgentLoopTurnUpdate | AgentRequestUpdate
    ) -> list[AgentMessage]:
        """Apply what ``prepare_next_turn`` or ``prepare_request`` replaced; returns the
        messages to deliver before the next request."""
        if update.context is not None:
            self.context = update.context
        if update.model is not None:
            self.model = update.model
        if update.thinking_level is not None:
            self.thinking_level = update.thinking_level
        return list(getattr(update, "messages", None) or [])

    # -- one assistant response ----------------------------------------------------------

    async def stream_assistant_response(self) -> AssistantMessage:
        config = self.config
        if self.tracker is not None:
            await self.compact_before_request()
        messages = self.context.messages
        if config.transform_context is not None:
            messages = await maybe_await(config.transform_context(messages, self.signal))
        if (
            messages is self.context.messages
            and config.convert_to_llm is default_convert_to_llm
            and not self.hooks_see_context
        ):
            llm_messages: list[Message] = self.convert_incrementally(messages)
        else:
            llm_messages = list(await maybe_await(config.convert_to_llm(messages)))
        api_key = self.options.api_key
        if config.get_api_key is not None:
            api_key = await maybe_await(config.get_api_key(self.model.provider)) or api_key
        request = self._request
        if request is None or request[:2] != (api_key, self.thinking_level):
            level = self.thinking_level
            options = attrs.evolve(
                self.options,
                reasoning=None if level == "off" else level,  # "off" is no level, as in pi
                api_key=api_key,
                signal=self.signal,
            )
            self._request = request = (api_key, self.thinking_level, options)
        options = request[2]
        if not isinstance(self.model, Model):  # a hook's replacement, say
            raise TypeError(f"the run's model must be a Model, got {self.model!r}")
        stream_fn = self.stream_fn if self.stream_fn is not None else get_default_stream_fn()
        # No provider request after an abort (or past a usage limit), even when the hooks
        # above never checkpointed.
        self.check_limit("before_request")
        await trio.lowlevel.checkpoint_if_cancelled()
        self.at.requested = True
        events = await iterate_stream(
            stream_fn, self.model, LlmContext(messages=llm_messages), options
        )
        final: AssistantMessage | None = None
        context_messages = self.context.messages
        sink = self.sink
        at = self.at
        try:
            async for event in events:
                if event.type == "done":
                    final = event.message
                    break
                if event.type == "error":
                    final = event.error
                    break
                if event.type == "start":
                    at.partial = event.partial
                    context_messages.append(event.partial)
                    await self.emit(MessageStartEvent(message=event.partial))
                elif at.partial is not None:
                    # The per-token path: self.emit inlined (an update changes no
                    # "where are we" state), so a listener that does not await costs
                    # one call.
                    at.partial = partial = event.partial
                    context_messages[-1] = partial
                    update = MessageUpdateEvent(message=partial, assistant_message_event=event)
                    try:
                        sink.send_nowait(update)
                    except trio.WouldBlock:
                        await self._send_shielded(update)
        except BaseException:
            await _aclose(events, bounded=True)
            raise
        await _aclose(events, bounded=False)
        if final is None:
            final = self.synthesize("error", "Stream function ended without a done or error event")
        return await self.finish_response(final)

    async def finish_response(self, final: AssistantMessage) -> AssistantMessage:
        """Commit the turn's final assistant message (``message_start`` first if the
        stream never started one), stamped with the turn's thinking level."""
        if final.thinking_level != self.thinking_level:
            final = attrs.evolve(final, thinking_level=self.thinking_level)
        # The response is set first: a close after a listener's error on either event
        # goes on from here instead of making the response again.
        self.at.response = final
        if self.config.usage_limits is not None:
            self.config.usage_limits.used.add(final.usage)
        if self.at.partial is not None:
            self.context.messages[-1] = final
        else:
            self.context.messages.append(final)
            await self.emit(MessageStartEvent(message=final))
        self.at.partial = None
        await self.emit(MessageEndEvent(message=final))
        return final

    def synthesize(self, stop_reason: Literal["error", "aborted"], text: str) -> AssistantMessage:
        """The streamed partial (or an empty message of the working model) ended with
        ``stop_reason`` and ``text``."""
        if self.at.partial is not None:
            return attrs.evolve(self.at.partial, stop_reason=stop_reason, error_message=text)
        model = self.model
        return AssistantMessage(
            content=[],
            api=model.api,
            provider=model.provider,
            model=model.id,
            usage=Usage(),
            stop_reason=stop_reason,
            error_message=text,
            thinking_level=self.thinking_level,
        )

    # -- the one close path --------------------------------------------------------------

    async def close(self, cause: BaseException | None) -> None:
        """Finish a run that did not end normally, keeping the event grammar.

        ``cause`` is ``None`` for an abort, an ``Exception`` for a failure (reported
        in-band with a synthesized failure message, then the run returns), or a
        ``BaseException`` (the caller's ``Cancelled``, ``KeyboardInterrupt``, ...) that is
        re-raised once the run is closed like an abort. The caller's cancellation and a
        ``BaseException`` bound the listeners' time by :data:`CLOSING_GRACE_SECONDS`. An
        ``Exception`` from a listener while closing turns the rest of the close into the
        report of that failure; later ones are raised after ``agent_end`` (several as a
        group). The first ``BaseException`` while closing bounds the listeners' time and
        the rest of the sequence is still delivered; a second one stops delivery there.
        A close that raises before handing on any event stops rather than retry (it
        would spin): the errors, and a failure it could not report, leave as they are.
        """
        if self.at.ended:
            # Nothing may follow agent_end: a listener's failure there leaves as itself.
            if cause is not None:
                raise cause
            return
        failure = cause if isinstance(cause, Exception) else None
        if failure is not None:
            logger.warning("run failed: %s", _describe(failure))
        elif cause is None:
            logger.debug("run aborted (reason: %r)", self.signal.reason)
        else:
            logger.debug("run ended by %s, closing it", type(cause).__name__)
        if cause is not None and failure is None:
            self._bound_closing(cause if not isinstance(cause, trio.Cancelled) else "cancelled")
        errors: list[BaseException] = []
        interrupted = False
        while not self.at.ended:
            progress = (self.at.handed_on, failure)
            try:
                if failure is None:
                    await self._close_aborted()
                else:
                    await self._close_failed(failure)
            except Exception as exc:
                if failure is None and not self.at.ended:
                    logger.warning("run failed while closing: %s", _describe(exc))
                    failure = exc
                else:  # raised on agent_end, or while reporting a failure
                    errors.append(exc)
            except BaseException as exc:
                errors.append(exc)
                if interrupted:
                    break  # a second BaseException while closing: delivery stops
                # The first one does not cut the closing sequence short: the rest is
                # delivered under the bounded grace, then it propagates.
                interrupted = True
                self._bound_closing(exc if not isinstance(exc, trio.Cancelled) else "cancelled")
            if not self.at.ended and progress == (self.at.handed_on, failure):
                # Nothing was handed on and nothing changed: trying again would spin
                # without a checkpoint. The errors leave as they are.
                break
        # A failure reported in-band stays there; one the close could not finish
        # reporting leaves too, after the cause.
        unreported: list[BaseException] = (
            [failure] if failure is not None and not self.at.ended else []
        )
        if cause is not None and cause is not failure:
            unreported.insert(0, cause)
        errors[:0] = unreported
        if errors:
            raise collapse_errors(errors)

    async def _commit_open_message(self) -> None:
        """Commit a user, system or tool-result message left between its events (an open
        assistant partial is the abort's or the failure's to finish)."""
        message = self.at.open_message
        if message is not None and self.at.partial is None and message is not self.failure:
            if self.at.batch is not None:
                self.at.batch.committed(message)
            await self.emit(MessageEndEvent(message=message))

    async def _close_aborted(self) -> None:
        """The closing events of an abort (the guide's table, "Abort and cancellation")."""
        if not self.at.started:
            await self.emit(AgentStartEvent())
        await self._commit_open_message()
        if self.at.turn_open:
            if self.at.response is None:
                # Aborted while the response streams, or after turn_start but before the
                # request (then there is no response for finish_turn to see).
                text = REQUEST_ABORTED if self.at.requested else OPERATION_ABORTED
                if isinstance(self.signal.reason, LimitReached):
                    text = str(self.signal.reason)
                self.at.finish_turn_called = not self.at.requested
                await self.finish_response(self.synthesize("aborted", text))
            response = self.at.response
            assert response is not None
            if (
                self.at.batch is None
                and response.stop_reason != "error"
                and any(isinstance(b, ToolCall) for b in response.content)
            ):
                # Tool calls that streamed before the abort are answered too: every tool
                # call in the transcript gets exactly one result. Those of a
                # response that failed on its own stay unanswered, as on the normal path.
                self.at.batch = ToolBatch.for_message(response, self.context.tools, self.emit)
            tool_results: list[ToolResultMessage] = []
            if self.at.batch is not None:
                await self.at.batch.close(None)
                tool_results = self.at.batch.result_messages
                known = {id(m) for m in self.context.messages}
                self.context.messages.extend(m for m in tool_results if id(m) not in known)
            if not self.at.finish_turn_called and response.stop_reason in ("error", "aborted"):
                # finish_turn sees a response that an abort ended, once, under a
                # cancelled scope however the stream ended; the shield keeps
                # the caller's cancellation out of this close path.
                with trio.CancelScope(shield=True), trio.CancelScope() as cancelled:
                    cancelled.cancel()
                    await self.finish_turn(response, tool_results)
            await self.emit(TurnEndEvent(message=response, tool_results=tool_results))
        await self.emit(AgentEndEvent(messages=self.new_messages))

    async def _close_failed(self, error: Exception) -> None:
        """Report ``error`` in-band: the failure message closes the run.

        Executions the failure cut short end with its text (their calls stay unanswered),
        an open message is committed (an open assistant partial is replaced by the failure
        message), and ``agent_end`` lists only the failure message. A failure after the
        last ``turn_end`` opens a turn for its report, unless the run was aborted: an abort
        never starts a turn, so the failure message then stands outside a turn.
        """
        text = error_text(error)
        if self.failure is None:
            model = self.config.model
            if not isinstance(model, Model):  # past the config's check: report it anyway
                model = UNKNOWN_MODEL
            self.failure = AssistantMessage(
                content=[TextContent(text="")],
                api=model.api,
                provider=model.provider,
                model=model.id,
                stop_reason="aborted" if self.signal.aborted else "error",
                error_message=text,
            )
        message = self.failure
        if not self.at.started:
            await self.emit(AgentStartEvent())
        if self.at.batch is not None:
            await self.at.batch.close(text)
        await self._commit_open_message()
        if not (self.new_messages and self.new_messages[-1] is message):
            if not self.at.turn_open and not self.signal.aborted:
                await self.emit(TurnStartEvent())
            if self.at.open_message is None:
                await self.emit(MessageStartEvent(message=message))
            self.at.partial = None
            await self.emit(MessageEndEvent(message=message))
        if self.at.turn_open:
            await self.emit(TurnEndEvent(message=message, tool_results=[]))
        await self.emit(AgentEndEvent(messages=[message]))


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


async def _aclose(events: AsyncIterator[AssistantMessageEvent], *, bounded: bool) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is None:
        return
    if not bounded:
        # After its terminal event a stream only cleans up.
        await aclose()
        return
    # The run is failing or cancelled: clean up the provider's HTTP stream anyway,
    # shielded and bounded.
    with trio.move_on_after(5, shield=True):
        await aclose()
