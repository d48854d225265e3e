"""``trio-agent`` on the session store: ``--session ID``, ``--store URL``, ``--continue``,
``trio-agent sessions``, ``/sessions``; ``/compact`` and automatic compaction."""

from __future__ import annotations

import io
import json
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_agent import AgentMessage, UserMessage, content_text
from trio_agent._cli import UsageError, build_parser, main, run_program
from trio_agent.serialization import dump_transcript, load_transcript
from trio_agent.sessions import CompactionEntry, MessageEntry, open_store

ADD_OUT = "Let me calculate 3 + 4.\n3 + 4 = 7.\n"
ADD_ERR = '[tool call] calculate {"expression":"3 + 4"}\n[tool result] calculate (0 ms): 7\n'
TIMEOUT = 60


@pytest.fixture(autouse=True)
def _state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


def _sessions_dir(state: Path) -> Path:
    return state / "trio-agent" / "sessions"


async def _run(argv: list[str], *, lines: list[str] | None = None) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    receive = None
    if lines is not None:
        send, receive = trio.open_memory_channel[str](len(lines))
        for line in lines:
            send.send_nowait(line + "\n")
        send.close()
    status = await run_program(
        build_parser().parse_args(argv),
        stdin=io.StringIO(""),
        stdout=stdout,
        stderr=stderr,
        handle_signals=False,
        lines=receive,
        interactive=False,
        show_usage=False,
    )
    return status, stdout.getvalue(), stderr.getvalue()


async def _stored(url: str, session_id: str) -> list[AgentMessage]:
    async with open_store(url) as store:
        return (await store.open(session_id)).messages()


def _users(messages: list[AgentMessage]) -> list[str]:
    return [content_text(m.content) for m in messages if isinstance(m, UserMessage)]


def _env(state: Path) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    env["XDG_STATE_HOME"] = str(state)
    return env


# ---------------------------------------------------------------------------------------
# --session ID on the default store: pi's files in the sessions directory


async def test_a_session_id_is_a_pi_session_of_the_sessions_directory(_state_home: Path) -> None:
    assert await _run(["run", "--session", "notes", "What is 3 + 4?"]) == (0, ADD_OUT, ADD_ERR)
    status, _out, err = await _run(["run", "--session", "notes", "hello"])
    assert status == 0
    assert err == "[session] resumed 5 messages from session 'notes'\n"
    [path] = _sessions_dir(_state_home).glob("*.jsonl")
    assert path.name.endswith("_notes.jsonl")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert (lines[0]["type"], lines[0]["version"], lines[0]["id"]) == ("session", 3, "notes")
    assert {line["type"] for line in lines[1:]} >= {"message", "model_change"}
    messages = await _stored(f"jsonl:{_sessions_dir(_state_home)}", "notes")
    assert _users(messages) == ["What is 3 + 4?", "hello"]
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
        "assistant",
    ]


async def test_a_resumed_session_keeps_its_thinking_level_unless_one_is_given(
    _state_home: Path,
) -> None:
    lines = ["/thinking high", "hello"]
    assert (await _run(["chat", "--session", "deep"], lines=lines))[0] == 0
    url = f"jsonl:{_sessions_dir(_state_home)}"
    async with open_store(url) as store:
        assert (await store.open("deep")).context().thinking_level == "high"
    assert (await _run(["run", "--session", "deep", "hi"]))[0] == 0
    async with open_store(url) as store:
        assert (await store.open("deep")).context().thinking_level == "high"
    assert (await _run(["run", "--session", "deep", "--thinking", "low", "hi"]))[0] == 0
    async with open_store(url) as store:
        assert (await store.open("deep")).context().thinking_level == "low"


async def test_a_pi_session_file_given_as_a_file_is_opened_in_its_directory(
    _state_home: Path,
) -> None:
    assert (await _run(["run", "--session", "pi-one", "What is 3 + 4?"]))[0] == 0
    [path] = _sessions_dir(_state_home).glob("*.jsonl")
    status, _, err = await _run(["run", "--session", str(path), "hello"])
    assert status == 0
    assert err == "[session] resumed 5 messages from session 'pi-one'\n"
    messages = await _stored(f"jsonl:{_sessions_dir(_state_home)}", "pi-one")
    assert _users(messages) == ["What is 3 + 4?", "hello"]


