"""The stateful :class:`Agent`: transcript, tools, queues, listeners and one run at a time.

Built only on the public :mod:`trio_agent.loop` API (reference upstream-agent.md §4; SPEC §7
and §8). A run is ``prompt()``/``continue_()`` running the loop in the calling task; its
events travel through a memory channel to one dispatcher task that reduces them into
:class:`AgentState` and then awaits every listener in subscription order. The loop waits
for each event's acknowledgement (``message_update`` events may be pipelined through a
small buffer), so listeners never overlap and a slow listener delays the run.

Besides :mod:`trio_agent.loop`, it uses only public names of the data model and the
transcript helpers (their private modules are imported to avoid an import cycle).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from ._abort import AbortController, AbortSignal
from ._events import (
    AgentEndEvent,
    AgentEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from ._exceptions import AgentBusyError, NothingToContinueError
from ._hooks import AgentContext, AgentTurnContext
from ._messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    Model,
    ModelCost,
    QueueMode,
    SystemMessage,
    TextContent,
    ThinkingLevel,
    ToolExecutionMode,
    ToolResultMessage,
    UserMessage,
    registered_message_types,
)
from ._streaming import ProviderResponse, StreamFn, Transport, get_default_stream_fn
from ._tools import AgentTool, AgentToolResult
from ._transcript import (
    create_initial_system_message,
    get_current_system_message,
    get_current_system_prompt,
    to_tool_declaration,
)
from ._util import collapse_exception_group, maybe_await
from .loop import (
    AfterToolCallHook,
    AgentEventSink,
    AgentLoopConfig,
    BeforeToolCallHook,
    default_convert_to_llm,
    run_agent_loop,
    run_agent_loop_continue,
)

__all__ = ["Agent", "AgentInitialState", "AgentListener", "AgentState"]

AgentListener = Callable[..., Any]
"""A listener: ``(event)`` or ``(event, signal)``, a plain function or ``async def``."""

_PROMPT_BUSY = (
    "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, "
    "or wait for completion."
)
_CONTINUE_BUSY = "Agent is already processing. Wait for completion before continuing."
_RESET_BUSY = "Agent is already processing. Wait for completion before resetting."

# How many message_update events may be in flight to the dispatcher (SPEC §8 relaxation).
_UPDATE_PIPELINE = 16


def _placeholder_model() -> Model:
    return Model(
        id="unknown",
        name="unknown",
        api="unknown",
        provider="unknown",
        base_url="",
        reasoning=False,
        input=[],
        cost=ModelCost(),
        context_window=0,
        max_tokens=0,
    )


@attrs.frozen(kw_only=True)
class AgentInitialState:
    """Initial state of an :class:`Agent`.

    ``system_prompt`` and ``tools`` become the leading system message (timestamp 0)
    unless ``messages`` already starts with a system message.
    """

    system_prompt: str | None = None
    model: Model | None = None
    thinking_level: ThinkingLevel = "off"
    tools: Sequence[AgentTool] | None = None
    messages: Sequence[AgentMessage] | None = None


class AgentState:
    """The durable state of an :class:`Agent` (``agent.state``).

    ``tools`` and ``messages`` return the live lists; assigning stores a copy of the
    top-level list. Runtime fields are read-only and change only through events.
    """

    def __init__(
        self,
        *,
        model: Model,
        thinking_level: ThinkingLevel,
        tools: list[AgentTool],
        messages: list[AgentMessage],
    ) -> None:
        self.model: Model = model
        """The model of future runs."""
        self.thinking_level: ThinkingLevel = thinking_level
        """The thinking level of future runs."""
        self._tools = tools
        self._messages = messages
        self._is_streaming = False
        self._streaming_message: AgentMessage | None = None
        self._pending_tool_calls: frozenset[str] = frozenset()
        self._error_message: str | None = None

    @property
    def system_prompt(self) -> str:
        """The effective system prompt, replayed from the transcript's system messages.

        Read-only: append a :class:`~trio_agent.SystemMessage` to change it.
        """
        return get_current_system_prompt(self._messages)

    @property
    def tools(self) -> list[AgentTool]:
        """The executable tools (the live list). Changes are declared to the model before
        the next request."""
        return self._tools

    @tools.setter
    def tools(self, tools: Sequence[AgentTool]) -> None:
        self._tools = list(tools)

    @property
    def messages(self) -> list[AgentMessage]:
        """The transcript (the live list)."""
        return self._messages

    @messages.setter
    def messages(self, messages: Sequence[AgentMessage]) -> None:
        self._messages = list(messages)

    @property
    def is_streaming(self) -> bool:
        """True from run start until the run has fully settled (``agent_end`` listeners
        included)."""
        return self._is_streaming

    @property
    def streaming_message(self) -> AgentMessage | None:
        """The message between its ``message_start`` and ``message_end``."""
        return self._streaming_message

    @property
    def pending_tool_calls(self) -> frozenset[str]:
        """Ids of tool calls between ``tool_execution_start`` and ``_end`` (replaced on
        every change, never mutated)."""
        return self._pending_tool_calls

    @property
    def error_message(self) -> str | None:
        """The error message of the latest failed turn; cleared when a run starts and by
        ``reset()``."""
        return self._error_message

    def __repr__(self) -> str:
        return (
            f"<AgentState model={self.model.id!r} messages={len(self._messages)} "
            f"tools={len(self._tools)} is_streaming={self._is_streaming}>"
        )


@attrs.define(eq=False)
class _Queue:
    """A steering or follow-up queue with delivery ownership (reference §3.12)."""

    mode: QueueMode
    items: list[AgentMessage] = attrs.field(factory=list)
    in_flight: list[AgentMessage] = attrs.field(factory=list)

    def select(self) -> list[AgentMessage]:
        return list(self.items if self.mode == "all" else self.items[:1])

    def drain(self) -> list[AgentMessage]:
        taken = self.select()
        del self.items[: len(taken)]
        self.in_flight.extend(taken)
        return taken

    def delivered(self, message: AgentMessage) -> bool:
        for index, candidate in enumerate(self.in_flight):
            if candidate is message or _same_system_message(candidate, message):
                del self.in_flight[index]
                return True
        return False

    def restore(self) -> None:
        self.items[:0] = self.in_flight
        self.in_flight.clear()

    def clear(self) -> None:
        self.items.clear()
        self.in_flight.clear()


def _same_system_message(a: AgentMessage, b: AgentMessage) -> bool:
    # The loop may rewrite a queued system message's tool fields before delivering it.
    if not (isinstance(a, SystemMessage) and isinstance(b, SystemMessage)):
        return False
    return attrs.evolve(a, tools_added=None, tools_removed=None) == attrs.evolve(
        b, tools_added=None, tools_removed=None
    )


@attrs.define(eq=False)
class _Listener:
    fn: AgentListener
    takes_signal: bool


def _takes_signal(fn: AgentListener) -> bool:
    """Whether ``fn`` is called as ``(event, signal)`` rather than ``(event)``.

    Raises:
        TypeError: ``fn`` is not callable, or cannot be called with one or two
            positional arguments.
    """
    if not callable(fn):
        raise TypeError(f"listener must be callable, got {fn!r}")
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: give both
        return True
    positional = required = 0
    empty = inspect.Parameter.empty
    for parameter in parameters:
        kind = parameter.kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            return required <= 2
        if kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            positional += 1
            required += parameter.default is empty
        elif kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is empty:
            raise TypeError(
                f"listener {fn!r} has a required keyword-only parameter {parameter.name!r}; "
                "listeners are called as (event) or (event, signal)"
            )
    if positional == 0 or required > 2:
        raise TypeError(
            f"listener {fn!r} must accept (event) or (event, signal), "
            f"not {positional} positional parameter(s)"
        )
    return positional >= 2


_MESSAGE_CLASSES = (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage)


def _check_message(value: object, where: str) -> AgentMessage:
    """``value`` if it is a message the transcript can hold, else a ``TypeError``."""
    if isinstance(value, _MESSAGE_CLASSES) or type(value) in registered_message_types().values():
        return value  # type: ignore[return-value]  # checked just above
    raise TypeError(
        f"{where}: expected a message (SystemMessage, UserMessage, AssistantMessage, "
        f"ToolResultMessage or a class registered with register_message_type), got {value!r}"
    )


@attrs.define(eq=False)
class _Ack:
    """The emitter's wait for one barrier event.

    Cheaper than a ``trio.Event`` per event: the emitter parks itself and the dispatcher
    reschedules it once the listeners are done.
    """

    task: trio.lowlevel.Task
    done: bool = False
    parked: bool = False
    error: BaseException | None = None

    async def wait(self) -> None:
        if self.done:
            return
        self.parked = True
        # The emitter always waits for its acknowledgement (the loop emits shielded), so
        # cancellation cannot abort this wait.
        await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)

    def set(self) -> None:
        self.done = True
        if self.parked:
            trio.lowlevel.reschedule(self.task)


@attrs.define(eq=False)
class _ActiveRun:
    controller: AbortController
    idle: trio.Event
    skip_initial_steering_poll: bool
    send: trio.MemorySendChannel[tuple[AgentEvent, _Ack | None]] | None = None
    update_error: BaseException | None = None
    ended: bool = False
    reporting_failure: bool = False
    """``agent_end`` was dispatched: nothing may follow it (SPEC §8)."""


class Agent:
    """A stateful agent: owns the transcript, tools, queues and listeners; one run at a time.

    Every constructor option is also a public attribute read when the next run starts.
    ``stream_fn`` defaults to :func:`~trio_agent.get_default_stream_fn` (evaluated now, so
    a missing default raises :class:`~trio_agent.AgentError` here).
    """

    def __init__(
        self,
        initial_state: AgentInitialState | None = None,
        stream_fn: StreamFn | None = None,
        convert_to_llm: Callable[[list[AgentMessage]], Any] = default_convert_to_llm,
        transform_context: Callable[[list[AgentMessage], AbortSignal | None], Any] | None = None,
        get_api_key: Callable[[str], Any] | None = None,
        on_payload: Callable[[dict[str, Any], Model], Any] | None = None,
        on_response: Callable[[ProviderResponse, Model], Any] | None = None,
        on_provider_stream_event: Callable[[Any, Model], Any] | None = None,
        before_tool_call: BeforeToolCallHook | None = None,
        after_tool_call: AfterToolCallHook | None = None,
        finish_turn: Callable[[AgentTurnContext, AbortSignal | None], Any] | None = None,
        prepare_request: Callable[..., Any] | None = None,
        prepare_next_turn: Callable[[AbortSignal | None], Any] | None = None,
        prepare_next_turn_with_context: Callable[[AgentTurnContext, AbortSignal | None], Any]
        | None = None,
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        session_id: str | None = None,
        thinking_budgets: dict[str, int] | None = None,
        transport: Transport = "auto",
        max_retry_delay_ms: int | None = None,
        tool_execution: ToolExecutionMode = "parallel",
    ) -> None:
        initial = initial_state or AgentInitialState()
        tools = list(initial.tools or [])
        messages = list(initial.messages or [])
        if not messages or messages[0].role != "system":
            system = create_initial_system_message(
                initial.system_prompt, [to_tool_declaration(tool) for tool in tools]
            )
            if system is not None:
                messages.insert(0, system)
        self._state = AgentState(
            model=initial.model if initial.model is not None else _placeholder_model(),
            thinking_level=initial.thinking_level,
            tools=tools,
            messages=messages,
        )
        self.stream_fn: StreamFn = stream_fn if stream_fn is not None else get_default_stream_fn()
        """The stream function of future runs."""
        self.convert_to_llm = convert_to_llm
        self.transform_context = transform_context
        self.get_api_key = get_api_key
        self.on_payload = on_payload
        self.on_response = on_response
        self.on_provider_stream_event = on_provider_stream_event
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.finish_turn = finish_turn
        self.prepare_request = prepare_request
        self.prepare_next_turn = prepare_next_turn
        self.prepare_next_turn_with_context = prepare_next_turn_with_context
        self.session_id = session_id
        self.thinking_budgets = thinking_budgets
        self.transport: Transport = transport
        self.max_retry_delay_ms = max_retry_delay_ms
        self.tool_execution: ToolExecutionMode = tool_execution
        if tool_execution not in ("sequential", "parallel"):
            raise ValueError(
                f"tool_execution must be 'sequential' or 'parallel', not {tool_execution!r}"
            )
        if transport not in ("sse", "websocket", "auto"):
            raise ValueError(f"transport must be 'sse', 'websocket' or 'auto', not {transport!r}")
        self._steering = _Queue(_check_mode(steering_mode))
        self._follow_up = _Queue(_check_mode(follow_up_mode))
        self._listeners: list[_Listener] = []
        self._open_tools: dict[str, str] = {}  # tool-call id -> name, started not ended
        self._turn_open = False
        self._active: _ActiveRun | None = None

    # -- state and listeners -----------------------------------------------------------

    @property
    def state(self) -> AgentState:
        """The live state object."""
        return self._state

    def subscribe(self, listener: AgentListener) -> Callable[[], None]:
        """Add a listener; returns a function that removes it.

        A listener takes ``(event)`` or ``(event, signal)`` (decided now from its
        signature) and may be a plain function or ``async def``. Listeners are awaited in
        subscription order after the event was reduced into :attr:`state`; subscribing the
        same function twice has no effect. A listener that raises fails the run.

        Raises:
            TypeError: ``listener`` is not callable with ``(event)`` or
                ``(event, signal)``.
        """
        for existing in self._listeners:
            if existing.fn is listener:
                return self._unsubscriber(existing)
        entry = _Listener(listener, _takes_signal(listener))
        self._listeners.append(entry)
        return self._unsubscriber(entry)

    def _unsubscriber(self, entry: _Listener) -> Callable[[], None]:
        def unsubscribe() -> None:
            if entry in self._listeners:
                self._listeners.remove(entry)

        return unsubscribe

    @asynccontextmanager
    async def events(
        self, max_buffer_size: float = 0
    ) -> AsyncIterator[trio.MemoryReceiveChannel[AgentEvent]]:
        """Subscribe a channel: yields a receive channel of every event, across runs.

        It subscribes on entry (at that position in the listener order) and unsubscribes
        on exit. With ``max_buffer_size=0`` a run waits until the consumer has received
        each event.
        """
        send, receive = trio.open_memory_channel[AgentEvent](max_buffer_size)

        async def forward(event: AgentEvent) -> None:
            try:
                await send.send(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the consumer has left the block

        unsubscribe = self.subscribe(forward)
        try:
            async with receive:
                yield receive
        finally:
            unsubscribe()
            send.close()

    # -- queues ---------------------------------------------------------------------

    @property
    def steering_mode(self) -> QueueMode:
        """Drain mode of the steering queue; a change applies at the next drain."""
        return self._steering.mode

    @steering_mode.setter
    def steering_mode(self, mode: QueueMode) -> None:
        self._steering.mode = _check_mode(mode)

    @property
    def follow_up_mode(self) -> QueueMode:
        """Drain mode of the follow-up queue; a change applies at the next drain."""
        return self._follow_up.mode

    @follow_up_mode.setter
    def follow_up_mode(self, mode: QueueMode) -> None:
        self._follow_up.mode = _check_mode(mode)

    def steer(self, message: AgentMessage) -> None:
        """Queue a message delivered after the current turn's tool calls (any time).

        Raises:
            TypeError: ``message`` is not a message.
        """
        self._steering.items.append(_check_message(message, "steer()"))

    def follow_up(self, message: AgentMessage) -> None:
        """Queue a message delivered when the agent would otherwise stop (any time).

        Raises:
            TypeError: ``message`` is not a message.
        """
        self._follow_up.items.append(_check_message(message, "follow_up()"))

    def clear_steering_queue(self) -> None:
        """Drop queued steering messages (also drained ones not yet delivered)."""
        self._steering.clear()

    def clear_follow_up_queue(self) -> None:
        """Drop queued follow-up messages (also drained ones not yet delivered)."""
        self._follow_up.clear()

    def clear_all_queues(self) -> None:
        """Drop both queues."""
        self.clear_steering_queue()
        self.clear_follow_up_queue()

    def has_queued_messages(self) -> bool:
        """True when either queue holds a message."""
        return bool(self._steering.items or self._follow_up.items)

    def peek_queued_messages(self) -> list[AgentMessage]:
        """What the next drain would take, without taking it: the steering queue's head
        (per its mode) if it is non-empty, else the follow-up queue's head."""
        if self._steering.items:
            return self._steering.select()
        return self._follow_up.select()

    # -- runs -------------------------------------------------------------------------

    @property
    def signal(self) -> AbortSignal | None:
        """The active run's abort signal, or ``None`` when idle."""
        return self._active.controller.signal if self._active is not None else None

    def abort(self, reason: Any = None) -> None:
        """Abort the active run (no-op when idle).

        Cancels whatever the run is awaiting (provider read, tool, hook) at once; the run
        then delivers its closing events and ``prompt()`` returns normally.
        """
        if self._active is not None:
            self._active.controller.abort(reason)

    async def wait_for_idle(self) -> None:
        """Block until the active run has fully settled (``agent_end`` listeners
        included). A checkpoint; returns at once when idle. Deadlocks if awaited from a
        listener of the run it waits for."""
        if self._active is None:
            await trio.lowlevel.checkpoint()
            return
        await self._active.idle.wait()

    def reset(self) -> None:
        """Clear the transcript down to its consolidated system message, the runtime
        fields, the error message and both queues. Model, tools and hooks are kept.

        Raises:
            AgentBusyError: while a run is active.
        """
        if self._active is not None:
            raise AgentBusyError(_RESET_BUSY)
        system = get_current_system_message(self._state.messages)
        self._state.messages = [system] if system is not None else []
        self._state._is_streaming = False
        self._state._streaming_message = None
        self._state._pending_tool_calls = frozenset()
        self._state._error_message = None
        self.clear_all_queues()

    async def prompt(
        self,
        input: str | AgentMessage | Sequence[AgentMessage],
        images: Sequence[ImageContent] | None = None,
    ) -> None:
        """Run the agent on new input and return when the run has fully settled.

        ``input`` is a text (with optional ``images``), one message, or a list of
        messages (used as given). Provider failures do not raise: inspect
        ``state.error_message`` or the last message. Cancelling the caller's scope aborts
        the run, delivers its closing events and re-raises ``trio.Cancelled``.

        Raises:
            AgentBusyError: a run is already active.
            Exception: a listener raised on ``agent_end`` (nothing may follow it, so the
                error cannot be reported in-band), or raised again while the failure of
                the run was being reported.
        """
        if self._active is not None:
            raise AgentBusyError(_PROMPT_BUSY)
        messages: list[AgentMessage]
        if isinstance(input, str):
            content: list[TextContent | ImageContent] = [TextContent(text=input)]
            for image in images or ():
                if not isinstance(image, ImageContent):
                    raise TypeError(f"prompt(): images must be ImageContent, got {image!r}")
                content.append(image)
            messages = [UserMessage(content=content)]
        elif isinstance(input, list):
            messages = input
        elif isinstance(input, Sequence):
            messages = [*input]
        else:
            messages = [input]
        for message in messages:
            _check_message(message, "prompt()")
        await self._run_prompt(messages, skip_initial_steering_poll=False)

    async def continue_(self) -> None:
        """Continue from the current transcript.

        From an assistant tail, queued steering (then follow-up) messages become the
        input; from any other tail the loop continues as is.

        Raises:
            AgentBusyError: a run is already active.
            NothingToContinueError: no messages (or only system messages), or an assistant
                tail with nothing queued.
            Exception: a listener raised on ``agent_end``, or raised again while the
                failure of the run was being reported (as for :meth:`prompt`).
        """
        if self._active is not None:
            raise AgentBusyError(_CONTINUE_BUSY)
        messages = self._state.messages
        if not messages or all(m.role == "system" for m in messages):
            raise NothingToContinueError("No messages to continue from")
        if messages[-1].role == "assistant":
            steering = self._steering.drain()
            if steering:
                await self._run_prompt(steering, skip_initial_steering_poll=True)
                return
            follow_ups = self._follow_up.drain()
            if follow_ups:
                await self._run_prompt(follow_ups, skip_initial_steering_poll=False)
                return
            raise NothingToContinueError("Cannot continue from message role: assistant")
        await self._run(
            lambda context, config, emit, signal: run_agent_loop_continue(
                context,
                config,
                emit,
                signal=signal,
                stream_fn=self.stream_fn,
                emit_concurrently=True,  # the dispatcher's channel orders events
            ),
            skip_initial_steering_poll=False,
        )

    async def _run_prompt(
        self, messages: list[AgentMessage], *, skip_initial_steering_poll: bool
    ) -> None:
        await self._run(
            lambda context, config, emit, signal: run_agent_loop(
                messages,
                context,
                config,
                emit,
                signal=signal,
                stream_fn=self.stream_fn,
                emit_concurrently=True,  # the dispatcher's channel orders events
            ),
            skip_initial_steering_poll=skip_initial_steering_poll,
        )

    def _loop_config(self, run: _ActiveRun) -> AgentLoopConfig:
        first_poll = [run.skip_initial_steering_poll]

        def get_steering_messages() -> list[AgentMessage]:
            if first_poll[0]:
                first_poll[0] = False
                return []
            return self._steering.drain()

        prepare_next_turn = None
        if self.prepare_next_turn is not None or self.prepare_next_turn_with_context is not None:

            def prepare_next_turn(turn: AgentTurnContext) -> Any:
                # Both variants are read when called (reference §4.11).
                if self.prepare_next_turn_with_context is not None:
                    return self.prepare_next_turn_with_context(turn, self.signal)
                if self.prepare_next_turn is not None:
                    return self.prepare_next_turn(self.signal)
                return None

        state = self._state
        return AgentLoopConfig(
            model=state.model,
            reasoning=None if state.thinking_level == "off" else state.thinking_level,
            convert_to_llm=self.convert_to_llm,
            transform_context=self.transform_context,
            get_api_key=self.get_api_key,
            finish_turn=self.finish_turn,
            prepare_request=self.prepare_request,
            prepare_next_turn=prepare_next_turn,
            get_steering_messages=get_steering_messages,
            get_follow_up_messages=self._follow_up.drain,
            tool_execution=self.tool_execution,
            before_tool_call=self.before_tool_call,
            after_tool_call=self.after_tool_call,
            session_id=self.session_id,
            transport=self.transport,
            thinking_budgets=self.thinking_budgets,
            max_retry_delay_ms=self.max_retry_delay_ms,
            on_payload=self.on_payload,
            on_response=self.on_response,
            on_provider_stream_event=self.on_provider_stream_event,
        )

    async def _run(
        self,
        executor: Callable[
            [AgentContext, AgentLoopConfig, AgentEventSink, AbortSignal],
            Awaitable[list[AgentMessage]],
        ],
        *,
        skip_initial_steering_poll: bool,
    ) -> None:
        if self._active is not None:
            raise AgentBusyError("Agent is already processing.")
        run = _ActiveRun(AbortController(), trio.Event(), skip_initial_steering_poll)
        self._active = run
        state = self._state
        state._is_streaming = True
        state._streaming_message = None
        state._error_message = None
        try:
            context = AgentContext(messages=list(state.messages), tools=list(state.tools))
            config = self._loop_config(run)
            send, receive = trio.open_memory_channel[tuple[AgentEvent, _Ack | None]](
                _UPDATE_PIPELINE
            )
            run.send = send
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._dispatch, run, receive)
                async with send:
                    emit = self._emitter(run)
                    try:
                        await executor(context, config, emit, run.controller.signal)
                    except Exception as exc:
                        if run.ended:
                            # A listener failed on agent_end: no event may follow it
                            # (SPEC §8), so the error leaves prompt() after cleanup.
                            raise
                        # A listener error on a pipelined update that the failure
                        # overtook must not abort the report of the failure.
                        run.reporting_failure = True
                        run.update_error = None
                        with trio.CancelScope(shield=True):
                            await self._report_failure(exc, emit, run)
        except BaseExceptionGroup as group:
            # The nursery only holds the dispatcher; see collapse_exception_group.
            raise collapse_exception_group(group) from None
        finally:
            self._steering.restore()
            self._follow_up.restore()
            state._is_streaming = False
            state._streaming_message = None
            state._pending_tool_calls = frozenset()
            self._open_tools.clear()
            self._turn_open = False
            self._active = None
            run.idle.set()

    def _emitter(self, run: _ActiveRun) -> Callable[[AgentEvent], Awaitable[None] | None]:
        send = run.send
        assert send is not None

        def emit(event: AgentEvent) -> Awaitable[None] | None:
            if isinstance(event, MessageUpdateEvent):
                # Pipelined (SPEC §8): queued in order without waiting for the listeners;
                # only a full pipeline makes the loop wait.
                try:
                    send.send_nowait((event, None))
                except trio.WouldBlock:
                    return send.send((event, None))
                return None
            return emit_barrier(event)

        async def emit_barrier(event: AgentEvent) -> None:
            ack = _Ack(trio.lowlevel.current_task())
            try:
                send.send_nowait((event, ack))
            except trio.WouldBlock:
                await send.send((event, ack))
            await ack.wait()
            error = ack.error
            if error is None and not run.reporting_failure:
                error = run.update_error
            run.update_error = None
            if error is not None:
                raise error

        return emit

    async def _dispatch(
        self,
        run: _ActiveRun,
        receive: trio.MemoryReceiveChannel[tuple[AgentEvent, _Ack | None]],
    ) -> None:
        # Shielded: the dispatcher must deliver the closing events of a cancelled run. It
        # ends when the run closes the send side.
        with trio.CancelScope(shield=True):
            async with receive:
                while True:
                    # Drain what is buffered without a checkpoint per event; block only
                    # when the pipeline is empty.
                    try:
                        event, ack = receive.receive_nowait()
                    except trio.WouldBlock:
                        try:
                            event, ack = await receive.receive()
                        except trio.EndOfChannel:
                            return
                    except trio.EndOfChannel:
                        return
                    try:
                        self._reduce(event)
                        if isinstance(event, AgentEndEvent):
                            run.ended = True
                        signal = run.controller.signal
                        for listener in list(self._listeners):
                            if listener.takes_signal:
                                value = listener.fn(event, signal)
                            else:
                                value = listener.fn(event)
                            if value is not None and inspect.isawaitable(value):
                                await value
                    except BaseException as exc:
                        # Every failure goes back to the emitter, KeyboardInterrupt
                        # included: the emitter waits for the ack under a shield, so a
                        # dispatcher that died here would hang the run forever.
                        if ack is None:
                            run.update_error = run.update_error or exc
                        else:
                            ack.error = exc
                    if ack is not None:
                        ack.set()

    def _reduce(self, event: AgentEvent) -> None:
        state = self._state
        if isinstance(event, MessageUpdateEvent | MessageStartEvent):
            state._streaming_message = event.message
        elif isinstance(event, MessageEndEvent):
            state._streaming_message = None
            state._messages.append(event.message)
            if not self._steering.delivered(event.message):
                self._follow_up.delivered(event.message)
        elif isinstance(event, ToolExecutionStartEvent):
            state._pending_tool_calls = state._pending_tool_calls | {event.tool_call_id}
            self._open_tools[event.tool_call_id] = event.tool_name
        elif isinstance(event, ToolExecutionEndEvent):
            state._pending_tool_calls = state._pending_tool_calls - {event.tool_call_id}
            self._open_tools.pop(event.tool_call_id, None)
        elif isinstance(event, TurnStartEvent):
            self._turn_open = True
        elif isinstance(event, TurnEndEvent):
            self._turn_open = False
            message = event.message
            if isinstance(message, AssistantMessage) and message.error_message:
                state._error_message = message.error_message
        elif isinstance(event, AgentEndEvent):
            state._streaming_message = None

    async def _report_failure(
        self,
        error: Exception,
        emit: Callable[[AgentEvent], Awaitable[None] | None],
        run: _ActiveRun,
    ) -> None:
        """Close a run that raised with a synthesized assistant failure (reference §4.8)."""
        model = self._state.model
        message = AssistantMessage(
            content=[TextContent(text="")],
            api=model.api,
            provider=model.provider,
            model=model.id,
            stop_reason="aborted" if run.controller.signal.aborted else "error",
            error_message=str(error) or type(error).__name__,
        )
        text = message.error_message or ""
        events: list[AgentEvent] = []
        # Keep the event grammar closed (SPEC §8): tool executions the failure cut short
        # end as errors (their calls stay unanswered in the transcript), an open user,
        # system or tool-result message is committed, and an open assistant partial is
        # replaced by the failure message.
        for call_id, name in list(self._open_tools.items()):
            result = AgentToolResult(content=[TextContent(text=text)], details={}, is_error=True)
            events.append(
                ToolExecutionEndEvent(
                    tool_call_id=call_id, tool_name=name, result=result, is_error=True
                )
            )
        if not self._turn_open:
            # The failure came before the first turn_start (an agent_start listener).
            events.append(TurnStartEvent())
        open_message = self._state._streaming_message
        if open_message is not None and open_message.role != "assistant":
            events.append(MessageEndEvent(message=open_message))
            open_message = None
        if open_message is None:
            events.append(MessageStartEvent(message=message))
        events += [
            MessageEndEvent(message=message),
            TurnEndEvent(message=message, tool_results=[]),
            AgentEndEvent(messages=[message]),
        ]
        for event in events:
            await maybe_await(emit(event))


def _check_mode(mode: QueueMode) -> QueueMode:
    if mode not in ("all", "one-at-a-time"):
        raise ValueError(f"queue mode must be 'all' or 'one-at-a-time', not {mode!r}")
    return mode
