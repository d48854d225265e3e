"""The ``trio-agent`` program: in-process (``main`` / ``run_program``) and as a subprocess."""

from __future__ import annotations

import errno
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agent
from trio_agent import (
    AbortController,
    AgentEvent,
    AgentTool,
    AssistantMessage,
    LlmContext,
    Message,
    MessageUpdateEvent,
    StreamOptions,
    TextContent,
    TextDeltaEvent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    content_text,
)
from trio_agent._cli import Renderer, UsageError, build_parser, main, read_lines, run_program
from trio_agent._demo import (
    DEMO_TOOLS,
    DemoModel,
    calculate,
    demo_response,
    evaluate_arithmetic,
    get_time,
    get_weather,
)
from trio_agent.models import FauxState
from trio_agent.serialization import from_json, load_transcript

WEATHER_PROMPT = "What is the weather in Paris?"
WEATHER_OUT = (
    "Let me check the weather in Paris.\n"
    "The weather in Paris: partly cloudy, 18 degrees Celsius, wind 11 km/h (demo data).\n"
)
WEATHER_ERR = (
    '[tool call] get_weather {"city":"Paris"}\n'
    "[tool result] get_weather (0 ms): partly cloudy, 18 degrees Celsius, wind 11 km/h\n"
)
HELLO_OUT = (
    'You said: "hello". I am the offline demo model of trio-agent, so I only know a few '
    'tricks: ask me about the weather ("What is the weather in Paris?"), a calculation '
    '("What is 6 * 7?") or the time. Run with --model provider/id to talk to a real '
    "model.\n"
)
ADD_OUT = "Let me calculate 3 + 4.\n3 + 4 = 7.\n"
ADD_ERR = '[tool call] calculate {"expression":"3 + 4"}\n[tool result] calculate (0 ms): 7\n'

POSIX_ONLY = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
_DURATION = re.compile(r" \(\d+ ms\):")


def _ms(text: str) -> str:
    """Tool durations on the real clock vary: write them all as 0 ms."""
    return _DURATION.sub(" (0 ms):", text)


def _python_m(*args: str) -> list[str]:
    return [sys.executable, "-m", "trio_agent", *args]