async def test_continue_resumes_the_newest_session_of_either_kind(_state_home: Path) -> None:
    sessions = _sessions_dir(_state_home)
    sessions.mkdir(parents=True)
    old = sessions / "20260101-000000-1.jsonl"
    dump_transcript(old, [UserMessage(content="an old transcript file", timestamp=1)])
    os.utime(old, (1_000_000, 1_000_000))
    assert (await _run(["run", "--session", "newer", "What is 3 + 4?"]))[0] == 0
    status, _out, err = await _run(["run", "--continue", "hello"])
    assert status == 0
    assert err.splitlines()[:3] == [
        "[session] resumed 5 messages from session 'newer'",
        "[last prompt] What is 3 + 4?",
        "[last answer] 3 + 4 = 7.",
    ]
    os.utime(old, None)  # now the transcript file is the newest
    status, _, err = await _run(["run", "--continue", "What is 3 + 4?"])
    assert status == 0
    assert err.startswith(f"[session] resumed 1 messages from {str(old)!r}\n")
    assert _users(load_transcript(old)) == ["an old transcript file", "What is 3 + 4?"]


async def test_a_transcript_file_keeps_its_format(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    assert (await _run(["run", "--session", str(path), "What is 3 + 4?"]))[0] == 0
    assert (await _run(["run", "--session", str(path), "hello"]))[0] == 0
    assert _users(load_transcript(path)) == ["What is 3 + 4?", "hello"]


# ---------------------------------------------------------------------------------------
# --store


async def test_an_sqlite_store_and_the_sessions_command(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'chats.db'}"
    assert (await _run(["run", "--store", url, "--session", "a", "What is 3 + 4?"]))[0] == 0
    assert (await _run(["run", "--store", url, "--session", "b", "hello"]))[0] == 0
    status, out, err = await _run(["sessions", "list", "--store", url])
    assert (status, err) == (0, "")
    rows = out.splitlines()
    assert [row.split()[0] for row in rows] == ["b", "a"]
    assert rows[1].endswith("  4 messages  What is 3 + 4?")
    assert rows[0].endswith("  2 messages  hello")
    status, out, _ = await _run(["sessions", "show", "--store", url, "a"])
    assert status == 0
    assert out == (
        "[system] You are a helpful assistant. Use the tools when they help.\n"
        "[user] What is 3 + 4?\n"
        "[assistant] Let me calculate 3 + 4.\n"
        '[tool call] calculate {"expression": "3 + 4"}\n'
        "[tool result] calculate: 7\n"
        "[assistant] 3 + 4 = 7.\n"
    )
    assert await _run(["sessions", "delete", "--store", url, "a"]) == (
        0,
        "",
        "[deleted] session 'a'\n",
    )
    with pytest.raises(UsageError) as caught:
        await _run(["sessions", "show", "--store", url, "a"])
    assert str(caught.value) == f"no session 'a' in {url}"


POSTGRES_URL_VARIABLE = "TRIO_AGENT_TEST_POSTGRES_URL"


@pytest.fixture
def postgres_url() -> str:
    """The test server's URL: the tests skip without it (and fail under CI)."""
    url = os.environ.get(POSTGRES_URL_VARIABLE, "")
    if not url:
        message = f"set {POSTGRES_URL_VARIABLE} to a PostgreSQL URL (see the README)"
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"CI=true and {message}", pytrace=False)
        pytest.skip(message)
    return url


async def test_a_postgresql_store(postgres_url: str) -> None:
    url = postgres_url
    session_id = f"cli-{secrets.token_hex(6)}"
    argv = ["run", "--store", url, "--session", session_id]
    try:
        assert await _run([*argv, "What is 3 + 4?"]) == (0, ADD_OUT, ADD_ERR)
        status, _, err = await _run([*argv, "hello"])
        assert (status, err) == (0, f"[session] resumed 5 messages from session {session_id!r}\n")
        _, out, _ = await _run(["sessions", "list", "--store", url])
        [row] = [row for row in out.splitlines() if row.startswith(session_id + " ")]
        assert row.endswith("  6 messages  What is 3 + 4?")
    finally:
        await _run(["sessions", "delete", "--store", url, session_id])
    async with open_store(url) as store:
        assert session_id not in [header.id for header in await store.list()]


async def test_chat_lists_the_sessions_of_a_memory_store() -> None:
    lines = ["What is 3 + 4?", "/sessions"]
    status, _, err = await _run(["chat", "--store", "memory:", "--session", "m1"], lines=lines)
    assert status == 0
    assert err.endswith(
        "[sessions] memory:\n* m1  " + err.rsplit("* m1  ", 1)[1].split("\n")[0] + "\n"
    )
    assert err.rstrip("\n").endswith("  4 messages  What is 3 + 4?")


async def test_sessions_list_shows_transcript_files_of_the_sessions_directory(
    _state_home: Path,
) -> None:
    status, out, err = await _run(["sessions", "list"])
    assert (status, out) == (0, "")
    assert err == f"no sessions in jsonl:{_sessions_dir(_state_home)}\n"
    sessions = _sessions_dir(_state_home)
    sessions.mkdir(parents=True)
    old = sessions / "20260101-000000-1.jsonl"
    dump_transcript(old, [UserMessage(content="from an earlier version", timestamp=1)])
    assert (await _run(["run", "--session", "new", "hello"]))[0] == 0
    status, out, _ = await _run(["sessions", "list"])
    names = [row.split()[0] for row in out.splitlines()]
    assert names == ["new", str(old)]
    assert out.splitlines()[1].endswith("  1 message  from an earlier version")


