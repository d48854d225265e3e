"""transform_messages and sanitize_surrogates (reference upstream-ai.md §6.0)."""

from __future__ import annotations

from typing import Any

import attrs

from trio_agent import (
    AssistantMessage,
    ImageContent,
    Message,
    Model,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from trio_agent.models import sanitize_surrogates, transform_messages

MODEL = Model(
    id="m1",
    name="M1",
    api="openai-completions",
    provider="p",
    base_url="http://x",
    input=["text", "image"],
)
TEXT_ONLY = Model(id="m1", name="M1", api="openai-completions", provider="p", base_url="http://x")
IMAGE = ImageContent(data="AAAA", mime_type="image/png")


def assistant(*content: Any, **changes: Any) -> AssistantMessage:
    fields: dict[str, Any] = {
        "content": list(content),
        "api": "openai-completions",
        "provider": "p",
        "model": "m1",
        "stop_reason": "toolUse",
        "timestamp": 0,
    }
    fields.update(changes)
    return AssistantMessage(**fields)


def result(call_id: str, text: str = "ok", **changes: Any) -> ToolResultMessage:
    fields: dict[str, Any] = {
        "tool_call_id": call_id,
        "tool_name": "f",
        "content": [TextContent(text=text)],
        "timestamp": 0,
    }
    fields.update(changes)
    return ToolResultMessage(**fields)


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=0)


def call(call_id: str) -> ToolCall:
    return ToolCall(id=call_id, name="f", arguments={})


def test_images_replaced_per_run_for_text_only_models() -> None:
    message = UserMessage(
        content=[IMAGE, IMAGE, TextContent(text="between"), IMAGE],
        timestamp=0,
    )
    tool = result("c1", content=[TextContent(text="t"), IMAGE, IMAGE])
    out = transform_messages([message, assistant(call("c1")), tool], TEXT_ONLY)
    assert out[0] == UserMessage(
        content=[
            TextContent(text="(image omitted: model does not support images)"),
            TextContent(text="between"),
            TextContent(text="(image omitted: model does not support images)"),
        ],
        timestamp=0,
    )
    assert out[2] == result(
        "c1",
        content=[
            TextContent(text="t"),
            TextContent(text="(tool image omitted: model does not support images)"),
        ],
    )
    # Image-capable models keep them; the input list is not modified.
    kept = transform_messages([message], MODEL)
    assert kept == [message]
    assert message.content[0] is IMAGE


def test_none_content_becomes_empty() -> None:
    with attrs.validators.disabled():  # past the constructor's check, as a hook could
        broken = UserMessage(content=None, timestamp=0)  # type: ignore[arg-type]
    assert transform_messages([broken], MODEL) == [UserMessage(content=[], timestamp=0)]


def test_same_model_thinking_rules() -> None:
    message = assistant(
        ThinkingContent(thinking="", thinking_signature="sig"),
        ThinkingContent(thinking="  "),
        ThinkingContent(thinking="[Reasoning redacted]", redacted=True),
        ThinkingContent(thinking="plain"),
        TextContent(text="hi", text_signature="t"),
        stop_reason="stop",
    )
    (out,) = transform_messages([message], MODEL)
    assert out == assistant(
        ThinkingContent(thinking="", thinking_signature="sig"),
        ThinkingContent(thinking="[Reasoning redacted]", redacted=True),
        ThinkingContent(thinking="plain"),
        TextContent(text="hi", text_signature="t"),
        stop_reason="stop",
    )


def test_foreign_model_is_stripped_and_ids_normalized() -> None:
    foreign = assistant(
        ThinkingContent(thinking="secret", thinking_signature="sig"),
        TextContent(text="hi", text_signature="msg_1"),
        ToolCall(id="a|b", name="f", arguments={"x": 1}, thought_signature="ts"),
        provider="other",
    )
    seen: list[tuple[str, str, str]] = []

    def normalize(tool_call_id: str, model: Model, source: AssistantMessage) -> str:
        seen.append((tool_call_id, model.id, source.provider))
        return tool_call_id.replace("|", "_")

    out = transform_messages([foreign, result("a|b")], MODEL, normalize)
    assert out == [
        assistant(
            TextContent(text="hi"),
            ToolCall(id="a_b", name="f", arguments={"x": 1}),
            provider="other",
        ),
        result("a_b"),
    ]
    assert seen == [("a|b", "m1", "other")]
    # Without a callback ids stay as they are.
    assert transform_messages([foreign, result("a|b")], MODEL)[1] == result("a|b")


def test_error_and_aborted_assistants_are_dropped() -> None:
    messages: list[Message] = [
        user("q"),
        assistant(TextContent(text="oops"), stop_reason="error", error_message="x"),
        assistant(call("c9"), stop_reason="aborted", error_message="Request was aborted"),
        result("c9", "Operation aborted", is_error=True),
        user("again"),
        assistant(TextContent(text="fine"), stop_reason="stop"),
    ]
    assert transform_messages(messages, MODEL) == [
        user("q"),
        user("again"),
        assistant(TextContent(text="fine"), stop_reason="stop"),
    ]


def test_orphaned_tool_calls_get_synthetic_results() -> None:
    messages: list[Message] = [
        user("q"),
        assistant(call("c1"), call("c2")),
        result("c2"),
        user("next"),
        assistant(call("c3")),
    ]
    out = transform_messages(messages, MODEL)
    assert [m.role for m in out] == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "user",
        "assistant",
        "toolResult",
    ]
    synthetic = out[3]
    assert isinstance(synthetic, ToolResultMessage)
    assert synthetic.tool_call_id == "c1"
    assert synthetic.tool_name == "f"
    assert synthetic.content == [TextContent(text="No result provided")]
    assert synthetic.is_error is True
    last = out[6]
    assert isinstance(last, ToolResultMessage)
    assert last.tool_call_id == "c3"
    assert last.content == [TextContent(text="No result provided")]


def test_system_message_between_call_and_results_is_held_back() -> None:
    note = SystemMessage(content="new rule", timestamp=0)
    messages: list[Message] = [
        assistant(call("c1"), call("c2")),
        note,
        result("c1"),
        result("c2"),
        user("u"),
    ]
    out = transform_messages(messages, MODEL)
    assert out == [messages[0], result("c1"), result("c2"), note, user("u")]
    # Held back until the synthetic result as well.
    out2 = transform_messages([assistant(call("c1")), note, user("u")], MODEL)
    assert [m.role for m in out2] == ["assistant", "toolResult", "system", "user"]


def test_sanitize_surrogates() -> None:
    assert sanitize_surrogates("plain ✓") == "plain ✓"
    assert sanitize_surrogates("a\ud800b\udc00c") == "abc"
    assert sanitize_surrogates("\ud83d\ude00") == "😀"
    assert sanitize_surrogates("x\udbff") == "x"