def _subprocess_env() -> dict[str, str]:
    # Run against this checkout whatever the current directory, and never with real keys.
    root = str(Path(__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


async def _run(
    argv: list[str],
    *,
    lines: trio.MemoryReceiveChannel[str] | None = None,
    interactive: bool | None = None,
    handle_signals: bool = False,
) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    status = await run_program(
        build_parser().parse_args(argv),
        stdin=io.StringIO(""),
        stdout=stdout,
        stderr=stderr,
        handle_signals=handle_signals,
        lines=lines,
        interactive=interactive,
    )
    return status, stdout.getvalue(), stderr.getvalue()


def _channel_of(lines: list[str]) -> trio.MemoryReceiveChannel[str]:
    """The lines of a piped chat, then the end of input."""
    send, receive = trio.open_memory_channel[str](len(lines))
    for line in lines:
        send.send_nowait(line + "\n")
    send.close()
    return receive


# ---------------------------------------------------------------------------------------
# run


async def test_run_streams_the_weather_answer_and_tool_lines(
    autojump_clock: trio.abc.Clock,
) -> None:
    start = trio.current_time()
    status, out, err = await _run(["run", WEATHER_PROMPT])
    assert (status, out, err) == (0, WEATHER_OUT, WEATHER_ERR)
    # Paced at 200 tokens/s (34 tokens over two responses) so streaming is visible.
    assert trio.current_time() - start == pytest.approx(0.17)


async def test_run_streams_text_in_several_deltas(autojump_clock: trio.abc.Clock) -> None:
    writes: list[str] = []

    class Recording(io.StringIO):
        def write(self, text: str) -> int:
            writes.append(text)
            return super().write(text)

    args = build_parser().parse_args(["run", "hello"])
    status = await run_program(
        args, stdin=io.StringIO(), stdout=Recording(), stderr=io.StringIO(), handle_signals=False
    )
    assert status == 0
    assert "".join(writes) == HELLO_OUT
    assert len(writes) > 10


async def test_run_without_tools_gets_no_tool_calls(autojump_clock: trio.abc.Clock) -> None:
    status, out, err = await _run(["run", "--no-tools", "--system", "Be brief.", "hello"])
    assert (status, out, err) == (0, HELLO_OUT, "")


def test_main_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--tokens-per-second", "100000", WEATHER_PROMPT]) == 0
    captured = capsys.readouterr()
    assert (captured.out, _ms(captured.err)) == (WEATHER_OUT, WEATHER_ERR)


def test_main_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--json", "--tokens-per-second", "100000", WEATHER_PROMPT]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    lines = captured.out.splitlines()
    events = [from_json(line, AgentEvent) for line in lines]
    types = [event.type for event in events]
    assert types[0] == "agent_start"
    assert types[-1] == "agent_end"
    assert types.count("turn_start") == 2
    assert types.count("tool_execution_end") == 1
    assert all(json.loads(line)["type"] == kind for line, kind in zip(lines, types, strict=True))
    ends = [e for e in events if e.type == "tool_execution_end"]
    assert ends[0].tool_name == "get_weather"


def test_main_help_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "usage: trio-agent" in capsys.readouterr().out
    assert main([]) == 2
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err
    assert main(["run", "--model", "gpt", "hi"]) == 2
    assert capsys.readouterr().err.endswith(
        "trio-agent run: error: argument --model: expected PROVIDER/ID "
        "(e.g. openai/gpt-4o-mini), got 'gpt'\n"
    )


def test_main_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (f"trio-agent {trio_agent.__version__}\n", "")
    assert trio_agent.__version__ == "0.1.0"


def test_main_unknown_model_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--model", "openai/gpt-9", "hi"]) == 2
    err = capsys.readouterr().err
    # Reported like argparse's own errors: through the subcommand's parser.
    assert err.startswith("usage: trio-agent run [-h] ")
    assert err.splitlines()[-1] == (
        "trio-agent run: error: unknown model 'openai/gpt-9'; known openai models: gpt-4o, "
        "gpt-4o-mini, gpt-4.1, gpt-4.1-mini, gpt-4.1-nano, o3, o3-mini, o4-mini, gpt-5, "
        "gpt-5-mini, gpt-5-nano (for a model of an OpenAI-compatible server also pass "
        "--base-url URL)"
    )


async def test_unknown_provider_is_named() -> None:
    with pytest.raises(UsageError) as caught:
        await _run(["run", "--model", "nope/llama3", "hi"])
    assert str(caught.value) == (
        "unknown model 'nope/llama3': no provider 'nope' in the catalog (known: faux, "
        "anthropic, deepseek, groq, openai, openrouter); for a model of an "
        "OpenAI-compatible server also pass --base-url URL"
    )


@pytest.mark.parametrize("option", [["--base-url", "http://x/v1"], ["--api-key", "k"]])
async def test_provider_options_need_a_model(option: list[str]) -> None:
    with pytest.raises(UsageError, match=f"^{option[0]} needs --model PROVIDER/ID$"):
        await _run(["run", *option, "hi"])


def test_main_reports_later_usage_errors_through_the_subcommand(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["chat", "--api", "openai-responses"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: trio-agent chat [-h] ")
    assert captured.err.endswith("\ntrio-agent chat: error: --api needs --model PROVIDER/ID\n")


async def test_unknown_faux_model_is_named() -> None:
    with pytest.raises(UsageError) as caught:
        await _run(["run", "--model", "faux/other", "hi"])
    assert str(caught.value) == "unknown model 'other' for provider 'faux' (known: demo)"


def test_main_unknown_faux_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--model", "faux/other", "hi"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.endswith(
        "\ntrio-agent run: error: unknown model 'other' for provider 'faux' (known: demo)\n"
    )


@pytest.mark.parametrize(
    "url", ["localhost:11434/v1", "127.0.0.1:8080", "ftp://example.com/v1", "http://", "/v1"]
)
def test_main_base_url_needs_an_http_scheme(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--model", "ollama/llama3.2", "--base-url", url, "hi"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: trio-agent run [-h] ")
    assert captured.err.endswith(
        "\ntrio-agent run: error: argument --base-url: expected an http:// or https:// URL "
        f"(e.g. http://localhost:11434/v1), got {url!r}\n"
    )


@pytest.mark.parametrize("url", ["http://localhost:11434/v1", "HTTPS://example.com"])
def test_base_url_with_an_http_scheme_is_accepted(url: str) -> None:
    args = build_parser().parse_args(["run", "--model", "x/y", "--base-url", url, "hi"])
    assert args.base_url == url


async def test_explicit_demo_model(autojump_clock: trio.abc.Clock) -> None:
    assert await _run(["run", "--model", "faux/demo", WEATHER_PROMPT]) == (
        0,
        WEATHER_OUT,
        WEATHER_ERR,
    )


async def test_missing_api_key_is_an_error_result(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    status, out, err = await _run(["run", "--model", "openai/gpt-4o-mini", "hi"])
    assert (status, out, err) == (
        1,
        "",
        "[error] No API key for provider: openai (set OPENAI_API_KEY or pass api_key)\n",
    )


# ---------------------------------------------------------------------------------------
# A real OpenAI-compatible server on loopback (the Ollama / llama.cpp path)


class _CompatServer:
    """Answers every chat-completions request with one streamed text and records it."""

    def __init__(self) -> None:
        self.port = 0
        self.requests: list[tuple[str, dict[str, str], dict[str, object]]] = []
        self.unavailable = 0
        """How many of the next requests get a retryable error instead of an answer."""
        self.unavailable_status = b"503 Service Unavailable"

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in header_lines)
        }
        while len(body) < int(headers.get("content-length", "0")):
            body += await stream.receive_some(65536)
        self.requests.append((request_line, headers, json.loads(body)))
        if self.unavailable:
            self.unavailable -= 1
            error = b'{"error":{"message":"try again"}}'
            await stream.send_all(
                b"HTTP/1.1 %s\r\ncontent-type: application/json\r\n"
                b"retry-after-ms: 1\r\nconnection: close\r\n"
                b"content-length: %d\r\n\r\n%s" % (self.unavailable_status, len(error), error)
            )
            await stream.aclose()
            return
        chunk = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": "llama3",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi there."}}],
        }
        final = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": "llama3",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
        sse = "".join(f"data: {json.dumps(frame)}\n\n" for frame in (chunk, final))
        sse += "data: [DONE]\n\n"
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
            + f"content-length: {len(sse)}\r\n\r\n{sse}".encode()
        )
        await stream.aclose()