async def test_sessions_show_and_delete_take_files(tmp_path: Path, _state_home: Path) -> None:
    transcript = tmp_path / "old.jsonl"
    dump_transcript(transcript, [UserMessage(content="kept as it was", timestamp=1)])
    assert await _run(["sessions", "show", str(transcript)]) == (0, "[user] kept as it was\n", "")
    assert await _run(["sessions", "delete", str(transcript)]) == (
        0,
        "",
        f"[deleted] {str(transcript)!r}\n",
    )
    assert not transcript.exists()
    assert (await _run(["run", "--session", "filed", "hello"]))[0] == 0
    [path] = _sessions_dir(_state_home).glob("*.jsonl")
    status, out, _ = await _run(["sessions", "show", str(path)])
    assert (status, out.splitlines()[1]) == (0, "[user] hello")
    assert (await _run(["sessions", "delete", str(path)]))[2] == "[deleted] session 'filed'\n"
    assert list(_sessions_dir(_state_home).glob("*.jsonl")) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["run", "--store", "memory:", "--session", "x/y.jsonl", "hi"],
            "--session 'x/y.jsonl' names a file; with --store give a session id",
        ),
        (
            ["run", "--session", "bad.", "hi"],
            "--session 'bad.': a session id has letters, digits, '.', '_' and '-', and "
            "starts and ends with a letter or digit (a file name needs a '/' or the .jsonl "
            "ending)",
        ),
        (
            ["run", "--store", "nosuch:x", "--session", "a", "hi"],
            "--store 'nosuch:x': unknown session store URL 'nosuch:x' (known: memory:, "
            "jsonl:, sqlite:, postgresql:, postgres:)",
        ),
        (
            ["run", "--store", "memory:", "--continue", "hi"],
            "no session to continue in memory:",
        ),
        (["run", "--store", "memory:", "hi"], "--store needs --session ID or --continue"),
    ],
)
def test_store_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.endswith(f"trio-agent run: error: {message}\n")


# ---------------------------------------------------------------------------------------
# One writer per session


def test_a_second_program_on_a_session_is_told_who_writes_it(_state_home: Path) -> None:
    command = [sys.executable, "-m", "trio_agent", "chat", "--session", "shared"]
    env = _env(_state_home)
    first = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert first.stdin is not None and first.stdout is not None
        first.stdin.write("hello\n")
        first.stdin.flush()
        assert first.stdout.readline().startswith('You said: "hello".')
        for second_command in (command, [*command[:-2], "--continue"]):
            second = subprocess.run(
                second_command,
                input="What is 3 + 4?\n",
                capture_output=True,
                env=env,
                text=True,
                timeout=TIMEOUT,
            )
            assert (second.returncode, second.stdout) == (1, "")
            assert second.stderr == (
                f"trio-agent: error: session 'shared' is being written by "
                f"{socket.gethostname()}:{first.pid} (another trio-agent is using it: wait "
                "until it ends, or choose another session; the claim of a program that "
                "was killed expires within 30 seconds)\n"
            )
        deleted = subprocess.run(
            [sys.executable, "-m", "trio_agent", "sessions", "delete", "shared"],
            capture_output=True,
            env=env,
            text=True,
            timeout=TIMEOUT,
        )
        assert deleted.returncode == 1
        assert "is being written by" in deleted.stderr
        assert deleted.stderr.endswith("; it is not deleted\n")
    finally:
        first.communicate(timeout=TIMEOUT)  # the end of its input: it exits
    assert first.returncode == 0
    # Released: the session can be written again.
    again = subprocess.run(
        command,
        input="What is 3 + 4?\n",
        capture_output=True,
        env=env,
        text=True,
        timeout=TIMEOUT,
    )
    assert again.returncode == 0
    assert again.stderr.startswith("[session] resumed 3 messages from session 'shared'\n")


# ---------------------------------------------------------------------------------------
# /reset on a session of the store


async def test_reset_starts_a_new_branch_of_the_session(_state_home: Path) -> None:
    lines = ["hello", "/reset", "What is 3 + 4?"]
    assert (await _run(["chat", "--session", "branchy"], lines=lines))[0] == 0
    url = f"jsonl:{_sessions_dir(_state_home)}"
    assert _users(await _stored(url, "branchy")) == ["What is 3 + 4?"]
    async with open_store(url) as store:
        session = await store.open("branchy")
    every = [e.message for e in session.entries if isinstance(e, MessageEntry)]
    assert _users(every) == ["hello", "What is 3 + 4?"]


