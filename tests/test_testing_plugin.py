"""The opt-in pytest plugin works in a fresh project: pytest runs in a temporary folder
holding only a test file, with the installed package and ``-p
trio_agent.testing.pytest_plugin``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

TEST_FILE = """
from __future__ import annotations

import json

import httpx
import pytest
import trio

from trio_agent import LlmContext, StreamOptions, UserMessage, Model
from trio_agent.models import Models
from trio_agent.testing import (
    FauxProvider, assert_event_grammar, assert_event_types, faux_assistant_message, faux_step,
)

pytestmark = pytest.mark.trio


async def test_agent_factory_and_recorder(agent_factory, faux_provider, event_recorder):
    faux_provider.set_responses([faux_assistant_message("hello")])
    agent = agent_factory(system_prompt="Be brief.")
    await agent.prompt("hi")
    assert_event_grammar(event_recorder)
    assert event_recorder.types[-1] == "agent_end"
    assert [r.attempt for r in faux_provider.requests] == [0]


async def test_a_slow_step_on_the_mock_clock(agent_factory, faux_provider, autojump_clock):
    faux_provider.set_responses([faux_step(faux_assistant_message("late"), delay=30)])
    await agent_factory().prompt("hi")
    assert trio.current_time() == 30.0


async def test_left_over_steps_fail(agent_factory, faux_provider):
    faux_provider.set_responses([faux_assistant_message("a"), faux_assistant_message("b")])
    await agent_factory().prompt("hi")


def handler(request: httpx.Request) -> httpx.Response:
    choice = {"index": 0, "delta": {"content": "recorded"}, "finish_reason": "stop"}
    body = f"data: {json.dumps({'id': 'c1', 'choices': [choice]})}\\n\\ndata: [DONE]\\n\\n"
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


MODEL = Model(id="m", name="m", api="openai-completions", provider="local",
              base_url="http://api.example/v1", context_window=1000, max_tokens=100)


async def answer(client: httpx.AsyncClient, text: str = "hi") -> str:
    message = await Models(http_client=client).complete_simple(
        MODEL,
        LlmContext(messages=[UserMessage(content=text)]),
        StreamOptions(api_key="sk-abcdefgh12345678"),
    )
    return message.error_message or message.content[0].text


@pytest.mark.cassette(name="shared.json", transport=httpx.MockTransport(handler))
async def test_cassette_records(cassette_client, cassette):
    assert await answer(cassette_client) == "recorded"


@pytest.mark.cassette(name="shared.json")
async def test_cassette_replays(cassette_client, cassette):
    assert cassette.mode == "none"
    assert await answer(cassette_client) == "recorded"


@pytest.mark.cassette(name="shared.json")
async def test_cassette_mismatch_fails(cassette_client):
    await answer(cassette_client, "something else")
"""


def run_pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHONPATH"))}
    env["COLUMNS"] = "400"  # whole lines in the short summary
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "trio_agent.testing.pytest_plugin", "-q",
         "-p", "no:cacheprovider", "-W", "error", *args],
        cwd=folder, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def test_the_plugin_in_a_fresh_project(tmp_path: Path) -> None:
    (tmp_path / "test_agent.py").write_text(textwrap.dedent(TEST_FILE))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test_agent.py"]

    record = run_pytest(tmp_path, "--cassette-mode=once", "-k", "records")
    assert record.returncode == 0, record.stdout + record.stderr
    cassette = tmp_path / "cassettes" / "test_agent" / "shared.json"
    assert cassette.exists()
    assert "sk-abcdefgh12345678" not in cassette.read_text()

    result = run_pytest(tmp_path, "-k", "not records", "-rA")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    summary = output.strip().splitlines()[-1]
    assert summary.startswith("1 failed, 4 passed, 1 deselected, 1 error in "), output
    assert "PASSED test_agent.py::test_agent_factory_and_recorder" in output
    assert "PASSED test_agent.py::test_a_slow_step_on_the_mock_clock" in output
    assert "PASSED test_agent.py::test_cassette_replays" in output
    assert (
        "ERROR test_agent.py::test_left_over_steps_fail - AssertionError: "
        "1 scripted faux step left over after 1 request: message 'b' (stop)"
    ) in output
    assert (
        "difference: body at $.messages[0].content: recorded 'hi', got 'something else'"
    ) in output
    assert "FAILED test_agent.py::test_cassette_mismatch_fails - " in output
