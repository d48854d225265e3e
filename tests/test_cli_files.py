"""The files ``trio-agent`` reads and writes: session files and images that are not regular
files, endless lines, Ctrl-C while loading, concurrent saves (issue 18, item 8).

Each program runs in a subprocess with a timeout: the failures found were hangs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from trio_agent import UserMessage
from trio_agent._cli import UsageError
from trio_agent._cli._session import load_session, save_transcript
from trio_agent.serialization import dump_transcript, load_transcript

POSIX_ONLY = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs, devices and signals")
TIMEOUT = 60  # generous: a loaded machine starts Python slowly; a hang never ends


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def _program(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trio_agent", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=_env(),
        stdin=subprocess.DEVNULL,
    )


def _last_error(result: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    return result.returncode, result.stdout, result.stderr.splitlines()[-1]


@POSIX_ONLY
def test_a_fifo_session_is_refused_at_once(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    os.mkfifo(session)
    result = _program("run", "--session", str(session), "hello")
    assert _last_error(result) == (
        2,
        "",
        f"trio-agent run: error: cannot load session {str(session)!r}: is not a regular file",
    )


@POSIX_ONLY
def test_a_session_linked_to_dev_zero_is_refused(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session.symlink_to("/dev/zero")
    result = _program("chat", "--session", str(session))
    assert _last_error(result) == (
        2,
        "",
        f"trio-agent chat: error: cannot load session {str(session)!r}: is not a regular file",
    )


def test_a_directory_session_is_refused(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session.mkdir()
    with pytest.raises(UsageError) as caught:
        load_session(session)
    assert str(caught.value) == f"cannot load session {str(session)!r}: is a directory"


def test_an_endless_line_is_refused_after_128_mib(tmp_path: Path) -> None:
    # A sparse file: 4 GiB of zero bytes without a line end, next to nothing on disk.
    session = tmp_path / "s.jsonl"
    with open(session, "wb") as file:
        file.truncate(4 * 1024**3)
    started = time.monotonic()
    result = _program("run", "--session", str(session), "hello")
    assert _last_error(result) == (
        2,
        "",
        f"trio-agent run: error: cannot load session {str(session)!r}: line 1: longer than 128 MiB",
    )
    assert time.monotonic() - started < 30


def test_a_long_line_is_named(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    dump_transcript(session, [UserMessage(content="hi", timestamp=1)] * 2)
    line = '{"role":"user","content":"' + "x" * 100 + '","timestamp":1}'
    with open(session, "a", encoding="utf-8") as file:
        file.write(line + "\r\n")  # the line end does not count
    assert len(load_session(session, max_line_bytes=len(line)) or []) == 3
    with pytest.raises(UsageError) as caught:
        load_session(session, max_line_bytes=len(line) - 1)
    assert str(caught.value) == (
        f"cannot load session {str(session)!r}: line 3: longer than {len(line) - 1} bytes"
    )


@POSIX_ONLY
def test_an_image_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    image = tmp_path / "picture.png"
    os.mkfifo(image)
    result = _program("run", "--image", str(image), "hello")
    assert _last_error(result) == (
        2,
        "",
        f"trio-agent run: error: --image {str(image)!r}: is not a regular file",
    )


_BLOCKED_LOAD = """
import sys, threading
import trio_agent._cli._main as program

def load_forever(path):
    print("loading", flush=True)
    threading.Event().wait()

program.load_session = load_forever
sys.exit(program.main(["run", "--session", sys.argv[1], "hello"]))
"""


@POSIX_ONLY
def test_ctrl_c_ends_a_load_that_never_returns(tmp_path: Path) -> None:
    # Whatever a file system does (a hung network mount, say), Ctrl-C ends the program.
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_BLOCKED_LOAD), str(tmp_path / "s.jsonl")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "loading\n"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
        process.wait()
    assert (process.returncode, out, err) == (130, "", "")


_SAVER = """
import sys
from pathlib import Path
from trio_agent import UserMessage
from trio_agent._cli._session import save_transcript

path, text = Path(sys.argv[1]), sys.argv[2]
for _ in range(300):
    save_transcript(path, [UserMessage(content=text, timestamp=1)])
"""


def test_two_processes_saving_one_session_never_fail(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    savers = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_SAVER), str(session), text],
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for text in ("first", "second")
    ]
    results = [(saver.wait(timeout=TIMEOUT), saver.communicate()[1]) for saver in savers]
    assert results == [(0, ""), (0, "")]
    [message] = load_transcript(session)
    assert isinstance(message, UserMessage) and message.content in ("first", "second")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["s.jsonl"]  # no leftovers


def test_a_saved_session_is_private(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    save_transcript(session, [UserMessage(content="secret plans", timestamp=1)])
    if sys.platform != "win32":
        assert session.stat().st_mode & 0o777 == 0o600
    assert load_transcript(session) == [UserMessage(content="secret plans", timestamp=1)]
