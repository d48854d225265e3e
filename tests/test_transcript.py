"""System-message replay (SPEC §3; reference upstream-ai.md §3, upstream-agent.md §3.4)."""

from __future__ import annotations

from typing import Any, Literal

import attrs
import pytest

import trio_agent
from trio_agent import (
    AbortSignal,
    AgentMessage,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessage,
    ImageContent,
    LlmContext,
    Message,
    SystemMessage,
    TextContent,
    ToolDeclaration,
    ToolReference,
    ToolResultMessage,
    ToolStateChanges,
    UserMessage,
    _transcript,
    collapse_system_messages,
    content_text,
    create_initial_system_message,
    declarations_equal,
    get_current_system_message,
    get_current_system_prompt,
    get_current_tools,
    get_system_message_text,
    get_tool_state_changes,
    normalize_context,
    render_system_message_update,
    to_tool_declaration,
)
from trio_agent._messages import now_ms
from trio_agent._transcript import declare_tool_changes, tool_declarations

SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def decl(name: str, description: str | None = None) -> ToolDeclaration:
    return ToolDeclaration(
        name=name, description=description or f"{name} tool", parameters=dict(SCHEMA)
    )


async def _noop(
    tool_call_id: str,
    params: dict[str, Any],
    signal: AbortSignal,
    on_update: AgentToolUpdateCallback,
) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text="ok")])


def tool(name: str, description: str | None = None, **kwargs: Any) -> AgentTool:
    return AgentTool(
        name=name,
        label=name.title(),
        description=description or f"{name} tool",
        parameters=kwargs.pop("parameters", dict(SCHEMA)),
        execute=_noop,
        **kwargs,
    )


def user(text: str, timestamp: int = 1) -> UserMessage:
    return UserMessage(content=text, timestamp=timestamp)


def assistant(text: str, timestamp: int = 1) -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text=text)],
        api="faux",
        provider="faux",
        model="faux-1",
        timestamp=timestamp,
    )


@attrs.frozen(kw_only=True)
class Note:
    """An application message (never sent to a model)."""

    text: str
    role: Literal["note"] = "note"


def roles(messages: list[Any]) -> list[str]:
    return [message.role for message in messages]


# ---------------------------------------------------------------------------------------
# Worked example (upstream-ai.md §3.2)

FIRST = decl("first")
SECOND = decl("second")
M1 = SystemMessage(
    content="base", sections={"a": "<a>1</a>", "b": "<b>1</b>"}, tools_added=[FIRST], timestamp=10
)
M2 = user("hello", timestamp=11)
M3 = SystemMessage(content="also do this", timestamp=12)
M4 = assistant("ok", timestamp=13)
M5 = SystemMessage(
    content="",
    sections={"a": "<a>2</a>", "b": None, "c": "<c>1</c>"},
    tools_removed=[ToolReference(name="first")],
    tools_added=[SECOND],
    timestamp=14,
)
WORKED: list[Message] = [M1, M2, M3, M4, M5]


def test_worked_example_current_system_message() -> None:
    current = get_current_system_message(WORKED)
    assert current == SystemMessage(
        content="base\n\nalso do this",
        sections={"a": "<a>2</a>", "c": "<c>1</c>"},
        tools_added=[SECOND],
        timestamp=10,
    )
    assert current is not None
    assert current.sections is not None
    # dict equality ignores order; the replay order is part of the contract.
    assert list(current.sections) == ["a", "c"]
    assert current.tools_removed is None


def test_worked_example_current_system_prompt() -> None:
    assert get_current_system_prompt(WORKED) == "base\n\nalso do this\n\n<a>2</a>\n\n<c>1</c>"


def test_worked_example_system_message_text() -> None:
    assert get_system_message_text(M1) == "base\n\n<a>1</a>\n\n<b>1</b>"


def test_worked_example_render_update() -> None:
    assert render_system_message_update(M5) == (
        'Updated system prompt section "a":\n\n<a>2</a>'
        "\n\n"
        'Removed system prompt section "b".'
        "\n\n"
        'Updated system prompt section "c":\n\n<c>1</c>'
    )


def test_worked_example_collapse_roles() -> None:
    collapsed = collapse_system_messages(WORKED)
    assert roles(collapsed) == ["system", "user", "assistant"]
    assert collapsed[0] == get_current_system_message(WORKED)
    assert collapsed[1] is M2
    assert collapsed[2] is M4


