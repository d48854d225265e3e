"""OpenTelemetry tracing of agent runs: an :class:`AgentTracer` listener turns the events of
an :class:`~trio_agent.Agent` into spans that follow the OpenTelemetry GenAI semantic
conventions.

One run becomes an ``invoke_agent`` span; each turn a ``turn`` span inside it; each model
request a ``chat {model}`` span and each tool call an ``execute_tool {name}`` span inside
the turn. Listeners run one at a time in the run's own task (the one that called
``prompt()``), also for the events of parallel tools, so spans are linked to their parents
explicitly (never through the implicit current context): parallel tool calls get sibling
spans under their turn. Only the run span's parent comes from the current context, the one
of the task that called ``prompt()``.

The event grammar closes every turn, message and tool execution, also on abort, failure
and cancellation; ``agent_end`` still ends any span left open.

Tracing never fails a run (issue 18, item 10): an error of the tracing SDK (a span
processor or exporter raising in ``on_start`` or ``on_end``) is logged to the
``trio_agent.otel`` logger at WARNING and the run goes on; a span that could not start is
left out and its children are recorded under its parent.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from ._abort import AbortSignal
from ._events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from ._messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ._streaming import RetryNotice
from ._tools import AgentToolResult
from ._transcript import get_current_system_prompt

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["AgentTracer", "instrument_agent"]

_SCOPE = "trio_agent"

logger = logging.getLogger("trio_agent.otel")

# Stop reasons as GenAI finish reasons (the output-message schema's names where one exists).
_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "toolUse": "tool_call",
    "error": "error",
    "aborted": "aborted",
}


def _now_ns() -> int:
    return time.time_ns()


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


@attrs.define(eq=False)
class _Run:
    """The open spans of one run."""

    span: Span
    context: otel_context.Context
    turn: Span | None = None
    turn_context: otel_context.Context | None = None
    turn_number: int = 0
    chat: Span | None = None
    request_started_ns: int | None = None
    """When the next model request began: the last event of its turn before it."""
    tools: dict[str, Span] = attrs.field(factory=dict)
    retries: list[tuple[int, dict[str, AttributeValue]]] = attrs.field(factory=list)
    """Retries of the next model request (time, attributes): its span starts only when
    the response does, so they become its events then."""
    messages: list[AgentMessage] = attrs.field(factory=list)
    """Messages committed during the run (the input of requests without an agent)."""
    last_assistant: AssistantMessage | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    has_usage: bool = False


class AgentTracer:
    """A listener that records an agent's runs as OpenTelemetry spans.

    Subscribe it to one :class:`~trio_agent.Agent` (``agent.subscribe(tracer)``), or let
    :func:`instrument_agent` do it. Spans, all linked to their parents explicitly:

    - ``invoke_agent`` (or ``invoke_agent {agent_name}``), kind ``INTERNAL``: the run, a
      child of the context current where ``prompt()`` was called;
    - ``turn``, kind ``INTERNAL``: one turn, attribute ``trio_agent.turn.number``
      (1-based within the run);
    - ``chat {model}``, kind ``CLIENT``: one model request, from the end of the turn's
      previous event to the response's ``message_end``;
    - ``execute_tool {tool name}``, kind ``INTERNAL``: one tool call, from
      ``tool_execution_start`` to ``tool_execution_end`` (argument validation and the
      tool-call hooks included).

    A failed or aborted request, tool call or run ends with status ``ERROR`` and an
    ``error.type`` of ``"error"`` (the model request failed), ``"tool_error"`` (the
    tool returned or raised an error) or ``"aborted"``.

    Args:
        tracer_provider: Where spans go; ``None`` uses the global provider.
        capture_content: Also record prompts, completions, tool arguments and tool
            results (``gen_ai.input.messages``, ``gen_ai.output.messages``,
            ``gen_ai.system_instructions``, ``gen_ai.tool.call.arguments``,
            ``gen_ai.tool.call.result``, as JSON text). Off by default: content may be
            sensitive.
        agent_name: ``gen_ai.agent.name`` of the run spans, also in their name.
        agent: The agent being traced, if known: its model (with ``server.address`` and
            ``server.port`` from its ``base_url``), session id (as
            ``gen_ai.conversation.id``), tool descriptions and transcript enrich the spans.
            Without it, a request's recorded input is the messages of the current run.
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        capture_content: bool = False,
        agent_name: str | None = None,
        agent: Agent | None = None,
    ) -> None:
        from . import __version__

        self._tracer = trace.get_tracer(_SCOPE, __version__, tracer_provider=tracer_provider)
        self.capture_content = capture_content
        """Whether message and tool content is recorded."""
        self.agent_name = agent_name
        """``gen_ai.agent.name`` of the run spans."""
        self._agent = agent
        self._run: _Run | None = None

    def __call__(self, event: AgentEvent, signal: AbortSignal | None = None) -> None:
        """Record one event (the listener protocol: ``(event, signal)``).

        Never raises an :class:`Exception`: a failure of the tracing SDK is logged to
        ``trio_agent.otel`` and the run goes on.
        """
        if event.type == "message_update":
            return  # nothing per token
        try:
            self._record(event, signal)
        except Exception as exc:
            # The spans' own calls are guarded one by one (_start_span, _end_span), so
            # that the bookkeeping goes on; this catches anything else.
            _log_failure(exc)

    def _record(self, event: AgentEvent, signal: AbortSignal | None) -> None:
        if isinstance(event, AgentStartEvent):
            self._start_run()
            return
        run = self._run
        if run is None:
            return  # subscribed in the middle of a run
        if isinstance(event, TurnStartEvent):
            self._start_turn(run)
        elif isinstance(event, MessageStartEvent):
            if isinstance(event.message, AssistantMessage):
                self._start_chat(run, event.message)
        elif isinstance(event, MessageEndEvent):
            run.messages.append(event.message)
            if isinstance(event.message, AssistantMessage):
                self._end_chat(run, event.message)
            else:
                run.request_started_ns = _now_ns()
        elif isinstance(event, ToolExecutionStartEvent):
            self._start_tool(run, event)
        elif isinstance(event, ToolExecutionEndEvent):
            self._end_tool(run, event, aborted=signal is not None and signal.aborted)
        elif isinstance(event, TurnEndEvent):
            self._end_turn(run, event, aborted=signal is not None and signal.aborted)
        elif isinstance(event, AgentEndEvent):
            self._end_run(run, aborted=signal is not None and signal.aborted)

    def _start_span(
        self,
        name: str,
        *,
        context: otel_context.Context,
        kind: SpanKind,
        attributes: dict[str, AttributeValue],
        start_time: int | None = None,
    ) -> Span:
        """Start a span; if the SDK fails, log it and return a span that records nothing."""
        try:
            return self._tracer.start_span(
                name, context=context, kind=kind, attributes=attributes, start_time=start_time
            )
        except Exception as exc:
            _log_failure(exc)
            return trace.INVALID_SPAN

    # -- run and turn --------------------------------------------------------------------

    def _start_run(self) -> None:
        if self._run is not None:  # a run that never ended (not a well-formed stream)
            self._end_run(self._run)
        attributes: dict[str, AttributeValue] = {"gen_ai.operation.name": "invoke_agent"}
        agent = self._agent
        if agent is not None:
            model = agent.state.model
            attributes["gen_ai.provider.name"] = model.provider
            attributes["gen_ai.request.model"] = model.id
            attributes.update(_request_options(agent))
            if agent.session_id:
                attributes["gen_ai.conversation.id"] = agent.session_id
        if self.agent_name:
            attributes["gen_ai.agent.name"] = self.agent_name
        name = f"invoke_agent {self.agent_name}" if self.agent_name else "invoke_agent"
        parent = otel_context.get_current()
        span = self._start_span(name, context=parent, kind=SpanKind.INTERNAL, attributes=attributes)
        self._run = _Run(span=span, context=_child_context(span, parent))

    def _start_turn(self, run: _Run) -> None:
        if run.turn is not None:
            self._close_turn(run)
        run.turn_number += 1
        span = self._start_span(
            "turn",
            context=run.context,
            kind=SpanKind.INTERNAL,
            attributes={"trio_agent.turn.number": run.turn_number},
        )
        run.turn = span
        run.turn_context = _child_context(span, run.context)
        run.request_started_ns = _now_ns()

    def _end_turn(self, run: _Run, event: TurnEndEvent, *, aborted: bool) -> None:
        if run.turn is None:
            return
        message = event.message
        _set_outcome(run.turn, message if isinstance(message, AssistantMessage) else None, aborted)
        self._close_turn(run)

    def _close_turn(self, run: _Run) -> None:
        if run.chat is not None:
            _end_span(run.chat)
            run.chat = None
        for span in run.tools.values():
            _end_span(span)
        run.tools.clear()
        if run.turn is not None:
            _end_span(run.turn)
        run.turn = None
        run.turn_context = None

    def _end_run(self, run: _Run, *, aborted: bool = False) -> None:
        self._close_turn(run)
        span = run.span
        last = run.last_assistant
        if last is not None and self._agent is None:
            span.set_attribute("gen_ai.provider.name", last.provider)
            span.set_attribute("gen_ai.request.model", last.model)
        _set_outcome(span, last, aborted)
        if run.has_usage:
            _set_usage(span, run.input_tokens, run.output_tokens, run.cache_read, run.cache_write)
            if run.reasoning:
                span.set_attribute("gen_ai.usage.reasoning.output_tokens", run.reasoning)
        _end_span(span)
        self._run = None

    # -- model requests ------------------------------------------------------------------

    def _start_chat(self, run: _Run, message: AssistantMessage) -> None:
        if run.chat is not None:
            _end_span(run.chat)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": message.provider,
            "gen_ai.request.model": message.model,
        }
        agent = self._agent
        if agent is not None:
            model = agent.state.model
            if model.id == message.model and model.provider == message.provider:
                attributes.update(_server_attributes(model.base_url))
            attributes.update(_request_options(agent))
            if agent.session_id:
                attributes["gen_ai.conversation.id"] = agent.session_id
        if self.capture_content:
            transcript = (
                list(self._agent.state.messages) if self._agent is not None else run.messages
            )
            system = get_current_system_prompt(transcript)
            if system:
                attributes["gen_ai.system_instructions"] = _json(
                    [{"type": "text", "content": system}]
                )
            attributes["gen_ai.input.messages"] = _json(_input_messages(transcript))
        run.chat = self._start_span(
            f"chat {message.model}",
            context=run.turn_context or run.context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=run.request_started_ns,
        )
        for timestamp, retry in run.retries:
            run.chat.add_event("trio_agent.retry", retry, timestamp=timestamp)
        run.retries.clear()

    def _end_chat(self, run: _Run, message: AssistantMessage) -> None:
        span = run.chat
        if span is None:  # message_end without message_start: not a well-formed stream
            return
        run.chat = None
        run.last_assistant = message
        span.set_attribute(
            "gen_ai.response.finish_reasons",
            [_FINISH_REASONS.get(message.stop_reason, message.stop_reason)],
        )
        span.set_attribute("gen_ai.response.model", message.response_model or message.model)
        if message.response_id:
            span.set_attribute("gen_ai.response.id", message.response_id)
        usage = message.usage
        # A response without usage (all counts 0) records none, not input_tokens = 0.
        if usage.input or usage.output or usage.cache_read or usage.cache_write:
            _set_usage(span, usage.input, usage.output, usage.cache_read, usage.cache_write)
            if usage.reasoning:
                span.set_attribute("gen_ai.usage.reasoning.output_tokens", usage.reasoning)
            run.has_usage = True
            run.input_tokens += usage.input
            run.output_tokens += usage.output
            run.cache_read += usage.cache_read
            run.cache_write += usage.cache_write
            run.reasoning += usage.reasoning or 0
        if self.capture_content:
            output = _message_json(message)
            output["finish_reason"] = _FINISH_REASONS.get(message.stop_reason, message.stop_reason)
            span.set_attribute("gen_ai.output.messages", _json([output]))
        _set_outcome(span, message, aborted=False)
        _end_span(span)

    def _record_retry(self, *, status: int | None, wait: float, attempt: int) -> None:
        """Record that the current model request failed and is retried after ``wait``
        seconds: a ``trio_agent.retry`` event of its ``chat`` span, with the HTTP status
        (``None``: a connection error), the wait and the attempt about to be made
        (2 for the first retry).

        :func:`instrument_agent` calls it from the agent's ``on_retry`` request option,
        which the providers' retry loop calls before each retry.
        """
        run = self._run
        if run is None:
            return
        attributes: dict[str, AttributeValue] = {
            "http.request.resend_count": attempt - 1,
            "trio_agent.retry.wait_s": wait,
        }
        if status is not None:
            attributes["http.response.status_code"] = status
        run.retries.append((_now_ns(), attributes))

    # -- tools ---------------------------------------------------------------------------

    def _start_tool(self, run: _Run, event: ToolExecutionStartEvent) -> None:
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.tool_name,
            "gen_ai.tool.call.id": event.tool_call_id,
            "gen_ai.tool.type": "function",
        }
        if self._agent is not None:
            for tool in self._agent.state.tools:
                if tool.name == event.tool_name:
                    if tool.description:
                        attributes["gen_ai.tool.description"] = tool.description
                    break
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(event.args)
        previous = run.tools.pop(event.tool_call_id, None)
        if previous is not None:
            _end_span(previous)
        run.tools[event.tool_call_id] = self._start_span(
            f"execute_tool {event.tool_name}",
            context=run.turn_context or run.context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )

    def _end_tool(self, run: _Run, event: ToolExecutionEndEvent, aborted: bool) -> None:
        span = run.tools.pop(event.tool_call_id, None)
        if span is None:
            return
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.result", _json(_result_json(event.result)))
        if event.is_error:
            error_type = "aborted" if aborted else "tool_error"
            span.set_attribute("error.type", error_type)
            span.set_status(Status(StatusCode.ERROR, _text(event.result.content)))
        _end_span(span)


