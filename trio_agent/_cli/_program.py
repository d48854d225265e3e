"""One invocation of ``trio-agent``: runs, the chat loop, commands, Ctrl-C and saving."""

from __future__ import annotations

import argparse
import functools
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import get_args

import attrs
import trio

from .._agent import Agent
from .._exceptions import SerializationError
from .._messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ThinkingLevel,
    UserMessage,
)
from .._tools import AgentTool
from ..sessions import SessionError
from ._args import PROG, CommandError, ModelSpec, UsageError, parse_model_spec
from ._commands import BUSY_COMMANDS, COMMANDS, Command, help_text, parse_entry
from ._input import ChatInput
from ._render import Renderer, is_terminal, usage_summary
from ._session import check_session_directory, save_transcript
from ._store import StoreSession, opened_store, session_rows, session_table

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "ModelChoice",
    "ModelChooser",
    "Program",
    "join_continued",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


@attrs.frozen(kw_only=True)
class ModelChoice:
    """What selecting a model sets in the agent."""

    model: Model
    tools: list[AgentTool]
    get_api_key: Callable[[str], str | None] | None
    """The key source for this model (a key is sent only to the provider it was given
    for)."""


ModelChooser = Callable[[ModelSpec | None], ModelChoice]
"""``--model`` and ``/model``: what a spec selects (raises :class:`UsageError`)."""


def join_continued(lines: Sequence[str]) -> str:
    """One entry from lines that were continued with a trailing backslash."""
    return "\n".join(line[:-1] if line.endswith("\\") else line for line in lines)


def _tidy(entry: str) -> str:
    """Drop leading blank lines and trailing whitespace; keep indentation."""
    lines = entry.rstrip().split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines)


@attrs.frozen(kw_only=True)
class _Options:
    session: Path | None
    store: StoreSession | None
    store_url: str | None
    interactive: bool
    show_usage: bool
    choose_model: ModelChooser | None
    new_session_only: bool


