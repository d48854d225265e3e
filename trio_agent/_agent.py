"""The stateful :class:`Agent`: transcript, tools, queues, listeners and one run at a time.

Built only on the public :mod:`trio_agent.loop` API. A run is ``prompt()``/``continue_()``
running the loop in the calling task. The Agent is the run's
:class:`~trio_agent.loop.AgentEventSink`: it reduces each event into
:class:`AgentState`, then calls every listener in subscription order, in the run's task, so
listeners never overlap and a slow listener delays the run. The loop closes every run
itself (aborts, failures, cancellation); the Agent only reduces events into state.

Besides :mod:`trio_agent.loop`, it uses only public names of the data model and the
transcript helpers (their private modules are imported to avoid an import cycle).
"""

from __future__ import annotations

import inspect
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Generic, NoReturn, TypeVar, overload

import attrs
import trio

from ._abort import AbortController, AbortSignal
from ._agent_tool import agent_as_tool
from ._approval import ApproveToolCall, ToolApproval, decisions, pending_approvals
from ._checks import (
    check_callable,
    check_message,
    check_messages,
    check_model,
    check_thinking_level,
    check_tools,
    prompt_messages,
)
from ._compaction import CompactionFailure, CompactionResult, CompactionSettings
from ._events import AgentEvent
from ._exceptions import AgentBusyError, AgentError, NothingToContinueError
from ._hooks import AgentContext, AgentTurnContext, PrepareRequestContext
from ._messages import (
    UNKNOWN_MODEL,
    AgentMessage,
    AssistantMessage,
    ImageContent,
    Model,
    QueueMode,
    SystemMessage,
    ThinkingLevel,
    ToolCall,
    ToolExecutionMode,
)
from ._output import OutputMode, OutputRun
from ._run_result import RunResult, UsageLimits
from ._streaming import (
    ProviderResponse,
    RetryNotice,
    StreamFn,
    StreamOptions,
    Transport,
    check_request_option,
    get_default_stream_fn,
)
from ._tools import AgentTool
from ._transcript import (
    create_initial_system_message,
    get_current_system_message,
    get_current_system_prompt,
    to_tool_declaration,
)
from ._util import maybe_await
from .loop import (
    AfterToolCallHook,
    AgentEventSink,
    AgentLoopConfig,
    BeforeToolCallHook,
    default_convert_to_llm,
    run_agent_compaction,
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
_T = TypeVar("_T")

_ABORT_FROM_THREAD = (
    "Agent.abort() was called from another thread; in a thread started by Trio use "
    "trio.from_thread.run_sync(agent.abort), from any other thread "
    "trio.from_thread.run_sync(agent.abort, trio_token=token) with the token of the "
    "agent's Trio run (trio.lowlevel.current_trio_token())"
)
_NOT_UNDER_TRIO = (
    "Agent.{}() must run under Trio: call it from trio.run(...), not asyncio "
    "(trio_agent is Trio-native)"
)
_WAIT_FOR_ITSELF = (
    "wait_for_idle() called from inside the active run (a listener, hook or tool); "
    "it would wait for itself"
)


@attrs.frozen(kw_only=True)
class AgentInitialState:
    """Initial state of an :class:`Agent`.

    ``system_prompt`` and ``tools`` become the leading system message (timestamp 0)
    unless ``messages`` already starts with a system message.
    """

    system_prompt: str | None = None
    """The base system prompt; ``None`` means none."""
    model: Model | str | None = None
    """The model of the agent's runs: a :class:`~trio_agent.Model`, or a
    ``"provider/model-id"`` string of the built-in catalogue (``"openai/gpt-4o-mini"``);
    ``None`` leaves a placeholder (id ``"unknown"``) to replace through
    ``agent.state.model`` before the first run."""
    thinking_level: ThinkingLevel = "off"
    """The requested reasoning effort of the runs (default ``"off"``)."""
    tools: Sequence[AgentTool] | None = None
    """The tools the agent can run, with distinct names; ``None`` means none."""
    messages: Sequence[AgentMessage] | None = None
    """The transcript to start from (copied); ``None`` starts empty."""


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
        self._model = model
        self._thinking_level: ThinkingLevel = thinking_level
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
    def model(self) -> Model:
        """The model of future runs. Assign a :class:`~trio_agent.Model` or a
        ``"provider/model-id"`` string of the built-in catalogue.

        Raises:
            TypeError: on assignment, neither a ``Model`` nor a string.
            ValueError: on assignment, a string that names no known model.
        """
        return self._model

    @model.setter
    def model(self, model: Model | str) -> None:
        self._model = check_model(model, "state.model")

    @property
    def thinking_level(self) -> ThinkingLevel:
        """The thinking level of future runs.

        Raises:
            ValueError: on assignment, not a :data:`~trio_agent.ThinkingLevel`.
        """
        return self._thinking_level

    @thinking_level.setter
    def thinking_level(self, level: ThinkingLevel) -> None:
        self._thinking_level = check_thinking_level(level, "state.thinking_level")

    @property
    def tools(self) -> list[AgentTool]:
        """The executable tools (the live list). Changes are declared to the model before
        the next request."""
        return self._tools

    @tools.setter
    def tools(self, tools: Sequence[AgentTool]) -> None:
        self._tools = check_tools(tools, "state.tools")

    @property
    def messages(self) -> list[AgentMessage]:
        """The transcript (the live list)."""
        return self._messages

    @messages.setter
    def messages(self, messages: Sequence[AgentMessage]) -> None:
        self._messages = check_messages(messages, "state.messages")

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
            f"<AgentState model={self._model.id!r} messages={len(self._messages)} "
            f"tools={len(self._tools)} is_streaming={self._is_streaming}>"
        )