@pytest.fixture
async def compat_server(nursery: trio.Nursery) -> AsyncIterator[_CompatServer]:
    server = _CompatServer()
    await nursery.start(server.serve)
    yield server


async def test_custom_openai_compatible_model(compat_server: _CompatServer) -> None:
    base_url = f"http://127.0.0.1:{compat_server.port}/v1"
    argv = ["run", "--model", "ollama/llama3", "--base-url", base_url, "--no-tools", "hello"]
    assert await _run(argv) == (0, "Hi there.\n", "")
    [(request_line, headers, body)] = compat_server.requests
    assert request_line == "POST /v1/chat/completions HTTP/1.1"
    # A local server needs no key; the placeholder satisfies the provider's check.
    assert headers["authorization"] == "Bearer none"
    assert body["model"] == "llama3"
    assert body["stream"] is True


async def test_api_key_option_is_sent_and_never_printed(compat_server: _CompatServer) -> None:
    base_url = f"http://127.0.0.1:{compat_server.port}/v1"
    argv = ["run", "--json", "--model", "local/llama3", "--base-url", base_url]
    status, out, err = await _run([*argv, "--api-key", "sk-secret-1", "hello"])
    assert (status, err) == (0, "")
    assert compat_server.requests[0][1]["authorization"] == "Bearer sk-secret-1"
    assert "sk-secret-1" not in out


async def test_a_real_model_gets_no_demo_tools_unless_asked(compat_server: _CompatServer) -> None:
    base_url = f"http://127.0.0.1:{compat_server.port}/v1"
    argv = ["run", "--model", "local/llama3", "--base-url", base_url]
    assert await _run([*argv, "hello"]) == (0, "Hi there.\n", "")
    assert await _run([*argv, "--demo-tools", "hello"]) == (0, "Hi there.\n", "")
    without, with_tools = (body for _, _, body in compat_server.requests)
    assert "tools" not in without
    messages = without["messages"]
    assert isinstance(messages, list)
    assert messages[0] == {"role": "system", "content": "You are a helpful assistant."}
    tools = with_tools["tools"]
    assert isinstance(tools, list)
    assert [tool["function"]["name"] for tool in tools] == ["get_weather", "calculate", "get_time"]


async def test_temperature_reaches_the_request(compat_server: _CompatServer) -> None:
    base_url = f"http://127.0.0.1:{compat_server.port}/v1"
    argv = ["run", "--model", "local/llama3", "--base-url", base_url, "--temperature", "0.25"]
    assert await _run([*argv, "hello"]) == (0, "Hi there.\n", "")
    [(_, _, body)] = compat_server.requests
    assert body["temperature"] == 0.25


