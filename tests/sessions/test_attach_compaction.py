"""A compaction of an attached agent's transcript is pi's ``compaction`` entry, and a
reopened session resumes from the summary with the kept messages."""

from __future__ import annotations

from pathlib import Path

import attrs

from trio_agent import Agent, AgentInitialState, UserMessage, content_text
from trio_agent.compaction import CompactionResult, CompactionSettings
from trio_agent.sessions import CompactionEntry, attach_agent, open_store
from trio_agent.testing import FauxProvider, faux_assistant_message

LONG = "a sentence that takes some room in the context window. " * 20


async def test_a_compaction_is_a_compaction_entry_and_resumes(tmp_path: Path) -> None:
    provider = FauxProvider(
        [faux_assistant_message(f"answer {i}: " + LONG) for i in range(6)]
        + [faux_assistant_message("## Goal\nTalk about sentences.")]
    )
    model = attrs.evolve(provider.get_model(), context_window=100_000)
    settings = CompactionSettings(reserve_tokens=200, keep_recent_tokens=300)
    async with open_store(f"sqlite:{tmp_path / 's.db'}") as store:
        session_id = (await store.create()).id
        async with store.open_for_writing(session_id) as session:
            agent = Agent(
                AgentInitialState(model=model, system_prompt="You talk."),
                stream_fn=provider.stream_fn,
                compaction=settings,
            )
            async with attach_agent(agent, session):
                for turn in range(6):
                    await agent.prompt(f"question {turn}: " + LONG)
                outcome = await agent.compact()
                assert isinstance(outcome, CompactionResult)
                kept_texts = [
                    content_text(m.content)  # type: ignore[union-attr]
                    for m in agent.state.messages[2:]
                ]
        stored = await store.open(session_id)
    entries = [e for e in stored.current_branch() if isinstance(e, CompactionEntry)]
    assert len(entries) == 1
    assert entries[0].summary == "## Goal\nTalk about sentences."
    assert entries[0].tokens_before == outcome.tokens_before
    resumed = stored.messages()
    assert resumed[0].role == "system"
    assert isinstance(resumed[1], UserMessage)
    assert "Talk about sentences." in content_text(resumed[1].content)
    assert [content_text(m.content) for m in resumed[2:]] == kept_texts  # type: ignore[union-attr]
