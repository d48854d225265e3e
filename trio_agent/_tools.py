"""Executable tools: :class:`AgentTool` and :class:`AgentToolResult`."""

from __future__ import annotations

import re
import unicodedata
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal, TypeAlias

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


# What OpenAI (Chat Completions and Responses) and Anthropic accept as a tool name.
_PROVIDER_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def _check_name(instance: Any, attribute: Any, name: Any) -> None:
    """Refuse names no provider can take, flag names some refuse."""
    if not isinstance(name, str):
        raise TypeError(f"AgentTool.name must be a str, got {name!r}")
    if not name:
        raise ValueError("AgentTool.name must not be empty")
    if any(ch.isspace() or unicodedata.category(ch)[0] in "CZ" for ch in name):
        raise ValueError(
            f"AgentTool.name must not contain white space or control characters, got {name!r}"
        )
    if not _PROVIDER_NAME.fullmatch(name):
        warnings.warn(
            f"tool name {name!r} is refused by the OpenAI and Anthropic APIs, which accept "
            "1 to 64 ASCII letters, digits, '_' and '-'",
            UserWarning,
            stacklevel=3,
        )


def _check_parameters(instance: Any, attribute: Any, parameters: Any) -> None:
    if not isinstance(parameters, dict):
        raise TypeError(f"AgentTool.parameters must be a JSON Schema dict, got {parameters!r}")


def _check_execute(instance: Any, attribute: Any, execute: Any) -> None:
    if not callable(execute):
        raise TypeError(f"AgentTool.execute must be callable, got {execute!r}")


@attrs.frozen(kw_only=True)
class AgentTool:
    """A tool the agent can run. Only ``name``, ``description`` and ``parameters`` are
    declared to the model.

    Raises:
        TypeError: ``name`` is not a ``str``, ``parameters`` not a ``dict`` or
            ``execute`` not callable.
        ValueError: ``name`` is empty or contains white space or control characters.

    A name outside ``^[a-zA-Z0-9_-]{1,64}$`` (the pattern OpenAI and Anthropic accept),
    such as ``read.file`` or a non-ASCII name, gives a :class:`UserWarning`: other
    providers, and the faux provider, may take it. Distinct names within a tool set are
    checked where the set is given to the agent (see ``check_tools``).
    """

    name: str = attrs.field(validator=_check_name)
    """The name the model calls the tool by; distinct within a tool set."""
    label: str
    """Human-readable name for UIs and logs."""
    description: str
    """Tells the model what the tool does and when to use it."""
    parameters: dict[str, Any] = attrs.field(validator=_check_parameters)
    """JSON Schema of the arguments (root ``type: "object"``)."""
    execute: ToolExecute = attrs.field(validator=_check_execute)
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
    needs_approval: bool | Callable[[Any], bool | Awaitable[bool]] | None = None
    """Whether a call waits for a decision before it runs: ``True``, or a function of
    the :class:`~trio_agent.ToolCall` (may be ``async def``). See
    :class:`~trio_agent.ToolApproval` for inline and deferred approval."""
