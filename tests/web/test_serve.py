"""``trio_agent.web.main``, the command ``trio-agent serve``: it serves the page on
127.0.0.1, takes the model options of ``chat``, and Ctrl-C stops it."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import httpx

from trio_agent import Agent

_MAIN = "import sys; from trio_agent.web import main; sys.exit(main(sys.argv[1:]))"


def test_serve_runs_until_ctrl_c() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _MAIN, "--port", "0", "--tokens-per-second", "1000"],
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal sends it, even when this test runs with SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stderr is not None
        line = ""
        while "chat on" not in line:
            line = process.stderr.readline()
            assert line, "the server exited"
        match = re.search(r"chat on (http://127\.0\.0\.1:\d+)/", line)
        assert match is not None, line
        url = match.group(1)
        with httpx.Client(base_url=url) as http:
            assert "<textarea" in http.get("/").text
            session_id = http.post("/api/sessions").json()["id"]
            reply = http.post(f"/api/sessions/{session_id}/runs", json={"prompt": "What is 6*7?"})
            assert '"toolCallName":"calculate"' in reply.text
            messages = http.get(f"/api/sessions/{session_id}").json()["messages"]
            assert messages[-1]["content"] == "6*7 = 42."
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


def test_a_bad_model_is_a_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _MAIN, "--model", "faux/other"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "unknown model 'other' for provider 'faux'" in result.stderr


def test_main_returns_the_usage_status() -> None:
    from trio_agent.web import main

    assert main(["--store", "nope:x", "--port", "0"]) == 2


def test_the_model_options_of_chat_select_a_real_provider() -> None:
    from trio_agent.web._serve import _agent_factory, build_parser

    args = build_parser().parse_args(
        ["--model", "openai/gpt-4o-mini", "--api-key", "sk-test", "--thinking", "low"]
    )
    agent = _agent_factory(args)("session-1")
    assert isinstance(agent, Agent)
    assert (agent.state.model.provider, agent.state.model.id) == ("openai", "gpt-4o-mini")
    assert agent.state.thinking_level == "low"
    assert agent.state.tools == []  # the demo tools only with --demo-tools
    assert agent.get_api_key is not None and agent.get_api_key("openai") == "sk-test"
    assert agent.session_id == "session-1"