def instrument_agent(
    agent: Agent,
    *,
    tracer_provider: TracerProvider | None = None,
    capture_content: bool = False,
    agent_name: str | None = None,
) -> Callable[[], None]:
    """Trace every run of ``agent`` as OpenTelemetry spans (see :class:`AgentTracer`).

    Subscribes an :class:`AgentTracer` that knows ``agent``; call it before the run to
    trace. Returns the function that unsubscribes it.

    Args:
        agent: The agent to trace.
        tracer_provider: Where spans go; ``None`` uses the global provider.
        capture_content: Also record prompts, completions and tool arguments and results.
        agent_name: ``gen_ai.agent.name`` of the run spans.

    Raises:
        TypeError: ``agent`` is not an :class:`~trio_agent.Agent`.
    """
    from ._agent import Agent

    if not isinstance(agent, Agent):
        raise TypeError(f"instrument_agent() needs an Agent, got {agent!r}")
    tracer = AgentTracer(
        tracer_provider=tracer_provider,
        capture_content=capture_content,
        agent_name=agent_name,
        agent=agent,
    )
    previous = agent.on_retry

    def on_retry(notice: RetryNotice, model: Model) -> Any:
        try:
            tracer._record_retry(status=notice.status, wait=notice.wait, attempt=notice.attempt)
        except Exception as exc:  # tracing never fails a run
            _log_failure(exc)
        return previous(notice, model) if previous is not None else None

    agent.on_retry = on_retry
    unsubscribe = agent.subscribe(tracer)

    def uninstrument() -> None:
        unsubscribe()
        if agent.on_retry is on_retry:
            agent.on_retry = previous

    return uninstrument