@attrs.define(eq=False)
class _Queue:
    """A steering or follow-up queue with delivery ownership."""

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

    def committed(self, message: AgentMessage) -> bool:
        """Forget ``message`` if it was drained from this queue; whether it was."""
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


def _refuse_keyword_only(fn: AgentListener, name: str) -> NoReturn:
    raise TypeError(
        f"listener {fn!r} has a required keyword-only parameter {name!r}; "
        "listeners are called as (event) or (event, signal)"
    )


def _takes_signal(fn: AgentListener) -> bool:
    """Whether ``fn`` is called as ``(event, signal)`` rather than ``(event)``.

    Raises:
        TypeError: ``fn`` is not callable, or cannot be called with one or two
            positional arguments.
    """
    if not callable(fn):
        raise TypeError(f"listener must be callable, got {fn!r}")
    if (
        type(fn) is types.FunctionType
        and not hasattr(fn, "__wrapped__")
        and not hasattr(fn, "__signature__")
    ):
        # A plain function, read from its code object: inspect.signature() costs more
        # than creating the Agent.
        code = fn.__code__
        positional = code.co_argcount
        required = positional - len(fn.__defaults__ or ())
        if code.co_flags & inspect.CO_VARARGS:
            return required <= 2
        keyword_defaults = fn.__kwdefaults__ or {}
        for name in code.co_varnames[positional : positional + code.co_kwonlyargcount]:
            if name not in keyword_defaults:
                _refuse_keyword_only(fn, name)
    else:
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
            if kind in (
                inspect.Parameter.POSITIONAL_ONLY,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
            ):
                positional += 1
                required += parameter.default is empty
            elif kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is empty:
                _refuse_keyword_only(fn, parameter.name)
    if positional == 0 or required > 2:
        raise TypeError(
            f"listener {fn!r} must accept (event) or (event, signal), "
            f"not {positional} positional parameter(s)"
        )
    return positional >= 2


@attrs.define(eq=False)
class _ActiveRun:
    controller: AbortController
    idle: trio.Event
    skip_initial_steering_poll: bool
    task: trio.lowlevel.Task
    """The task running the run (listeners and hooks run in it, tools in its children)."""
    token: trio.lowlevel.TrioToken = attrs.field(factory=trio.lowlevel.current_trio_token)
    output: OutputRun | None = None
    """The run's structured output, when it was given an output type."""

    def in_its_thread(self) -> bool:
        """True in the thread of the run's Trio run (``abort()`` must be called there)."""
        try:
            return trio.lowlevel.current_trio_token() is self.token
        except RuntimeError:
            return False

    def contains_current_task(self) -> bool:
        task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
        while task is not None:
            if task is self.task:
                return True
            nursery = task.parent_nursery
            task = nursery.parent_task if nursery is not None else None
        return False