async def test_max_retries_retries_an_unavailable_server(compat_server: _CompatServer) -> None:
    base_url = f"http://127.0.0.1:{compat_server.port}/v1"
    argv = ["run", "--model", "local/llama3", "--base-url", base_url]
    compat_server.unavailable = 2
    assert await _run([*argv, "--max-retries", "2", "hello"]) == (0, "Hi there.\n", "")
    assert len(compat_server.requests) == 3
    compat_server.unavailable = 2
    status, out, err = await _run([*argv, "--max-retries", "1", "hello"])
    assert (status, out, err) == (1, "", '[error] 503: {"message":"try again"}\n')
    assert len(compat_server.requests) == 5


async def test_two_retries_by_default_and_a_rate_limit_names_the_option(
    compat_server: _CompatServer,
) -> None:
    base_url = f"http://127.0.0.1:{compat_server.port}/v1"
    argv = ["run", "--model", "local/llama3", "--base-url", base_url]
    compat_server.unavailable_status = b"429 Too Many Requests"
    compat_server.unavailable = 2
    assert await _run([*argv, "hello"]) == (0, "Hi there.\n", "")
    assert len(compat_server.requests) == 3
    compat_server.unavailable = 3
    status, out, err = await _run([*argv, "hello"])
    assert (status, out, err) == (
        1,
        "",
        '[error] 429: {"message":"try again"} (retried 2 times; a larger --max-retries '
        "waits longer for the limit)\n",
    )
    compat_server.unavailable = 1
    status, out, err = await _run([*argv, "--max-retries", "0", "hello"])
    assert (status, out, err) == (
        1,
        "",
        '[error] 429: {"message":"try again"} (not retried; --max-retries N retries a '
        "rate-limited request)\n",
    )
    assert len(compat_server.requests) == 3 + 3 + 1


def test_max_retries_default_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert (
        "--max-retries N retries of a provider request that failed before its answer "
        "started: rate limits (429), server errors (5xx), lost connections (default: 2)"
    ) in help_text