class Program:
    """One invocation: the agent, its output, interrupt handling and the session file.

    Args:
        agent: The agent (its listeners already include the renderer).
        renderer: Where output goes.
        session: The transcript file, written after every run.
        store: The session of the store, attached to the agent: opened already, or
            (a new chat) opened when the first prompt is sent, so that a chat that
            said nothing leaves nothing behind.
        store_url: The store ``/sessions`` lists.
        interactive: ``chat`` reads from a person: lines typed during a run steer it.
        show_usage: Print a usage line after every run.
        choose_model: What ``/model`` uses (``None``: the command is unavailable).
        new_session_only: ``session`` is a new file of the sessions directory: it is
            not written until something was said.
    """

    def __init__(
        self,
        agent: Agent,
        renderer: Renderer,
        *,
        session: Path | None = None,
        store: StoreSession | None = None,
        store_url: str | None = None,
        interactive: bool = False,
        show_usage: bool = False,
        choose_model: ModelChooser | None = None,
        new_session_only: bool = False,
    ) -> None:
        self.agent = agent
        self.renderer = renderer
        self.options = _Options(
            session=session,
            store=store,
            store_url=store_url,
            interactive=interactive,
            show_usage=show_usage,
            choose_model=choose_model,
            new_session_only=new_session_only,
        )
        self._scope = trio.CancelScope()
        self._abort_requested = False
        self._quit = False
        self._input_ended = False
        self._output_gone = False
        self._input: ChatInput | None = None  # chat's input, while it runs
        renderer.on_output_gone = self._stop_for_closed_output
        self._persisted: list[AgentMessage] | None = None
        """The transcript as last written to the session (or tried)."""

    # -- interrupts -------------------------------------------------------------------

    def interrupt(self) -> None:
        """What Ctrl-C does: abort the active run; if there is none, clear a half-typed
        line at the chat's prompt; else (an empty line, or a second Ctrl-C while the run
        is aborting) end the program (status 130)."""
        if self.agent.state.is_streaming and not self._abort_requested:
            self._abort("interrupted")
        elif self._input is not None and self._input.interrupt():
            pass  # a half-typed line was cleared
        else:
            self._scope.cancel()

    def _stop_for_closed_output(self) -> None:
        """The reader of the output went away (``| head``): end quietly, status 1."""
        self._output_gone = True
        self._scope.cancel()

    def _abort(self, reason: str) -> None:
        self._abort_requested = True
        # No notice here: text already in the event pipeline is still to be printed; the
        # run's closing events report the abort in order.
        self.renderer.run_aborted = True
        self.agent.abort(reason)

    async def _watch_interrupts(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        with trio.open_signal_receiver(signal.SIGINT) as interrupts:
            task_status.started()
            async for _ in interrupts:
                self.interrupt()

    async def run(
        self,
        body: Callable[[], Awaitable[int]],
        *,
        handle_signals: bool = True,
    ) -> int:
        """Run ``body`` (a command), with Ctrl-C handling; persist the session at the end.

        Returns the command's exit status, or 130 when it was interrupted.
        """
        status = EXIT_INTERRUPTED
        async with trio.open_nursery() as nursery:
            if handle_signals:
                await nursery.start(self._watch_interrupts)
            with self._scope:
                status = await body()
            nursery.cancel_scope.cancel()
        if self._output_gone:
            status = EXIT_ERROR
        elif self._scope.cancelled_caught:
            status = EXIT_INTERRUPTED
            self.renderer.finish()
        # The transcript is consistent even after an interrupt (the Agent guarantees it).
        return await self.persist() or status

    async def persist(self) -> int:
        """Write the transcript to the session file (if any) atomically.

        Returns 0, or 1 after reporting an error.
        """
        session = self.options.session
        messages = list(self.agent.state.messages)
        last = self._persisted
        unchanged = (
            last is not None
            and len(messages) == len(last)
            and all(new is old for new, old in zip(messages, last, strict=True))
        )
        if (
            session is None
            or unchanged  # saved already, or its failure reported already
            or (self.options.new_session_only and not self._said_anything())
        ):
            await trio.lowlevel.checkpoint()
            return EXIT_OK
        self._persisted = messages
        return await self._save(session)

    def _said_anything(self) -> bool:
        return any(message.role != "system" for message in self.agent.state.messages)

    async def _save(self, path: Path) -> int:
        messages = list(self.agent.state.messages)
        try:
            # Shielded: an interrupt must not leave the file half written.
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(save_transcript, path, messages)
        except (OSError, SerializationError) as exc:
            # The user named the file, not the temporary file an OSError names.
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.renderer.notice(
                self.renderer.style("red", f"{PROG}: error: cannot write session")
                + f" {str(path)!r}: {reason}"
            )
            return EXIT_ERROR
        return EXIT_OK

    # -- runs -------------------------------------------------------------------------

    def status(self) -> int:
        """Exit status from the transcript's last message: 1 for an error, 130 for an
        aborted run, else 0."""
        messages = self.agent.state.messages
        last = messages[-1] if messages else None
        if isinstance(last, AssistantMessage):
            if last.stop_reason == "error":
                return EXIT_ERROR
            if last.stop_reason == "aborted":
                return EXIT_INTERRUPTED
        return EXIT_OK

    async def _run_agent(self, start: Callable[[], Awaitable[object]]) -> None:
        """One run, then what was queued too late for it, then the usage line."""
        self._abort_requested = False
        self.renderer.run_aborted = False
        first = len(self.agent.state.messages)
        await start()
        # Queued just after the run's last queue poll: run it now.
        while self.agent.has_queued_messages() and not self._abort_requested:
            await self.agent.continue_()
        if self._abort_requested and self.agent.has_queued_messages():
            count = len(self.renderer.queued)
            self.agent.clear_all_queues()  # an abort drops what was typed meanwhile
            self.renderer.queued.clear()
            if count:
                self.renderer.info("dropped", f"{count} queued message(s) (the run was aborted)")
        if self.options.show_usage:
            summary = usage_summary(self.agent.state.messages[first:], self.agent.state.model)
            if summary is not None:
                self.renderer.notice(self.renderer.style("dim", f"[usage] {summary}"))

    async def run_once(self, prompt: str, images: Sequence[ImageContent] = ()) -> int:
        """``trio-agent run``: one prompt."""
        await self._run_agent(lambda: self.agent.prompt(prompt, images=list(images) or None))
        return self.status()

    # -- chat -------------------------------------------------------------------------

    async def chat(self, input: ChatInput, images: Sequence[ImageContent] = ()) -> int:
        """``trio-agent chat``: one run per entry until ``/quit`` or the end of input;
        commands run in between, and the session is written after every run."""
        self._input = input
        return await self._chat(input, list(images), None)

    async def _chat(
        self, input: ChatInput, pending_images: list[ImageContent], first: str | None
    ) -> int:
        while not self._quit and not self._input_ended:
            entry = first if first is not None else await self._read_entry(input)
            first = None
            if entry is None:
                break
            parsed = parse_entry(entry)
            if isinstance(parsed, Command) and parsed.name == "/followup" and parsed.argument:
                parsed = parsed.argument  # nothing runs: a follow-up is the next prompt
            if isinstance(parsed, Command):
                if await self._command(parsed):
                    break
                continue
            store = self.options.store
            if store is not None and store.session is None:
                # A new chat's session is created when something is said, and the rest
                # of the chat runs inside its claim.
                async with store.open(self.agent, self.agent.state.tools):
                    return await self._chat(input, pending_images, entry)
            input.remember(entry)
            attached, pending_images = pending_images, []
            async with trio.open_nursery() as nursery:
                if self.options.interactive:
                    nursery.start_soon(self._read_while_busy, input)
                await self._run_agent(
                    functools.partial(self.agent.prompt, parsed, images=attached or None)
                )
                nursery.cancel_scope.cancel()
            if await self.persist():
                return EXIT_ERROR
        return EXIT_OK

    async def _read_entry(self, input: ChatInput) -> str | None:
        """The next non-blank entry (continued lines joined), or ``None`` at the end."""
        while True:
            line = await input.read(self._prompt())
            if line is None:
                return None
            lines = [line]
            while lines[-1].endswith("\\"):
                more = await input.read(self._prompt(continuation=True), continuation=True)
                if more is None:
                    break
                if input.entry_dropped():  # Ctrl-C: the lines so far are gone
                    lines = [more]
                else:
                    lines.append(more)
            entry = _tidy(join_continued(lines))
            if entry:
                return entry

    def _prompt(self, *, continuation: bool = False) -> str:
        if self.renderer.json_lines:
            return ""  # stdout holds only JSON lines
        text = "... " if continuation else "> "
        if not self.renderer.style.enabled or not is_terminal(self.renderer.stdout):
            return text
        # \x01 ... \x02 tell readline that the colour codes take no room.
        return "\x01\x1b[1;32m\x02" + text + "\x01\x1b[0m\x02"

    async def _read_while_busy(self, input: ChatInput) -> None:
        """Lines typed during a run: steering, ``/followup``, ``/quit``, ``/help``."""
        while True:
            lines: list[str] = []
            while not lines or lines[-1].endswith("\\"):
                line = await input.read_while_busy()
                if line is None:
                    self._input_ended = True  # the run finishes, then chat ends
                    if not lines:
                        return
                    break
                lines.append(line)
            entry = _tidy(join_continued(lines))
            if not entry:
                continue
            parsed = parse_entry(entry)
            if isinstance(parsed, Command):
                if parsed.name == "/followup" and parsed.argument:
                    input.remember(entry)
                    self._queue("follow-up", parsed.argument)
                elif parsed.name == "/quit":
                    self._quit = True
                    self._abort("quit")
                    return
                elif parsed.name == "/help":
                    self.renderer.notice_after_answer(help_text())
                elif parsed.name in COMMANDS and parsed.name not in BUSY_COMMANDS:
                    self.renderer.error(
                        f"{parsed.name} is not available while the agent works "
                        "(wait, or press Ctrl-C to abort the run)",
                        after_answer=True,
                    )
                else:
                    self._command_error(parsed, after_answer=True)
            else:
                input.remember(entry)
                self._queue("steer", parsed)

    def _queue(self, kind: str, text: str) -> None:
        message = UserMessage(content=[TextContent(text=text)])
        self.renderer.queued.append((kind, message))
        if kind == "steer":
            self.agent.steer(message)
        else:
            self.agent.follow_up(message)
        style = self.renderer.style
        self.renderer.notice_after_answer(
            style("dim", f"[queued {kind}]") + " " + text.replace("\n", " ")
        )

    # -- commands -----------------------------------------------------------------------

    def _command_error(self, command: Command, *, after_answer: bool = False) -> None:
        if command.name not in COMMANDS:
            text = f"unknown command {command.name!r} (/help lists the commands)"
        else:
            text = f"{command.name} needs {COMMANDS[command.name][0]}"
        self.renderer.error(text, after_answer=after_answer)

    async def _command(self, command: Command) -> bool:
        """Run a command typed while idle; return True to end the chat."""
        name, argument = command.name, command.argument
        needs_argument = name in COMMANDS and COMMANDS[name][0][:1] not in ("", "[")
        if name not in COMMANDS or (needs_argument and not argument):
            self._command_error(command)
        elif name == "/quit":
            return True
        elif name == "/help":
            self.renderer.notice(help_text())
        elif name == "/reset":
            self.agent.reset()
            store = self.options.store
            if store is not None and store.session is not None:
                await store.start_over(self.agent)
            self.renderer.info("reset", "the conversation is cleared")
            await self.persist()
        elif name == "/compact":
            await self._compact(argument)
        elif name == "/sessions":
            await self._list_sessions()
        elif name == "/model":
            self._switch_model(argument)
        elif name == "/thinking":
            levels: tuple[ThinkingLevel, ...] = get_args(ThinkingLevel)
            if argument not in levels:
                self.renderer.error(
                    f"unknown thinking level {argument!r} (one of: {', '.join(levels)})"
                )
            else:
                self.agent.state.thinking_level = argument
                self.renderer.info("thinking", argument)
        elif name == "/save":
            await self._save_as(argument)
        return False

    async def _compact(self, instructions: str) -> None:
        """``/compact [INSTRUCTIONS]``: a compaction now (the renderer reports it)."""
        self._abort_requested = False
        self.renderer.run_aborted = False
        await self.agent.compact(instructions or None)
        await self.persist()

    async def _list_sessions(self) -> None:
        """``/sessions``: the sessions of the store, the current one marked ``*``."""
        url = self.options.store_url
        if url is None:
            self.renderer.error("no session store here")
            return
        store = self.options.store
        current = store.session_id if store is not None and store.session is not None else None
        try:
            if store is not None and store.store is not None and store.url == url:
                rows = await session_rows(store.store, url)
            else:
                async with opened_store(url) as opened:
                    rows = await session_rows(opened, url)
        except (UsageError, CommandError, SessionError) as exc:
            self.renderer.error(str(exc))
            return
        if not rows:
            self.renderer.info("sessions", f"none in {url}")
            return
        lines = session_table(rows, current if current is not None else "")
        self.renderer.info("sessions", url)
        for line in lines:
            self.renderer.notice(line)

    def _switch_model(self, text: str) -> None:
        """``/model SPEC`` switches; ``/model`` alone shows the current model."""
        choose = self.options.choose_model
        if text:
            try:
                if choose is None:
                    raise UsageError("switching models is not available here")
                choice = choose(parse_model_spec(text))
            except (UsageError, argparse.ArgumentTypeError) as exc:
                self.renderer.error(str(exc))
                return
            self.agent.state.model = choice.model
            self.agent.state.tools = choice.tools
            self.agent.get_api_key = choice.get_api_key
        model = self.agent.state.model
        names = ", ".join(tool.name for tool in self.agent.state.tools) or "none"
        self.renderer.info("model", f"{model.provider}/{model.id} (tools: {names})")

    async def _save_as(self, text: str) -> None:
        try:
            path = await trio.to_thread.run_sync(_save_target, text)
        except UsageError as exc:
            self.renderer.error(str(exc))
            return
        if await self._save(path) == EXIT_OK:
            count = len(self.agent.state.messages)
            self.renderer.info("saved", f"{count} messages to {str(path)!r}")


def _save_target(text: str) -> Path:
    """The file of ``/save PATH`` (``~`` expanded), once its directory is checked."""
    path = Path(os.path.expanduser(text))
    check_session_directory(path)
    return path
