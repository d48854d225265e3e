"""The cut point and the compaction preparation against pi-coding-agent 1.6.0 itself.

Random transcripts (``test_compaction.random_transcript``) go through
``compare/context/cut_points.mjs``, which runs pi's ``findCutPoint``,
``prepareCompaction``, ``estimateTokens`` and ``serializeConversation`` on them in Node;
trio_agent.compaction must decide the same. Needs ``node`` and the npm packages:
``cd compare/context && npm ci``.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_compaction import Note, random_transcript

from trio_agent import AgentMessage
from trio_agent._compaction import _file_details
from trio_agent.compaction import (
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    SUMMARIZATION_SYSTEM_PROMPT,
    CompactionSummary,
    convert_to_llm,
    estimate_tokens,
    find_cut_point,
    prepare_compaction,
    serialize_conversation,
)
from trio_agent.serialization import to_dict

HERE = Path(__file__).resolve().parent.parent / "compare" / "context"
DRIVER = HERE / "cut_points.mjs"
PACKAGE = HERE / "node_modules" / "@earendil-works" / "pi-coding-agent" / "package.json"
KEEPS = (1, 10, 100, 500, 2_000, 5_000, 20_000)
CASES = 600


def _node() -> str:
    node = shutil.which("node")
    if node is None or not PACKAGE.exists():
        pytest.skip(
            "needs Node.js and pi-coding-agent 1.6.0: install node, then "
            "`cd compare/context && npm ci`"
        )
    return node


def _wire(message: AgentMessage) -> dict[str, Any]:
    if isinstance(message, Note):
        # An application message the model never sees is, in a pi session, a custom
        # entry; the driver turns this role into one.
        return {"role": "custom-entry", "text": message.text, "timestamp": message.timestamp}
    data = to_dict(message)
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def pi_results() -> tuple[list[list[AgentMessage]], list[int], dict[str, Any]]:
    node = _node()
    rng = random.Random(20261204)
    transcripts = [random_transcript(rng, notes=True) for _ in range(CASES)]
    keeps = [rng.choice(KEEPS) for _ in range(CASES)]
    payload = {
        "cases": [
            {"messages": [_wire(m) for m in messages], "keep": keep}
            for messages, keep in zip(transcripts, keeps, strict=True)
        ]
    }
    completed = subprocess.run(
        [node, str(DRIVER)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
        cwd=HERE,
        timeout=120,
    )
    output: dict[str, Any] = json.loads(completed.stdout)
    return transcripts, keeps, output


def test_the_texts_are_pi_s(pi_results: Any) -> None:
    _, _, output = pi_results
    assert output["constants"] == {
        "SUMMARIZATION_SYSTEM_PROMPT": SUMMARIZATION_SYSTEM_PROMPT,
        "COMPACTION_SUMMARY_PREFIX": COMPACTION_SUMMARY_PREFIX,
        "COMPACTION_SUMMARY_SUFFIX": COMPACTION_SUMMARY_SUFFIX,
    }


def test_estimate_tokens_as_pi(pi_results: Any) -> None:
    transcripts, _, output = pi_results
    for messages, result in zip(transcripts, output["results"], strict=True):
        assert [estimate_tokens(m) for m in messages] == result["tokens"]


def test_find_cut_point_as_pi(pi_results: Any) -> None:
    transcripts, keeps, output = pi_results
    for messages, keep, result in zip(transcripts, keeps, output["results"], strict=True):
        start = next((i + 1 for i, m in enumerate(messages) if isinstance(m, CompactionSummary)), 0)
        cut = find_cut_point(messages, start, len(messages), keep)
        assert {
            "firstKeptIndex": cut.first_kept_index,
            "turnStartIndex": cut.turn_start_index,
            "isSplitTurn": cut.is_split_turn,
        } == result["cut"], (keep, [m.role for m in messages])


def test_prepare_compaction_as_pi(pi_results: Any) -> None:
    transcripts, keeps, output = pi_results
    prepared = 0
    for messages, keep, result in zip(transcripts, keeps, output["results"], strict=True):
        ours = prepare_compaction(messages, keep_recent_tokens=keep)
        theirs = result["prepared"]
        if theirs is None:
            assert ours is None
            continue
        prepared += 1
        assert ours is not None
        assert ours.first_kept_index == theirs["firstKeptIndex"]
        assert ours.is_split_turn == theirs["isSplitTurn"]
        assert ours.previous_summary == theirs["previousSummary"]
        summarized = [m for m in ours.messages_to_summarize if not isinstance(m, Note)]
        prefix = [m for m in ours.turn_prefix_messages if not isinstance(m, Note)]
        assert [_wire(m) for m in summarized] == theirs["messagesToSummarize"]
        assert [_wire(m) for m in prefix] == theirs["turnPrefixMessages"]
        assert serialize_conversation(convert_to_llm(summarized)) == theirs["serialized"]
        assert serialize_conversation(convert_to_llm(prefix)) == theirs["serializedPrefix"]
        files = _file_details(ours)
        assert (files.read_files, files.modified_files) == (
            theirs["readFiles"],
            theirs["modifiedFiles"],
        )
    # The sample exercises both outcomes, split turns and previous compactions.
    assert prepared > CASES // 4
    results = [r["prepared"] for r in output["results"] if r["prepared"] is not None]
    assert any(r["isSplitTurn"] for r in results)
    assert any(r["previousSummary"] for r in results)
