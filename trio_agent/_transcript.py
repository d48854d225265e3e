"""System-message replay: the transcript's system messages as prompt and tool state.

The system prompt and the tool declarations of a conversation live in its ``system``
messages. The leading one holds the base prompt and the initial tools; later ones append
instructions, patch named ``sections`` and add or remove tools. The helpers here replay
them as pi 1.6.0 does.

Every helper accepts a list of any transcript entries and looks only at entries whose
``role`` is ``"system"``; other roles, including application roles, are passed over.
Messages are frozen: new ones are made with :func:`attrs.evolve`, inputs are never
mutated.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import TypeGuard, TypeVar

import attrs

from ._jsjson import js_stringify
from ._messages import (
    AgentMessage,
    AssistantContent,
    Message,
    SystemMessage,
    TextContent,
    ToolDeclaration,
    ToolReference,
    UserContent,
    now_ms,
)
from ._streaming import LlmContext
from ._tools import AgentTool

__all__ = [
    "ToolStateChanges",
    "collapse_system_messages",
    "content_text",
    "create_initial_system_message",
    "declarations_equal",
    "declare_tool_changes",
    "get_current_system_message",
    "get_current_system_prompt",
    "get_current_tools",
    "get_system_message_text",
    "get_tool_state_changes",
    "normalize_context",
    "render_system_message_update",
    "to_tool_declaration",
    "tool_declarations",
]

_M = TypeVar("_M", bound=AgentMessage)

_PARAGRAPH = "\n\n"
"""Separator between the parts of a replayed prompt (upstream joins with a blank line)."""


@attrs.frozen(kw_only=True)
class ToolStateChanges:
    """The difference between two tool sets, as :func:`get_tool_state_changes` reports it.

    A tool whose definition changed appears in both lists (removal and re-addition).
    """

    tools_added: list[ToolDeclaration]
    """Declarations that are new or changed, in the order of the current set."""
    tools_removed: list[ToolReference]
    """Tools that are gone or changed, in the order of the previous set."""


def _is_system(message: object) -> TypeGuard[SystemMessage]:
    return getattr(message, "role", None) == "system"


def content_text(
    content: str | Sequence[UserContent | AssistantContent], separator: str = "\n"
) -> str:
    """Return the text of a message's content.

    A string is returned as is. For a list of content blocks only the ``text`` blocks count
    (images, thinking and tool calls are skipped); their texts are joined with
    ``separator``.
    """
    if isinstance(content, str):
        return content
    return separator.join(block.text for block in content if isinstance(block, TextContent))


# ---------------------------------------------------------------------------------------
# Tool declarations


def to_tool_declaration(tool: AgentTool | ToolDeclaration) -> ToolDeclaration:
    """Return what the model sees of ``tool``.

    Keeps ``name``, ``description``, a deep copy of ``parameters`` and
    ``constrained_sampling`` (when it is not ``None``, so ``False`` is kept); executable
    and display fields of an :class:`~trio_agent.AgentTool` are dropped. The result shares
    no mutable state with ``tool``.
    """
    return ToolDeclaration(
        name=tool.name,
        description=tool.description,
        parameters=copy.deepcopy(tool.parameters),
        constrained_sampling=copy.deepcopy(getattr(tool, "constrained_sampling", None)),
    )


def tool_declarations(
    tools: Iterable[AgentTool | ToolDeclaration] | None,
) -> list[ToolDeclaration]:
    """Map ``tools`` through :func:`to_tool_declaration`, keeping their order (``None`` gives
    ``[]``)."""
    return [to_tool_declaration(tool) for tool in tools or ()]


def _declaration_key(tool: AgentTool | ToolDeclaration) -> str:
    # Field order as upstream's declaration object: name, description, parameters,
    # constrainedSampling (absent when None).
    constrained = getattr(tool, "constrained_sampling", None)
    parts = [
        f'"name":{js_stringify(tool.name)}',
        f'"description":{js_stringify(tool.description)}',
        f'"parameters":{js_stringify(tool.parameters)}',
    ]
    if constrained is not None:
        parts.append(f'"constrainedSampling":{js_stringify(constrained)}')
    return "{" + ",".join(parts) + "}"


def declarations_equal(a: AgentTool | ToolDeclaration, b: AgentTool | ToolDeclaration) -> bool:
    """Whether ``a`` and ``b`` declare the same tool to the model.

    Compares their declarations (see :func:`to_tool_declaration`) serialized the way
    upstream's ``JSON.stringify`` does, so: executable fields are ignored; the key order of
    the parameter schema matters; ``constrained_sampling=False`` differs from ``None``
    (absent); ``1`` equals ``1.0``.

    Raises:
        TypeError: if a schema holds a value JSON cannot represent (or a non-string key).
    """
    return _declaration_key(a) == _declaration_key(b)


def get_tool_state_changes(
    previous: Sequence[AgentTool | ToolDeclaration],
    current: Sequence[AgentTool | ToolDeclaration],
) -> ToolStateChanges:
    """Return what changes from the tool set ``previous`` to the tool set ``current``.

    ``tools_added`` holds the declarations of the tools of ``current`` (in its order)
    whose name is new or whose declaration differs (:func:`declarations_equal`);
    ``tools_removed`` references the tools of ``previous`` (in its order) whose name is
    gone or whose declaration differs. A changed tool therefore appears in both lists.
    When a name occurs twice in one set, its last entry is the one compared against.
    """
    previous_by_name = {tool.name: tool for tool in previous}
    current_by_name = {tool.name: tool for tool in current}
    added: list[ToolDeclaration] = []
    for tool in current:
        before = previous_by_name.get(tool.name)
        if before is None or not declarations_equal(before, tool):
            added.append(to_tool_declaration(tool))
    removed: list[ToolReference] = []
    for tool in previous:
        after = current_by_name.get(tool.name)
        if after is None or not declarations_equal(tool, after):
            removed.append(ToolReference(name=tool.name))
    return ToolStateChanges(tools_added=added, tools_removed=removed)


# ---------------------------------------------------------------------------------------
# Replay


def create_initial_system_message(
    system_prompt: str | None,
    tools: Sequence[AgentTool | ToolDeclaration] | None,
) -> SystemMessage | None:
    """Build the leading system message of a transcript.

    Returns ``None`` when the prompt is empty or ``None`` and there are no tools.
    Otherwise a system message with ``content`` = the prompt (``""`` when absent),
    ``tools_added`` = the tools (omitted, i.e. ``None``, when empty) and ``timestamp`` 0.
    Declarations are used as given; an :class:`~trio_agent.AgentTool` is converted with
    :func:`to_tool_declaration`.
    """
    if not system_prompt and not tools:
        return None
    declarations = [
        tool if isinstance(tool, ToolDeclaration) else to_tool_declaration(tool)
        for tool in tools or ()
    ]
    return SystemMessage(
        content=system_prompt or "",
        tools_added=declarations or None,
        timestamp=0,
    )


def get_current_tools(messages: Iterable[AgentMessage]) -> list[ToolDeclaration]:
    """Return the tools declared once every system message of ``messages`` is replayed.

    Per system message, in order: first every name in ``tools_removed`` is removed, then
    every declaration in ``tools_added`` is set by name. Re-declaring a present name
    replaces it in place; a removed and re-added name moves to the end.
    """
    tools: dict[str, ToolDeclaration] = {}
    for message in messages:
        if not _is_system(message):
            continue
        for reference in message.tools_removed or ():
            tools.pop(reference.name, None)
        for declaration in message.tools_added or ():
            tools[declaration.name] = declaration
    return list(tools.values())


def get_current_system_message(messages: Iterable[AgentMessage]) -> SystemMessage | None:
    """Replay every system message of ``messages`` into one leading system message.

    - ``timestamp``: that of the first system message;
    - ``content``: the non-empty texts of all system messages (a list content joined with
      ``"\\n"`` first), joined with ``"\\n\\n"``;
    - ``sections``: patched message by message in key order; a string sets or replaces
      (a present key keeps its position), ``None`` removes (a later re-add goes last);
      ``None`` when no section remains;
    - ``tools_added``: :func:`get_current_tools` (``None`` when empty).

    Returns ``None`` only when there is no system message at all.
    """
    system_messages = [message for message in messages if _is_system(message)]
    if not system_messages:
        return None
    texts: list[str] = []
    sections: dict[str, str | None] = {}  # values are never None after patching
    for message in system_messages:
        text = content_text(message.content)
        if text:
            texts.append(text)
        for name, value in (message.sections or {}).items():
            if value is None:
                sections.pop(name, None)
            else:
                sections[name] = value
    tools = get_current_tools(system_messages)
    return SystemMessage(
        content=_PARAGRAPH.join(texts),
        sections=sections or None,
        tools_added=tools or None,
        timestamp=system_messages[0].timestamp,
    )


def get_system_message_text(message: SystemMessage) -> str:
    """Return the prompt text of one system message.

    Its content text followed by every non-``None`` section value in order; empty parts
    are dropped; parts are joined with ``"\\n\\n"``.
    """
    parts = [content_text(message.content)]
    parts.extend(value for value in (message.sections or {}).values() if value is not None)
    return _PARAGRAPH.join(part for part in parts if part)


def get_current_system_prompt(messages: Iterable[AgentMessage]) -> str:
    """Return the effective system prompt of ``messages`` (``""`` without system messages).

    The text (:func:`get_system_message_text`) of :func:`get_current_system_message`.
    """
    current = get_current_system_message(messages)
    return "" if current is None else get_system_message_text(current)


def render_system_message_update(message: SystemMessage) -> str:
    """Render a later system message as text for APIs that accept one mid-conversation.

    Parts: the content text (if non-empty), then per section in order either
    ``Removed system prompt section "<name>".`` (value ``None``) or
    ``Updated system prompt section "<name>":`` followed by a blank line and the value;
    joined with ``"\\n\\n"``. The result is ``""`` for an update that only changes tools.
    """
    parts: list[str] = []
    text = content_text(message.content)
    if text:
        parts.append(text)
    for name, value in (message.sections or {}).items():
        if value is None:
            parts.append(f'Removed system prompt section "{name}".')
        else:
            parts.append(f'Updated system prompt section "{name}":{_PARAGRAPH}{value}')
    return _PARAGRAPH.join(parts)


def collapse_system_messages(messages: Sequence[_M]) -> list[_M | SystemMessage]:
    """Fold all system messages into one leading message.

    Returns :func:`get_current_system_message` (when there is any system message)
    followed by every non-system message in order. Idempotent.
    """
    head = get_current_system_message(messages)
    rest: list[_M | SystemMessage] = [message for message in messages if not _is_system(message)]
    return rest if head is None else [head, *rest]


def normalize_context(
    messages: Sequence[Message],
    *,
    system_prompt: str | None = None,
    tools: Sequence[AgentTool | ToolDeclaration] | None = None,
) -> LlmContext:
    """Build the :class:`~trio_agent.LlmContext` a stream function receives.

    Prepends :func:`create_initial_system_message` of ``system_prompt`` and ``tools`` when
    that is not ``None`` (without checking whether ``messages`` already starts with a
    system message, as upstream). Otherwise the context holds the same message objects
    in a new list.
    """
    initial = create_initial_system_message(system_prompt, tools)
    if initial is None:
        return LlmContext(messages=list(messages))
    return LlmContext(messages=[initial, *messages])


# ---------------------------------------------------------------------------------------
# The agent loop's reconciliation of declared and executable tools


def declare_tool_changes(
    context_messages: Sequence[AgentMessage],
    pending: list[AgentMessage],
    tools: Sequence[AgentTool],
) -> list[AgentMessage]:
    """Make the declared tools equal the executable ``tools`` once ``pending`` is appended.

    As pi 1.6.0 does it: the last system message of ``pending`` (if any)
    has its own tool fields treated as intent: they are replaced by the delta between the
    tools declared by ``context_messages`` plus ``pending`` (without those fields) and
    ``tools``; each field is set only when non-empty. Without a pending system message a
    new one (empty content, timestamp now) carrying the delta is inserted before the first
    non-system pending message, or at the end.

    Returns the very same ``pending`` object when nothing changes (no delta, and no
    pending system message declaring anything); otherwise a new list. Never mutates
    ``pending``.
    """
    last_system: int | None = None
    pending_system: SystemMessage | None = None
    for index in range(len(pending) - 1, -1, -1):
        candidate = pending[index]
        if _is_system(candidate):
            last_system, pending_system = index, candidate
            break
    baseline = list(pending)
    if last_system is not None and pending_system is not None:
        baseline[last_system] = attrs.evolve(pending_system, tools_added=None, tools_removed=None)
    changes = get_tool_state_changes(
        get_current_tools([*context_messages, *baseline]), tool_declarations(tools)
    )
    has_changes = bool(changes.tools_added) or bool(changes.tools_removed)
    if last_system is not None and pending_system is not None:
        if not has_changes and not pending_system.tools_added and not pending_system.tools_removed:
            return pending
        # The pending message's own tool fields are intent only: replay must equal the
        # executable set, so they are overwritten with the computed delta.
        baseline[last_system] = attrs.evolve(
            pending_system,
            tools_added=changes.tools_added or None,
            tools_removed=changes.tools_removed or None,
        )
        return baseline
    if not has_changes:
        return pending
    declaration = SystemMessage(
        content="",
        tools_added=changes.tools_added or None,
        tools_removed=changes.tools_removed or None,
        timestamp=now_ms(),
    )
    insert_at = next(
        (index for index, item in enumerate(pending) if not _is_system(item)), len(pending)
    )
    return [*pending[:insert_at], declaration, *pending[insert_at:]]