def test_worked_example_current_tools() -> None:
    assert get_current_tools(WORKED) == [SECOND]
    assert get_current_tools(WORKED[:4]) == [FIRST]


def test_late_only_system_message() -> None:
    x = decl("x")
    late = SystemMessage(content="", sections={"preamble": "You are pi."}, tools_added=[x])
    transcript: list[Message] = [user("hi"), late]
    assert get_current_system_prompt(transcript) == "You are pi."
    collapsed = collapse_system_messages(transcript)
    assert roles(collapsed) == ["system", "user"]
    head = collapsed[0]
    assert isinstance(head, SystemMessage)
    assert head.tools_added == [x]
    assert head.content == ""
    assert head.timestamp == late.timestamp


def test_readded_section_goes_last() -> None:
    readd = SystemMessage(sections={"b": "<b>again</b>"}, timestamp=15)
    current = get_current_system_message([*WORKED, readd])
    assert current is not None
    assert current.sections is not None
    assert list(current.sections.items()) == [
        ("a", "<a>2</a>"),
        ("c", "<c>1</c>"),
        ("b", "<b>again</b>"),
    ]
    assert get_current_system_prompt([*WORKED, readd]) == (
        "base\n\nalso do this\n\n<a>2</a>\n\n<c>1</c>\n\n<b>again</b>"
    )


def test_replaced_section_keeps_position() -> None:
    patch = SystemMessage(sections={"a": "<a>3</a>"}, timestamp=2)
    current = get_current_system_message([M1, patch])
    assert current is not None
    assert current.sections is not None
    assert list(current.sections.items()) == [("a", "<a>3</a>"), ("b", "<b>1</b>")]


def test_list_content_joined_with_newline() -> None:
    listed = SystemMessage(content=[TextContent(text="x"), TextContent(text="y")], timestamp=5)
    transcript: list[Message] = [SystemMessage(content="base", timestamp=4), listed]
    current = get_current_system_message(transcript)
    assert current is not None
    assert current.content == "base\n\nx\ny"
    assert current.timestamp == 4
    assert get_system_message_text(listed) == "x\ny"
    assert render_system_message_update(listed) == "x\ny"


def test_redeclared_tool_replaced_in_place() -> None:
    first_v2 = decl("first", "first tool, improved")
    transcript: list[Message] = [
        SystemMessage(content="p", tools_added=[FIRST, SECOND], timestamp=0),
        SystemMessage(tools_added=[first_v2], timestamp=1),
    ]
    assert get_current_tools(transcript) == [first_v2, SECOND]


def test_removed_then_readded_tool_moves_to_end() -> None:
    transcript: list[Message] = [
        SystemMessage(tools_added=[FIRST, SECOND], timestamp=0),
        # Removal is applied before addition within one message.
        SystemMessage(
            tools_removed=[ToolReference(name="first")], tools_added=[FIRST], timestamp=1
        ),
    ]
    assert get_current_tools(transcript) == [SECOND, FIRST]


def test_render_update_tools_only_is_empty() -> None:
    assert render_system_message_update(SystemMessage(tools_added=[FIRST])) == ""


def test_system_message_text_drops_empty_parts() -> None:
    message = SystemMessage(content="", sections={"a": "", "b": None, "c": "<c/>"})
    assert get_system_message_text(message) == "<c/>"


# ---------------------------------------------------------------------------------------
# Empty transcripts, roles, collapse


def test_empty_transcript() -> None:
    assert get_current_system_message([]) is None
    assert get_current_system_prompt([]) == ""
    assert get_current_tools([]) == []
    assert collapse_system_messages([]) == []


def test_transcript_without_system_messages() -> None:
    transcript: list[Message] = [user("hi"), assistant("hello")]
    assert get_current_system_message(transcript) is None
    assert get_current_system_prompt(transcript) == ""
    collapsed = collapse_system_messages(transcript)
    assert collapsed == transcript
    assert collapsed is not transcript


def test_empty_system_message_replays_to_empty_prompt() -> None:
    current = get_current_system_message([SystemMessage(timestamp=3)])
    assert current == SystemMessage(content="", timestamp=3)
    assert get_current_system_prompt([SystemMessage(timestamp=3)]) == ""


