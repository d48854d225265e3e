"""Sessions cross between trio_agent and pi-coding-agent 1.6.0's real SessionManager.

pi writes a session (every kind of entry, a compaction, a branch): trio_agent opens it with
the same context as pi's ``buildSessionContext()`` and goes on with it. trio_agent writes
one (an agent's run, its journal, a compaction, a branch, an unknown entry): pi opens it
with the same context, goes on, and trio_agent reads pi's additions. The Node driver is
``compare/sessions/pi_sessions.mjs``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_agent import Agent, AgentInitialState, UserMessage
from trio_agent.serialization import to_dict
from trio_agent.sessions import (
    JsonlStore,
    Session,
    UnknownEntry,
    attach_agent,
)
from trio_agent.sessions._entries import encode_entry
from trio_agent.testing import FauxProvider, faux_assistant_message, faux_tool_call

from ._kill_worker import tools

DRIVER_DIR = Path(__file__).resolve().parents[2] / "compare" / "sessions"
PACKAGE = DRIVER_DIR / "node_modules" / "@earendil-works" / "pi-coding-agent" / "package.json"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not PACKAGE.exists(),
    reason="needs Node 20+ and pi-coding-agent 1.6.0: run `npm ci` in compare/sessions",
)


async def pi(command: str, target: Path) -> Any:
    result = await trio.run_process(
        ["node", str(DRIVER_DIR / "pi_sessions.mjs"), command, str(target)],
        capture_stdout=True,
    )
    return json.loads(result.stdout)


def same_context(session: Session, seen_by_pi: dict[str, Any]) -> None:
    context = session.context()
    assert [to_dict(m) for m in context.messages] == seen_by_pi["context"]["messages"]
    assert context.thinking_level == seen_by_pi["context"]["thinkingLevel"]
    model = seen_by_pi["context"]["model"]
    assert context.model == (None if model is None else (model["provider"], model["modelId"]))
    assert session.leaf_id == seen_by_pi["leafId"]


def session_file(directory: Path, session_id: str) -> Path:
    (path,) = directory.glob(f"*_{session_id}.jsonl")
    return path


async def test_a_session_written_by_pi_opens_and_continues(tmp_path: Path) -> None:
    written = await pi("write", tmp_path)
    store = JsonlStore(tmp_path)
    session = await store.open(written["id"])
    seen = await pi("read", Path(written["file"]))
    assert [encode_entry(e) for e in session.entries] == seen["entries"]
    same_context(session, seen)
    kinds = {type(e).__name__ for e in session.entries}
    assert {"CompactionEntry", "BranchSummaryEntry", "LabelEntry", "UnknownEntry"} <= kinds

    faux = FauxProvider([faux_assistant_message("trio_agent answers")])
    agent = Agent(initial_state=AgentInitialState(model=faux.get_model()), stream_fn=faux.stream_fn)
    async with store.open_for_writing(written["id"]) as writer, attach_agent(agent, writer):
        await agent.prompt("from trio_agent")
    (request,) = faux.requests
    assert [to_dict(m) for m in request.context.messages[:-1]] == seen["context"]["messages"]
    again = await pi("read", Path(written["file"]))
    same_context(await store.open(written["id"]), again)
    assert again["context"]["messages"][-1]["content"][0]["text"] == "trio_agent answers"


async def test_a_session_written_by_trio_agent_opens_in_pi(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.create(session_id="from-trio", cwd="/work/interop")
    faux = FauxProvider(
        [
            faux_assistant_message(
                [faux_tool_call("lookup", {"n": 1}, id="call-1")], stop_reason="toolUse"
            ),
            faux_assistant_message("looked"),
        ]
    )
    agent = Agent(
        initial_state=AgentInitialState(
            system_prompt="Be brief.", model=faux.get_model(), tools=tools(0)
        ),
        stream_fn=faux.stream_fn,
    )
    async with store.open_for_writing("from-trio") as session:
        async with attach_agent(agent, session):
            agent.state.thinking_level = "low"
            await agent.prompt("look it up")
        first_user = next(e for e in session.current_branch() if e.type == "message")
        await session.append_label(first_user.id, "start")
        await session.append_custom("app-state", {"x": 1})
        await session.append([UnknownEntry(data={"type": "future_kind", "v": 2})])
        kept = session.current_branch()[-6]
        await session.append_compaction("what happened", kept.id, 999)
        await session.append_messages([UserMessage(content="after", timestamp=5)])
        await session.branch_with_summary(kept.id, "a branch left behind")
        await session.append_messages([UserMessage(content="on the branch", timestamp=6)])
    path = session_file(tmp_path, "from-trio")
    seen = await pi("read", path)
    loaded = await store.open("from-trio")
    assert [encode_entry(e) for e in loaded.entries] == seen["entries"]
    same_context(loaded, seen)

    continued = await pi("continue", path)
    await loaded.reload()
    same_context(loaded, continued)
    assert continued["context"]["messages"][-1]["content"][0]["text"] == "pi answers"