# ---------------------------------------------------------------------------------------
# Compaction


class _Server:
    """An OpenAI-compatible server on loopback: a summary request is answered ``A
    summary.``, any other ``Noted.``; the usage reports the next of ``prompt_tokens``
    input tokens (10 when there are none left)."""

    def __init__(self) -> None:
        self.port = 0
        self.prompt_tokens: list[int] = []
        self.bodies: list[dict[str, Any]] = []

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
        length = 0
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        while len(body) < length:
            body += await stream.receive_some(65536)
        request = json.loads(body)
        self.bodies.append(request)
        system = str(request["messages"][0].get("content", ""))
        text = "A summary." if "summar" in system.lower() else "Noted."
        tokens = self.prompt_tokens.pop(0) if self.prompt_tokens else 10
        frames: list[dict[str, Any]] = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {
                "choices": [],
                "usage": {"prompt_tokens": tokens, "completion_tokens": 3},
            },
        ]
        sse = "".join(
            f"data: {json.dumps({'id': 'c', 'object': 'chat.completion.chunk', **f})}\n\n"
            for f in frames
        )
        sse += "data: [DONE]\n\n"
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
            + f"content-length: {len(sse.encode())}\r\n\r\n{sse}".encode()
        )
        await stream.aclose()


@pytest.fixture
async def server(nursery: trio.Nursery) -> AsyncIterator[_Server]:
    server = _Server()
    await nursery.start(server.serve)
    yield server


def _model(server: _Server) -> list[str]:
    return ["--model", "local/m", "--base-url", f"http://127.0.0.1:{server.port}/v1"]


BIG = "word " * 20_000  # about 25,000 tokens by the estimate


async def test_compact_summarizes_older_messages(server: _Server) -> None:
    lines = ["/compact", BIG, BIG, BIG, "/compact keep the word count"]
    server.prompt_tokens = [10, 10, 75_000]
    status, out, err = await _run(["chat", *_model(server), "--no-session"], lines=lines)
    assert status == 0
    assert out == "Noted.\n" * 3
    assert err.splitlines() == [
        "[compaction] /compact: not done: Nothing to compact (session too small)",
        "[compaction] /compact: about 75,003 tokens; now a summary and the 2 most recent messages",
    ]
    summary_request = server.bodies[-1]
    assert "keep the word count" in json.dumps(summary_request)


async def test_automatic_compaction_has_a_status_line(server: _Server) -> None:
    lines = [BIG, BIG, BIG, "one more"]
    server.prompt_tokens = [10, 120_000]  # the second answer: a context near the window
    status, out, err = await _run(["chat", *_model(server), "--no-session"], lines=lines)
    assert status == 0
    assert out == "Noted.\n" * 4
    [line] = [line for line in err.splitlines() if line.startswith("[compaction]")]
    assert line.startswith("[compaction] automatic, the context neared the model's window: about ")
    assert line.endswith("; now a summary and the most recent message")
    # The summary request came before the third prompt's request, which it shortened.
    assert len(server.bodies) == 5
    assert "summar" in json.dumps(server.bodies[2]["messages"][0]).lower()
    assert len(json.dumps(server.bodies[3])) < len(BIG) * 2


async def test_no_compaction_turns_automatic_compaction_off(server: _Server) -> None:
    lines = [BIG, BIG, BIG, "one more"]
    server.prompt_tokens = [10, 120_000]
    argv = ["chat", *_model(server), "--no-session", "--no-compaction"]
    status, out, err = await _run(argv, lines=lines)
    assert (status, out, err) == (0, "Noted.\n" * 4, "")


async def test_a_compaction_reaches_the_session(server: _Server, _state_home: Path) -> None:
    lines = [BIG, BIG, BIG, "/compact"]
    assert (await _run(["chat", *_model(server), "--session", "long"], lines=lines))[0] == 0
    async with open_store(f"jsonl:{_sessions_dir(_state_home)}") as store:
        session = await store.open("long")
    [compaction] = [e for e in session.entries if isinstance(e, CompactionEntry)]
    assert compaction.summary == "A summary."
    # A resumed chat starts from the summary and the kept messages.
    messages = session.messages()
    assert messages[0].role == "system"
    assert "A summary." in str(messages[1])
    assert _users(messages)[-1:] == [BIG.strip()]
    assert len(messages) < 8
    # The next chat on it sends the summary and the kept messages only.
    server.bodies.clear()
    argv = ["chat", *_model(server), "--session", "long"]
    status, _, err = await _run(argv, lines=["And now?"])
    assert status == 0
    assert err.startswith("[session] resumed 4 messages from session 'long'\n")
    [body] = server.bodies
    assert "A summary." in json.dumps(body)
    assert len(json.dumps(body)) < 2 * len(BIG)
