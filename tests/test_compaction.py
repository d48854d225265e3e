"""trio_agent.compaction: settings, the summary message, the cut point, compact(), the
tracker and compact_if_needed (pi-coding-agent 1.6.0 ``core/compaction``; issue 22)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_agent._estimate
from trio_agent import (
    AbortController,
    AgentMessage,
    AssistantMessage,
    DoneEvent,
    ImageContent,
    LlmContext,
    Message,
    Model,
    StreamOptions,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolDeclaration,
    ToolReference,
    ToolResultMessage,
    Usage,
    UserMessage,
    get_current_tools,
    register_message_type,
)
from trio_agent.compaction import (
    COMPACTION_SUMMARY_PREFIX,
    DEFAULT_COMPACTION_SETTINGS,
    SUMMARIZATION_PROMPT,
    SUMMARIZATION_SYSTEM_PROMPT,
    TURN_PREFIX_SUMMARIZATION_PROMPT,
    UPDATE_SUMMARIZATION_PROMPT,
    CompactionDetails,
    CompactionFailure,
    CompactionResult,
    CompactionSettings,
    CompactionSummary,
    ContextTracker,
    compact,
    compact_after_overflow,
    compact_if_needed,
    convert_to_llm,
    estimate_tokens,
    find_cut_point,
    prepare_compaction,
    serialize_conversation,
    should_compact,
    summary_to_user_message,
    transcript_tokens,
)
from trio_agent.serialization import from_json, to_json
from trio_agent.testing import FauxProvider, faux_assistant_message, faux_text, faux_tool_call
from trio_agent.testing import FauxStep as _FauxStep

# ---------------------------------------------------------------------------------------
# Random well-formed transcripts (also used by test_compaction_pi.py)

TOOLS = [
    ToolDeclaration(name="read", description="Read a file", parameters={"type": "object"}),
    ToolDeclaration(name="edit", description="Edit a file", parameters={"type": "object"}),
]
_NAMES = ("read", "write", "edit", "bash")
_PATHS = ("/a.py", "/b.md", "src/c.ts", "é/ü.txt")


@register_message_type
@attrs.frozen(kw_only=True)
class Note:
    """An application message the model never sees."""

    text: str
    timestamp: int = 0
    role: Literal["testNote"] = "testNote"


def _text(rng: random.Random, longest: int) -> str:
    size = rng.randint(0, rng.choice((0, 1, 5, 40, 400, longest)))
    words = ("abc ", "defgh ", "ij\n") if rng.random() < 0.9 else ("aé ", "😀", " \n")
    return "".join(rng.choices(words, k=size // 3 + 1))[:size]


def random_transcript(
    rng: random.Random, *, notes: bool = False, interleave: bool = False
) -> list[AgentMessage]:
    """A transcript as a run writes it: optional system messages, optionally a previous
    compaction, turns of a user message and assistant steps whose tool calls are each
    answered right after them (``interleave``: a steering user message may come between
    a call and its result)."""
    clock = iter(range(1, 10_000))
    messages: list[AgentMessage] = []
    if rng.random() < 0.8:
        messages.append(
            SystemMessage(
                content="You are terse.",
                sections={"rules": "Be brief."} if rng.random() < 0.3 else None,
                tools_added=list(TOOLS) if rng.random() < 0.7 else None,
                timestamp=next(clock),
            )
        )
    if rng.random() < 0.3:
        details = None
        if rng.random() < 0.5:
            details = CompactionDetails(read_files=["/old.py"], modified_files=["/x.py"])
        messages.append(
            CompactionSummary(
                summary="## Goal\nearlier work",
                tokens_before=999,
                details=details,
                timestamp=next(clock),
            )
        )
    calls = 0
    for _ in range(rng.randint(0, 8)):
        if rng.random() < 0.1:
            messages.append(
                SystemMessage(tools_removed=[ToolReference(name="edit")], timestamp=next(clock))
            )
        if notes and rng.random() < 0.2:
            messages.append(Note(text="ui note", timestamp=next(clock)))
        if rng.random() < 0.1:
            content: Any = [
                TextContent(text=_text(rng, 300)),
                ImageContent(data="AAAA", mime_type="image/png"),
            ]
        else:
            content = _text(rng, 3000)
        messages.append(UserMessage(content=content, timestamp=next(clock)))
        for _ in range(rng.randint(1, 4)):
            blocks: list[Any] = []
            if rng.random() < 0.3:
                blocks.append(ThinkingContent(thinking=_text(rng, 500)))
            if rng.random() < 0.7:
                blocks.append(TextContent(text=_text(rng, 2000)))
            tool_calls = []
            for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
                calls += 1
                name = rng.choice(_NAMES)
                args: dict[str, Any] = {"path": rng.choice(_PATHS)}
                if rng.random() < 0.3:
                    args["n"] = rng.choice((1, 2.5, None, [1, "x"]))
                tool_calls.append(ToolCall(id=f"call_{calls}", name=name, arguments=args))
            blocks.extend(tool_calls)
            total = rng.choice((0, 0, rng.randint(1, 50_000)))
            messages.append(
                AssistantMessage(
                    content=blocks,
                    api="faux",
                    provider="faux",
                    model="faux-1",
                    usage=Usage(total_tokens=total),
                    stop_reason="toolUse" if tool_calls else "stop",
                    timestamp=next(clock),
                )
            )
            for index, call in enumerate(tool_calls):
                if interleave and index == 1 and rng.random() < 0.5:
                    messages.append(UserMessage(content="steer", timestamp=next(clock)))
                messages.append(
                    ToolResultMessage(
                        tool_call_id=call.id,
                        tool_name=call.name,
                        content=[TextContent(text=_text(rng, 20_000))],
                        timestamp=next(clock),
                    )
                )
            if not tool_calls:
                break
    return messages


def assert_paired(messages: Sequence[AgentMessage]) -> None:
    """Every tool result answers a call made before it; every call has a result after it."""
    called: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            called.update(b.id for b in message.content if isinstance(b, ToolCall))
        elif isinstance(message, ToolResultMessage):
            assert message.tool_call_id in called, f"result {message.tool_call_id} without call"
            answered.add(message.tool_call_id)
    assert called == answered, f"calls without result: {sorted(called - answered)}"


# ---------------------------------------------------------------------------------------
# Helpers


def faux(*responses: Any, window: int = 128_000) -> tuple[FauxProvider, Model]:
    provider = FauxProvider(responses)
    model = attrs.evolve(provider.get_model(), context_window=window)
    return provider, model


def user(text: str, timestamp: int = 1) -> UserMessage:
    return UserMessage(content=text, timestamp=timestamp)


def reply(*content: Any, timestamp: int = 2, total: int = 0) -> AssistantMessage:
    return AssistantMessage(
        content=list(content),
        api="faux",
        provider="faux",
        model="faux-1",
        usage=Usage(total_tokens=total),
        stop_reason="toolUse" if any(isinstance(b, ToolCall) for b in content) else "stop",
        timestamp=timestamp,
    )


def result(call_id: str, text: str, timestamp: int = 3, name: str = "read") -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)], timestamp=timestamp
    )


SYSTEM = SystemMessage(content="You are terse.", tools_added=list(TOOLS), timestamp=0)


def long_transcript() -> list[AgentMessage]:
    """Two turns of 400 tokens (estimate_tokens) each, then a short question."""
    return [
        SYSTEM,
        user("a" * 800, 1),
        reply(TextContent(text="b" * 800), timestamp=2),
        user("c" * 800, 3),
        reply(
            TextContent(text="reading"),
            ToolCall(id="c1", name="read", arguments={"path": "/x.py"}),
            timestamp=4,
        ),
        result("c1", "d" * 800, 5),
        reply(TextContent(text="done"), timestamp=6),
        user("next?", 7),
    ]


# ---------------------------------------------------------------------------------------
# Settings and the summary message


def test_default_settings_are_pi_s() -> None:
    assert (
        CompactionSettings(enabled=True, reserve_tokens=16384, keep_recent_tokens=20000)
        == DEFAULT_COMPACTION_SETTINGS
    )


def test_should_compact_above_window_minus_reserve() -> None:
    s = CompactionSettings(reserve_tokens=100)
    assert not should_compact(900, 1000, s)
    assert should_compact(901, 1000, s)
    assert not should_compact(10_000, 1000, CompactionSettings(enabled=False))


def test_keep_is_lowered_only_for_small_windows() -> None:
    s = DEFAULT_COMPACTION_SETTINGS
    assert s.keep_for_window(32_768) == 8192
    assert s.keep_for_window(56_768) == 20000
    assert s.keep_for_window(200_000) == 20000
    assert s.keep_for_window(0) == 20000
    assert s.keep_for_window(10_000) == 20000  # no room at all: the window is the problem


def test_summary_round_trips_in_pi_s_wire_form() -> None:
    summary = CompactionSummary(
        summary="S",
        tokens_before=12,
        details=CompactionDetails(read_files=["/a"], modified_files=[]),
        timestamp=5,
    )
    text = to_json(summary)
    assert text == (
        '{"role":"compactionSummary","summary":"S","tokensBefore":12,'
        '"details":{"readFiles":["/a"],"modifiedFiles":[]},"timestamp":5}'
    )
    assert from_json(text, AgentMessage) == summary
    assert repr(CompactionSummary).startswith("<class 'trio_agent.compaction.CompactionSummary")


def test_summary_is_sent_as_a_user_message() -> None:
    summary = CompactionSummary(summary="S", tokens_before=1, timestamp=5)
    expected = UserMessage(
        content=[
            TextContent(
                text="The conversation history before this point was compacted into the "
                "following summary:\n\n<summary>\nS\n</summary>"
            )
        ],
        timestamp=5,
    )
    assert summary_to_user_message(summary) == expected
    note = Note(text="x")
    assert convert_to_llm([SYSTEM, note, summary, user("u")]) == [SYSTEM, expected, user("u")]


def test_estimate_tokens_is_four_characters_a_token() -> None:
    assert estimate_tokens(user("abcde")) == 2
    assert estimate_tokens(CompactionSummary(summary="x" * 9, tokens_before=0)) == 3
    assert estimate_tokens(Note(text="x" * 100)) == 0
    system = SystemMessage(content="abcd", sections={"a": "1234", "b": None}, timestamp=0)
    assert estimate_tokens(system) == 2


# ---------------------------------------------------------------------------------------
# Cut point and preparation


def test_cut_keeps_about_keep_recent_tokens() -> None:
    messages = long_transcript()
    # From the end: 2 + 1 + 200 + 5 + 200 (the user message at 3) reaches 400.
    cut = find_cut_point(messages, 0, len(messages), 400)
    assert (cut.first_kept_index, cut.turn_start_index, cut.is_split_turn) == (3, -1, False)


def test_cut_at_an_assistant_message_splits_the_turn_and_keeps_its_results() -> None:
    messages = long_transcript()
    cut = find_cut_point(messages, 0, len(messages), 150)
    # The 200-token result at 5 reaches the budget; the nearest cut point after it is 6.
    assert (cut.first_kept_index, cut.turn_start_index, cut.is_split_turn) == (6, 3, True)
    cut = find_cut_point(messages[:6], 0, 6, 150)
    # A tool result is never a cut point: its call's message at 4 is the cut.
    assert (cut.first_kept_index, cut.turn_start_index, cut.is_split_turn) == (4, 3, True)


def test_nothing_to_compact() -> None:
    assert prepare_compaction([]) is None
    assert prepare_compaction([SYSTEM, user("hi")]) is None
    summary = CompactionSummary(summary="S", tokens_before=1)
    assert prepare_compaction([SYSTEM, user("hi"), summary]) is None


def test_preparation_after_a_previous_compaction() -> None:
    details = CompactionDetails(read_files=["/old.py"], modified_files=[])
    previous = CompactionSummary(summary="OLD", tokens_before=1, details=details, timestamp=1)
    messages: list[AgentMessage] = [SYSTEM, previous, *long_transcript()[1:]]
    preparation = prepare_compaction(messages, keep_recent_tokens=400)
    assert preparation is not None
    assert preparation.previous_summary == "OLD"
    assert preparation.previous_details == details
    assert preparation.first_kept_index == 4
    assert preparation.messages_to_summarize == messages[2:4]


# ---------------------------------------------------------------------------------------
# compact()


async def test_compact_summarizes_the_history_and_keeps_the_rest() -> None:
    provider, model = faux(faux_assistant_message([faux_text("## Goal\nShip it")]))
    messages = long_transcript()
    before = list(messages)
    outcome = await compact(
        messages, model, provider.stream_fn, settings=CompactionSettings(keep_recent_tokens=400)
    )
    assert messages == before
    assert isinstance(outcome, CompactionResult)
    request = provider.requests[0]
    assert request.context.messages[0] == SystemMessage(
        content=SUMMARIZATION_SYSTEM_PROMPT, timestamp=0
    )
    prompt = request.context.messages[1]
    assert isinstance(prompt, UserMessage)
    assert isinstance(prompt.content, list)
    conversation = f"[User]: {'a' * 800}\n\n[Assistant]: {'b' * 800}"
    assert prompt.content[0] == TextContent(
        text=f"<conversation>\n{conversation}\n</conversation>\n\n{SUMMARIZATION_PROMPT}"
    )
    assert outcome.first_kept_index == 3
    # The read call is in the kept part: no file lists yet.
    assert outcome.summary.summary == "## Goal\nShip it"
    assert outcome.summary.details == CompactionDetails(read_files=[], modified_files=[])
    system = outcome.messages[0]
    assert isinstance(system, SystemMessage)
    assert get_current_tools([system]) == TOOLS
    assert system.timestamp == outcome.summary.timestamp
    assert outcome.messages[1:] == [outcome.summary, *messages[3:]]
    assert outcome.tokens_before == transcript_tokens(messages).tokens
    assert outcome.tokens_after == transcript_tokens(outcome.messages).tokens
    assert outcome.tokens_after < outcome.tokens_before
    assert outcome.usage.output > 0


async def test_compact_updates_the_previous_summary_with_instructions() -> None:
    provider, model = faux(faux_assistant_message([faux_text("NEW")]))
    previous = CompactionSummary(summary="OLD", tokens_before=1, timestamp=1)
    messages: list[AgentMessage] = [SYSTEM, previous, *long_transcript()[1:]]
    outcome = await compact(
        messages,
        model,
        provider.stream_fn,
        instructions="the tests",
        keep_recent_tokens=400,
    )
    assert isinstance(outcome, CompactionResult)
    prompt = provider.requests[0].context.messages[1]
    assert isinstance(prompt, UserMessage) and isinstance(prompt.content, list)
    conversation = f"[User]: {'a' * 800}\n\n[Assistant]: {'b' * 800}"
    assert prompt.content[0] == TextContent(
        text=f"<conversation>\n{conversation}\n</conversation>\n\n"
        "<previous-summary>\nOLD\n</previous-summary>\n\n"
        f"{UPDATE_SUMMARIZATION_PROMPT}\n\nAdditional focus: the tests"
    )
    # One summary in the result: the previous one is replaced, not kept.
    assert [m for m in outcome.messages if isinstance(m, CompactionSummary)] == [outcome.summary]


async def test_a_split_turn_gets_its_own_summary() -> None:
    provider, model = faux(
        faux_assistant_message([faux_text("HISTORY")]),
        faux_assistant_message([faux_text("PREFIX")]),
    )
    messages = long_transcript()
    outcome = await compact(messages, model, provider.stream_fn, keep_recent_tokens=150)
    assert isinstance(outcome, CompactionResult)
    assert outcome.first_kept_index == 6
    prefix_prompt = provider.requests[1].context.messages[1]
    assert isinstance(prefix_prompt, UserMessage) and isinstance(prefix_prompt.content, list)
    conversation = (
        f"[User]: {'c' * 800}\n\n[Assistant]: reading\n\n"
        f'[Assistant tool calls]: read(path="/x.py")\n\n[Tool result]: {"d" * 800}'
    )
    assert prefix_prompt.content[0] == TextContent(
        text=f"# Conversation\n{conversation}\n\n# Instructions\n{TURN_PREFIX_SUMMARIZATION_PROMPT}"
    )
    assert outcome.summary.summary == (
        "HISTORY\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"
        "\n\n<read-files>\n/x.py\n</read-files>"
    )
    assert outcome.messages[2:] == messages[6:]


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (
            faux_assistant_message([], stop_reason="error", error_message="boom"),
            "Summarization failed: boom",
        ),
        (
            faux_assistant_message([], stop_reason="error"),
            "Summarization failed: Unknown error",
        ),
        (
            faux_assistant_message([faux_text("half")], stop_reason="length"),
            "Summarization failed: generation hit the token cap and the summary is incomplete",
        ),
        (
            faux_assistant_message([faux_tool_call("read", {"path": "/x"})]),
            "Summarization attempted to call a tool",
        ),
    ],
)
async def test_a_failed_summary_leaves_the_transcript(response: Any, error: str) -> None:
    provider, model = faux(response)
    messages = long_transcript()
    before = list(messages)
    outcome = await compact(messages, model, provider.stream_fn, keep_recent_tokens=400)
    assert outcome == CompactionFailure(
        error_message=error, tokens_before=transcript_tokens(messages).tokens
    )
    assert messages == before


async def test_a_stream_function_that_raises_is_a_failure() -> None:
    async def broken(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        raise RuntimeError("socket closed")
        yield  # pragma: no cover

    _, model = faux()
    outcome = await compact(long_transcript(), model, broken, keep_recent_tokens=400)
    assert isinstance(outcome, CompactionFailure)
    assert outcome.error_message == "Summarization failed: socket closed"


async def test_abort_through_the_signal_is_a_failure(autojump_clock: trio.abc.Clock) -> None:
    provider, model = faux(_FauxStep(response=faux_assistant_message([faux_text("x")]), delay=5))
    controller = AbortController()
    outcome: Any = None

    async def run() -> None:
        nonlocal outcome
        outcome = await compact(
            long_transcript(),
            model,
            provider.stream_fn,
            signal=controller.signal,
            keep_recent_tokens=400,
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.sleep(1)
        controller.abort()
    assert isinstance(outcome, CompactionFailure)
    assert (outcome.error_message, outcome.aborted) == ("Compaction cancelled", True)
    assert trio.current_time() == 1


async def test_cancelling_the_caller_cancels_the_request(autojump_clock: trio.abc.Clock) -> None:
    provider, model = faux(_FauxStep(response=faux_assistant_message([faux_text("x")]), delay=5))
    messages = long_transcript()
    before = list(messages)
    with trio.move_on_after(1) as scope:
        await compact(messages, model, provider.stream_fn, keep_recent_tokens=400)
    assert scope.cancelled_caught
    assert trio.current_time() == 1
    assert messages == before


async def test_nothing_to_compact_is_a_failure() -> None:
    provider, model = faux()
    outcome = await compact([SYSTEM, user("hi")], model, provider.stream_fn)
    assert isinstance(outcome, CompactionFailure)
    assert outcome.error_message == "Nothing to compact (session too small)"
    summary = CompactionSummary(summary="S", tokens_before=1)
    outcome = await compact([SYSTEM, user("hi"), summary], model, provider.stream_fn)
    assert isinstance(outcome, CompactionFailure)
    assert outcome.error_message == "Already compacted"
    assert provider.state.call_count == 0


def test_serialize_conversation_cuts_long_tool_results() -> None:
    text = "x" * 1999 + "😀" + "y"
    messages: list[Message] = [
        user("q"),
        reply(ThinkingContent(thinking="hidden"), ToolCall(id="c", name="f", arguments={})),
        result("c", text),
    ]
    assert serialize_conversation(messages) == (
        "[User]: q\n\n[Assistant tool calls]: f()\n\n[Tool result]: "
        + "x" * 1999
        + "\n\n[... 2 more characters truncated]"
    )


# ---------------------------------------------------------------------------------------
# The tracker and compact_if_needed


def test_tracker_follows_appends_incrementally(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    tracker = ContextTracker()
    for _ in range(30):
        messages = random_transcript(rng, notes=True)
        growing: list[AgentMessage] = []
        for message in messages:
            growing.append(message)
            assert tracker.update(growing) == transcript_tokens(growing).tokens
        tracker = ContextTracker()
    # Appending one message estimates one message.
    counted: list[object] = []
    real = trio_agent._estimate.estimate_message_tokens

    def spy(message: Any) -> int:
        counted.append(message)
        return int(real(message))

    growing = list(long_transcript())
    tracker.update(growing)
    monkeypatch.setattr("trio_agent._compaction.estimate_message_tokens", spy)
    growing.append(user("one more", 8))
    tracker.update(growing)
    assert counted == [growing[-1]]


def test_tracker_ignores_usage_from_before_the_last_summary() -> None:
    # A response kept by a compaction in the same millisecond: pi-ai's rule (not older
    # than any message before it) would let its 50,000 stand for the compacted transcript.
    kept = reply(TextContent(text="kept"), timestamp=10, total=50_000)
    summary = CompactionSummary(summary="S", tokens_before=60_000, timestamp=10)
    estimate = transcript_tokens([SYSTEM, summary, user("q", 10), kept]).tokens
    assert estimate < 100
    tracker = ContextTracker()
    before: list[AgentMessage] = [SYSTEM, user("q", 1), kept]
    assert tracker.update(before) == 50_000
    assert tracker.update([SYSTEM, summary, user("q", 10), kept]) == estimate
    later = reply(TextContent(text="new"), timestamp=11, total=700)
    assert tracker.update([SYSTEM, summary, user("q", 10), kept, later]) == 700


async def test_compact_if_needed_below_the_threshold_does_nothing() -> None:
    provider, model = faux(window=100_000)
    tracker = ContextTracker()
    with trio.testing.assert_checkpoints():
        assert (
            await compact_if_needed(tracker, long_transcript(), model, provider.stream_fn) is None
        )
    assert provider.state.call_count == 0
    with trio.testing.assert_no_checkpoints():
        assert not tracker.needs_compaction(long_transcript(), model)
    small = attrs.evolve(model, context_window=17_000)
    assert tracker.needs_compaction(long_transcript(), small)
    assert not tracker.needs_compaction(long_transcript(), attrs.evolve(model, context_window=0))


async def test_compact_if_needed_compacts_and_the_tracker_follows() -> None:
    provider, model = faux(faux_assistant_message([faux_text("S")]), window=2_000)
    tracker = ContextTracker()
    s = CompactionSettings(reserve_tokens=1_500, keep_recent_tokens=400)
    messages = long_transcript()
    assert transcript_tokens(messages).tokens > 500
    outcome = await compact_if_needed(tracker, messages, model, provider.stream_fn, settings=s)
    assert isinstance(outcome, CompactionResult)
    assert outcome.first_kept_index == 3
    assert tracker.tokens() == outcome.tokens_after
    # Disabled: never.
    off = attrs.evolve(s, enabled=False)
    assert (
        await compact_if_needed(tracker, messages, model, provider.stream_fn, settings=off) is None
    )


async def test_compact_if_needed_when_nothing_can_be_cut() -> None:
    provider, model = faux(window=1_000)
    s = CompactionSettings(reserve_tokens=900)
    messages: list[AgentMessage] = [SYSTEM, user("x" * 2_000)]
    assert (
        await compact_if_needed(ContextTracker(), messages, model, provider.stream_fn, settings=s)
        is None
    )
    assert provider.state.call_count == 0


# ---------------------------------------------------------------------------------------
# Property: a compaction never separates a tool call from its result


async def _summarize_anything(model: Model, context: LlmContext, options: StreamOptions) -> Any:
    await trio.lowlevel.checkpoint()
    yield DoneEvent(reason="stop", message=reply(TextContent(text="S")))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), keep=st.sampled_from([1, 50, 500, 2000, 20000]))
def test_compaction_keeps_calls_and_results_together(seed: int, keep: int) -> None:
    messages = random_transcript(random.Random(seed), notes=True, interleave=True)
    assert_paired(messages)
    model = FauxProvider().get_model()

    async def main() -> Any:
        return await compact(messages, model, _summarize_anything, keep_recent_tokens=keep)

    outcome = trio.run(main)
    if isinstance(outcome, CompactionFailure):
        assert outcome.error_message in (
            "Nothing to compact (session too small)",
            "Already compacted",
        )
        return
    assert_paired(outcome.messages)
    # The declared tools survive; the kept part is the original suffix.
    assert get_current_tools(outcome.messages) == get_current_tools(messages)
    kept = [m for m in messages[outcome.first_kept_index :] if not isinstance(m, SystemMessage)]
    assert outcome.messages[-len(kept) :] == kept
    assert sum(isinstance(m, CompactionSummary) for m in outcome.messages) == 1


def test_the_summary_prefix_is_pi_s() -> None:
    assert COMPACTION_SUMMARY_PREFIX.startswith("The conversation history before this point")


async def test_compact_after_overflow_compacts_once_for_a_failed_request() -> None:
    provider, model = faux(faux_assistant_message([faux_text("S")]), window=200_000)
    tracker = ContextTracker()
    messages = long_transcript()
    overflow = attrs.evolve(
        reply(timestamp=9), stop_reason="error", error_message="prompt is too long: 9 > 8"
    )
    outcome = await compact_after_overflow(tracker, messages, overflow, model, provider.stream_fn)
    # Whatever the estimate says (far below this window), the overflow compacts.
    assert isinstance(outcome, CompactionResult)
    # The estimate (about 1,000 tokens) is far below keep_recent_tokens: half is kept.
    assert outcome.first_kept_index == 2
    assert tracker.tokens() == outcome.tokens_after
    # A completed response, a different error, disabled compaction: no compaction.
    silent = attrs.evolve(reply(timestamp=9), usage=Usage(input=300_000))
    other = attrs.evolve(overflow, error_message="Internal server error")
    off = CompactionSettings(enabled=False)
    on = DEFAULT_COMPACTION_SETTINGS
    for response, s in ((silent, on), (other, on), (overflow, off)):
        outcome = await compact_after_overflow(
            tracker, messages, response, model, provider.stream_fn, settings=s
        )
        assert outcome is None
    assert provider.state.call_count == 1


_TABLE = json.loads((Path(__file__).parent / "context" / "overflow_table.json").read_text("utf-8"))
_FAILED_REQUESTS = [
    case for case in _TABLE["overflow"] if case["stopReason"] == "error" and "errorMessage" in case
]


@pytest.mark.parametrize("case", _FAILED_REQUESTS, ids=lambda case: repr(case)[:80])
async def test_every_overflow_wording_compacts_once(case: dict[str, Any]) -> None:
    provider, model = faux(faux_assistant_message([faux_text("S")]))
    failed = attrs.evolve(
        reply(timestamp=9),
        provider=case["provider"],
        stop_reason="error",
        error_message=case["errorMessage"],
    )
    outcome = await compact_after_overflow(
        ContextTracker(), long_transcript(), failed, model, provider.stream_fn
    )
    if case["expected"]:
        assert isinstance(outcome, CompactionResult)
        assert provider.state.call_count == 1
    else:
        assert outcome is None
        assert provider.state.call_count == 0