def test_collapse_is_idempotent() -> None:
    note = Note(text="remember")
    listed = SystemMessage(content=[TextContent(text="x"), TextContent(text="y")], timestamp=20)
    transcript: list[AgentMessage] = [*WORKED, note, listed, user("again", timestamp=21)]
    once = collapse_system_messages(transcript)
    twice = collapse_system_messages(once)
    assert twice == once
    assert roles(once) == ["system", "user", "assistant", "note", "user"]
    assert all(a is b for a, b in zip(once[1:], twice[1:], strict=True))


def test_custom_roles_are_ignored_and_kept() -> None:
    note = Note(text="not a system message")
    result = ToolResultMessage(
        tool_call_id="c1", tool_name="first", content=[TextContent(text="r")], timestamp=2
    )
    transcript: list[AgentMessage] = [note, M1, result, M3]
    collapsed = collapse_system_messages(transcript)
    assert roles(collapsed) == ["system", "note", "toolResult"]
    assert collapsed[1] is note
    assert collapsed[2] is result
    assert get_current_system_prompt(transcript) == "base\n\nalso do this\n\n<a>1</a>\n\n<b>1</b>"
    assert get_current_tools(transcript) == [FIRST]


def test_helpers_do_not_mutate_inputs() -> None:
    before = [attrs.evolve(message) for message in WORKED]
    collapse_system_messages(WORKED)
    get_current_system_message(WORKED)
    assert before == WORKED
    assert M5.sections == {"a": "<a>2</a>", "b": None, "c": "<c>1</c>"}
    assert M1.sections == {"a": "<a>1</a>", "b": "<b>1</b>"}


# ---------------------------------------------------------------------------------------
# content_text


def test_content_text() -> None:
    assert content_text("plain") == "plain"
    blocks: list[TextContent | ImageContent] = [
        TextContent(text="a"),
        ImageContent(data="AAAA", mime_type="image/png"),
        TextContent(text="b"),
    ]
    assert content_text(blocks) == "a\nb"
    assert content_text(blocks, separator="") == "ab"
    assert content_text([]) == ""


# ---------------------------------------------------------------------------------------
# create_initial_system_message / normalize_context (system-message-replay.test.ts)


def test_create_initial_system_message_empty() -> None:
    assert create_initial_system_message(None, None) is None
    assert create_initial_system_message("", []) is None


def test_create_initial_system_message_prompt_only() -> None:
    message = create_initial_system_message("be brief", None)
    assert message == SystemMessage(content="be brief", timestamp=0)
    assert message is not None
    assert message.tools_added is None


def test_create_initial_system_message_tools_only() -> None:
    message = create_initial_system_message(None, [tool("a")])
    assert message == SystemMessage(content="", tools_added=[decl("a")], timestamp=0)
    assert message is not None
    assert message.tools_added is not None
    assert type(message.tools_added[0]) is ToolDeclaration


def test_create_initial_system_message_keeps_declarations() -> None:
    a = decl("a")
    message = create_initial_system_message("p", [a])
    assert message is not None
    assert message.tools_added is not None
    assert message.tools_added[0] is a


@pytest.mark.parametrize(
    ("system_prompt", "tools"), [(None, None), ("", None), (None, []), ("", [])]
)
def test_normalize_context_identity(
    system_prompt: str | None, tools: list[AgentTool] | None
) -> None:
    messages: list[Message] = [SystemMessage(content="Transcript prompt", timestamp=0), user("hi")]
    context = normalize_context(messages, system_prompt=system_prompt, tools=tools)
    assert isinstance(context, LlmContext)
    assert context.messages == messages
    assert all(a is b for a, b in zip(context.messages, messages, strict=True))


def test_normalize_context_prepends() -> None:
    a = decl("a")
    hi = user("hi")
    context = normalize_context([hi], system_prompt="be brief", tools=[a])
    assert context.messages == [
        SystemMessage(content="be brief", tools_added=[a], timestamp=0),
        hi,
    ]
    assert context.messages[1] is hi


def test_normalize_context_does_not_check_existing_system_message() -> None:
    existing = SystemMessage(content="already here", timestamp=5)
    context = normalize_context([existing], system_prompt="be brief")
    assert roles(context.messages) == ["system", "system"]
    assert context.messages[0] == SystemMessage(content="be brief", timestamp=0)
    assert context.messages[1] is existing


def test_normalize_context_converts_agent_tools() -> None:
    context = normalize_context([], tools=[tool("a")])
    assert context.messages == [SystemMessage(content="", tools_added=[decl("a")], timestamp=0)]