class _ListenerSink:
    """The Agent as the sink of one run: reduce the event, then call every listener.

    ``send_nowait`` calls the listeners until one returns an awaitable (an ``async def``
    listener); it then raises ``trio.WouldBlock`` and ``send`` awaits that one and calls
    the rest. Listeners that do not await cost no checkpoint.
    """

    __slots__ = ("_agent", "_resume", "_signal")

    def __init__(self, agent: Agent, signal: AbortSignal) -> None:
        self._agent = agent
        self._signal = signal
        self._resume: tuple[AgentEvent, Awaitable[Any], tuple[_Listener, ...], int] | None = None

    def send_nowait(self, event: AgentEvent) -> None:
        agent = self._agent
        if event.type == "message_update":  # once per streamed token: _reduce inlined
            agent._state._streaming_message = event.message
        else:
            agent._reduce(event)
        listeners = agent._listeners
        signal = self._signal
        for listener in listeners:
            value = listener.fn(event, signal) if listener.takes_signal else listener.fn(event)
            if value is not None and inspect.isawaitable(value):
                self._resume = (event, value, listeners, listeners.index(listener) + 1)
                raise trio.WouldBlock

    async def send(self, event: AgentEvent) -> None:
        resume, self._resume = self._resume, None
        pending: Awaitable[Any] | None = None
        if resume is not None and resume[0] is event:
            _, pending, listeners, start = resume
        else:
            self._agent._reduce(event)
            listeners, start = self._agent._listeners, 0
        signal = self._signal
        cancelled: list[trio.Cancelled] = []
        if pending is not None:
            await _settle(pending, cancelled)
        for listener in listeners[start:]:
            value = listener.fn(event, signal) if listener.takes_signal else listener.fn(event)
            if value is not None and inspect.isawaitable(value):
                await _settle(value, cancelled)
        if cancelled:
            raise cancelled[0]


async def _settle(value: Awaitable[Any], cancelled: list[trio.Cancelled]) -> None:
    try:
        await value
    except trio.Cancelled as exc:
        # The closing grace ran out for this listener: the ones after it still receive
        # the event, and the cancellation is raised after them.
        cancelled.append(exc)


