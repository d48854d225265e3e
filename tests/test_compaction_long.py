"""A 300-turn conversation on a 32k window stays under the window minus the reserve.

Issue 22, "Done when": the faux model (context window 32,768), a tool whose outputs are
large (about 1,700 tokens each), 300 user turns of one tool call and one answer each. The
check runs before every request: here through the loop's ``prepare_request`` hook calling
:func:`~trio_agent.compaction.compact_if_needed`. When the Agent gets its compaction
option, :func:`drive_with_loop` gets a sibling that drives an ``Agent`` instead, and the
assertions stay as they are.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import attrs
import trio
from test_compaction import assert_paired

from trio_agent import (
    AbortSignal,
    Agent,
    AgentEvent,
    AgentInitialState,
    AgentMessage,
    AgentRequestUpdate,
    AgentTool,
    AgentToolResult,
    AssistantMessageEvent,
    CompactionEvent,
    LlmContext,
    MessageEndEvent,
    Model,
    PrepareRequestContext,
    StreamOptions,
    SystemMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
)
from trio_agent.compaction import (
    DEFAULT_COMPACTION_SETTINGS,
    SUMMARIZATION_SYSTEM_PROMPT,
    CompactionResult,
    CompactionSummary,
    ContextTracker,
    compact_if_needed,
    transcript_tokens,
)
from trio_agent.loop import AgentContext, AgentLoopConfig, run_agent_loop
from trio_agent.testing import (
    FauxProvider,
    assert_event_grammar,
    faux_assistant_message,
    faux_text,
    faux_tool_call,
)

WINDOW = 32_768
TURNS = 300
LIMIT = WINDOW - DEFAULT_COMPACTION_SETTINGS.reserve_tokens


async def read_file(
    tool_call_id: str, params: dict[str, Any], signal: AbortSignal | None, on_update: Any
) -> AgentToolResult:
    await trio.lowlevel.checkpoint()
    line = f"{params['path']}: lorem ipsum dolor sit amet, consectetur adipiscing elit\n"
    return AgentToolResult(content=[TextContent(text=line * 80)])  # about 6,000 characters


READ = AgentTool(
    name="read",
    label="Read",
    description="Read a file",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    execute=read_file,
)


@attrs.define
class Script:
    """The scripted model: a tool call for a prompt, an answer for a tool result, a
    summary for a summary request; it records what each request looked like."""

    provider: FauxProvider = attrs.field(factory=FauxProvider)
    summaries: int = 0
    requests: int = 0
    reported_inputs: list[int] = attrs.field(factory=list)

    def respond(self, context: LlmContext) -> Any:
        first = context.messages[0]
        last = context.messages[-1]
        if isinstance(first, SystemMessage) and first.content == SUMMARIZATION_SYSTEM_PROMPT:
            self.summaries += 1
            text = f"## Goal\nRead files (summary {self.summaries}).\n" + "- [x] done\n" * 60
            return faux_assistant_message([faux_text(text)])
        self.requests += 1
        if isinstance(last, ToolResultMessage):
            return faux_assistant_message([faux_text("That file is fine. " * 15)])
        assert isinstance(last, UserMessage)
        return faux_assistant_message(
            [faux_tool_call("read", {"path": f"/src/file_{self.requests}.py"})]
        )

    async def stream_fn(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        self.provider.append_responses([self.respond(context)])
        summary = context.messages[0].content == SUMMARIZATION_SYSTEM_PROMPT
        async with aclosing(self.provider.stream_fn(model, context, options)) as events:
            async for event in events:
                if event.type == "done" and not summary:
                    usage = event.message.usage
                    self.reported_inputs.append(usage.input + usage.cache_read)
                yield event


@attrs.define
class Observed:
    """What the test checks: the estimate of every request, the compactions, and the
    transcript the runs leave (followed through ``message_end`` events)."""

    estimates: list[int] = attrs.field(factory=list)
    compactions: list[CompactionResult] = attrs.field(factory=list)
    transcript: list[AgentMessage] = attrs.field(factory=list)


async def drive_with_loop(script: Script, model: Model) -> Observed:
    """Plain loop calls; compaction before every request through ``prepare_request``."""
    observed = Observed(transcript=[SystemMessage(content="You read files.", timestamp=0)])
    tracker = ContextTracker()

    async def prepare_request(
        request: PrepareRequestContext, signal: AbortSignal
    ) -> AgentRequestUpdate | None:
        messages = request.context.messages
        assert messages == observed.transcript
        outcome = await compact_if_needed(
            tracker, messages, request.model, script.stream_fn, signal=signal
        )
        update = None
        if isinstance(outcome, CompactionResult):
            observed.compactions.append(outcome)
            observed.transcript = list(outcome.messages)
            update = AgentRequestUpdate(
                context=AgentContext(messages=outcome.messages, tools=request.context.tools)
            )
        else:
            assert outcome is None, outcome
        observed.estimates.append(tracker.tokens())
        assert tracker.tokens() == transcript_tokens(observed.transcript).tokens
        return update

    def emit(event: AgentEvent) -> None:
        if isinstance(event, MessageEndEvent):
            observed.transcript.append(event.message)

    config = AgentLoopConfig(model=model, prepare_request=prepare_request)
    for turn in range(TURNS):
        prompt = UserMessage(content=f"Turn {turn}: please read the next file and check it.")
        context = AgentContext(messages=list(observed.transcript), tools=[READ])
        await run_agent_loop([prompt], context, config, emit, stream_fn=script.stream_fn)
    return observed


async def test_300_turns_never_exceed_the_window_minus_the_reserve() -> None:
    script = Script()
    model = attrs.evolve(script.provider.get_model(), context_window=WINDOW)
    observed = await drive_with_loop(script, model)

    assert script.requests == 2 * TURNS
    assert len(observed.estimates) == 2 * TURNS
    assert max(observed.estimates) <= LIMIT
    # What the provider itself counted agrees.
    assert len(script.reported_inputs) == 2 * TURNS
    assert max(script.reported_inputs) <= LIMIT
    # It compacted, each time with one summary request (two when the cut split a turn).
    assert len(observed.compactions) > 20
    assert len(observed.compactions) <= script.summaries <= 2 * len(observed.compactions)
    assert all(c.tokens_after < c.tokens_before for c in observed.compactions)
    transcript = observed.transcript
    assert_paired(transcript)
    assert sum(isinstance(m, CompactionSummary) for m in transcript) == 1
    assert isinstance(transcript[0], SystemMessage)
    assert transcript[0].tools_added is not None
    assert [t.name for t in transcript[0].tools_added] == ["read"]
    assert transcript_tokens(transcript).tokens <= LIMIT


async def test_300_turns_with_the_agents_automatic_compaction() -> None:
    """The same conversation through ``Agent(compaction=True)``: the check runs inside
    the loop, before every request, and listeners see each compaction."""
    script = Script()
    model = attrs.evolve(script.provider.get_model(), context_window=WINDOW)
    agent = Agent(
        AgentInitialState(model=model, system_prompt="You read files.", tools=[READ]),
        stream_fn=script.stream_fn,
        compaction=True,
    )
    events: list[AgentEvent] = []
    agent.subscribe(events.append)
    for turn in range(TURNS):
        await agent.prompt(f"Turn {turn}: please read the next file and check it.")

    assert script.requests == 2 * TURNS
    assert max(script.reported_inputs) <= LIMIT
    compactions = [e for e in events if isinstance(e, CompactionEvent)]
    assert len(compactions) > 20
    assert all(e.reason == "threshold" and e.messages is not None for e in compactions)
    assert_event_grammar(events)
    transcript = agent.state.messages
    assert_paired(transcript)
    assert sum(isinstance(m, CompactionSummary) for m in transcript) == 1
    assert transcript_tokens(transcript).tokens <= LIMIT