# ---------------------------------------------------------------------------------------
# to_tool_declaration / declarations_equal


def test_to_tool_declaration_strips_and_copies() -> None:
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    }
    source = tool("search", "find things", parameters=parameters)
    declaration = to_tool_declaration(source)
    assert declaration == ToolDeclaration(
        name="search", description="find things", parameters=parameters
    )
    assert declaration.constrained_sampling is None
    assert declaration.parameters is not parameters
    parameters["properties"]["q"]["type"] = "integer"
    parameters["required"].append("x")
    assert declaration.parameters == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    }


def test_to_tool_declaration_keeps_constrained_sampling() -> None:
    disabled = ToolDeclaration(name="a", description="d", parameters={}, constrained_sampling=False)
    assert to_tool_declaration(disabled).constrained_sampling is False
    config = {"type": "json_schema", "strict": "prefer"}
    strict = ToolDeclaration(name="a", description="d", parameters={}, constrained_sampling=config)
    assert to_tool_declaration(strict).constrained_sampling == config


def test_tool_declarations() -> None:
    assert tool_declarations(None) == []
    assert tool_declarations([tool("a"), decl("b")]) == [decl("a"), decl("b")]


def test_declarations_equal_ignores_executable_fields() -> None:
    assert declarations_equal(tool("a"), decl("a"))
    assert declarations_equal(tool("a"), tool("a", execution_mode="sequential", replay="safe"))
    assert not declarations_equal(tool("a"), tool("a", "other description"))
    assert not declarations_equal(decl("a"), decl("b"))


def test_declarations_equal_constrained_sampling() -> None:
    absent = ToolDeclaration(name="a", description="d", parameters={})
    disabled = attrs.evolve(absent, constrained_sampling=False)
    assert declarations_equal(absent, ToolDeclaration(name="a", description="d", parameters={}))
    assert declarations_equal(absent, tool("a", "d", parameters={}))
    assert not declarations_equal(absent, disabled)
    assert declarations_equal(disabled, attrs.evolve(absent, constrained_sampling=False))


def test_declarations_equal_key_order_matters() -> None:
    one = ToolDeclaration(name="a", description="d", parameters={"type": "object", "title": "t"})
    other = ToolDeclaration(name="a", description="d", parameters={"title": "t", "type": "object"})
    assert one == other  # Python dict equality ignores order ...
    assert not declarations_equal(one, other)  # ... upstream's string comparison does not.


def test_declarations_equal_follows_json_stringify() -> None:
    def with_params(parameters: dict[str, Any]) -> ToolDeclaration:
        return ToolDeclaration(name="a", description="d", parameters=parameters)

    # JavaScript has one number type: 1 and 1.0 serialize alike.
    assert declarations_equal(with_params({"maximum": 1}), with_params({"maximum": 1.0}))
    assert not declarations_equal(with_params({"maximum": 1}), with_params({"maximum": 1.5}))
    # JavaScript objects list integer-like keys first, in ascending order.
    assert declarations_equal(
        with_params({"b": 1, "10": 2, "2": 3}), with_params({"2": 3, "10": 2, "b": 1})
    )
    assert not declarations_equal(with_params({"b": 1, "01": 2}), with_params({"01": 2, "b": 1}))
    assert declarations_equal(
        with_params({"enum": ["é", None]}), with_params({"enum": ["é", None]})
    )
    assert not declarations_equal(with_params({"enum": [None]}), with_params({"enum": []}))
    assert declarations_equal(with_params({"enum": ("x",)}), with_params({"enum": ["x"]}))


def test_declarations_equal_rejects_non_json_values() -> None:
    bad = ToolDeclaration(name="a", description="d", parameters={"enum": {1, 2}})
    with pytest.raises(TypeError, match=r"^cannot write 'set' values as JSON$"):
        declarations_equal(bad, decl("a"))


# ---------------------------------------------------------------------------------------
# get_tool_state_changes


def test_tool_state_changes_removal_and_addition() -> None:
    a, b, c = decl("a"), decl("b"), decl("c")
    b_changed = decl("b", "b tool, changed")
    changes = get_tool_state_changes([a, b], [b_changed, c])
    assert changes == ToolStateChanges(
        tools_added=[b_changed, c],
        tools_removed=[ToolReference(name="a"), ToolReference(name="b")],
    )