class _RequestOption(Generic[_T]):
    """An :class:`Agent` attribute kept in the agent's one :class:`StreamOptions`; an
    assignment is checked like the constructor's argument and changes nothing if refused."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, agent: None, owner: type[Any]) -> _RequestOption[_T]: ...
    @overload
    def __get__(self, agent: Agent, owner: type[Any]) -> _T: ...
    def __get__(self, agent: Agent | None, owner: type[Any]) -> _T | _RequestOption[_T]:
        if agent is None:
            return self
        value: _T = getattr(agent._options, self.name)
        return value

    def __set__(self, agent: Agent, value: _T) -> None:
        if self.name in _CHECKED_OPTIONS:
            check_request_option("Agent.", self.name, value)
        elif self.name.startswith("on_"):
            check_callable(value, "Agent.", self.name)
        changes: dict[str, Any] = {self.name: value}
        agent._options = attrs.evolve(agent._options, **changes)


_CHECKED_OPTIONS = frozenset({"max_retry_delay_ms", "max_retries", "max_tokens", "temperature"})


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
        transform_context: Callable[[list[AgentMessage], AbortSignal], Any] | None = None,
        get_api_key: Callable[[str], Any] | None = None,
        on_payload: Callable[[dict[str, Any], Model], Any] | None = None,
        on_response: Callable[[ProviderResponse, Model], Any] | None = None,
        on_provider_stream_event: Callable[[Any, Model], Any] | None = None,
        on_retry: Callable[[RetryNotice, Model], Any] | None = None,
        before_tool_call: BeforeToolCallHook | None = None,
        after_tool_call: AfterToolCallHook | None = None,
        finish_turn: Callable[[AgentTurnContext, AbortSignal], Any] | None = None,
        prepare_request: Callable[[PrepareRequestContext, AbortSignal], Any] | None = None,
        prepare_next_turn: Callable[[AbortSignal], Any] | None = None,
        prepare_next_turn_with_context: Callable[[AgentTurnContext, AbortSignal], Any]
        | None = None,
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        session_id: str | None = None,
        thinking_budgets: dict[str, int] | None = None,
        transport: Transport = "auto",
        max_retry_delay_ms: int | None = None,
        tool_execution: ToolExecutionMode = "parallel",
        temperature: float | None = None,
        max_tokens: int | None = None,
        max_retries: int | None = None,
        headers: dict[str, str | None] | None = None,
        usage_limits: UsageLimits | None = None,
        output_type: Any = None,
        output_retries: int = 2,
        output_mode: OutputMode = "auto",
        approve_tool_call: ApproveToolCall | None = None,
        compaction: CompactionSettings | bool | None = None,
    ) -> None:
        if initial_state is not None and not isinstance(initial_state, AgentInitialState):
            raise TypeError(
                "Agent(): initial_state must be an AgentInitialState or None, got "
                f"{initial_state!r}"
            )
        hooks = {
            "stream_fn": stream_fn,
            "convert_to_llm": convert_to_llm,
            "transform_context": transform_context,
            "get_api_key": get_api_key,
            "on_payload": on_payload,
            "on_response": on_response,
            "on_provider_stream_event": on_provider_stream_event,
            "on_retry": on_retry,
            "before_tool_call": before_tool_call,
            "after_tool_call": after_tool_call,
            "finish_turn": finish_turn,
            "prepare_request": prepare_request,
            "prepare_next_turn": prepare_next_turn,
            "prepare_next_turn_with_context": prepare_next_turn_with_context,
            "approve_tool_call": approve_tool_call,
        }
        for name, hook in hooks.items():
            check_callable(hook, "Agent(): ", name)
        if tool_execution not in ("sequential", "parallel"):
            raise ValueError(
                f"tool_execution must be 'sequential' or 'parallel', not {tool_execution!r}"
            )
        if transport not in ("sse", "websocket", "auto"):
            raise ValueError(f"transport must be 'sse', 'websocket' or 'auto', not {transport!r}")
        requested = {
            "max_retry_delay_ms": max_retry_delay_ms,
            "max_retries": max_retries,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        for name, value in requested.items():
            check_request_option("Agent(): ", name, value)
        initial = initial_state or AgentInitialState()
        model = (
            check_model(initial.model, "AgentInitialState.model")
            if initial.model is not None
            else UNKNOWN_MODEL
        )
        thinking_level = check_thinking_level(
            initial.thinking_level, "AgentInitialState.thinking_level"
        )
        tools = check_tools(initial.tools or [], "AgentInitialState.tools")
        messages = check_messages(initial.messages or [], "AgentInitialState.messages")
        if not messages or messages[0].role != "system":
            system = create_initial_system_message(
                initial.system_prompt, [to_tool_declaration(tool) for tool in tools]
            )
            if system is not None:
                messages.insert(0, system)
        self._state = AgentState(
            model=model, thinking_level=thinking_level, tools=tools, messages=messages
        )
        self.stream_fn: StreamFn = stream_fn if stream_fn is not None else get_default_stream_fn()
        """The stream function of future runs."""
        self.convert_to_llm = convert_to_llm
        self.transform_context = transform_context
        self.get_api_key = get_api_key
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.finish_turn = finish_turn
        self.prepare_request = prepare_request
        self.prepare_next_turn = prepare_next_turn
        self.prepare_next_turn_with_context = prepare_next_turn_with_context
        # The request options live in one StreamOptions; each run's derives from it.
        self._options = StreamOptions(
            session_id=session_id,
            transport=transport,
            thinking_budgets=thinking_budgets,
            headers=headers,
            on_payload=on_payload,
            on_response=on_response,
            on_provider_stream_event=on_provider_stream_event,
            on_retry=on_retry,
            max_retry_delay_ms=max_retry_delay_ms,
            max_retries=max_retries,
            max_tokens=max_tokens,
            temperature=temperature,
        )
        self.tool_execution: ToolExecutionMode = tool_execution
        if usage_limits is not None and not isinstance(usage_limits, UsageLimits):
            raise TypeError(
                f"Agent(): usage_limits must be a UsageLimits or None, got {usage_limits!r}"
            )
        self.usage_limits = usage_limits
        self.approve_tool_call = approve_tool_call
        """The inline approver of calls to tools with ``needs_approval`` (``None``: such
        calls wait for :meth:`approve` or :meth:`deny` and :meth:`continue_`)."""
        self._decisions: list[ToolApproval] = []
        if compaction is True:
            compaction = CompactionSettings()
        elif compaction is False:
            compaction = None
        elif compaction is not None and not isinstance(compaction, CompactionSettings):
            raise TypeError(
                "Agent(): compaction must be a CompactionSettings, a bool or None, got "
                f"{compaction!r}"
            )
        self.compaction: CompactionSettings | None = compaction
        """Automatic compaction (``None``: off): checked before every request of a run,
        and after a provider refuses a request as too long (see :meth:`compact`)."""
        if output_type is not None:
            OutputRun(output_type, output_retries)  # checks both now
        self.output_type: Any = output_type
        """The type of every run's :attr:`RunResult.output <trio_agent.RunResult.output>`
        (``None``: no structured output); ``prompt(..., output_type=...)`` overrides it."""
        self.output_retries = output_retries
        """How many wrong answers the model may correct before a structured-output run
        ends as an error."""
        self.output_mode: OutputMode = _check_output_mode(output_mode)
        """How the structured answer is asked for (see :data:`~trio_agent.OutputMode`)."""
        """Limits on what this agent's runs use (``None``: none); may be shared with
        other agents, which then draw on one budget."""
        self._steering = _Queue(_check_mode(steering_mode))
        self._follow_up = _Queue(_check_mode(follow_up_mode))
        # Replaced, never changed in place: an event goes to the listeners of its start.
        self._listeners: tuple[_Listener, ...] = ()
        self._active: _ActiveRun | None = None

    session_id: _RequestOption[str | None] = _RequestOption(
        """Prompt-cache / session-affinity key of every request."""
    )
    transport: _RequestOption[Transport] = (
        _RequestOption("""Transport preference (``"sse"``, ``"websocket"``,
    ``"auto"``); the built-in providers stream over SSE.""")
    )
    thinking_budgets: _RequestOption[dict[str, int] | None] = (
        _RequestOption("""Token budgets per thinking level for budget-based
    APIs.""")
    )
    max_retry_delay_ms: _RequestOption[int | None] = (
        _RequestOption("""Fail instead of sleeping when the server asks
    for a longer retry delay (``None``: the provider's default).""")
    )
    max_retries: _RequestOption[int | None] = (
        _RequestOption("""Retries of a failed request phase, e.g. on a 429
    (``None``: the provider's default, 0). An int >= 0.""")
    )
    max_tokens: _RequestOption[int | None] = (
        _RequestOption("""Output token limit of every request (``None`` or 0: the
    model's). An int >= 0.""")
    )
    temperature: _RequestOption[float | None] = (
        _RequestOption("""Sampling temperature of every request (``None``: the
    provider's default). A finite number >= 0.""")
    )
    headers: _RequestOption[Mapping[str, str | None] | None] = (
        _RequestOption("""Extra request headers, merged last; a ``None`` value
    deletes a default header.""")
    )
    on_payload: _RequestOption[Callable[[dict[str, Any], Model], Any] | None] = _RequestOption(
        """Sees each request body; may return a replacement."""
    )
    on_response: _RequestOption[Callable[[ProviderResponse, Model], Any] | None] = _RequestOption(
        """Sees each response's status and headers."""
    )
    on_provider_stream_event: _RequestOption[Callable[[Any, Model], Any] | None] = _RequestOption(
        """Sees every parsed provider event."""
    )
    on_retry: _RequestOption[Callable[[RetryNotice, Model], Any] | None] = _RequestOption(
        """Told before each retry of a request (status, wait, attempt)."""
    )

    # -- state and listeners -----------------------------------------------------------

    @property
    def state(self) -> AgentState:
        """The live state object."""
        return self._state

    def subscribe(self, listener: AgentListener) -> Callable[[], None]:
        """Add a listener; returns a function that removes it.

        A listener takes ``(event)`` or ``(event, signal)`` (decided now from its
        signature) and may be a plain function or ``async def``. A plain function may also
        return an awaitable for some events (``None`` for the others): the agent awaits it
        before going on, so only those events cost a checkpoint. Listeners are awaited in
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
        self._listeners = (*self._listeners, entry)
        return self._unsubscriber(entry)

    def _unsubscriber(self, entry: _Listener) -> Callable[[], None]:
        def unsubscribe() -> None:
            self._listeners = tuple(other for other in self._listeners if other is not entry)

        return unsubscribe

    def events(
        self, max_buffer_size: float = 0
    ) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[AgentEvent]]:
        """The same as :meth:`open_events`, under the name earlier versions used (trio
        names an async context manager ``open_*``; new code should use that name)."""
        return self.open_events(max_buffer_size)

    @asynccontextmanager
    async def open_events(
        self, max_buffer_size: float = 0
    ) -> AsyncIterator[trio.MemoryReceiveChannel[AgentEvent]]:
        """Subscribe a channel: yields a receive channel of every event, across runs.

        It subscribes on entry (at that position in the listener order) and unsubscribes
        on exit. With ``max_buffer_size=0`` a run waits until the consumer has received
        each event. A consumer that stops receiving holds the run until the caller's
        scope is cancelled; after the closing grace
        (:data:`~trio_agent.loop.CLOSING_GRACE_SECONDS`) it is then given up: unsubscribed
        and its channel closed.
        """
        send, receive = trio.open_memory_channel[AgentEvent](max_buffer_size)

        def forward(event: AgentEvent) -> Awaitable[None] | None:
            try:
                send.send_nowait(event)
            except trio.WouldBlock:
                return wait_for_consumer(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the consumer has left the block
            return None

        async def wait_for_consumer(event: AgentEvent) -> None:
            try:
                await send.send(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            except trio.Cancelled:
                unsubscribe()
                send.close()
                raise

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
        self._steering.items.append(check_message(message, "steer()"))

    def follow_up(self, message: AgentMessage) -> None:
        """Queue a message delivered when the agent would otherwise stop (any time).

        Raises:
            TypeError: ``message`` is not a message.
        """
        self._follow_up.items.append(check_message(message, "follow_up()"))

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
        active = self._active
        if active is not None:
            if not active.in_its_thread():
                raise AgentError(_ABORT_FROM_THREAD)
            active.controller.abort(reason)

    async def wait_for_idle(self) -> None:
        """Block until the active run has fully settled (``agent_end`` listeners
        included). A checkpoint; returns at once when idle.

        Raises:
            AgentError: awaited from inside the active run (a listener, hook or tool),
                which would wait for itself.
        """
        active = self._active
        if active is None:
            await trio.lowlevel.checkpoint()
            return
        if active.contains_current_task():
            raise AgentError(_WAIT_FOR_ITSELF)
        await active.idle.wait()

    def approve(self, tool_call_id: str) -> None:
        """Approve a call that awaits a decision; :meth:`continue_` then runs it (once).

        The decision is committed to the transcript as a :class:`~trio_agent.ToolApproval`
        message at the start of that run.

        Raises:
            AgentBusyError: a run is active.
            ValueError: no call with this id awaits a decision.
        """
        self._decide(tool_call_id, True, None)

    def deny(self, tool_call_id: str, reason: str | None = None) -> None:
        """Deny a call that awaits a decision; :meth:`continue_` then answers it with an
        error result that gives ``reason`` to the model.

        Raises:
            AgentBusyError: a run is active.
            ValueError: no call with this id awaits a decision.
        """
        self._decide(tool_call_id, False, reason)

    @property
    def pending_approvals(self) -> list[ToolCall]:
        """The calls that await a decision (none decided since the last run)."""
        decided = {d.tool_call_id for d in self._decisions}
        decided.update(decisions(self._state.messages))
        return [c for c in pending_approvals(self._state.messages) if c.id not in decided]

    def _decide(self, tool_call_id: str, approved: bool, reason: str | None) -> None:
        if self._active is not None:
            raise AgentBusyError("decide on tool calls once the run has ended")
        if tool_call_id not in {call.id for call in self.pending_approvals}:
            raise ValueError(f"no tool call {tool_call_id!r} awaits a decision")
        self._decisions.append(
            ToolApproval(tool_call_id=tool_call_id, approved=approved, reason=reason)
        )

    async def compact(
        self, instructions: str | None = None
    ) -> CompactionResult | CompactionFailure:
        """Compact the transcript now: older messages become a summary the model writes
        (pi's compaction), recent ones are kept, and no tool call is separated from its
        result.

        A run of its own (``agent_start``, ``compaction``, ``agent_end``): the summary
        request is a provider request that :meth:`abort` cancels; a failure leaves the
        transcript as it was and is returned, not raised. Uses :attr:`compaction`'s
        settings (the defaults when ``None``).

        Args:
            instructions: Added to the summary prompt (what to keep, what to focus on).

        Raises:
            AgentBusyError: a run is active.
        """
        _require_trio("compact")
        if self._active is not None:
            raise AgentBusyError("Agent is already processing; compact once it is idle.")
        outcome: list[CompactionResult | CompactionFailure] = []

        async def executor(
            context: AgentContext,
            config: AgentLoopConfig,
            emit: AgentEventSink,
            signal: AbortSignal,
        ) -> list[AgentMessage]:
            outcome.append(
                await run_agent_compaction(
                    context,
                    config,
                    emit,
                    instructions=instructions,
                    signal=signal,
                    stream_fn=self.stream_fn,
                )
            )
            return []

        await self._run(executor, skip_initial_steering_poll=True)
        return outcome[0]

    def as_tool(
        self, *, name: str, description: str, label: str | None = None, fresh: bool = True
    ) -> AgentTool:
        """This agent as a tool another agent can call with ``{"prompt": "..."}``.

        The call runs ``self.prompt(prompt)`` in the tool's task: the parent's abort
        cancels this agent's run at once (it closes like any cancelled run and the call
        ends with the parent's abort result), this agent's streamed text reaches the
        parent as tool progress (``tool_execution_update``), and the result carries the
        final text, ``details={"agent": name, "ending": ...}`` and the run's usage. A run
        that ended in an error, an abort or a limit gives an error result. Give both
        agents one :class:`~trio_agent.UsageLimits` to draw on one budget. The tool runs
        its calls one at a time (``execution_mode="sequential"``).

        Args:
            name: The tool's name.
            description: What the model is told the tool does.
            label: A human-readable label (default: ``name``).
            fresh: Start every call from this agent's system message (``reset()``); with
                ``False`` the calls continue one conversation, kept in this agent's
                transcript.
        """
        return agent_as_tool(self, name=name, description=description, label=label, fresh=fresh)

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

    @overload
    async def prompt(
        self,
        input: str | AgentMessage | Sequence[AgentMessage],
        images: Sequence[ImageContent] | None = None,
    ) -> RunResult[Any]: ...

    @overload
    async def prompt(
        self,
        input: str | AgentMessage | Sequence[AgentMessage],
        images: Sequence[ImageContent] | None = None,
        *,
        output_type: type[_T],
        output_retries: int | None = None,
        output_mode: OutputMode | None = None,
    ) -> RunResult[_T]: ...

    async def prompt(
        self,
        input: str | AgentMessage | Sequence[AgentMessage],
        images: Sequence[ImageContent] | None = None,
        *,
        output_type: Any = None,
        output_retries: int | None = None,
        output_mode: OutputMode | None = None,
    ) -> RunResult[Any]:
        """Run the agent on new input and return when the run has fully settled.

        ``input`` is a text (with optional ``images``), one message, or a list of
        messages (used as given). Provider failures do not raise: the returned
        :class:`~trio_agent.RunResult` says how the run ended (``ending``, ``error``,
        ``abort_reason``, ``limit``), what it added and its usage. Cancelling the
        caller's scope aborts the run, delivers its closing events and re-raises
        ``trio.Cancelled``.

        Raises:
            AgentBusyError: a run is already active.
            Exception: a listener raised on ``agent_end`` (nothing may follow it, so the
                error cannot be reported in-band), or raised again while the failure of
                the run was being reported.
        """
        _require_trio("prompt")
        if self._active is not None:
            raise AgentBusyError(_PROMPT_BUSY)
        messages = prompt_messages(input, images)
        output = self._output(output_type, output_retries, output_mode)
        return await self._run_prompt(messages, skip_initial_steering_poll=False, output=output)

    async def continue_(self) -> RunResult[Any]:
        """Continue from the current transcript.

        From an assistant tail, queued steering (then follow-up) messages become the
        input; from any other tail the loop continues as is. Returns the run's
        :class:`~trio_agent.RunResult`.

        Raises:
            AgentBusyError: a run is already active.
            NothingToContinueError: no messages (or only system messages), or an assistant
                tail with nothing queued.
            Exception: a listener raised on ``agent_end``, or raised again while the
                failure of the run was being reported (as for :meth:`prompt`).
        """
        _require_trio("continue_")
        if self._active is not None:
            raise AgentBusyError(_CONTINUE_BUSY)
        messages = self._state.messages
        if not messages or all(m.role == "system" for m in messages):
            raise NothingToContinueError("No messages to continue from")
        if self._decisions:
            undecided = self.pending_approvals
            if undecided:
                ids = ", ".join(repr(call.id) for call in undecided)
                raise AgentError(f"tool calls await a decision: {ids}; approve() or deny() each")
            decided, self._decisions = self._decisions, []
            try:
                return await self._run_prompt(
                    list(decided), skip_initial_steering_poll=True, output=self._output(None, None)
                )
            except BaseException:
                if not any(d in self._state.messages for d in decided):
                    self._decisions[:0] = decided  # nothing was committed: keep them
                raise
        if messages[-1].role == "assistant":
            steering = self._steering.drain()
            output = self._output(None, None)
            if steering:
                return await self._run_prompt(
                    steering, skip_initial_steering_poll=True, output=output
                )
            follow_ups = self._follow_up.drain()
            if follow_ups:
                return await self._run_prompt(
                    follow_ups, skip_initial_steering_poll=False, output=output
                )
            raise NothingToContinueError("Cannot continue from message role: assistant")
        return await self._run(
            lambda context, config, emit, signal: run_agent_loop_continue(
                context,
                config,
                emit,
                signal=signal,
                stream_fn=self.stream_fn,
            ),
            skip_initial_steering_poll=False,
            output=self._output(None, None),
        )

    def _output(
        self, output_type: Any, retries: int | None, mode: OutputMode | None = None
    ) -> OutputRun | None:
        if output_type is None:
            output_type = self.output_type
        if output_type is None:
            return None
        mode = self.output_mode if mode is None else _check_output_mode(mode)
        compat = self._state.model.compat or {}
        native = mode == "native" or (mode == "auto" and compat.get("supportsJsonSchema") is True)
        return OutputRun(output_type, self.output_retries if retries is None else retries, native)

    async def _run_prompt(
        self,
        messages: list[AgentMessage],
        *,
        skip_initial_steering_poll: bool,
        output: OutputRun | None = None,
    ) -> RunResult[Any]:
        return await self._run(
            lambda context, config, emit, signal: run_agent_loop(
                messages,
                context,
                config,
                emit,
                signal=signal,
                stream_fn=self.stream_fn,
            ),
            skip_initial_steering_poll=skip_initial_steering_poll,
            output=output,
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
                # Both variants are read when called.
                if self.prepare_next_turn_with_context is not None:
                    return self.prepare_next_turn_with_context(turn, run.controller.signal)
                if self.prepare_next_turn is not None:
                    return self.prepare_next_turn(run.controller.signal)
                return None

        state = self._state
        # "off" is no level: a stream function receives None, as pi's does.
        reasoning = None if state.thinking_level == "off" else state.thinking_level
        options = self._options
        if options.reasoning != reasoning:
            options = attrs.evolve(options, reasoning=reasoning)
        if run.output is not None and run.output.native:
            options = attrs.evolve(options, response_schema=run.output.response_schema)
        return AgentLoopConfig(
            model=state.model,
            stream_options=options,
            convert_to_llm=self.convert_to_llm,
            transform_context=self.transform_context,
            get_api_key=self.get_api_key,
            finish_turn=self._finish_turn(run),
            prepare_request=self.prepare_request,
            prepare_next_turn=prepare_next_turn,
            get_steering_messages=get_steering_messages,
            get_follow_up_messages=self._follow_up.drain,
            tool_execution=self.tool_execution,
            before_tool_call=self.before_tool_call,
            after_tool_call=self.after_tool_call,
            usage_limits=self.usage_limits,
            approve_tool_call=self.approve_tool_call,
            compaction=self.compaction,
        )

    def _finish_turn(self, run: _ActiveRun) -> Any:
        """The loop's finish_turn: the application's, then the structured output's."""
        output, hook = run.output, self.finish_turn
        if output is None:
            return hook

        async def finish_turn(turn: AgentTurnContext, signal: AbortSignal) -> Any:
            decision = await maybe_await(hook(turn, signal)) if hook is not None else None
            return output.finish_turn(turn, self.steer) or decision

        return finish_turn

    async def _run(
        self,
        executor: Callable[
            [AgentContext, AgentLoopConfig, AgentEventSink, AbortSignal],
            Awaitable[list[AgentMessage]],
        ],
        *,
        skip_initial_steering_poll: bool,
        output: OutputRun | None = None,
    ) -> RunResult[Any]:
        if self._active is not None:
            raise AgentBusyError("Agent is already processing.")
        run = _ActiveRun(
            AbortController(),
            trio.Event(),
            skip_initial_steering_poll,
            trio.lowlevel.current_task(),
            output=output,
        )
        self._active = run
        state = self._state
        state._is_streaming = True
        state._streaming_message = None
        state._error_message = None
        try:
            tools = list(state.tools)
            if output is not None and not output.native:
                tools.append(output.tool)
            context = AgentContext(messages=list(state.messages), tools=tools)
            signal = run.controller.signal
            added = await executor(
                context, self._loop_config(run), _ListenerSink(self, signal), signal
            )
        finally:
            self._steering.restore()
            self._follow_up.restore()
            state._is_streaming = False
            state._streaming_message = None
            state._pending_tool_calls = frozenset()
            self._active = None
            run.idle.set()
        result = RunResult.of(added, signal)
        return output.apply(result) if output is not None else result

    def _reduce(self, event: AgentEvent) -> None:
        """Reduce an event into :attr:`state`."""
        state = self._state
        if event.type == "message_update" or event.type == "message_start":
            state._streaming_message = event.message
        elif event.type == "message_end":
            message = event.message
            state._streaming_message = None
            state._messages.append(message)
            if not self._steering.committed(message):
                self._follow_up.committed(message)
        elif event.type == "tool_execution_start":
            state._pending_tool_calls = state._pending_tool_calls | {event.tool_call_id}
        elif event.type == "tool_execution_end":
            state._pending_tool_calls = state._pending_tool_calls - {event.tool_call_id}
        elif event.type == "turn_end":
            _note_error(state, event.message)
        elif event.type == "compaction":
            if event.messages is not None:
                state._messages = list(event.messages)
        elif event.type == "agent_end":
            # A failure reported after an aborted run's last turn_end stands outside a
            # turn: agent_end carries it.
            state._streaming_message = None
            _note_error(state, event.messages[-1] if event.messages else None)


def _note_error(state: AgentState, message: AgentMessage | None) -> None:
    if isinstance(message, AssistantMessage) and message.error_message:
        state._error_message = message.error_message


def _check_output_mode(mode: object) -> OutputMode:
    if mode not in ("auto", "tool", "native"):
        raise ValueError(f"output_mode must be 'auto', 'tool' or 'native', got {mode!r}")
    return mode


def _require_trio(method: str) -> None:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        raise AgentError(_NOT_UNDER_TRIO.format(method)) from None


def _check_mode(mode: QueueMode) -> QueueMode:
    if mode not in ("all", "one-at-a-time"):
        raise ValueError(f"queue mode must be 'all' or 'one-at-a-time', not {mode!r}")
    return mode
