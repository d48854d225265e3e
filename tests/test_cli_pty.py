"""``trio-agent chat`` under a real pseudo-terminal, as a person uses it (offline demo model)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_agent import AgentMessage, UserMessage, content_text
from trio_agent.serialization import load_transcript
from trio_agent.sessions import open_store

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")

TIMEOUT = 60  # generous: a loaded machine starts Python slowly
SGR = re.compile(r"\x1b\[[0-9;]*m")  # a colour code
_COLOURED = r"(?:\x1b\[[0-9;]*m)*"
PROMPT = "> "
UP, LEFT, BACKSPACE = "\x1b[A", "\x1b[D", "\x7f"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
CTRL_C, CTRL_D = "\x03", "\x04"


def _spawn(tmp_path: Path, *args: str, no_color: bool = False) -> Any:
    root = str(Path(__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("NO_COLOR", None)
    env.update(
        TERM="xterm",
        XDG_STATE_HOME=str(tmp_path / "state"),
        PYTHONPATH=os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")])),
    )
    if no_color:
        env["NO_COLOR"] = "1"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "trio_agent", "chat", *args],
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, 200),
    )
    child.delaybeforesend = None
    return child


def _expect(child: Any, text: str) -> None:
    """Wait for ``text`` as the user reads it: colour codes may sit anywhere in it."""
    child.expect(_COLOURED.join(re.escape(char) for char in text))


def _users(path: Path) -> list[str]:
    return [content_text(m.content) for m in load_transcript(path) if isinstance(m, UserMessage)]


def _stored(directory: Path) -> list[AgentMessage]:
    """The messages of the one session of a ``jsonl:`` store."""

    async def read() -> list[AgentMessage]:
        async with open_store(f"jsonl:{directory}") as store:
            [header] = await store.list()
            return (await store.open(header.id)).messages()

    return trio.run(read)


def _plain(text: str) -> str:
    return SGR.sub("", text)


def test_line_editing_history_paste_and_ctrl_d(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    child = _spawn(tmp_path, "--session", str(session), "--tokens-per-second", "100000")
    _expect(child, "Ctrl-D or /quit exits.")
    child.expect_exact(PROMPT)
    # Arrow keys edit the line: "3 + 5" becomes "3 + 4" (never raw escape codes).
    child.send("What is 3 + 5?" + LEFT + BACKSPACE + "4\r")
    _expect(child, "3 + 4 = 7.")
    child.expect_exact(PROMPT)
    child.send("   \r")  # a blank line is ignored
    child.expect_exact(PROMPT)
    # A multi-line paste is one prompt, indentation kept.
    child.send(PASTE_START + "def f():\n    return 1\n" + PASTE_END + "\r")
    _expect(child, 'You said: "def f(): return 1"')
    child.expect_exact(PROMPT)
    # A trailing backslash continues the entry on the next line.
    child.send("first \\\r")
    _expect(child, "... ")
    child.send("  second\r")
    _expect(child, 'You said: "first second"')
    child.expect_exact(PROMPT)
    # Up recalls the history: the arithmetic question, three entries back.
    child.send(UP + UP + UP + "\r")
    _expect(child, "3 + 4 = 7.")
    child.expect_exact(PROMPT)
    child.send(CTRL_D)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert _users(session) == [
        "What is 3 + 4?",
        "def f():\n    return 1",
        "first \n  second",
        "What is 3 + 4?",
    ]
    history = (tmp_path / "state" / "trio-agent" / "history").read_text(encoding="utf-8")
    assert "What is 3 + 4?" in history


def test_typing_during_a_streamed_answer_is_queued_not_echoed(tmp_path: Path) -> None:
    child = _spawn(tmp_path, "--tokens-per-second", "20")
    child.expect_exact(PROMPT)
    child.send("hello\r")
    child.expect_exact("You said")  # the answer streams slowly
    child.send("What is the weather in Tokyo?\r")
    child.expect_exact("to talk to a real model.")  # the answer goes on
    streamed_so_far = child.before
    # Acknowledged below the answer, never in the middle of a word; then delivered.
    _expect(child, "\r\n[queued steer] What is the weather in Tokyo?\r\n")
    coloured = child.after
    _expect(child, "[steer] What is the weather in Tokyo?")
    # Typed while the answer streams, without Enter: it waits in the next prompt.
    child.send("What is 2 + 2?")
    _expect(child, "humid and overcast")
    _expect(child, "[usage] ")
    child.expect_exact(PROMPT)
    child.expect_exact("What is 2 + 2?")
    child.send("\r")
    child.expect_exact("2 + 2 = 4.")
    child.expect_exact(PROMPT)
    child.send("/quit\r")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    # Nothing typed was echoed into the answer.
    assert "Tokyo" not in streamed_so_far
    # Colours are on for a terminal.
    assert SGR.search(coloured)


def test_ctrl_c_aborts_then_exits_130_without_colours(tmp_path: Path) -> None:
    child = _spawn(tmp_path, "--tokens-per-second", "20", no_color=True)
    child.expect_exact(PROMPT)
    child.send("hello\r")
    _expect(child, "You said")
    child.send(CTRL_C)
    _expect(child, "[aborted] Request was aborted")
    child.expect_exact(PROMPT)
    output = child.before
    child.send(CTRL_C)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    assert not SGR.search(output)  # NO_COLOR
    # The chat was saved in the sessions directory, the abort included, as a pi session
    # file (format version 3).
    sessions = tmp_path / "state" / "trio-agent" / "sessions"
    [saved] = sessions.glob("*.jsonl")
    header = json.loads(saved.read_text(encoding="utf-8").splitlines()[0])
    assert (header["type"], header["version"]) == ("session", 3)
    messages = _stored(sessions)
    assert [content_text(m.content) for m in messages if isinstance(m, UserMessage)] == ["hello"]
    assert [m.role for m in messages][-1] == "assistant"


def test_ctrl_c_clears_a_half_typed_line_and_exits_on_an_empty_one(tmp_path: Path) -> None:
    child = _spawn(tmp_path, "--tokens-per-second", "100000", "--no-session", no_color=True)
    child.expect_exact(PROMPT)
    child.send("a question I no longer want")
    child.expect_exact("want")  # echoed by readline
    child.send(CTRL_C)
    child.expect_exact("^C\r\n" + PROMPT)  # a fresh, empty prompt, as in bash
    child.send("hello\r")  # the cleared text is not part of the entry
    child.expect_exact('You said: "hello".')
    child.expect_exact(PROMPT)
    child.send("two Ctrl-C")
    child.expect_exact("Ctrl-C")
    child.send(CTRL_C)  # the first clears the line (a second would exit)
    child.expect_exact("^C\r\n" + PROMPT)
    # In a continued entry, Ctrl-C drops the whole entry and shows the entry prompt.
    child.send("dropped \\\r")
    child.expect_exact("... ")
    child.send("also dropped")
    child.expect_exact("dropped")
    child.send(CTRL_C)
    child.expect_exact("^C\r\n" + PROMPT)
    child.send("kept \\\r")
    child.expect_exact("... ")
    child.send("too\r")
    child.expect_exact('You said: "kept too".')
    child.expect_exact(PROMPT)
    child.send(CTRL_C)  # on the empty line: exits
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130


def test_slash_commands(tmp_path: Path) -> None:
    saved = tmp_path / "saved.jsonl"
    child = _spawn(tmp_path, "--tokens-per-second", "100000", "--no-session")
    child.expect_exact(PROMPT)
    child.send("/help\r")
    _expect(child, "/followup TEXT")
    child.expect_exact(PROMPT)
    child.send("/frobnicate now\r")
    _expect(child, "[error] unknown command '/frobnicate' (/help lists the commands)")
    child.expect_exact(PROMPT)
    child.send("/thinking high\r")
    _expect(child, "[thinking] high")
    child.expect_exact(PROMPT)
    child.send("/model\r")
    _expect(child, "[model] faux/demo (tools: get_weather, calculate, get_time)")
    child.expect_exact(PROMPT)
    child.send("/model faux/other\r")
    _expect(child, "[error] unknown model 'other' for provider 'faux' (known: demo)")
    child.expect_exact(PROMPT)
    child.send("What is 2 * 21?\r")
    _expect(child, "2 * 21 = 42.")
    child.expect_exact(PROMPT)
    child.send(f"/save {saved}\r")
    _expect(child, f"[saved] 5 messages to {str(saved)!r}")
    child.expect_exact(PROMPT)
    child.send("/reset\r")
    _expect(child, "[reset] the conversation is cleared")
    child.expect_exact(PROMPT)
    child.send("//help\r")  # sent to the model as "/help"
    _expect(child, 'You said: "/help"')
    child.expect_exact(PROMPT)
    child.send("/quit\r")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert _users(saved) == ["What is 2 * 21?"]


def test_a_chat_that_said_nothing_is_not_saved(tmp_path: Path) -> None:
    child = _spawn(tmp_path)
    _expect(child, "[session] saving to ")
    child.expect_exact(PROMPT)
    child.send("/thinking low\r")
    _expect(child, "[thinking] low")
    child.expect_exact(PROMPT)
    child.send(CTRL_D)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    sessions = tmp_path / "state" / "trio-agent" / "sessions"
    assert sessions.is_dir()
    assert list(sessions.iterdir()) == []


def test_compact_and_sessions_in_a_chat_on_a_session_of_the_store(tmp_path: Path) -> None:
    child = _spawn(
        tmp_path, "--session", "pty-chat", "--tokens-per-second", "100000", no_color=True
    )
    child.expect_exact(PROMPT)
    child.send("/compact\r")  # nothing said yet
    child.expect_exact(
        "[compaction] /compact: not done: Nothing to compact (session too small)\r\n"
    )
    child.expect_exact(PROMPT)
    child.send("What is 3 + 4?\r")
    child.expect_exact("3 + 4 = 7.")
    child.expect_exact(PROMPT)
    child.send("/sessions\r")
    sessions = tmp_path / "state" / "trio-agent" / "sessions"
    child.expect_exact(f"[sessions] jsonl:{sessions}\r\n* pty-chat  ")
    child.expect_exact("4 messages  What is 3 + 4?\r\n")
    child.expect_exact(PROMPT)
    child.send("/help\r")
    child.expect_exact("/compact [INSTRUCTIONS]")
    child.expect_exact(PROMPT)
    child.send(CTRL_D)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    messages = _stored(sessions)
    assert [m.role for m in messages] == ["system", "user", "assistant", "toolResult", "assistant"]


def test_a_second_chat_on_a_session_in_use_names_its_holder(tmp_path: Path) -> None:
    first = _spawn(tmp_path, "--session", "busy", no_color=True)
    first.expect_exact(PROMPT)  # claimed before the first prompt
    second = _spawn(tmp_path, "--session", "busy", no_color=True)
    second.expect_exact("trio-agent: error: session 'busy' is being written by ")
    second.expect_exact(f":{first.pid} (another trio-agent is using it")
    second.expect(pexpect.EOF)
    second.close()
    assert second.exitstatus == 1
    first.send(CTRL_D)
    first.expect(pexpect.EOF)
    first.close()
    assert first.exitstatus == 0