def test_tool_state_changes_none() -> None:
    assert get_tool_state_changes([decl("a")], [tool("a")]) == ToolStateChanges(
        tools_added=[], tools_removed=[]
    )
    assert get_tool_state_changes([], []) == ToolStateChanges(tools_added=[], tools_removed=[])


def test_tool_state_changes_orders_and_converts() -> None:
    changes = get_tool_state_changes([decl("z"), decl("y")], [tool("b"), tool("a")])
    assert changes.tools_added == [decl("b"), decl("a")]
    assert all(type(item) is ToolDeclaration for item in changes.tools_added)
    assert changes.tools_removed == [ToolReference(name="z"), ToolReference(name="y")]


def test_tool_state_changes_is_frozen() -> None:
    changes = get_tool_state_changes([], [])
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        changes.tools_added = []  # type: ignore[misc]  # checking the runtime guard


# ---------------------------------------------------------------------------------------
# declare_tool_changes (upstream-agent.md §3.4; agent.test.ts 5-7)


@pytest.fixture
def fixed_now(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(_transcript, "now_ms", lambda: 1_700_000_000_000)
    return 1_700_000_000_000


def tool_names(messages: list[Any]) -> list[str]:
    """The ``+added`` / ``-removed`` names of every system message, like upstream's test."""
    names: list[str] = []
    for message in messages:
        if message.role == "system":
            names += [f"+{t.name}" for t in message.tools_added or ()]
            names += [f"-{t.name}" for t in message.tools_removed or ()]
    return names


def test_declare_delta_before_next_prompt(fixed_now: int) -> None:
    first, second = tool("first"), tool("second")
    initial = create_initial_system_message("You are helpful.", tool_declarations([first]))
    assert initial is not None
    committed: list[AgentMessage] = [initial, user("one"), assistant("1")]
    two = user("two")
    pending: list[AgentMessage] = [two]
    result = declare_tool_changes(committed, pending, [second])
    assert result == [
        SystemMessage(
            content="",
            tools_added=[decl("second")],
            tools_removed=[ToolReference(name="first")],
            timestamp=fixed_now,
        ),
        two,
    ]
    assert result[1] is two
    assert pending == [two]
    assert tool_names([*committed, *result]) == ["+first", "+second", "-first"]
    assert get_current_tools([*committed, *result]) == [decl("second")]
    # The next request does not repeat the delta.
    committed = [*committed, *result, assistant("2")]
    three: list[AgentMessage] = [user("three")]
    assert declare_tool_changes(committed, three, [second]) is three


def test_declare_merges_into_pending_system_message(fixed_now: int) -> None:
    committed: list[AgentMessage] = [SystemMessage(content="You are helpful.", timestamp=0)]
    skills = SystemMessage(content="", sections={"skills": "<skills>s</skills>"}, timestamp=1)
    hi = user("hi")
    pending: list[AgentMessage] = [skills, hi]
    result = declare_tool_changes(committed, pending, [tool("echo")])
    assert result == [
        SystemMessage(
            content="",
            sections={"skills": "<skills>s</skills>"},
            tools_added=[decl("echo")],
            timestamp=1,
        ),
        hi,
    ]
    assert result[1] is hi
    assert pending == [skills, hi]
    assert skills.tools_added is None
    assert roles([*committed, *result]) == ["system", "system", "user"]


def test_declare_rewrites_false_claims(fixed_now: int) -> None:
    first = tool("first")
    initial = create_initial_system_message(None, tool_declarations([first]))
    assert initial is not None
    committed: list[AgentMessage] = [initial]
    claims = SystemMessage(
        content="",
        sections={"note": "<note>n</note>"},
        tools_added=[decl("second")],
        tools_removed=[ToolReference(name="first")],
        timestamp=1,
    )
    pending: list[AgentMessage] = [claims, user("go")]
    result = declare_tool_changes(committed, pending, [first])
    assert result[0] == SystemMessage(content="", sections={"note": "<note>n</note>"}, timestamp=1)
    assert result[1] is pending[1]
    consolidated = get_current_system_message([*committed, *result])
    assert consolidated is not None
    assert [t.name for t in consolidated.tools_added or ()] == ["first"]


def test_declare_rewrites_claims_to_the_actual_delta(fixed_now: int) -> None:
    committed: list[AgentMessage] = [SystemMessage(tools_added=[decl("a"), decl("b")], timestamp=0)]
    claims = SystemMessage(tools_added=[decl("c")], timestamp=1)
    result = declare_tool_changes(committed, [claims], [tool("b"), tool("d")])
    assert result == [
        SystemMessage(tools_added=[decl("d")], tools_removed=[ToolReference(name="a")], timestamp=1)
    ]


def test_declare_changed_definition(fixed_now: int) -> None:
    committed: list[AgentMessage] = [SystemMessage(tools_added=[decl("a")], timestamp=0)]
    result = declare_tool_changes(committed, [], [tool("a", "a tool v2")])
    assert result == [
        SystemMessage(
            tools_added=[decl("a", "a tool v2")],
            tools_removed=[ToolReference(name="a")],
            timestamp=fixed_now,
        )
    ]


def test_declare_unchanged_keeps_identity() -> None:
    committed: list[AgentMessage] = [SystemMessage(tools_added=[decl("first")], timestamp=0)]
    pending: list[AgentMessage] = [user("hi")]
    assert declare_tool_changes(committed, pending, [tool("first")]) is pending
    empty: list[AgentMessage] = []
    assert declare_tool_changes(committed, empty, [tool("first")]) is empty
    assert declare_tool_changes([], empty, []) is empty


def test_declare_unchanged_pending_system_message_keeps_identity() -> None:
    committed: list[AgentMessage] = [SystemMessage(tools_added=[decl("first")], timestamp=0)]
    plain = SystemMessage(content="more", timestamp=1)
    pending: list[AgentMessage] = [plain, user("hi")]
    assert declare_tool_changes(committed, pending, [tool("first")]) is pending
    # Empty tool lists declare nothing either: kept as they are.
    empty_fields = SystemMessage(tools_added=[], tools_removed=[], timestamp=1)
    pending = [empty_fields]
    result = declare_tool_changes(committed, pending, [tool("first")])
    assert result is pending
    assert result[0] is empty_fields


def test_declare_uses_last_pending_system_message() -> None:
    earlier = SystemMessage(tools_added=[decl("first")], timestamp=1)
    later = SystemMessage(content="later", timestamp=2)
    pending: list[AgentMessage] = [earlier, later, user("hi")]
    # The earlier message's declarations count as committed baseline: nothing to add.
    assert declare_tool_changes([], pending, [tool("first")]) is pending
    result = declare_tool_changes([], pending, [tool("first"), tool("second")])
    assert result == [
        earlier,
        SystemMessage(content="later", tools_added=[decl("second")], timestamp=2),
        pending[2],
    ]
    assert result[0] is earlier


def test_declare_into_empty_pending_list(fixed_now: int) -> None:
    committed: list[AgentMessage] = [user("hi"), assistant("hello")]
    pending: list[AgentMessage] = []
    result = declare_tool_changes(committed, pending, [tool("first")])
    assert result == [SystemMessage(content="", tools_added=[decl("first")], timestamp=fixed_now)]
    assert result is not pending
    assert pending == []


def test_declare_inserts_before_first_pending_message(fixed_now: int) -> None:
    a, b = user("a"), Note(text="b")
    pending: list[AgentMessage] = [a, b]
    result = declare_tool_changes([], pending, [tool("first")])
    assert roles(result) == ["system", "user", "note"]
    assert result[1] is a
    assert result[2] is b


def test_declare_uses_wall_clock_timestamp() -> None:
    before = now_ms()
    result = declare_tool_changes([], [], [tool("first")])
    after = now_ms()
    [message] = result
    assert isinstance(message, SystemMessage)
    assert before <= message.timestamp <= after


def test_public_exports() -> None:
    for name in [
        "ToolStateChanges",
        "collapse_system_messages",
        "content_text",
        "create_initial_system_message",
        "declarations_equal",
        "get_current_system_message",
        "get_current_system_prompt",
        "get_current_tools",
        "get_system_message_text",
        "get_tool_state_changes",
        "normalize_context",
        "render_system_message_update",
        "to_tool_declaration",
    ]:
        assert getattr(trio_agent, name) is getattr(_transcript, name)
    assert not hasattr(trio_agent, "declare_tool_changes")
    assert repr(ToolStateChanges(tools_added=[], tools_removed=[])) == (
        "ToolStateChanges(tools_added=[], tools_removed=[])"
    )
