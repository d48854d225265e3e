"""An agent as another agent's tool (:meth:`Agent.as_tool <trio_agent.Agent.as_tool>`).

The child runs in the tool's task: the parent's abort (or any cancellation of the tool)
cancels the child's run at once, which closes as the caller's cancellation closes any run
(SPEC §8). The child's text streams to the parent as tool progress (``on_update``); its
usage comes back on the result, and a :class:`~trio_agent.UsageLimits` shared by both
agents is one budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._abort import AbortSignal
from ._events import AgentEvent
from ._messages import AssistantMessage, TextContent
from ._tools import AgentTool, AgentToolResult, AgentToolUpdateCallback
from ._transcript import content_text

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["agent_as_tool"]

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "description": "The task for the agent."}},
    "required": ["prompt"],
    "additionalProperties": False,
}


def agent_as_tool(
    child: Agent, *, name: str, description: str, label: str | None = None, fresh: bool = True
) -> AgentTool:
    """See :meth:`Agent.as_tool`."""

    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        if fresh:
            child.reset()

        def progress(event: AgentEvent) -> None:
            if event.type == "message_update" and isinstance(event.message, AssistantMessage):
                text = content_text(event.message.content)
                if text:
                    on_update(
                        AgentToolResult(content=[TextContent(text=text)], details={"agent": name})
                    )

        unsubscribe = child.subscribe(progress)
        try:
            result = await child.prompt(params["prompt"])
        finally:
            unsubscribe()
        final = result.final
        text = content_text(final.content) if final is not None else ""
        failed = result.ending in ("error", "aborted", "limit")
        if failed and not text:
            text = result.error or str(result.limit or "") or f"the agent's run {result.ending}"
        return AgentToolResult(
            content=[TextContent(text=text)],
            details={"agent": name, "ending": result.ending},
            usage=result.usage,
            is_error=failed or None,
        )

    return AgentTool(
        name=name,
        label=label or name,
        description=description,
        parameters=_PARAMETERS,
        execute=execute,
        # One child, one run at a time: the parent runs its calls to this tool in turn.
        execution_mode="sequential",
    )