# -- containing the tracing SDK's errors -------------------------------------------------


def _log_failure(exc: Exception) -> None:
    logger.warning(
        "tracing failed (the run goes on): %s: %s", type(exc).__name__, exc, exc_info=exc
    )


def _end_span(span: Span) -> None:
    """End ``span``; if the SDK fails (a span processor's ``on_end``), log it and go on."""
    try:
        span.end()
    except Exception as exc:
        _log_failure(exc)


def _child_context(span: Span, parent: otel_context.Context) -> otel_context.Context:
    """The context of ``span``'s children: ``parent`` itself when ``span`` failed to start."""
    if not span.get_span_context().is_valid:
        return parent
    return trace.set_span_in_context(span, parent)


# -- attributes ------------------------------------------------------------------------


def _request_options(agent: Agent) -> dict[str, AttributeValue]:
    """``gen_ai.request.temperature`` and ``gen_ai.request.max_tokens`` when set on the
    agent (when unset, the provider's or the model's default applies)."""
    attributes: dict[str, AttributeValue] = {}
    if agent.temperature is not None:
        attributes["gen_ai.request.temperature"] = agent.temperature
    if agent.max_tokens:  # 0 means the model's limit, like None
        attributes["gen_ai.request.max_tokens"] = agent.max_tokens
    return attributes


