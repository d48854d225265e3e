"""The agent loop: one run = turns of (streamed assistant response + its tool batch).

Reference: upstream-agent.md §3 step for step; SPEC §6 and §8 for the Trio design.

The run's work (provider request, hooks, tool executions) happens inside one cancel scope
linked to the run's :class:`~trio_agent.AbortSignal`, so an abort interrupts whatever is
being awaited at once. Events are emitted shielded: the awaited ``emit`` (the listeners)
is never interrupted by an abort, and the closing events that an abort produces are
delivered too. Every run ends with ``agent_end``, except when a hook, the stream function
or ``emit`` raises; then the exception propagates (the :class:`~trio_agent.Agent` turns it
into a synthesized failure message).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal

import attrs
import trio

from ._abort import AbortSignal, open_abort_scope
from ._events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    AssistantMessageEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from ._exceptions import NothingToContinueError
from ._hooks import (
    AgentContext,
    AgentLoopTurnUpdate,
    AgentRequestUpdate,
    AgentTurnContext,
    AgentTurnDecision,
    PrepareRequestContext,
)
from ._messages import (
    AgentMessage,
    AssistantMessage,
    Message,
    Model,
    SystemMessage,
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._streaming import (
    LlmContext,
    ProviderResponse,
    StreamFn,
    StreamOptions,
    Transport,
    get_default_stream_fn,
    iterate_stream,
)
from ._tool_execution import AfterToolCallHook, BeforeToolCallHook, ToolBatch
from ._transcript import declare_tool_changes
from ._util import collapse_exception_group, maybe_await

__all__ = [
    "AgentEventSink",
    "AgentLoopConfig",
    "default_convert_to_llm",
    "open_agent_loop",
    "open_agent_loop_continue",
    "run_agent_loop",
    "run_agent_loop_continue",
]

AgentEventSink = Callable[[AgentEvent], Awaitable[None] | None]
"""``emit(event)``: the loop does not go on until it has returned and, when it returns an
awaitable (an ``async def`` sink), until that was awaited. Never called concurrently."""

REQUEST_ABORTED = "Request was aborted"
OPERATION_ABORTED = "Operation aborted"
_LLM_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage)


def default_convert_to_llm(messages: list[AgentMessage]) -> list[Message]:
    """Keep the messages a provider understands (system, user, assistant, toolResult)."""
    # A class check: application messages have their own classes (and roles).
    return [m for m in messages if isinstance(m, _LLM_TYPES)]


@attrs.frozen(kw_only=True)
class AgentLoopConfig:
    """Everything a run needs besides the context. Hooks may be sync or ``async def``.

    Hooks are fixed for the run when it starts. Hooks that receive ``signal`` get the run's
    :class:`~trio_agent.AbortSignal` (``None`` when the run has none).
    """

    model: Model
    convert_to_llm: Callable[[list[AgentMessage]], Any] = default_convert_to_llm
    """``(messages) -> list[Message]`` before every request."""
    transform_context: Callable[[list[AgentMessage], AbortSignal | None], Any] | None = None
    """``(messages, signal) -> messages`` applied before ``convert_to_llm`` (request only)."""
    get_api_key: Callable[[str], Any] | None = None
    """``(provider) -> key | None`` before every request; falls back to ``api_key``."""
    finish_turn: Callable[[AgentTurnContext, AbortSignal | None], Any] | None = None
    """``(turn, signal) -> AgentTurnDecision | None``; runs before ``turn_end``."""
    prepare_request: Callable[[PrepareRequestContext, AbortSignal | None], Any] | None = None
    """``(request, signal) -> AgentRequestUpdate | None``; before every request."""
    prepare_next_turn: Callable[[AgentTurnContext], Any] | None = None
    """``(turn) -> AgentLoopTurnUpdate | None``; before every turn but the first."""
    get_steering_messages: Callable[[], Any] | None = None
    """``() -> list[AgentMessage]``: polled at startup and after every turn."""
    get_follow_up_messages: Callable[[], Any] | None = None
    """``() -> list[AgentMessage]``: polled when the run would otherwise stop."""
    tool_execution: Literal["sequential", "parallel"] = "parallel"
    before_tool_call: BeforeToolCallHook | None = None
    after_tool_call: AfterToolCallHook | None = None
    # Stream options forwarded to the stream function.
    reasoning: ThinkingLevel | None = None
    api_key: str | None = attrs.field(default=None, repr=False)
    session_id: str | None = None
    transport: Transport | None = None
    thinking_budgets: dict[str, int] | None = None
    max_retry_delay_ms: int | None = None
    max_retries: int | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    headers: dict[str, str | None] | None = None
    on_payload: Callable[[dict[str, Any], Model], Any] | None = None
    on_response: Callable[[ProviderResponse, Model], Any] | None = None
    on_provider_stream_event: Callable[[Any, Model], Any] | None = None


def _reasoning(level: ThinkingLevel | None) -> ThinkingLevel | None:
    return None if level in (None, "off") else level


class _Run:
    """State of one run (reference §3.2)."""

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        emit: AgentEventSink,
        signal: AbortSignal | None,
        stream_fn: StreamFn | None,
        new_messages: list[AgentMessage],
        emit_concurrently: bool = False,
    ) -> None:
        self.context = context
        self.emit_concurrently = emit_concurrently
        self.config = config
        self.model = config.model
        self.reasoning = _reasoning(config.reasoning)
        self._emit_to = emit
        self.signal = signal
        self.stream_fn = stream_fn
        self.new_messages = new_messages
        self.last_turn: AgentTurnContext | None = None
        # What the abort path needs to close the event grammar.
        self.turn_open = False
        self.assistant: AssistantMessage | None = None
        self.assistant_started = False
        self.assistant_final = False
        self.requesting = False
        self.batch: ToolBatch | None = None
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
        # Parallel tools and their on_update emissions emit from several tasks; the
        # sink is still called for one event at a time, in arrival order (SPEC §8).
        self._emit_lock = trio.StrictFIFOLock()

    async def emit(self, event: AgentEvent) -> None:
        if self.emit_concurrently:
            # The sink orders concurrent calls itself (e.g. a memory channel).
            value = self._emit_to(event)
            if value is not None:
                with trio.CancelScope(shield=True):
                    await value
            return
        lock = self._emit_lock
        if lock.locked():
            # Another task (a parallel tool) is inside the sink: queue behind it.
            with trio.CancelScope(shield=True):
                async with lock:
                    value = self._emit_to(event)
                    if value is not None:
                        await value
            return
        # Fast path, taken per streamed token: no checkpoint, and the lock and a shield
        # only when the sink actually has something to await.
        value = self._emit_to(event)
        if value is None:
            return
        lock.acquire_nowait()  # free: nothing ran since locked() was checked
        try:
            # Listeners are outside the run's work scope: an abort never interrupts them.
            with trio.CancelScope(shield=True):
                await value
        finally:
            lock.release()

    async def emit_message(self, message: AgentMessage) -> None:
        await self.emit(MessageStartEvent(message=message))
        await self.emit(MessageEndEvent(message=message))

    # -- running ----------------------------------------------------------------------

    async def run(self, initial: Sequence[AgentMessage]) -> list[AgentMessage]:
        """Emit the start events and ``initial``'s message events, then run the main loop,
        all inside the work scope."""
        try:
            with open_abort_scope(self.signal) as work:
                try:
                    await self.start(initial)
                    await self.main_loop()
                except BaseExceptionGroup as group:
                    raise collapse_exception_group(group) from None
        except trio.Cancelled:
            # Outer cancellation aborts the run like an abort (SPEC §8): hooks and
            # listeners see it through the signal; then close the grammar under a shield
            # and re-raise.
            if self.signal is not None and not self.signal.aborted:
                self.signal._abort("cancelled")
            with trio.CancelScope(shield=True):
                await self.close_aborted()
            raise
        if work.cancelled_caught:
            await self.close_aborted()
        return self.new_messages

    async def start(self, initial: Sequence[AgentMessage]) -> None:
        await self.emit(AgentStartEvent())
        await self.emit(TurnStartEvent())
        self.turn_open = True
        for message in initial:
            # An abort stops the prompt batch before its next message (reference §3.12).
            await trio.lowlevel.checkpoint_if_cancelled()
            await self.emit_message(message)

    async def poll(self, source: Callable[[], Any] | None) -> list[AgentMessage]:
        # No queue poll after an abort (SPEC §8): a sync hook or a shielded emit before
        # this point never checkpointed, so the abort may not have been observed yet.
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
                    # An abort in prepare_next_turn ends the run before a new turn starts
                    # and before drained messages are delivered (reference §3.12).
                    await trio.lowlevel.checkpoint_if_cancelled()
                    await self.emit(TurnStartEvent())
                    self.turn_open = True
                to_emit = self.declare_tool_changes(prepared + pending)
                pending = []
                for message in to_emit:
                    # An abort (e.g. in the previous message's or turn_start's listener)
                    # stops the turn before another message is delivered (§3.12).
                    await trio.lowlevel.checkpoint_if_cancelled()
                    await self.emit_message(message)
                    self.context.messages.append(message)
                    self.new_messages.append(message)
                await trio.lowlevel.checkpoint_if_cancelled()

                if config.prepare_request is not None:
                    request_update = await maybe_await(
                        config.prepare_request(
                            PrepareRequestContext(
                                context=self.context,
                                model=self.model,
                                thinking_level=self.reasoning or "off",
                            ),
                            self.signal,
                        )
                    )
                    if request_update is not None:
                        self.apply_request_update(request_update)

                message = await self.stream_assistant_response()
                self.new_messages.append(message)

                if message.stop_reason in ("error", "aborted"):
                    failed_results: list[ToolResultMessage] = []
                    if (
                        message.stop_reason == "aborted"
                        and self.signal is not None
                        and self.signal.aborted
                        and any(isinstance(block, ToolCall) for block in message.content)
                    ):
                        # A stream that honoured the run's abort itself: its streamed tool
                        # calls are answered as on the cancelled path (SPEC §8). (Tool
                        # calls of a response that failed on its own stay unexecuted and
                        # unanswered, as upstream; providers drop such messages.)
                        self.batch = ToolBatch.for_message(message, self.emit)
                        await self.batch.close_aborted()
                        failed_results = self.batch.result_messages
                        self.context.messages.extend(failed_results)
                        self.new_messages.extend(failed_results)
                    self.last_turn = AgentTurnContext(
                        message=message,
                        tool_results=failed_results,
                        context=self.context,
                        new_messages=self.new_messages,
                    )
                    if config.finish_turn is not None:
                        await maybe_await(config.finish_turn(self.last_turn, self.signal))
                    await self.end_turn(message, failed_results)
                    await self.emit(AgentEndEvent(messages=self.new_messages))
                    return

                has_more_tool_calls = False
                tool_results = []
                if any(isinstance(block, ToolCall) for block in message.content):
                    batch = ToolBatch.for_message(message, self.emit)
                    self.batch = batch
                    if message.stop_reason == "length":
                        await batch.refuse_truncated()
                    else:
                        await batch.run(
                            mode=self.tool_mode(batch),
                            context=self.context,
                            before_tool_call=config.before_tool_call,
                            after_tool_call=config.after_tool_call,
                            signal=self.signal,
                        )
                    tool_results = batch.result_messages
                    has_more_tool_calls = not batch.terminate
                    self.context.messages.extend(tool_results)
                    self.new_messages.extend(tool_results)

                self.last_turn = AgentTurnContext(
                    message=message,
                    tool_results=tool_results,
                    context=self.context,
                    new_messages=self.new_messages,
                )
                decision: AgentTurnDecision | None = None
                if config.finish_turn is not None:
                    decision = await maybe_await(config.finish_turn(self.last_turn, self.signal))
                await self.end_turn(message, tool_results)
                if decision is not None and decision.action == "end":
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

    async def end_turn(self, message: AgentMessage, tool_results: list[Any]) -> None:
        self.turn_open = False
        self.batch = None
        await self.emit(TurnEndEvent(message=message, tool_results=tool_results))
        self.assistant = None
        self.assistant_started = self.assistant_final = self.requesting = False

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

    def tool_mode(self, batch: ToolBatch) -> Literal["sequential", "parallel"]:
        if self.config.tool_execution == "sequential":
            return "sequential"
        for record in batch.records:
            tool = next((t for t in self.context.tools if t.name == record.tool_call.name), None)
            if tool is not None and tool.execution_mode == "sequential":
                return "sequential"
        return "parallel"

    def apply_turn_update(self, update: AgentLoopTurnUpdate) -> list[AgentMessage]:
        if update.context is not None:
            self.context = update.context
        if update.model is not None:
            self.model = update.model
        if update.thinking_level is not None:
            self.reasoning = _reasoning(update.thinking_level)
        return list(update.messages or [])

    def apply_request_update(self, update: AgentRequestUpdate) -> None:
        if update.context is not None:
            self.context = update.context
        if update.model is not None:
            self.model = update.model
        if update.thinking_level is not None:
            self.reasoning = _reasoning(update.thinking_level)

    # -- one assistant response ---------------------------------------------------------

    async def stream_assistant_response(self) -> AssistantMessage:
        config = self.config
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
        api_key = None
        if config.get_api_key is not None:
            api_key = await maybe_await(config.get_api_key(self.model.provider))
        options = StreamOptions(
            reasoning=self.reasoning,
            api_key=api_key or config.api_key,
            signal=self.signal,
            session_id=config.session_id,
            transport=config.transport,
            thinking_budgets=config.thinking_budgets,
            max_retry_delay_ms=config.max_retry_delay_ms,
            max_retries=config.max_retries,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            headers=config.headers,
            on_payload=config.on_payload,
            on_response=config.on_response,
            on_provider_stream_event=config.on_provider_stream_event,
        )
        stream_fn = self.stream_fn if self.stream_fn is not None else get_default_stream_fn()
        # No provider request after an abort, even when the hooks above never checkpointed.
        await trio.lowlevel.checkpoint_if_cancelled()
        self.requesting = True
        events = await iterate_stream(
            stream_fn, self.model, LlmContext(messages=llm_messages), options
        )
        final: AssistantMessage | None = None
        try:
            async for event in events:
                kind = event.type
                if kind == "start":
                    self.assistant = event.partial  # type: ignore[union-attr]
                    self.context.messages.append(self.assistant)
                    self.assistant_started = True
                    await self.emit(MessageStartEvent(message=self.assistant))
                elif kind == "done":
                    final = event.message  # type: ignore[union-attr]
                    break
                elif kind == "error":
                    final = event.error  # type: ignore[union-attr]
                    break
                elif self.assistant_started:
                    self.assistant = event.partial  # type: ignore[union-attr]
                    self.context.messages[-1] = self.assistant
                    await self.emit(
                        MessageUpdateEvent(message=self.assistant, assistant_message_event=event)
                    )
        finally:
            await _aclose(events)
        if final is None:
            final = self._synthesize("error", "Stream function ended without a done or error event")
        final = attrs.evolve(final, thinking_level=self.reasoning or "off")
        await self.finish_assistant(final)
        return final

    async def finish_assistant(self, final: AssistantMessage) -> None:
        if self.assistant_started:
            self.context.messages[-1] = final
        else:
            self.context.messages.append(final)
        self.assistant = final
        if not self.assistant_started:
            self.assistant_started = True
            await self.emit(MessageStartEvent(message=final))
        self.assistant_final = True
        await self.emit(MessageEndEvent(message=final))

    def _synthesize(self, stop_reason: Literal["error", "aborted"], text: str) -> AssistantMessage:
        model = self.model
        partial = self.assistant
        if partial is not None:
            return attrs.evolve(partial, stop_reason=stop_reason, error_message=text)
        return AssistantMessage(
            content=[],
            api=model.api,
            provider=model.provider,
            model=model.id,
            usage=Usage(),
            stop_reason=stop_reason,
            error_message=text,
            thinking_level=self.reasoning or "off",
        )

    # -- abort ------------------------------------------------------------------------

    async def close_aborted(self) -> None:
        """Deliver the closing events of an aborted run (SPEC §8 table). Runs shielded."""
        if self.turn_open:
            if self.assistant is None and not self.requesting:
                # Aborted after turn_start, before the request.
                message = self._synthesize("aborted", OPERATION_ABORTED)
                await self.finish_assistant(message)
                self.new_messages.append(message)
            elif not self.assistant_final:
                message = self._synthesize("aborted", REQUEST_ABORTED)
                message = attrs.evolve(message, thinking_level=self.reasoning or "off")
                await self.finish_assistant(message)
                self.new_messages.append(message)
                if any(isinstance(block, ToolCall) for block in message.content):
                    # Tool calls that streamed before the abort are answered too: every
                    # tool call in the transcript gets exactly one result (SPEC §8).
                    self.batch = ToolBatch.for_message(message, self.emit)
            assert self.assistant is not None
            tool_results = []
            if self.batch is not None:
                await self.batch.close_aborted()
                tool_results = self.batch.result_messages
                known = {id(m) for m in self.context.messages}
                for result in tool_results:
                    if id(result) not in known:
                        self.context.messages.append(result)
                        self.new_messages.append(result)
            await self.end_turn(self.assistant, tool_results)
        await self.emit(AgentEndEvent(messages=self.new_messages))


async def _aclose(events: AsyncIterator[AssistantMessageEvent]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        # Graceful cleanup of the provider's HTTP stream, bounded and shielded so it also
        # runs when the run was cancelled.
        with trio.move_on_after(5, shield=True):
            await aclose()


def _working_context(context: AgentContext, messages: list[AgentMessage]) -> AgentContext:
    return AgentContext(messages=messages, tools=list(context.tools))


async def run_agent_loop(
    prompts: Sequence[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    emit: AgentEventSink,
    *,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    emit_concurrently: bool = False,
) -> list[AgentMessage]:
    """Run the agent on new prompt messages and return the messages the run produced.

    Emits ``agent_start``, ``turn_start``, the prompts' (and tool declarations')
    ``message_start``/``message_end``, then turns until the model stops asking for tools
    and the queues are empty. ``emit`` is awaited for every event; the loop does not go on
    until it returns. The caller's ``context`` is not modified.

    ``emit`` is never called concurrently: events of parallel tools (and their
    ``on_update`` progress) wait for each other. With ``emit_concurrently=True`` the loop
    calls ``emit`` from each tool's task as its events occur, for sinks that order
    concurrent calls themselves (a memory channel's ``send``, :class:`~trio_agent.Agent`);
    each task still waits for its own call to finish.

    Aborting ``signal`` cancels whatever the run awaits (provider read, tool, hook) at once
    and closes the run with its closing events (see the guide, "Abort and cancellation");
    the function then returns normally.
    Cancelling the caller's scope does the same (the signal, if any, becomes aborted with
    reason ``"cancelled"``) and re-raises ``trio.Cancelled``.

    Raises:
        Exception: whatever a hook, the stream function or ``emit`` raised (the run ends
            without ``agent_end``).
    """
    initial = declare_tool_changes(context.messages, list(prompts), context.tools)
    new_messages = list(initial)
    run = _Run(
        _working_context(context, [*context.messages, *initial]),
        config,
        emit,
        signal,
        stream_fn,
        new_messages,
        emit_concurrently,
    )
    return await run.run(initial)


def _check_continuable(context: AgentContext) -> None:
    if not context.messages:
        raise NothingToContinueError("Cannot continue: no messages in context")
    last = context.messages[-1]
    if last.role == "assistant":
        raise NothingToContinueError("Cannot continue from message role: assistant")


async def run_agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    emit: AgentEventSink,
    *,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    emit_concurrently: bool = False,
) -> list[AgentMessage]:
    """Continue from an existing context (its last message must not be an assistant one).

    Like :func:`run_agent_loop` without prompts: no message events for existing messages;
    the returned list holds only new messages.

    Raises:
        NothingToContinueError: ``Cannot continue: no messages in context`` or
            ``Cannot continue from message role: assistant`` (before any event).
    """
    _check_continuable(context)
    run = _Run(
        _working_context(context, list(context.messages)),
        config,
        emit,
        signal,
        stream_fn,
        [],
        emit_concurrently,
    )
    return await run.run(())


@asynccontextmanager
async def _open_loop(
    runner: Callable[[AgentEventSink], Awaitable[list[AgentMessage]]], max_buffer_size: float
) -> AsyncIterator[trio.MemoryReceiveChannel[AgentEvent]]:
    send, receive = trio.open_memory_channel[AgentEvent](max_buffer_size)

    async def emit(event: AgentEvent) -> None:
        try:
            await send.send(event)
        except trio.BrokenResourceError:
            # The consumer left the block: the closing events of the cancelled run have
            # nobody to go to.
            pass

    async def drive() -> None:
        try:
            await runner(emit)
        finally:
            # close(), not aclose(): aclose() is a checkpoint, and the cancellation that
            # the consumer's exit (on end of channel) triggers would replace the run's
            # exception there, losing it.
            send.close()

    try:
        async with trio.open_nursery() as nursery, receive:
            nursery.start_soon(drive)
            try:
                yield receive
            finally:
                # Leaving the block (early or not) ends the loop: nothing outlives it.
                nursery.cancel_scope.cancel(reason="open_agent_loop block exited")
    except BaseExceptionGroup as group:
        # One error at a time: the run's or the block's (policy in collapse_exception_group).
        raise collapse_exception_group(group) from None


def open_agent_loop(
    prompts: Sequence[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    *,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    max_buffer_size: float = 0,
) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[AgentEvent]]:
    """Run :func:`run_agent_loop` in a nursery this context manager owns and yield a
    receive channel of its events.

    The channel ends after ``agent_end``. With ``max_buffer_size=0`` the loop waits until
    the consumer has received each event. Leaving the block early cancels the loop. An
    exception of the run propagates out of the block.
    """
    return _open_loop(
        lambda emit: run_agent_loop(
            prompts,
            context,
            config,
            emit,
            signal=signal,
            stream_fn=stream_fn,
            emit_concurrently=True,  # channel sends are ordered by the channel
        ),
        max_buffer_size,
    )


def open_agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    *,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    max_buffer_size: float = 0,
) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[AgentEvent]]:
    """Like :func:`open_agent_loop` for :func:`run_agent_loop_continue`.

    Raises:
        NothingToContinueError: at the call, when the context cannot be continued.
    """
    _check_continuable(context)
    return _open_loop(
        lambda emit: run_agent_loop_continue(
            context,
            config,
            emit,
            signal=signal,
            stream_fn=stream_fn,
            emit_concurrently=True,  # channel sends are ordered by the channel
        ),
        max_buffer_size,
    )
