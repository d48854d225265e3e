"""Tool approval: calls that wait for a person, recorded in the transcript itself.

A tool with ``needs_approval`` is approved one of two ways:

- **inline**, by an ``approve_tool_call`` hook awaited inside the run (in its work scope,
  so ``abort()`` and any Trio timeout end the wait); a denial becomes the call's error
  result;
- **deferred**, when no hook is given: the run ends after the turn with the call left
  unanswered in the transcript, and :class:`~trio_agent.RunResult` lists it
  (``ending="approval"``). A decision is a :class:`ToolApproval` message appended to the
  transcript (``Agent.approve`` / ``Agent.deny``); the next run first runs each approved
  call (exactly once: its result message then answers it) and answers each denied one,
  then asks the model. The state lives in the transcript and nowhere else, so it survives
  a restart wherever the transcript does (a session store).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from ._abort import AbortSignal
from ._messages import (
    AgentMessage,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    now_ms,
    register_message_type,
)
from ._util import maybe_await

__all__ = [
    "ApproveToolCall",
    "ToolApproval",
    "pending_approvals",
]


@register_message_type
@attrs.frozen(kw_only=True)
class ToolApproval:
    """A decision on a tool call that awaits approval (an application message: it is kept
    in the transcript and the session, and never sent to the model)."""

    tool_call_id: str
    """The call decided on."""
    approved: bool
    """Whether it may run."""
    reason: str | None = None
    """Why it was denied (the model reads it in the call's error result)."""
    timestamp: int = attrs.field(factory=now_ms)
    """When the decision was made, in Unix milliseconds."""
    role: Literal["toolApproval"] = "toolApproval"


ApproveToolCall: TypeAlias = Callable[
    [ToolCall, AbortSignal], bool | str | Awaitable[bool | str | None] | None
]
"""The inline approver: ``(tool_call, signal) -> approved``. ``True`` approves; ``False``
or a string (the reason, shown to the model) denies. May be ``async def``; it runs in the
run's work scope."""


def denial_text(reason: str | None) -> str:
    """The error result of a denied call."""
    return f"Tool call denied: {reason}" if reason else "Tool call denied"


def pending_approvals(messages: Sequence[AgentMessage]) -> list[ToolCall]:
    """The tool calls of the last assistant message that have no result yet, in source
    order: after a run that ended with ``ending="approval"``, the calls awaiting a
    decision (and those decided but not yet run)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage):
            answered = {
                m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolResultMessage)
            }
            return [
                block
                for block in message.content
                if isinstance(block, ToolCall) and block.id not in answered
            ]
    return []


def decisions(messages: Sequence[AgentMessage]) -> dict[str, ToolApproval]:
    """The latest decision per call id among ``messages``."""
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolApproval)}


async def needs_approval(tool: Any, call: ToolCall) -> bool:
    """Whether ``tool`` wants a decision before ``call`` runs."""
    rule = getattr(tool, "needs_approval", None)
    if rule is None or rule is False:
        return False
    if rule is True:
        return True
    return bool(await maybe_await(rule(call)))