def _server_attributes(base_url: str) -> dict[str, AttributeValue]:
    """``server.address`` and ``server.port`` of a model's base URL (none if it has no
    host)."""
    try:
        url = urllib.parse.urlsplit(base_url)
        port = url.port
    except ValueError:
        return {}
    if not url.hostname:
        return {}
    if port is None:
        port = {"https": 443, "http": 80}.get(url.scheme)
    attributes: dict[str, AttributeValue] = {"server.address": url.hostname}
    if port is not None:
        attributes["server.port"] = port
    return attributes


def _set_usage(span: Span, input: int, output: int, cache_read: int, cache_write: int) -> None:
    # The GenAI input count includes cached tokens; trio_agent's ``input`` excludes them.
    span.set_attribute("gen_ai.usage.input_tokens", input + cache_read + cache_write)
    span.set_attribute("gen_ai.usage.output_tokens", output)
    if cache_read:
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", cache_read)
    if cache_write:
        span.set_attribute("gen_ai.usage.cache_creation.input_tokens", cache_write)


def _set_outcome(span: Span, message: AssistantMessage | None, aborted: bool) -> None:
    """Mark ``span`` failed when ``message`` failed or the run was aborted."""
    if message is not None and message.stop_reason in ("error", "aborted"):
        span.set_attribute("error.type", message.stop_reason)
        span.set_status(Status(StatusCode.ERROR, message.error_message or message.stop_reason))
    elif aborted:
        span.set_attribute("error.type", "aborted")
        span.set_status(Status(StatusCode.ERROR, "aborted"))


