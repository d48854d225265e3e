"""``trio-agent`` options and chat commands, in process on the demo model."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import trio_agent.models
from trio_agent import (
    AgentToolResult,
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    UserMessage,
    content_text,
)
from trio_agent._cli import UsageError, build_parser, main, run_program
from trio_agent._cli._commands import Command, parse_entry
from trio_agent._cli._input import TypeAhead
from trio_agent._cli._render import Renderer, color_wanted
from trio_agent._events import (
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
)
from trio_agent.serialization import dump_transcript, load_transcript

ADD_OUT = "Let me calculate 3 + 4.\n3 + 4 = 7.\n"
ADD_ERR = '[tool call] calculate {"expression":"3 + 4"}\n[tool result] calculate (0 ms): 7\n'
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@pytest.fixture(autouse=True)
def _state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


async def _run(
    argv: list[str],
    *,
    stdin: str = "",
    lines: list[str] | None = None,
    show_usage: bool = False,
) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    receive = None
    if lines is not None:
        send, receive = trio.open_memory_channel[str](len(lines))
        for line in lines:
            send.send_nowait(line + "\n")
        send.close()
    status = await run_program(
        build_parser().parse_args(argv),
        stdin=io.StringIO(stdin),
        stdout=stdout,
        stderr=stderr,
        handle_signals=False,
        lines=receive,
        interactive=False,
        show_usage=show_usage,
    )
    return status, stdout.getvalue(), stderr.getvalue()


def _users(path: Path) -> list[UserMessage]:
    return [m for m in load_transcript(path) if isinstance(m, UserMessage)]


# ---------------------------------------------------------------------------------------
# Session files (P7a) and --continue


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (b"\xff\xfe garbage\n", "line 1: not valid UTF-8 (byte 0xff at column 1)"),
        (
            b'{"role":"user","content":"hi","timestamp":1}\n'
            b'{"role":"user","content":"caf\xe9","timestamp":1}\n',
            "line 2: not valid UTF-8 (byte 0xe9 at column 30)",
        ),
    ],
)
@pytest.mark.parametrize("command", [["run", "hi"], ["chat"]])
def test_a_session_that_is_not_utf8_is_a_usage_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    where: str,
    command: list[str],
) -> None:
    session = tmp_path / "bad.jsonl"
    session.write_bytes(content)
    assert main([command[0], "--session", str(session), *command[1:]]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "Traceback" not in captured.err
    last = captured.err.splitlines()[-1]
    assert last == (
        f"trio-agent {command[0]}: error: cannot load session {str(session)!r}: {where}"
    )
    assert session.read_bytes() == content  # left alone


async def test_resuming_a_session_says_how_many_messages(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    session = tmp_path / "s.jsonl"
    assert (await _run(["run", "--session", str(session), "hello"]))[0] == 0
    status, out, err = await _run(["run", "--session", str(session), "What is 3 + 4?"])
    assert (status, out) == (0, ADD_OUT)
    assert err == f"[session] resumed 3 messages from {str(session)!r}\n" + ADD_ERR


async def test_continue_resumes_the_most_recent_session(
    _state_home: Path, autojump_clock: trio.abc.Clock
) -> None:
    sessions = _state_home / "trio-agent" / "sessions"
    with pytest.raises(UsageError) as caught:
        await _run(["run", "--continue", "hi"])
    assert str(caught.value) == f"no session to continue in {str(sessions)!r}"
    sessions.mkdir(parents=True)
    old, new = sessions / "20260101-000000-1.jsonl", sessions / "20260102-000000-1.jsonl"
    dump_transcript(old, [UserMessage(content="old", timestamp=1)])
    dump_transcript(new, [UserMessage(content="new", timestamp=1)])
    os.utime(old, (1, 1))
    os.utime(new, (2, 2))
    status, out, err = await _run(["run", "-c", "What is 3 + 4?"])
    assert (status, out) == (0, ADD_OUT)
    assert err.startswith(f"[session] resumed 1 messages from {str(new)!r}\n")
    assert [content_text(m.content) for m in _users(new)] == ["new", "What is 3 + 4?"]
    assert len(load_transcript(old)) == 1


def test_continue_and_session_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--continue", "--session", "x.jsonl", "hi"]) == 2
    assert capsys.readouterr().err.endswith(
        "error: argument --session: not allowed with argument -c/--continue\n"
    )


# ---------------------------------------------------------------------------------------
# The prompt from stdin, images


async def test_dash_reads_the_prompt_from_stdin(autojump_clock: trio.abc.Clock) -> None:
    assert await _run(["run", "-"], stdin="What is 3 + 4?\n") == (0, ADD_OUT, ADD_ERR)
    with pytest.raises(UsageError, match=r"^the prompt read from stdin \('-'\) is empty$"):
        await _run(["run", "-"], stdin=" \n")


async def test_images_are_attached_to_the_prompt(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    (tmp_path / "a.png").write_bytes(PNG)
    (tmp_path / "b.gif").write_bytes(b"GIF89a" + b"\x00" * 8)
    session = tmp_path / "s.jsonl"
    argv = ["run", "--session", str(session), "--image", str(tmp_path / "a.png")]
    status, _, _ = await _run([*argv, "--image", str(tmp_path / "b.gif"), "hello"])
    assert status == 0
    [user] = _users(session)
    assert isinstance(user.content, list)
    assert user.content == [
        TextContent(text="hello"),
        ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png"),
        ImageContent(
            data=base64.b64encode(b"GIF89a" + b"\x00" * 8).decode(), mime_type="image/gif"
        ),
    ]


async def test_a_bad_image_is_a_usage_error_naming_the_file(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello", encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        await _run(["run", "--image", str(text), "hi"])
    assert str(caught.value) == f"--image {str(text)!r}: not a PNG, JPEG, GIF or WebP image"
    missing = tmp_path / "missing.png"
    with pytest.raises(UsageError) as caught:
        await _run(["run", "--image", str(missing), "hi"])
    assert str(caught.value) == f"--image {str(missing)!r}: No such file or directory"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--temperature", "-1", "expected a number >= 0, got '-1'"),
        ("--temperature", "nan", "expected a finite number, got 'nan'"),
        ("--max-retries", "2.5", "expected a whole number, got '2.5'"),
        ("--max-retries", "-1", "expected a whole number >= 0, got '-1'"),
    ],
)
def test_bad_request_options(
    option: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", option, value, "hi"]) == 2
    assert capsys.readouterr().err.endswith(f"argument {option}: {message}\n")


# ---------------------------------------------------------------------------------------
# Output


async def test_parallel_tool_calls_are_labelled(autojump_clock: trio.abc.Clock) -> None:
    status, _, err = await _run(["run", "What is the weather in Paris and Berlin?"])
    assert status == 0
    calls, results = err.splitlines()[:2], err.splitlines()[2:]
    assert calls == [
        '[tool call #1] get_weather {"city":"Paris"}',
        '[tool call #2] get_weather {"city":"Berlin"}',
    ]
    # Parallel calls end in any order; the labels pair them.
    assert sorted(results) == [
        "[tool result #1] get_weather (0 ms): partly cloudy, 18 degrees Celsius, wind 11 km/h",
        "[tool result #2] get_weather (0 ms): sunny, 21 degrees Celsius, wind 8 km/h",
    ]


async def test_a_usage_line_follows_each_run(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    session = tmp_path / "s.jsonl"
    status, _, err = await _run(
        ["run", "--session", str(session), "What is 3 + 4?"], show_usage=True
    )
    assert status == 0
    replies = [m for m in load_transcript(session) if isinstance(m, AssistantMessage)]
    tokens_in = sum(m.usage.input + m.usage.cache_read + m.usage.cache_write for m in replies)
    tokens_out = sum(m.usage.output for m in replies)
    last = replies[-1].usage
    context = last.input + last.cache_read + last.cache_write + last.output
    share = f"{100 * context / 128_000:.1f}"
    assert tokens_in > 0 and tokens_out > 0
    assert err == ADD_ERR + (
        f"[usage] {tokens_in:,} in, {tokens_out:,} out, $0.0000, "
        f"context {context:,}/128,000 ({share}%)\n"
    )


def _update(event: object) -> MessageUpdateEvent:
    partial = AssistantMessage(content=[], api="faux", provider="faux", model="demo")
    return MessageUpdateEvent(message=partial, assistant_message_event=event)  # type: ignore[arg-type]


def _thinking_then_text(renderer: Renderer) -> None:
    partial = AssistantMessage(content=[], api="faux", provider="faux", model="demo")
    renderer(_update(ThinkingStartEvent(content_index=0, partial=partial)))
    renderer(_update(ThinkingDeltaEvent(content_index=0, delta="hmm", partial=partial)))
    renderer(_update(ThinkingEndEvent(content_index=0, content="hmm", partial=partial)))
    renderer(_update(TextDeltaEvent(content_index=1, delta="Yes.", partial=partial)))


def test_thinking_is_shown_dimmed_on_stderr() -> None:
    terminal = io.StringIO()
    _thinking_then_text(Renderer(terminal, terminal, json_lines=False))
    assert terminal.getvalue() == "[thinking] hmm\nYes."
    terminal = io.StringIO()
    _thinking_then_text(Renderer(terminal, terminal, json_lines=False, color=True))
    assert terminal.getvalue() == "\x1b[2m[thinking] \x1b[0m\x1b[2mhmm\x1b[0m\nYes."


def test_tool_calls_that_never_ran_are_not_shown() -> None:
    terminal = io.StringIO()
    renderer = Renderer(terminal, terminal, json_lines=False)
    result = AgentToolResult(content=[TextContent(text="Operation aborted")])

    def call(call_id: str, duration: int | None) -> None:
        renderer(ToolExecutionStartEvent(tool_call_id=call_id, tool_name="t", args={}))
        renderer(
            ToolExecutionEndEvent(
                tool_call_id=call_id,
                tool_name="t",
                result=result,
                is_error=True,
                duration_ms=duration,
            )
        )

    call("ran", 1500)
    renderer.run_aborted = True
    call("never", None)
    assert terminal.getvalue() == "[tool call] t {}\n[tool error] t (1.5 s): Operation aborted\n"


def test_colours_follow_the_terminal_and_no_color() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert color_wanted("auto", Terminal(), {})
    assert not color_wanted("auto", Terminal(), {"NO_COLOR": "1"})
    assert not color_wanted("auto", Terminal(), {"TERM": "dumb"})
    assert not color_wanted("auto", io.StringIO(), {})
    assert color_wanted("always", io.StringIO(), {"NO_COLOR": "1"})
    assert not color_wanted("never", Terminal(), {})


async def test_color_always_colours_the_tool_lines(autojump_clock: trio.abc.Clock) -> None:
    status, out, err = await _run(["run", "--color", "always", "What is 3 + 4?"])
    assert (status, out) == (0, ADD_OUT)
    assert err == (
        '\x1b[36m[tool call] calculate\x1b[0m \x1b[2m{"expression":"3 + 4"}\x1b[0m\n'
        "\x1b[32m[tool result] calculate (0 ms):\x1b[0m 7\n"
    )


# ---------------------------------------------------------------------------------------
# Chat input and commands


async def test_chat_commands(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    saved = tmp_path / "saved.jsonl"
    lines = [
        "/help",
        "/nope",
        "/model",
        "/thinking loud",
        "/thinking low",
        "/followup",
        "/followup What is 3 + 4?",  # idle: simply the next prompt
        f"/save {saved}",
        f"/save {tmp_path / 'missing' / 'x.jsonl'}",
        "/reset",
        "//nope",
        "/EXIT",
        "never read",
    ]
    status, out, err = await _run(["chat", "--no-session"], lines=lines)
    assert status == 0
    assert out == ADD_OUT + 'You said: "/nope". I am the offline demo' + out.split("demo", 1)[1]
    lines_out = err.splitlines()
    assert lines_out[0] == "Commands:"
    rest = err[err.index("//text sends /text.\n") + len("//text sends /text.\n") :]
    assert rest == (
        "[error] unknown command '/nope' (/help lists the commands)\n"
        "[model] faux/demo (tools: get_weather, calculate, get_time)\n"
        "[error] unknown thinking level 'loud' (one of: off, minimal, low, medium, high, "
        "xhigh, max)\n"
        "[thinking] low\n"
        "[error] /followup needs TEXT\n" + ADD_ERR + f"[saved] 5 messages to {str(saved)!r}\n"
        f"[error] cannot write session {str(tmp_path / 'missing' / 'x.jsonl')!r}: directory "
        f"{str(tmp_path / 'missing')!r} does not exist\n"
        "[reset] the conversation is cleared\n"
    )
    assert [content_text(m.content) for m in _users(saved)] == ["What is 3 + 4?"]


async def test_chat_model_switch(
    autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lines = [
        "/model openai/gpt-4o-mini",
        "hello",
        "/model",  # shows the current model
        "/model faux/demo",
        "What is 3 + 4?",
    ]
    status, out, err = await _run(["chat", "--no-session"], lines=lines)
    assert (status, out) == (0, ADD_OUT)
    assert err == (
        "[model] openai/gpt-4o-mini (tools: none)\n"
        "[error] No API key for provider: openai (set OPENAI_API_KEY or pass api_key)\n"
        "[model] openai/gpt-4o-mini (tools: none)\n"
        "[model] faux/demo (tools: get_weather, calculate, get_time)\n" + ADD_ERR
    )


async def test_chat_continued_lines_keep_their_indentation(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    session = tmp_path / "s.jsonl"
    lines = ["", "def f():\\", "    return 1\\", "", "   "]
    status, _, _ = await _run(["chat", "--session", str(session)], lines=lines)
    assert status == 0
    assert [content_text(m.content) for m in _users(session)] == ["def f():\n    return 1"]


async def test_followup_typed_during_a_run_is_delivered_after_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    send, receive = trio.open_memory_channel[str](0)
    terminal = io.StringIO()
    statuses: list[int] = []

    async def chat() -> None:
        statuses.append(
            await run_program(
                build_parser().parse_args(["chat", "--no-session"]),
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
        await send.send("What is 3 + 4?\n")
        await trio.sleep(0.05)
        await send.send("/followup What is 5 * 5?\n")
        await send.send("/reset\n")
        await send.send("/what\n")
        await trio.sleep(5)
        await send.aclose()
    assert statuses == [0]
    text = terminal.getvalue()
    after_banner = text[text.index("/quit exits.\n") + len("/quit exits.\n") :]
    queued = after_banner.index("[queued follow-up] What is 5 * 5?\n")
    assert "[error] /reset is not available while the agent works" in after_banner
    assert "[error] unknown command '/what' (/help lists the commands)\n" in after_banner
    # Delivered after the first answer, then answered.
    answered = after_banner.index("3 + 4 = 7.\n")
    delivered = after_banner.index("[follow-up] What is 5 * 5?\n")
    assert queued < answered < delivered < after_banner.index("5 * 5 = 25.\n")


def test_parse_entry() -> None:
    assert parse_entry("hello") == "hello"
    assert parse_entry("//x y") == "/x y"
    assert parse_entry("/MODEL  openai/gpt-4o ") == Command("/model", "openai/gpt-4o")
    assert parse_entry("/exit") == Command("/quit", "")
    assert parse_entry("/Nope x") == Command("/Nope", "x")
    assert parse_entry("/followup a\n  b") == Command("/followup", "a\n  b")


def test_type_ahead_collects_lines_without_escape_codes() -> None:
    typed = TypeAhead()
    assert typed.feed(b"ab\x7fc\x1b[Dd\x1bOA") == []
    assert typed.feed("é\r".encode()[:1]) == []  # half a character
    assert typed.feed("é\r".encode()[1:]) == ["acdé"]
    assert typed.feed(b"one two\x17three\x15four\n") == ["four"]
    assert typed.feed(b"\x1b[200~a\n  b\x1b[201~\r") == ["a\n  b"]
    assert typed.feed(b"partial") == []
    assert typed.take() == "partial"
    assert typed.text == ""


# ---------------------------------------------------------------------------------------
# What a new user trips over (issue 19)


@pytest.mark.parametrize(
    ("argv", "stdin", "message"),
    [
        (["run", ""], "", "the prompt is empty"),
        (["run", " \n\t"], "", "the prompt is empty"),
        (["run", "-"], "", "the prompt read from stdin ('-') is empty"),
        (["run", "-"], " \n\n", "the prompt read from stdin ('-') is empty"),
    ],
)
def test_an_empty_prompt_is_one_usage_error(
    argv: list[str],
    stdin: str,
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: trio-agent run [-h] ")
    assert captured.err.endswith(f"\ntrio-agent run: error: {message}\n")


@pytest.mark.parametrize("command", [["run", "--bogus", "hi"], ["chat", "--bogus", "-x"]])
def test_an_unknown_option_shows_the_commands_usage(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(command) == 2
    err = capsys.readouterr().err
    name, *unknown = (word for word in command if word != "hi")
    assert err.startswith(f"usage: trio-agent {name} [-h] ")
    assert err.endswith(
        f"\ntrio-agent {name}: error: unrecognized arguments: {' '.join(unknown)}\n"
    )


def test_models_lists_the_demo_model_and_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[:3] == [
        "MODEL                                           CONTEXT  INPUT        THINKING  "
        "$/M IN  $/M OUT",
        "faux/demo                                       128,000  text         no          "
        "0.00     0.00",
        "openai/gpt-4o                                   128,000  text, image  no          "
        "2.50    10.00",
    ]
    assert len(lines) == 1 + 1 + len(trio_agent.models.Models().get_models())
    assert captured.err == (
        "Prices are indicative, in USD per million tokens. With --base-url any model id of "
        "an OpenAI-compatible server works too.\n"
    )
    assert main(["models", "deepseek"]) == 0
    assert capsys.readouterr().out == (
        "MODEL                       CONTEXT  INPUT  THINKING  $/M IN  $/M OUT\n"
        "deepseek/deepseek-chat      128,000  text   no          0.28     0.42\n"
        "deepseek/deepseek-reasoner  128,000  text   yes         0.28     0.42\n"
    )
    assert main(["models", "nope"]) == 2
    assert capsys.readouterr().err.endswith(
        "\ntrio-agent models: error: unknown provider 'nope' (known: faux, openai, "
        "anthropic, openrouter, groq, deepseek)\n"
    )


async def test_the_demo_model_says_it_ignores_an_image(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    (tmp_path / "a.png").write_bytes(PNG)
    status, out, err = await _run(["run", "--image", str(tmp_path / "a.png"), "What is 3 + 4?"])
    assert (status, out) == (0, ADD_OUT)
    assert err == (
        "[image] the offline demo model ignores images: it answers as if none were attached "
        "(--model PROVIDER/ID selects a model that reads them)\n" + ADD_ERR
    )


async def test_continue_recaps_the_last_exchange(
    _state_home: Path, autojump_clock: trio.abc.Clock
) -> None:
    sessions = _state_home / "trio-agent" / "sessions"
    sessions.mkdir(parents=True)
    session = sessions / "20260101-000000-1.jsonl"
    assert (await _run(["run", "--session", str(session), "What is 3 + 4?"]))[0] == 0
    assert (await _run(["run", "--session", str(session), "hello"]))[0] == 0
    status, out, err = await _run(["chat", "--continue"], lines=["/quit"])
    assert (status, out) == (0, "")
    assert err == (
        f"[session] resumed 7 messages from {str(session)!r}\n"
        "[last prompt] hello\n"
        '[last answer] You said: "hello". I am the offline demo model of trio-agent, so I '
        'only know a few tricks: ask me about the weather ("What is the weather in Paris?"), '
        'a calculation ("What is 6 * 7?") or the time. ...\n'
    )


def test_a_notice_during_the_answer_waits_until_it_ends() -> None:
    terminal = io.StringIO()
    renderer = Renderer(terminal, terminal, json_lines=False)
    partial = AssistantMessage(content=[], api="faux", provider="faux", model="demo")
    renderer(MessageStartEvent(message=partial))
    for delta in ("You sa", "id: he", "llo."):
        update = TextDeltaEvent(content_index=0, delta=delta, partial=partial)
        renderer(MessageUpdateEvent(message=partial, assistant_message_event=update))
        if delta == "You sa":
            renderer.notice_after_answer("[queued steer] go on")
            renderer.error("no such command", after_answer=True)
    final = AssistantMessage(
        content=[TextContent(text="You said: hello.")], api="faux", provider="faux", model="demo"
    )
    assert terminal.getvalue() == "You said: hello."
    renderer(MessageEndEvent(message=final))
    renderer.notice_after_answer("[queued steer] at once")  # no answer streaming
    assert terminal.getvalue() == (
        "You said: hello.\n[queued steer] go on\n[error] no such command\n[queued steer] at once\n"
    )


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")
@pytest.mark.parametrize("json_lines", [True, False])
def test_a_reader_that_goes_away_ends_the_program_quietly(json_lines: bool) -> None:
    # ``trio-agent run --json ... | head -1``: no traceback, status 1 (as in text mode).
    root = str(Path(__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    options = ["--json"] if json_lines else []
    argv = ["run", *options, "--tokens-per-second", "20", "What is the weather in Paris?"]
    process = subprocess.Popen(
        [sys.executable, "-m", "trio_agent", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.read(3)  # "{"t" or "Let": the answer has begun
        process.stdout.close()  # the reader goes away
        err = process.stderr.read()
        status = process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    assert first == (b'{"t' if json_lines else b"Let")
    assert (status, err) == (1, b"")