async def test_a_key_is_sent_only_to_the_model_it_was_given_for(
    compat_server: _CompatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    base_url = f"http://127.0.0.1:{compat_server.port}/v1"
    # The key of the local server is not sent to OpenAI after /model (nor is the
    # placeholder of a server without a key); it is sent again after switching back.
    no_key = "No API key for provider: openai (set OPENAI_API_KEY or pass api_key)"
    for key_option, sent in (["--api-key", "sk-local"], "Bearer sk-local"), ([], "Bearer none"):
        compat_server.requests.clear()
        lines = ["hello", "/model openai/gpt-4o-mini", "hello", "/model local/llama3", "hello"]
        argv = ["chat", "--model", "local/llama3", "--base-url", base_url, *key_option]
        status, out, err = await _run(argv, lines=_channel_of(lines))
        assert (status, out) == (0, "Hi there.\nHi there.\n")
        assert err == (
            "[model] openai/gpt-4o-mini (tools: none)\n"
            f"[error] {no_key}\n"
            "[model] local/llama3 (tools: none)\n"
        )
        assert [headers["authorization"] for _, headers, _ in compat_server.requests] == [
            sent,
            sent,
        ]


async def test_a_key_for_a_catalog_model_goes_to_its_provider_only(
    compat_server: _CompatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A catalog model pointed at another server with --base-url: the key given for it
    # goes to that server, never to the provider's own address (a later /model).
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    base_url = f"http://127.0.0.1:{compat_server.port}/v1"
    argv = ["chat", "--model", "groq/llama-3.1-8b-instant", "--base-url", base_url]
    lines = ["hello", "/model groq/qwen/qwen3-32b", "hello", "/model openai/gpt-4o", "hello"]
    status, out, err = await _run([*argv, "--api-key", "sk-1"], lines=_channel_of(lines))
    assert (status, out) == (0, "Hi there.\n")
    assert err == (
        "[model] groq/qwen/qwen3-32b (tools: none)\n"
        "[error] No API key for provider: groq (set GROQ_API_KEY or pass api_key)\n"
        "[model] openai/gpt-4o (tools: none)\n"
        "[error] No API key for provider: openai (set OPENAI_API_KEY or pass api_key)\n"
    )
    assert [headers["authorization"] for _, headers, _ in compat_server.requests] == ["Bearer sk-1"]


# ---------------------------------------------------------------------------------------
# Sessions


async def test_session_is_resumed(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    session = tmp_path / "chat.jsonl"
    assert await _run(["run", "--session", str(session), WEATHER_PROMPT]) == (
        0,
        WEATHER_OUT,
        WEATHER_ERR,
    )
    first = load_transcript(session)
    assert [m.role for m in first] == ["system", "user", "assistant", "toolResult", "assistant"]
    status, out, _ = await _run(["run", "--session", str(session), "What is 3 + 4?"])
    assert (status, out) == (0, ADD_OUT)
    second = load_transcript(session)
    assert second[:5] == first
    assert [m.role for m in second[5:]] == ["user", "assistant", "toolResult", "assistant"]
    assert isinstance(second[5], UserMessage)
    assert content_text(second[5].content) == "What is 3 + 4?"
    assert not (tmp_path / "chat.jsonl.tmp").exists()


async def test_bad_session_file_is_a_usage_error(tmp_path: Path) -> None:
    session = tmp_path / "bad.jsonl"
    session.write_text('{"role": "bogus"}\n', encoding="utf-8")
    with pytest.raises(UsageError, match=r"^cannot load session '.*bad\.jsonl': line 1: "):
        await _run(["run", "--session", str(session), "hi"])


async def test_session_in_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    session = tmp_path / "missing-dir" / "s.jsonl"
    with pytest.raises(UsageError) as caught:
        await _run(["run", "--session", str(session), "hello"])
    assert str(caught.value) == (
        f"cannot write session {str(session)!r}: "
        f"directory {str(tmp_path / 'missing-dir')!r} does not exist"
    )


async def test_session_under_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("", encoding="utf-8")
    session = tmp_path / "notes.txt" / "s.jsonl"
    with pytest.raises(UsageError) as caught:
        await _run(["chat", "--session", str(session)])
    assert str(caught.value) == (
        f"cannot write session {str(session)!r}: "
        f"directory {str(tmp_path / 'notes.txt')!r} is not a directory"
    )


async def test_session_in_a_read_only_directory_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Patched rather than chmod-ed: a superuser may write to any directory.
    checked: list[tuple[str, int]] = []

    def access(path: str | os.PathLike[str], mode: int) -> bool:
        checked.append((os.fspath(path), mode))
        return False

    monkeypatch.setattr(os, "access", access)
    session = tmp_path / "s.jsonl"
    with pytest.raises(UsageError) as caught:
        await _run(["run", "--session", str(session), "hello"])
    assert str(caught.value) == (
        f"cannot write session {str(session)!r}: directory {str(tmp_path)!r} is not writable"
    )
    assert checked == [(str(tmp_path), os.W_OK)]


def test_main_session_usage_error_comes_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = tmp_path / "missing-dir" / "s.jsonl"
    assert main(["run", "--session", str(session), WEATHER_PROMPT]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing ran
    assert captured.err.endswith(
        f"\ntrio-agent run: error: cannot write session {str(session)!r}: "
        f"directory {str(session.parent)!r} does not exist\n"
    )


@POSIX_ONLY
async def test_unwritable_session_exits_1_naming_the_session(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    session = tmp_path / "s.jsonl"

    send, receive = trio.open_memory_channel[str](0)

    async def occupy_the_session() -> None:
        async with send:
            await send.send("hello")  # received: the session was loaded (there was none)
            # Before the save: the rename onto a directory fails.
            session.mkdir()
            (session / "kept").touch()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(occupy_the_session)
        status, out, err = await _run(["chat", "--session", str(session)], lines=receive)
    assert (status, out) == (1, HELLO_OUT)
    assert err == (
        f"trio-agent: error: cannot write session {str(session)!r}: {os.strerror(errno.EISDIR)}\n"
    )
    assert os.listdir(tmp_path) == ["s.jsonl"]  # the temporary file was removed


# ---------------------------------------------------------------------------------------
# chat


async def test_chat_runs_one_prompt_per_line(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    session = tmp_path / "s.jsonl"
    send, receive = trio.open_memory_channel[str](10)
    for line in ["hello\n", "\n", "  \n", "What is 3 + 4?\n", "/quit\n", "never read\n"]:
        send.send_nowait(line)
    status, out, err = await _run(["chat", "--session", str(session)], lines=receive)
    assert (status, out, err) == (0, HELLO_OUT + ADD_OUT, ADD_ERR)
    users = [m for m in load_transcript(session) if isinstance(m, UserMessage)]
    assert [content_text(m.content) for m in users] == ["hello", "What is 3 + 4?"]


async def test_chat_ends_at_end_of_input_and_quit(autojump_clock: trio.abc.Clock) -> None:
    send, receive = trio.open_memory_channel[str](10)
    send.send_nowait("hello\n")
    send.close()
    assert await _run(["chat"], lines=receive) == (0, HELLO_OUT, "")
    send, receive = trio.open_memory_channel[str](10)
    send.send_nowait("/quit\n")
    assert await _run(["chat"], lines=receive) == (0, "", "")


async def test_chat_steers_the_running_agent(autojump_clock: trio.abc.Clock) -> None:
    send, receive = trio.open_memory_channel[str](0)
    terminal = io.StringIO()  # stdout and stderr on one terminal, as a user sees them
    statuses: list[int] = []

    async def chat() -> None:
        args = build_parser().parse_args(["chat"])
        statuses.append(
            await run_program(
                args,
                stdin=io.StringIO(),
                stdout=terminal,
                stderr=terminal,
                handle_signals=False,
                lines=receive,
                interactive=True,
                show_usage=False,
            )
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat)
        await send.send("hello\n")
        await trio.sleep(0.1)  # the canned answer is streaming
        await send.send(WEATHER_PROMPT + "\n")
        await trio.sleep(5)
        await send.aclose()
    assert statuses == [0]
    banner, _, rest = terminal.getvalue().partition("/quit exits.\n")
    assert banner.startswith("trio-agent 0.1.0 · faux/demo, the offline demo model")
    # Typed during the answer: acknowledged below it (never in the middle of a word),
    # then delivered.
    assert rest == (
        HELLO_OUT
        + f"[queued steer] {WEATHER_PROMPT}\n"
        + f"[steer] {WEATHER_PROMPT}\n"
        + "Let me check the weather in Paris.\n"
        + WEATHER_ERR
        + "The weather in Paris: partly cloudy, 18 degrees Celsius, wind 11 km/h (demo data).\n"
    )


def _text_delta(delta: str) -> MessageUpdateEvent:
    partial = AssistantMessage(content=[], api="faux", provider="faux", model="demo")
    update = TextDeltaEvent(content_index=0, delta=delta, partial=partial)
    return MessageUpdateEvent(message=partial, assistant_message_event=update)


def test_a_notice_ends_the_half_written_answer_line_first() -> None:
    terminal = io.StringIO()
    renderer = Renderer(terminal, terminal, json_lines=False)
    renderer(_text_delta("Hel"))
    renderer.notice("[queued steer] a")
    renderer(_text_delta("lo\n"))
    renderer.notice("[queued steer] b")  # the line is complete: no extra break
    assert terminal.getvalue() == "Hel\n[queued steer] a\nlo\n[queued steer] b\n"


async def test_read_lines_forwards_each_line_and_closes_the_channel() -> None:
    send, receive = trio.open_memory_channel[str](10)
    await read_lines(io.StringIO("a\nb\n"), send)
    assert [line async for line in receive] == ["a\n", "b\n"]


async def test_chat_quit_while_running_aborts(autojump_clock: trio.abc.Clock) -> None:
    send, receive = trio.open_memory_channel[str](0)
    result: list[tuple[int, str, str]] = []

    async def chat() -> None:
        result.append(await _run(["chat"], lines=receive, interactive=True))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat)
        await send.send("hello\n")
        await trio.sleep(0.1)
        await send.send("/quit\n")
    [(status, out, err)] = result
    assert status == 0
    assert out.endswith("\n")
    assert HELLO_OUT.startswith(out[:-1])
    assert 0 < len(out) - 1 < len(HELLO_OUT) - 1
    assert err.endswith("/quit exits.\n[aborted] Request was aborted\n")


# ---------------------------------------------------------------------------------------
# Ctrl-C


@POSIX_ONLY
async def test_first_interrupt_aborts_the_run(autojump_clock: trio.abc.Clock) -> None:
    async def interrupt_soon() -> None:
        await trio.sleep(0.1)
        os.kill(os.getpid(), signal.SIGINT)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt_soon)
        status, out, err = await _run(["run", "hello"], handle_signals=True)
    assert status == 130
    assert HELLO_OUT.startswith(out[:-1])
    assert 0 < len(out) - 1 < len(HELLO_OUT) - 1
    assert err == "[aborted] Request was aborted\n"


@POSIX_ONLY
async def test_interrupt_while_idle_in_chat_exits_130(autojump_clock: trio.abc.Clock) -> None:
    send, receive = trio.open_memory_channel[str](0)

    async def interrupt_soon() -> None:
        await send.send("hello\n")
        await trio.sleep(5)  # the answer is complete; chat waits for the next line
        os.kill(os.getpid(), signal.SIGINT)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt_soon)
        result = await _run(["chat"], lines=receive, handle_signals=True)
    assert result == (130, HELLO_OUT, "")


async def _read_until(stream: trio.abc.ReceiveStream, buffer: bytearray, needle: bytes) -> None:
    while needle not in buffer:
        data = await stream.receive_some()
        assert data, f"end of output before {needle!r}; got {bytes(buffer)!r}"
        buffer += data


@POSIX_ONLY
async def test_subprocess_chat_interrupt_twice_exits_130() -> None:
    process = await trio.lowlevel.open_process(
        _python_m("chat", "--tokens-per-second", "5"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_subprocess_env(),
    )
    assert process.stdin and process.stdout and process.stderr
    out, err = bytearray(), bytearray()
    with trio.fail_after(30):
        await process.stdin.send_all(b"hello\n")
        await _read_until(process.stdout, out, b"You said")  # streaming has begun
        process.send_signal(signal.SIGINT)
        await _read_until(process.stderr, err, b"[aborted] Request was aborted\n")
        process.send_signal(signal.SIGINT)  # idle now: exits
        assert await process.wait() == 130
        await _read_until(process.stdout, out, b"\n")
    await process.stdin.aclose()
    assert bytes(err) == b"[aborted] Request was aborted\n"


# ---------------------------------------------------------------------------------------
# As a program


def test_python_m_trio_agent_run() -> None:
    result = subprocess.run(
        _python_m("run", WEATHER_PROMPT),
        capture_output=True,
        text=True,
        timeout=60,
        env=_subprocess_env(),
    )
    assert (result.returncode, result.stdout, _ms(result.stderr)) == (0, WEATHER_OUT, WEATHER_ERR)


def test_console_script() -> None:
    script = shutil.which("trio-agent", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("trio-agent is not installed in this environment")
    result = subprocess.run(
        [script, "run", WEATHER_PROMPT], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stdout, _ms(result.stderr)) == (0, WEATHER_OUT, WEATHER_ERR)


def test_python_m_chat_over_piped_stdin() -> None:
    result = subprocess.run(
        _python_m("chat"),
        input="hello\nWhat is 3 + 4?\n/quit\nnever read\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=_subprocess_env(),
    )
    assert (result.returncode, result.stdout, _ms(result.stderr)) == (
        0,
        HELLO_OUT + ADD_OUT,
        ADD_ERR,
    )


def test_python_m_json_lines() -> None:
    result = subprocess.run(
        _python_m("run", "--json", WEATHER_PROMPT),
        capture_output=True,
        text=True,
        timeout=60,
        env=_subprocess_env(),
    )
    assert (result.returncode, result.stderr) == (0, "")
    types = [json.loads(line)["type"] for line in result.stdout.splitlines()]
    assert (types[0], types[-1]) == ("agent_start", "agent_end")


def test_python_m_bad_model() -> None:
    result = subprocess.run(
        _python_m("run", "--model", "nope/thing", "hi"),
        capture_output=True,
        text=True,
        timeout=60,
        env=_subprocess_env(),
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert "\ntrio-agent run: error: unknown model 'nope/thing'" in result.stderr


def test_transcript_shape_of_a_weather_run(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    argv = ["run", "--session", str(session), "--tokens-per-second", "100000", WEATHER_PROMPT]
    assert main(argv) == 0
    messages = load_transcript(session)
    assistant, result = messages[2], messages[3]
    assert isinstance(assistant, AssistantMessage) and isinstance(result, ToolResultMessage)
    assert (assistant.stop_reason, assistant.provider, assistant.model) == (
        "toolUse",
        "faux",
        "demo",
    )
    assert (result.tool_name, result.is_error) == ("get_weather", False)


# ---------------------------------------------------------------------------------------
# The demo model and tools


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 * (3 + 4)", 14),
        ("-2 ** 2", -4),
        ("2^10", 1024),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("+1.5 - 0.5", 1.0),
    ],
)
def test_evaluate_arithmetic(expression: str, value: float) -> None:
    result = evaluate_arithmetic(expression)
    assert (result, type(result)) == (value, type(value))


@pytest.mark.parametrize(
    ("expression", "error", "message"),
    [
        ("", ValueError, "empty expression"),
        ("__import__('os')", ValueError, "unsupported expression: \"__import__('os')\""),
        ("x + 1", ValueError, "unsupported expression: 'x + 1'"),
        ("2 +", ValueError, "malformed expression: '2 +'"),
        ("9 ** 9 ** 9", ValueError, "exponent too large: 387420489"),
        ("10 ** 200", ValueError, "result too large: '10 ** 200'"),
        ("(-8) ** 0.5", ValueError, "result is not a real number: '(-8) ** 0.5'"),
        ("1 / 0", ZeroDivisionError, "division by zero"),
        ("1" * 201, ValueError, "expression longer than 200 characters"),
    ],
)
def test_evaluate_arithmetic_rejects(expression: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as caught:
        evaluate_arithmetic(expression)
    assert str(caught.value) == message


async def _call(tool: AgentTool, **arguments: object) -> tuple[str, bool | None]:
    result = await tool.execute("id", dict(arguments), AbortController().signal, lambda _: None)
    return content_text(result.content), result.is_error


async def test_demo_tools() -> None:
    assert await _call(get_weather, city="Paris") == (
        "partly cloudy, 18 degrees Celsius, wind 11 km/h",
        None,
    )
    assert await _call(get_weather, city="  new   YORK ") == (
        "clear, 24 degrees Celsius, wind 13 km/h",
        None,
    )
    # Unknown cities get stable data (the same in every process).
    assert await _call(get_weather, city="Lyon") == await _call(get_weather, city="lyon")
    assert await _call(calculate, expression="2 * 3.5") == ("7", None)
    assert await _call(calculate, expression="1 / 3") == ("0.3333333333333333", None)
    text, _ = await _call(get_time)
    assert len(text) == 20 and text.endswith("Z") and text[10] == "T"
    assert [t.name for t in DEMO_TOOLS] == ["get_weather", "calculate", "get_time"]
    assert get_weather.parameters == {
        "type": "object",
        "properties": {"city": {"type": "string", "description": 'City name, e.g. "Paris".'}},
        "required": ["city"],
        "additionalProperties": False,
    }


def _plan_of(text: str) -> tuple[str, list[tuple[str, dict[str, object]]], str]:
    model = DemoModel().model
    context = LlmContext(messages=[UserMessage(content=text)])
    message = demo_response(context, StreamOptions(), FauxState(), model)
    calls = [(b.name, b.arguments) for b in message.content if isinstance(b, ToolCall)]
    return content_text(message.content), calls, message.stop_reason


def test_demo_response_plans_tool_calls() -> None:
    assert _plan_of("weather in Paris, berlin and New York today?") == (
        "Let me check the weather in Paris and Berlin and New York.",
        [
            ("get_weather", {"city": "Paris"}),
            ("get_weather", {"city": "Berlin"}),
            ("get_weather", {"city": "New York"}),
        ],
        "toolUse",
    )
    assert _plan_of("what's 12*(3+4) and the time?") == (
        "Let me calculate 12*(3+4) and look at the clock.",
        [("calculate", {"expression": "12*(3+4)"}), ("get_time", {})],
        "toolUse",
    )
    assert _plan_of("How is the weather?") == (
        'You said: "How is the weather?". I am the offline demo model of trio-agent, so I '
        'only know a few tricks: ask me about the weather ("What is the weather in '
        'Paris?"), a calculation ("What is 6 * 7?") or the time. Run with --model '
        "provider/id to talk to a real model.",
        [],
        "stop",
    )


def test_demo_response_reports_tool_results_and_errors() -> None:
    call = ToolCall(id="c1", name="calculate", arguments={"expression": "1/0"})
    messages: list[Message] = [
        UserMessage(content="1/0?"),
        AssistantMessage(content=[call], api="faux", provider="faux", model="demo"),
        ToolResultMessage(
            tool_call_id="c1",
            tool_name="calculate",
            content=[TextContent(text="division by zero")],
            is_error=True,
        ),
    ]
    message = demo_response(
        LlmContext(messages=messages), StreamOptions(), FauxState(), DemoModel().model
    )
    assert content_text(message.content) == "The calculate tool failed: division by zero."
    assert message.stop_reason == "stop"