def _text(content: list[TextContent | ImageContent]) -> str:
    return "\n".join(block.text for block in content if isinstance(block, TextContent))


def _parts(content: str | list[Any]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "content": block.text})
        elif isinstance(block, ImageContent):
            parts.append(
                {
                    "type": "blob",
                    "modality": "image",
                    "mime_type": block.mime_type,
                    "content": block.data,
                }
            )
        elif isinstance(block, ThinkingContent):
            parts.append({"type": "reasoning", "content": block.thinking})
        elif isinstance(block, ToolCall):
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.id,
                    "name": block.name,
                    "arguments": block.arguments,
                }
            )
    return parts


def _message_json(message: AgentMessage) -> dict[str, Any]:
    if isinstance(message, ToolResultMessage):
        return {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": message.tool_call_id,
                    "response": _text(message.content),
                }
            ],
        }
    if isinstance(message, UserMessage | AssistantMessage):
        return {"role": message.role, "parts": _parts(message.content)}
    return {"role": message.role, "parts": []}


def _input_messages(transcript: list[AgentMessage]) -> list[dict[str, Any]]:
    # System messages are recorded as ``gen_ai.system_instructions``; application
    # messages (other roles) are not sent to the model as they are.
    return [
        _message_json(message)
        for message in transcript
        if isinstance(message, UserMessage | AssistantMessage | ToolResultMessage)
    ]


def _result_json(result: AgentToolResult) -> Any:
    parts = _parts(list(result.content))
    if result.structured_content is not None:
        return {"content": parts, "structured_content": result.structured_content}
    return parts
