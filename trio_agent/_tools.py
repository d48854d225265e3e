"""Executable tools: :class:`AgentTool` and :class:`AgentToolResult`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeAlias

import attrs

from ._abort import AbortSignal
from ._messages import ToolExecutionMode, ToolResultContent, Usage

__all__ = [
    "AgentTool",
    "AgentToolResult",
    "AgentToolUpdateCallback",
    "ToolExecute",
]


@attrs.frozen(kw_only=True)
class AgentToolResult:
    """What a tool's ``execute`` returns (and what ``on_update`` reports as progress)."""

    content: list[ToolResultContent]
    """Text and image blocks returned to the model."""
    details: Any = None
    """Structured data for logs and UIs; copied into the tool-result message."""
    structured_content: Any = None
    """Machine-readable result matching the tool's ``output_schema``; never sent to the
    model and not copied into the transcript."""
    usage: Usage | None = None
    """Usage of the tool's own model calls; copied into the tool-result message."""
    is_error: bool | None = None
    """Report failure without raising; the model sees ``content`` as an error result."""
    terminate: bool | None = None
    """Stop after this batch; effective only when every result of the batch sets it."""


AgentToolUpdateCallback: TypeAlias = Callable[[AgentToolResult], None]
"""``on_update(partial_result)``: a plain callable that never blocks the tool; calls made
after ``execute`` returned are ignored."""

ToolExecute: TypeAlias = Callable[
    [str, dict[str, Any], AbortSignal, AgentToolUpdateCallback], Awaitable[AgentToolResult]
]
"""``async execute(tool_call_id, params, signal, on_update) -> AgentToolResult``."""


@attrs.frozen(kw_only=True)
class AgentTool:
    """A tool the agent can run. Only ``name``, ``description`` and ``parameters`` are
    declared to the model."""

    name: str
    label: str
    """Human-readable name for UIs and logs."""
    description: str
    parameters: dict[str, Any]
    """JSON Schema of the arguments (root ``type: "object"``)."""
    execute: ToolExecute
    """Runs the tool. Raising an ``Exception`` produces an error result; cancellation
    (abort) propagates."""
    prepare_arguments: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """Compatibility shim applied to the raw arguments before validation."""
    output_schema: dict[str, Any] | None = None
    """JSON Schema of ``structured_content`` (not validated by the loop)."""
    replay: Literal["never", "safe"] | None = None
    """Recovery policy for durable harnesses; ignored by the loop."""
    execution_mode: ToolExecutionMode | None = None
    """``"sequential"`` forces the whole batch containing a call of this tool to run
    sequentially."""
