"""Crash recovery: answer the tool calls a run left without results.

A run journaled as started and never finished was cut short by a crash (an abort, a
failure or a cancellation still finishes the run). Its last assistant message may hold
tool calls whose results were never committed: strict providers refuse such a transcript
(issue 21; pydantic-ai #3461). Each one is answered exactly once:

- re-run, when the caller passes a tool of that name whose ``replay`` is ``"safe"``
  (idempotent, so running it again does no harm): its result is committed;
- otherwise an error result (:data:`INTERRUPTED_TEXT`): the tool may or may not have
  done its work, so it is not run a second time.

The results and the :class:`RunFinishedEntry` that lists what was done are one batch: a
crash during recovery leaves the run unfinished, and the next recovery starts over
(re-running only safe tools).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import trio

from .._abort import AbortController
from .._messages import TextContent, ToolCall, ToolResultMessage
from .._tools import AgentTool, AgentToolResult
from .._util import maybe_await
from .._validation import validate_tool_arguments
from ._entries import RecoveredCall, RunFinishedEntry

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["INTERRUPTED_TEXT", "recover_session"]

INTERRUPTED_TEXT: Final = (
    "The run was interrupted before this tool call finished; the tool was not re-run."
)
"""The text of the error result given to an unanswered call that is not re-run."""


async def _rerun(tool: AgentTool, call: ToolCall) -> ToolResultMessage:
    """Run a ``replay="safe"`` tool again; a failure is an error result, as in a run."""
    start = trio.current_time()
    try:
        arguments = call.arguments
        if tool.prepare_arguments is not None:
            prepared = await maybe_await(tool.prepare_arguments(arguments))
            call = ToolCall(id=call.id, name=call.name, arguments=prepared)
        params = validate_tool_arguments(tool, call)
        result = await tool.execute(
            call.id, params, AbortController().signal, lambda _partial: None
        )
    except Exception as exc:  # a tool failure is data, as in the loop
        result = AgentToolResult(content=[TextContent(text=str(exc))], is_error=True)
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=list(result.content),
        details=result.details,
        usage=result.usage,
        is_error=bool(result.is_error),
        duration_ms=round((trio.current_time() - start) * 1000),
    )


async def recover_session(session: Session, tools: Sequence[AgentTool]) -> RunFinishedEntry | None:
    run = session.unfinished_run()
    if run is None:
        await trio.lowlevel.checkpoint()
        return None
    by_name = {tool.name: tool for tool in tools}
    results: list[ToolResultMessage] = []
    done: list[RecoveredCall] = []
    for call in session.unanswered_tool_calls():
        tool = by_name.get(call.name)
        if tool is not None and tool.replay == "safe":
            results.append(await _rerun(tool, call))
            done.append(RecoveredCall(tool_call_id=call.id, tool_name=call.name, action="rerun"))
            continue
        results.append(
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=[TextContent(text=INTERRUPTED_TEXT)],
                is_error=True,
            )
        )
        done.append(RecoveredCall(tool_call_id=call.id, tool_name=call.name, action="interrupted"))
    return await session.finish_run(run.run_id, "recovered", messages=results, recovered=done)
