"""Where ``trio-agent chat`` reads its input.

Two phases alternate. While the agent is idle, :meth:`ChatInput.read` reads the next
entry: on a terminal through the standard library's ``readline`` (line editing, history,
bracketed paste) in a worker thread. While the agent works,
:meth:`ChatInput.read_while_busy` collects typed lines *without echo*, so typing never
lands in the middle of the streamed answer; the program shows each line once it is
queued. A line typed but not finished when the run ends is put back into the next
``readline`` prompt.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import os
import select
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, TextIO

import trio

try:
    import termios
except ImportError:  # pragma: no cover - not POSIX
    termios = None  # type: ignore[assignment]

__all__ = [
    "ChannelInput",
    "ChatInput",
    "TerminalInput",
    "TypeAhead",
    "read_lines",
    "terminal_restored",
]

HISTORY_LENGTH = 1000
PASTE_WAIT = 0.02
"""Seconds to wait for more input after a line: a paste without bracketed-paste
markers arrives at once, so its next line is already there."""


class ChatInput(Protocol):
    """The input of ``chat``."""

    async def read(self, prompt: str, *, continuation: bool = False) -> str | None:
        """The next entry (without its line break), or ``None`` at the end of input."""
        ...

    async def read_while_busy(self) -> str | None:
        """The next line typed while the agent works; ``None`` at the end of input.

        Cancelled when the run ends.
        """
        ...

    def remember(self, entry: str) -> None:
        """Add a complete entry to the history."""
        ...

    def interrupt(self) -> bool:
        """Ctrl-C while no run is going: clear a half-typed line at the prompt (or drop
        the entry being continued) and return ``True``; return ``False`` when there is
        none (the program then ends)."""
        ...

    def entry_dropped(self) -> bool:
        """Whether Ctrl-C dropped the entry during the last continuation read: the line
        it returned starts a new entry."""
        ...


class ChannelInput:
    """Lines from a memory channel (piped stdin, or tests).

    Args:
        lines: The lines; the end of the channel is the end of input.
        interactive: Lines received while the agent works steer it; otherwise they wait
            for the run to end, one prompt at a time.
    """

    def __init__(self, lines: trio.MemoryReceiveChannel[str], *, interactive: bool) -> None:
        self.lines = lines
        self.interactive = interactive

    async def read(self, prompt: str, *, continuation: bool = False) -> str | None:
        """The next line, or ``None`` at the end of the channel."""
        try:
            return (await self.lines.receive()).rstrip("\r\n")
        except trio.EndOfChannel:
            return None

    async def read_while_busy(self) -> str | None:
        """The next line if interactive; otherwise wait until cancelled."""
        if not self.interactive:
            await trio.sleep_forever()
        return await self.read("")

    def remember(self, entry: str) -> None:
        """Nothing to remember."""

    def interrupt(self) -> bool:
        """No line is being typed."""
        return False

    def entry_dropped(self) -> bool:
        """Never."""
        return False


async def read_lines(stdin: TextIO, send: trio.MemorySendChannel[str]) -> None:
    """Forward the lines of ``stdin`` into ``send`` until end of input, then close it.

    Reads in a worker thread (portable, and leaves the terminal's blocking mode alone);
    a read in progress is abandoned when this task is cancelled.
    """
    async with send:
        while True:
            line = await trio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)
            if not line:
                return
            await send.send(line)


class TypeAhead:
    """A line being typed without echo: printable characters, Backspace, Ctrl-U, Ctrl-W;
    escape sequences (arrow keys, bracketed-paste markers) are dropped."""

    def __init__(self) -> None:
        self.text = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._escape = ""
        self._in_paste = False

    def feed(self, data: bytes) -> list[str]:
        """Add typed bytes; return the lines completed by Enter."""
        lines: list[str] = []
        for char in self._decoder.decode(data):
            if self._escape:
                self._escape += char
                if _escape_complete(self._escape):
                    if self._escape in (_PASTE_START, _PASTE_END):
                        self._in_paste = self._escape == _PASTE_START
                    self._escape = ""
            elif char == "\x1b":
                self._escape = char
            elif char in "\r\n" and self._in_paste:
                self.text += "\n"  # a pasted line break is part of the entry
            elif char in "\r\n":
                lines.append(self.text)
                self.text = ""
            elif char in "\x7f\x08":
                self.text = self.text[:-1]
            elif char == "\x15":  # Ctrl-U
                self.text = ""
            elif char == "\x17":  # Ctrl-W: the last word
                self.text = self.text.rstrip()
                self.text = self.text[: self.text.rfind(" ") + 1]
            elif char == "\t" or char >= " ":
                self.text += char
        return lines

    def take(self) -> str:
        """The unfinished line (which is then empty)."""
        text, self.text = self.text, ""
        return text


_PASTE_START = "\x1b[200~"
_PASTE_END = "\x1b[201~"
BRACKETED_PASTE_ON = "\x1b[?2004h"
BRACKETED_PASTE_OFF = "\x1b[?2004l"


def _escape_complete(sequence: str) -> bool:
    if len(sequence) < 2:
        return False
    if sequence[1] == "[":  # CSI: parameters, then a final byte in @..~
        return len(sequence) > 2 and "@" <= sequence[-1] <= "~"
    if sequence[1] == "O":  # SS3: one more character
        return len(sequence) > 2
    return True  # ESC + one character (Alt-x)


class TerminalInput:
    """Input from a terminal: ``readline`` while idle, unechoed type-ahead while busy.

    Args:
        stdin: The terminal.
        history: The history file (read now, appended to after each entry), or ``None``.
    """

    def __init__(self, stdin: TextIO, stdout: TextIO, *, history: Path | None = None) -> None:
        self.fd = stdin.fileno()
        self.stdout = stdout
        self.history = history
        self.typeahead = TypeAhead()
        self.history_error: str | None = None
        """Why the history file could not be read or written, once."""
        self._pending_lines: list[str] = []
        self._saved: Any = None  # terminal settings while quiet
        self._readline: Any = None
        self._library: ctypes.CDLL | None = None  # the C library, to clear its line
        self._at_prompt = False  # a readline read is in progress
        self._continuation = False  # ... of a continued entry (lines before it pending)
        self._entry_prompt = ""  # the prompt of an entry's first line
        self._dropped = False
        try:
            import readline
        except ImportError:  # pragma: no cover - no readline on this platform
            return
        self._readline = readline
        self._library = _line_clearing_library(readline)
        readline.set_auto_history(False)
        readline.set_history_length(HISTORY_LENGTH)
        if history is not None:
            try:
                readline.read_history_file(history)
            except FileNotFoundError:
                pass
            except OSError as exc:
                self.history_error = f"cannot read history {str(history)!r}: {exc.strerror}"

    # -- idle -------------------------------------------------------------------------

    async def read(self, prompt: str, *, continuation: bool = False) -> str | None:
        """Read one entry with ``readline`` in a worker thread (abandoned when cancelled:
        the blocked read then ends with the process)."""
        self._restore()
        if self._pending_lines:  # typed (with Enter) just before the run ended
            return self._pending_lines.pop(0)
        prefill = self.typeahead.take()
        if not continuation:
            self._entry_prompt = prompt
        self._at_prompt, self._continuation, self._dropped = True, continuation, False
        try:
            return await trio.to_thread.run_sync(
                self._read_blocking, prompt, prefill, abandon_on_cancel=True
            )
        finally:
            self._at_prompt = False

    def interrupt(self) -> bool:
        """Ctrl-C at the prompt: clear a half-typed line, as bash and the Python REPL do;
        at a continuation prompt, drop the whole entry and show the entry prompt again.

        The line belongs to ``readline`` in the reading thread, blocked waiting for a key:
        it is cleared through the C library (GNU readline's ``rl_replace_line``) and the
        prompt redrawn. Without that library (libedit) the line is not cleared and
        ``False`` is returned, as for an empty line.
        """
        readline, library = self._readline, self._library
        if not self._at_prompt or readline is None or library is None:
            return False
        if not readline.get_line_buffer() and not self._continuation:
            return False
        library.rl_replace_line(b"", 1)
        ctypes.c_int.in_dll(library, "rl_point").value = 0
        library.using_history()  # Up starts again from the newest entry
        if self._continuation:  # the line read next starts a new entry
            self._continuation, self._dropped = False, True
            library.rl_set_prompt(self._entry_prompt.encode())
        self._write("^C\n")
        library.rl_on_new_line()
        library.rl_redisplay()
        return True

    def entry_dropped(self) -> bool:
        """Whether Ctrl-C dropped the continued entry during the last read."""
        return self._dropped

    def _read_blocking(self, prompt: str, prefill: str) -> str | None:
        readline = self._readline
        if prefill and readline is not None:
            readline.set_startup_hook(lambda: readline.insert_text(prefill))
        try:
            lines = [input(prompt)]
            # A paste without bracketed-paste markers: its next lines are already here.
            while _input_pending(self.fd, PASTE_WAIT):
                lines.append(input(""))
        except EOFError:  # Ctrl-D: leave the shell's prompt on a line of its own
            self._write("\n")
            return None
        finally:
            if prefill and readline is not None:
                readline.set_startup_hook(None)
        return "\n".join(lines)

    def remember(self, entry: str) -> None:
        """Add ``entry`` to the in-memory history and append it to the history file."""
        readline = self._readline
        if readline is None or not entry.strip():
            return
        length = readline.get_current_history_length()
        if length and readline.get_history_item(length) == entry:
            return  # no consecutive duplicates
        readline.add_history(entry)
        if self.history is None or self.history_error is not None:
            return
        try:
            self.history.parent.mkdir(parents=True, exist_ok=True)
            if not self.history.exists():
                self.history.touch(mode=0o600)
            readline.append_history_file(1, self.history)
        except OSError as exc:
            self.history_error = f"cannot write history {str(self.history)!r}: {exc.strerror}"

    # -- busy -------------------------------------------------------------------------

    async def read_while_busy(self) -> str | None:
        """The next line typed while the agent works, read without echo (the terminal
        stays quiet until the next :meth:`read`). Without ``termios`` (not POSIX), lines
        typed during a run wait for it to end."""
        if termios is None:  # pragma: no cover
            await trio.sleep_forever()
        self._quiet()
        while not self._pending_lines:
            await trio.lowlevel.wait_readable(self.fd)
            data = os.read(self.fd, 4096)
            if not data:
                return None
            self._pending_lines.extend(self.typeahead.feed(data))
        return self._pending_lines.pop(0)

    def _quiet(self) -> None:
        """No echo and no line buffering (Ctrl-C still interrupts), bracketed paste on
        (a paste stays one entry); :meth:`_restore` undoes it."""
        if self._saved is not None or termios is None or not os.isatty(self.fd):
            return
        self._saved = termios.tcgetattr(self.fd)
        quiet = termios.tcgetattr(self.fd)
        quiet[3] &= ~(termios.ECHO | termios.ICANON)  # lflag
        quiet[6][termios.VMIN] = 1
        quiet[6][termios.VTIME] = 0
        termios.tcsetattr(self.fd, termios.TCSANOW, quiet)
        self._write(BRACKETED_PASTE_ON)

    def _restore(self) -> None:
        saved, self._saved = self._saved, None
        if saved is not None and termios is not None:
            termios.tcsetattr(self.fd, termios.TCSANOW, saved)
            self._write(BRACKETED_PASTE_OFF)

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stdout.write(text)
            self.stdout.flush()


_LINE_CLEARING = (
    "rl_replace_line",
    "rl_on_new_line",
    "rl_redisplay",
    "rl_set_prompt",
    "using_history",
)


def _line_clearing_library(readline: Any) -> ctypes.CDLL | None:
    """The GNU readline library behind the ``readline`` module, if it can clear the line
    being edited (``None`` for libedit, or a module linked statically)."""
    if "libedit" in (readline.__doc__ or ""):
        return None
    try:
        library = ctypes.CDLL(readline.__file__)
        ctypes.c_int.in_dll(library, "rl_point")
    except (OSError, ValueError, AttributeError):
        return None
    if not all(hasattr(library, name) for name in _LINE_CLEARING):
        return None
    library.rl_replace_line.argtypes = [ctypes.c_char_p, ctypes.c_int]
    library.rl_set_prompt.argtypes = [ctypes.c_char_p]
    return library


def _input_pending(fd: int, timeout: float) -> bool:
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
    except (OSError, ValueError):  # pragma: no cover
        return False
    return bool(readable)


@contextlib.contextmanager
def terminal_restored(stdin: TextIO, stdout: TextIO) -> Iterator[None]:
    """Restore the terminal settings of ``stdin`` on exit: a ``readline`` read abandoned
    by Ctrl-C leaves them (and bracketed paste) changed."""
    fd: int | None = None
    saved: Any = None
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = stdin.fileno()
        if termios is not None and os.isatty(fd):
            saved = termios.tcgetattr(fd)
    try:
        yield
    finally:
        if saved is not None and fd is not None and termios is not None:
            with contextlib.suppress(OSError, ValueError):
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)
                if stdout.isatty():
                    stdout.write(BRACKETED_PASTE_OFF)
                    stdout.flush()
