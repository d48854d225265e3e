"""What a run returns, and the usage limits that can end it.

:class:`RunResult` is read off what a run leaves behind: the messages it added and its
abort signal. A usage limit ends a run as an abort whose reason is a
:class:`LimitReached`, so the close path, the events and the transcript are those of an
abort (SPEC §8), and the result tells the two apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Literal, TypeAlias, TypeVar

import attrs

from ._abort import AbortSignal
from ._messages import (
    AgentMessage,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    add_usage,
)

__all__ = [
    "LimitReached",
    "RunEnding",
    "RunResult",
    "UsageLimits",
    "UsageTally",
    "sum_usage",
]

RunEnding: TypeAlias = Literal[
    "stop", "length", "tool_use", "approval", "aborted", "error", "limit"
]
"""How a run ended:

- ``"stop"``: the model's last response ended normally;
- ``"length"``: it hit the output token limit;
- ``"tool_use"``: it asked for tools that were left pending (a tool's ``terminate``, or a
  ``finish_turn`` hook that ended the run);
- ``"approval"``: calls to tools with ``needs_approval`` await a decision; see
  :attr:`RunResult.pending_approvals`;
- ``"aborted"``: ``abort()`` (or the loop's signal) ended it; see
  :attr:`RunResult.abort_reason`;
- ``"error"``: the provider, a hook or a listener failed; see :attr:`RunResult.error`;
- ``"limit"``: a :class:`UsageLimits` limit was reached; see :attr:`RunResult.limit`.
"""

_ENDINGS: dict[str, RunEnding] = {
    "stop": "stop",
    "length": "length",
    "toolUse": "tool_use",
    "error": "error",
    "aborted": "aborted",
}


@attrs.frozen
class LimitReached:
    """The abort reason of a run that a usage limit ended."""

    limit: str
    """The limit's name: ``"requests"``, ``"tool_calls"``, ``"input_tokens"``,
    ``"output_tokens"``, ``"total_tokens"`` or ``"cost"``."""
    value: float
    """The limit's value."""

    def __str__(self) -> str:
        return f"usage limit reached: {self.limit} ({self.value:g})"


@attrs.define(kw_only=True)
class UsageTally:
    """What the runs drawing on one :class:`UsageLimits` have used so far."""

    requests: int = 0
    """Provider requests sent."""
    tool_calls: int = 0
    """Tool executions started."""
    input_tokens: int = 0
    """Input tokens reported (cache reads and writes included)."""
    output_tokens: int = 0
    """Output tokens reported."""
    total_tokens: int = 0
    """Total tokens reported."""
    cost: float = 0.0
    """Cost reported, in USD."""

    def add(self, usage: Usage) -> None:
        """Count a response's usage."""
        self.input_tokens += usage.input + usage.cache_read + usage.cache_write
        self.output_tokens += usage.output
        self.total_tokens += usage.total_tokens
        self.cost += usage.cost.total


def _limit(kind: type) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is None:
            return
        if type(value) not in (int, kind) or value < 0:
            wanted = "an int >= 0" if kind is int else "a number >= 0"
            raise ValueError(
                f"UsageLimits: {attribute.name} must be {wanted} or None, got {value!r}"
            )

    return attrs.field(default=None, validator=check, kw_only=True)


@attrs.define(eq=False)
class UsageLimits:
    """Limits on what runs may use, checked before each provider request and each tool
    execution: request N+1 is never sent once ``requests=N`` were, and no tool runs once
    ``tool_calls`` were started. Token and cost limits stop the next request once the
    responses so far reached them (a response's size is known only when it arrives).

    A limit that is reached ends the run like :meth:`~trio_agent.Agent.abort` with a
    :class:`LimitReached` reason (the closing events and the transcript are an abort's), and
    the :class:`RunResult` says ``ending="limit"`` and which one. One object may be shared
    by several agents (a parent and the agents it runs as tools): they draw on one
    :attr:`used` tally, which is never reset by a run; make a new object per budget.

    Raises:
        ValueError: a limit is negative or not a number.
    """

    requests: int | None = _limit(int)
    """Provider requests."""
    tool_calls: int | None = _limit(int)
    """Tool executions."""
    input_tokens: int | None = _limit(int)
    """Input tokens (cache reads and writes included)."""
    output_tokens: int | None = _limit(int)
    """Output tokens."""
    total_tokens: int | None = _limit(int)
    """Total tokens."""
    cost: float | None = _limit(float)
    """Cost in USD."""
    used: UsageTally = attrs.field(factory=UsageTally, kw_only=True)
    """What has been used against these limits."""

    def exhausted(self) -> LimitReached | None:
        """The limit that forbids another request, if any (nothing is counted)."""
        used = self.used
        for name, value, spent in (
            ("requests", self.requests, used.requests),
            ("input_tokens", self.input_tokens, used.input_tokens),
            ("output_tokens", self.output_tokens, used.output_tokens),
            ("total_tokens", self.total_tokens, used.total_tokens),
            ("cost", self.cost, used.cost),
        ):
            if value is not None and spent >= value:
                return LimitReached(name, value)
        return None

    def before_request(self) -> LimitReached | None:
        """The limit that forbids another request, if any; else count the request."""
        reached = self.exhausted()
        if reached is None:
            self.used.requests += 1
        return reached

    def before_tool_call(self) -> LimitReached | None:
        """The limit that forbids another tool execution, if any; else count it."""
        if self.tool_calls is not None and self.used.tool_calls >= self.tool_calls:
            return LimitReached("tool_calls", self.tool_calls)
        self.used.tool_calls += 1
        return None


def sum_usage(messages: Sequence[AgentMessage]) -> Usage:
    """The usage and cost of the assistant messages among ``messages``, added up."""
    total = Usage()
    for message in messages:
        if isinstance(message, AssistantMessage):
            total = add_usage(total, message.usage)
    return total


OutputT = TypeVar("OutputT")


@attrs.frozen(kw_only=True)
class RunResult(Generic[OutputT]):
    """How a run ended: what ``prompt()`` and ``continue_()`` return.

    Generic in the type of :attr:`output`: ``await agent.prompt(..., output_type=X)``
    returns a ``RunResult[X]``.

    Loop users build the same with :meth:`of` from what ``run_agent_loop`` returned and
    the signal they gave it.
    """

    messages: list[AgentMessage]
    """The messages the run added to the transcript, in order."""
    final: AssistantMessage | None
    """The run's last assistant message (``None`` if it produced none)."""
    ending: RunEnding
    """How the run ended (see :data:`RunEnding`)."""
    abort_reason: Any = None
    """The reason given to ``abort()`` when ``ending`` is ``"aborted"``."""
    error: str | None = None
    """The error message when ``ending`` is ``"error"``."""
    limit: LimitReached | None = None
    """The limit reached when ``ending`` is ``"limit"``."""
    usage: Usage = attrs.field(factory=Usage)
    """Usage and cost summed over the run's responses."""
    pending_approvals: list[ToolCall] = attrs.field(factory=list)
    """The calls awaiting a decision when ``ending`` is ``"approval"``."""
    output: OutputT | None = None
    """The structured output of a run given an ``output_type`` (``None`` without one,
    or when no valid answer came: then ``ending`` is ``"error"``)."""

    @classmethod
    def of(cls, messages: Sequence[AgentMessage], signal: AbortSignal | None) -> RunResult[Any]:
        """The result of a run that added ``messages`` and ran with ``signal``."""
        added = list(messages)
        final = next((m for m in reversed(added) if isinstance(m, AssistantMessage)), None)
        reason = signal.reason if signal is not None and signal.aborted else None
        if isinstance(reason, LimitReached):
            ending: RunEnding = "limit"
        elif signal is not None and signal.aborted:
            ending = "aborted"
        elif final is None:
            ending = "stop"
        else:
            ending = _ENDINGS.get(final.stop_reason, "stop")
        waiting: list[ToolCall] = []
        if ending in ("tool_use", "stop") and final is not None:
            answered = {m.tool_call_id for m in added if isinstance(m, ToolResultMessage)}
            waiting = [
                block
                for block in final.content
                if isinstance(block, ToolCall) and block.id not in answered
            ]
            if waiting:
                ending = "approval"
        return cls(
            messages=added,
            final=final,
            ending=ending,
            abort_reason=reason if ending == "aborted" else None,
            error=final.error_message if ending == "error" and final is not None else None,
            limit=reason if isinstance(reason, LimitReached) else None,
            usage=sum_usage(added),
            pending_approvals=waiting,
        )
