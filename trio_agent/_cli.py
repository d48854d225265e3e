"""The ``trio-agent`` program (also ``python -m trio_agent``).

``trio-agent run PROMPT`` runs one prompt; ``trio-agent chat`` reads prompts from stdin,
one per line. Without ``--model`` the program runs offline on the embedded demo model
(:mod:`trio_agent._demo`); ``--model provider/id`` (with ``--base-url``, ``--api-key`` or
the provider's environment variable) selects a real provider.

Output: the assistant's text streams to stdout as it arrives; tool calls, tool results,
errors and notices are one-line ``[tag] ...`` forms on stderr, so stdout holds only the
answer. With ``--json`` stdout holds every agent event as one JSON line instead.

Exit status: 0 on success, 1 when the last assistant message is an error (or the
session file cannot be written), 2 for usage errors, 130 when interrupted (Ctrl-C).
Usage errors found after parsing (an unknown model, an unreadable session file, ...) are
reported like argparse's own, through the subcommand's parser.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TextIO, get_args
from urllib.parse import urlsplit

import attrs
import trio

from . import __version__
from ._agent import Agent, AgentInitialState
from ._demo import DEMO_MODEL_ID, DEMO_SYSTEM_PROMPT, DEMO_TOOLS, DemoModel
from ._events import (
    AgentEvent,
    MessageEndEvent,
    MessageUpdateEvent,
    TextDeltaEvent,
    TextStartEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
)
from ._exceptions import SerializationError
from ._messages import (
    AgentMessage,
    AssistantMessage,
    Model,
    ModelCost,
    TextContent,
    ThinkingLevel,
    UserMessage,
)
from ._streaming import StreamFn
from ._transcript import content_text
from ._util import collapse_exception_group
from .models import Models
from .models._http import env_api_key
from .serialization import dump_transcript, load_transcript, to_json

__all__ = ["build_parser", "main", "run_program"]

PROG = "trio-agent"
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it

_CUSTOM_APIS = ("openai-completions", "anthropic-messages", "openai-responses")
_DEMO_PROVIDER = "faux"
_CUSTOM_CONTEXT_WINDOW = 128_000
_CUSTOM_MAX_TOKENS = 8_192
_MAX_RESULT_CHARS = 200


class UsageError(Exception):
    """A command line that cannot run (reported like argparse errors, exit status 2)."""


_COMMAND_PARSER = "_command_parser"
"""Namespace attribute holding the subcommand's parser (which reports usage errors)."""


# ---------------------------------------------------------------------------------------
# Command line


@attrs.frozen(kw_only=True)
class ModelSpec:
    """``--model provider/id``, split at the first ``/`` (ids may contain more)."""

    provider: str
    model_id: str

    def __str__(self) -> str:
        return f"{self.provider}/{self.model_id}"


def _model_spec(text: str) -> ModelSpec:
    provider, slash, model_id = text.partition("/")
    if not (provider and slash and model_id):
        raise argparse.ArgumentTypeError(
            f"expected PROVIDER/ID (e.g. openai/gpt-4o-mini), got {text!r}"
        )
    return ModelSpec(provider=provider, model_id=model_id)


def _base_url(text: str) -> str:
    try:
        parts = urlsplit(text)
    except ValueError:  # e.g. an unbalanced "[" in the host
        parts = None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(
            f"expected an http:// or https:// URL (e.g. http://localhost:11434/v1), got {text!r}"
        )
    return text


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The program's argument parser (``run`` and ``chat`` share every option)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Run an LLM agent on Trio. Without --model it runs offline on a built-in demo "
            "model with demo tools (get_weather, calculate, get_time)."
        ),
        epilog=(
            "Text streams to stdout; tool calls and results go to stderr as one-line "
            "'[tool call] ...' / '[tool result] ...' forms. Ctrl-C aborts the run, a "
            "second Ctrl-C exits (status 130)."
        ),
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    model = common.add_argument_group("model")
    model.add_argument(
        "--model",
        type=_model_spec,
        metavar="PROVIDER/ID",
        help="a catalog model (openai/gpt-4o-mini, anthropic/claude-sonnet-4-5, "
        "openrouter/openai/gpt-4o-mini, ...) or, with --base-url, any model id of an "
        "OpenAI-compatible server (default: the offline demo model faux/demo)",
    )
    model.add_argument(
        "--base-url",
        type=_base_url,
        metavar="URL",
        help="the API base URL, e.g. http://localhost:11434/v1 for Ollama",
    )
    model.add_argument(
        "--api",
        choices=_CUSTOM_APIS,
        help="wire API of a --base-url model that is not in the catalog "
        "(default: openai-completions)",
    )
    model.add_argument(
        "--api-key",
        metavar="KEY",
        help="API key (default: the provider's environment variable, e.g. OPENAI_API_KEY)",
    )
    model.add_argument(
        "--thinking",
        choices=get_args(ThinkingLevel),
        default="off",
        help="thinking level for reasoning models (default: off)",
    )
    model.add_argument(
        "--tokens-per-second",
        type=_positive_float,
        default=200.0,
        metavar="N",
        help="streaming pace of the demo model (default: 200)",
    )
    agent = common.add_argument_group("agent")
    agent.add_argument("--system", metavar="PROMPT", help="the system prompt")
    agent.add_argument(
        "--no-tools", action="store_true", help="do not offer the built-in demo tools"
    )
    agent.add_argument(
        "--session",
        type=Path,
        metavar="FILE.jsonl",
        help="load the transcript from FILE if it exists; write it back after each run",
    )
    agent.add_argument(
        "--json", action="store_true", help="print every event as one JSON line on stdout"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run", parents=[common], help="run one prompt", description="Run one prompt."
    )
    run.add_argument("prompt", metavar="PROMPT", help="the user message")
    chat = commands.add_parser(
        "chat",
        parents=[common],
        help="read prompts from stdin, one per line",
        description=(
            "Read prompts from stdin, one per line; a blank line, /quit or end of input "
            "exits. On a terminal, lines typed while the agent works steer the run."
        ),
    )
    for command in (run, chat):
        command.set_defaults(**{_COMMAND_PARSER: command})
    return parser


# ---------------------------------------------------------------------------------------
# Output


class Renderer:
    """The program's agent listener: writes events to stdout/stderr as they arrive.

    Human form: text deltas to ``stdout`` unchanged; ``[tool call]``, ``[tool result]``,
    ``[tool error]``, ``[error]`` and ``[aborted]`` lines to ``stderr``. JSON form: every
    event as one line of :func:`~trio_agent.serialization.to_json` on ``stdout``.
    """

    def __init__(self, stdout: TextIO, stderr: TextIO, *, json_lines: bool) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.json_lines = json_lines
        self._at_line_start = True

    def __call__(self, event: AgentEvent) -> None:
        if self.json_lines:
            self.stdout.write(to_json(event) + "\n")
            self.stdout.flush()
            return
        if isinstance(event, MessageUpdateEvent):
            update = event.assistant_message_event
            if isinstance(update, TextStartEvent):
                self.end_line()  # a second text block starts on its own line
            elif isinstance(update, TextDeltaEvent) and update.delta:
                self.stdout.write(update.delta)
                self.stdout.flush()
                self._at_line_start = update.delta.endswith("\n")
        elif isinstance(event, MessageEndEvent) and isinstance(event.message, AssistantMessage):
            self.end_line()
            message = event.message
            if message.stop_reason == "error":
                self.notice(f"[error] {message.error_message or 'unknown error'}")
            elif message.stop_reason == "aborted":
                self.notice(f"[aborted] {message.error_message or 'Request was aborted'}")
        elif isinstance(event, ToolExecutionStartEvent):
            arguments = json.dumps(event.args, ensure_ascii=False, separators=(",", ":"))
            self.notice(f"[tool call] {event.tool_name} {arguments}")
        elif isinstance(event, ToolExecutionEndEvent):
            tag = "[tool error]" if event.is_error else "[tool result]"
            self.notice(f"{tag} {event.tool_name}: {_one_line(event.result.content)}")

    def end_line(self) -> None:
        """End the current stdout line if text was written to it."""
        if not self._at_line_start:
            self.stdout.write("\n")
            self.stdout.flush()
            self._at_line_start = True

    def input_line_ended(self) -> None:
        """The user pressed Enter on the terminal: its echo moved the cursor to the start
        of a line, so a notice printed now needs no line break of its own (text streamed
        after this point does)."""
        self._at_line_start = True

    def notice(self, line: str) -> None:
        """Write one line to stderr, after ending a pending stdout line."""
        self.end_line()
        self.stderr.write(line + "\n")
        self.stderr.flush()


def _one_line(content: Sequence[Any]) -> str:
    text = " ".join(content_text(content, " ").split())
    if len(text) > _MAX_RESULT_CHARS:
        text = text[: _MAX_RESULT_CHARS - 3] + "..."
    return text or "(no text)"


# ---------------------------------------------------------------------------------------
# The program


@attrs.frozen(kw_only=True)
class _Setup:
    model: Model
    stream_fn: StreamFn


def _resolve_model(args: argparse.Namespace, models: Models) -> Model:
    spec: ModelSpec = args.model
    try:
        model = models.get_model(spec.provider, spec.model_id)
    except KeyError:
        if args.base_url is None:
            raise UsageError(_unknown_model_message(spec, models)) from None
        # Any id of an OpenAI-compatible (or --api) server: Ollama, llama.cpp, vLLM, ...
        return Model(
            id=spec.model_id,
            name=spec.model_id,
            api=args.api or "openai-completions",
            provider=spec.provider,
            base_url=args.base_url,
            cost=ModelCost(),
            context_window=_CUSTOM_CONTEXT_WINDOW,
            max_tokens=_CUSTOM_MAX_TOKENS,
        )
    if args.base_url is not None:
        model = attrs.evolve(model, base_url=args.base_url)
    if args.api is not None:
        model = attrs.evolve(model, api=args.api)
    return model


def _unknown_model_message(spec: ModelSpec, models: Models) -> str:
    known = models.get_models(spec.provider)
    hint = "for a model of an OpenAI-compatible server also pass --base-url URL"
    if known:
        ids = ", ".join(model.id for model in known)
        return f"unknown model {str(spec)!r}; known {spec.provider} models: {ids} ({hint})"
    providers = ", ".join(sorted({model.provider for model in models.get_models()}))
    return (
        f"unknown model {str(spec)!r}: no provider {spec.provider!r} in the catalog "
        f"(known: {_DEMO_PROVIDER}, {providers}); {hint}"
    )


PLACEHOLDER_API_KEY = "none"
"""Sent to a ``--base-url`` server when no key is configured: local servers (Ollama,
llama.cpp) need none, but the providers refuse to send a request without one."""


def _key_source(args: argparse.Namespace) -> Callable[[str], str | None] | None:
    """The agent's ``get_api_key``: ``--api-key``, else (consulted after it) the
    provider's environment variable, else the placeholder for a ``--base-url`` server."""
    api_key: str | None = args.api_key
    if api_key is not None:
        return lambda provider: api_key
    if args.base_url is not None:
        return lambda provider: None if env_api_key(provider) else PLACEHOLDER_API_KEY
    return None


def _check_options(args: argparse.Namespace) -> None:
    if args.model is None:
        for option, value in (
            ("--base-url", args.base_url),
            ("--api", args.api),
            ("--api-key", args.api_key),
        ):
            if value is not None:
                raise UsageError(f"{option} needs --model PROVIDER/ID")
        return
    spec: ModelSpec = args.model
    if spec.provider == _DEMO_PROVIDER and spec.model_id != DEMO_MODEL_ID and not args.base_url:
        # The built-in provider is not in the catalog: name its one model.
        raise UsageError(
            f"unknown model {spec.model_id!r} for provider {_DEMO_PROVIDER!r} "
            f"(known: {DEMO_MODEL_ID})"
        )


def _is_demo(args: argparse.Namespace) -> bool:
    spec: ModelSpec | None = args.model
    return spec is None or (spec.provider == _DEMO_PROVIDER and spec.model_id == DEMO_MODEL_ID)


class Program:
    """One invocation: the agent, its output, interrupt handling and the session file.

    Args:
        agent: The agent (its listeners already include the renderer).
        renderer: Where notices go.
        session: The ``--session`` file, written after every run.
        interactive: In ``chat``, lines read while a run is going steer it.
    """

    def __init__(
        self,
        agent: Agent,
        renderer: Renderer,
        *,
        session: Path | None = None,
        interactive: bool = False,
    ) -> None:
        self.agent = agent
        self.renderer = renderer
        self.session = session
        self.interactive = interactive
        self._scope = trio.CancelScope()
        self._abort_requested = False
        self._quit = False

    # -- interrupts -------------------------------------------------------------------

    def interrupt(self) -> None:
        """What Ctrl-C does: abort the active run; if there is none, or its abort was
        already requested, end the program (status 130)."""
        if self.agent.state.is_streaming and not self._abort_requested:
            self._abort_requested = True
            # No notice here: text already in the event pipeline is still to be printed;
            # the run's closing events report the abort in order.
            self.agent.abort("interrupted")
        else:
            self._scope.cancel()

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
        if self._scope.cancelled_caught:
            status = EXIT_INTERRUPTED
        # The transcript is consistent even after an interrupt (the Agent guarantees it).
        return await self.persist() or status

    async def persist(self) -> int:
        """Write the transcript to the session file (if any) atomically.

        Returns 0, or 1 after reporting an error.
        """
        session = self.session
        if session is None:
            await trio.lowlevel.checkpoint()
            return EXIT_OK
        messages = list(self.agent.state.messages)
        temporary = session.with_name(session.name + ".tmp")

        def write() -> None:
            try:
                dump_transcript(temporary, messages)
                os.replace(temporary, session)
            except BaseException:
                with contextlib.suppress(OSError):
                    temporary.unlink(missing_ok=True)
                raise

        try:
            # Shielded: an interrupt must not leave the session half written.
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(write)
        except (OSError, SerializationError) as exc:
            # The user named the session file, not the temporary file an OSError names.
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.renderer.notice(f"{PROG}: error: cannot write session {str(session)!r}: {reason}")
            return EXIT_ERROR
        return EXIT_OK

    # -- commands -----------------------------------------------------------------------

    async def _prompt(self, run: Callable[[], Awaitable[None]]) -> None:
        self._abort_requested = False
        await run()

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

    async def run_once(self, prompt: str) -> int:
        """``trio-agent run``: one prompt."""
        await self._prompt(functools.partial(self.agent.prompt, prompt))
        return self.status()

    async def chat(self, lines: trio.MemoryReceiveChannel[str]) -> int:
        """``trio-agent chat``: one run per line of ``lines`` until a blank line, ``/quit``
        or the end of the channel; the session is written after every run."""
        while not self._quit:
            if self.interactive and not self.renderer.json_lines:
                self.renderer.stderr.write("> ")
                self.renderer.stderr.flush()
            try:
                text = (await lines.receive()).strip()
            except trio.EndOfChannel:
                break
            if not text or text == "/quit":
                break
            async with trio.open_nursery() as nursery:
                if self.interactive:
                    nursery.start_soon(self._steer_from, lines)
                await self._prompt(functools.partial(self.agent.prompt, text))
                # Steering typed just after the run's last queue poll: run it now.
                while self.agent.has_queued_messages() and self.status() != EXIT_INTERRUPTED:
                    await self._prompt(self.agent.continue_)
                nursery.cancel_scope.cancel()
            if self.status() == EXIT_INTERRUPTED:
                self.agent.clear_all_queues()  # an abort drops what was typed meanwhile
            if await self.persist():
                return EXIT_ERROR
        return EXIT_OK

    async def _steer_from(self, lines: trio.MemoryReceiveChannel[str]) -> None:
        while True:
            try:
                text = (await lines.receive()).strip()
            except trio.EndOfChannel:
                return  # the run finishes, then chat sees the end of input
            if text == "/quit":
                self._quit = True
                self.agent.abort("quit")
                return
            if text:
                self.agent.steer(UserMessage(content=[TextContent(text=text)]))
                self.renderer.notice(f"[steer] {text}")


def _load_session(path: Path) -> list[AgentMessage] | None:
    """The session's transcript, or ``None`` when the file does not exist yet.

    Raises:
        UsageError: the file could not be written after a run (its directory does not
            exist or is not writable), or it exists and cannot be loaded.
    """
    # Checked before the run, so that no answer is lost for want of a directory.
    directory = path.parent
    if not directory.is_dir():
        problem = "is not a directory" if directory.exists() else "does not exist"
    elif not os.access(directory, os.W_OK):
        problem = "is not writable"
    else:
        problem = None
    if problem is not None:
        raise UsageError(
            f"cannot write session {str(path)!r}: directory {str(directory)!r} {problem}"
        )
    try:
        return load_transcript(path)
    except FileNotFoundError:
        return None
    except (OSError, SerializationError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"cannot load session {str(path)!r}: {reason}") from None


async def read_lines(
    stdin: TextIO,
    send: trio.MemorySendChannel[str],
    on_line: Callable[[], object] | None = None,
) -> None:
    """Forward the lines of ``stdin`` into ``send`` until end of input, then close it.

    Reads in a worker thread (portable, and leaves the terminal's blocking mode alone);
    a read in progress is abandoned when this task is cancelled. ``on_line`` is called as
    soon as a line has been read, before it is sent.
    """
    async with send:
        while True:
            line = await trio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)
            if not line:
                return
            if on_line is not None:
                on_line()
            await send.send(line)


async def run_program(
    args: argparse.Namespace,
    *,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    handle_signals: bool = True,
    lines: trio.MemoryReceiveChannel[str] | None = None,
    interactive: bool | None = None,
) -> int:
    """Run a parsed command line; return the exit status.

    Args:
        args: From :func:`build_parser`.
        stdin: Where ``chat`` reads prompts (unless ``lines`` is given).
        stdout: Streamed text, or JSON lines with ``--json``.
        stderr: Tool lines, notices and errors.
        handle_signals: Install the Ctrl-C handler (main thread only).
        lines: For ``chat``: the input lines (the end of the channel is the end of input).
        interactive: For ``chat``: lines read during a run steer it (default: whether
            ``stdin`` is a terminal).

    Raises:
        UsageError: unknown model, unreadable session file or one whose directory does
            not exist or is not writable, inconsistent options.
    """
    try:
        return await _run_program(
            args,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            handle_signals=handle_signals,
            lines=lines,
            interactive=interactive,
        )
    except BaseExceptionGroup as group:
        # Only one error is possible here (the program's own tasks never fail); see
        # collapse_exception_group for the policy.
        raise collapse_exception_group(group) from None


async def _run_program(
    args: argparse.Namespace,
    *,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    handle_signals: bool,
    lines: trio.MemoryReceiveChannel[str] | None,
    interactive: bool | None,
) -> int:
    _check_options(args)
    session: Path | None = args.session
    messages: list[AgentMessage] | None = None
    if session is not None:
        messages = await trio.to_thread.run_sync(_load_session, session)
    renderer = Renderer(stdout, stderr, json_lines=args.json)
    async with contextlib.AsyncExitStack() as stack:
        if _is_demo(args):
            demo = DemoModel(tokens_per_second=args.tokens_per_second)
            setup = _Setup(model=demo.model, stream_fn=demo.stream_fn)
        else:
            models = await stack.enter_async_context(Models())
            setup = _Setup(model=_resolve_model(args, models), stream_fn=models.stream_simple)
        agent = Agent(
            AgentInitialState(
                system_prompt=args.system if args.system is not None else DEMO_SYSTEM_PROMPT,
                model=setup.model,
                thinking_level=args.thinking,
                tools=[] if args.no_tools else list(DEMO_TOOLS),
                messages=messages,
            ),
            stream_fn=setup.stream_fn,
            get_api_key=_key_source(args),
        )
        agent.subscribe(renderer)
        if args.command == "run":
            program = Program(agent, renderer, session=session)
            prompt: str = args.prompt
            return await program.run(
                lambda: program.run_once(prompt), handle_signals=handle_signals
            )
        if interactive is None:
            interactive = lines is None and stdin.isatty()
        program = Program(agent, renderer, session=session, interactive=interactive)
        async with trio.open_nursery() as nursery:
            if lines is None:
                send, lines = trio.open_memory_channel[str](0)
                # On a terminal, Enter echoes a line break: see Renderer.input_line_ended.
                on_line = renderer.input_line_ended if interactive else None
                nursery.start_soon(read_lines, stdin, send, on_line)
            chat_lines = lines
            status = await program.run(
                lambda: program.chat(chat_lines), handle_signals=handle_signals
            )
            nursery.cancel_scope.cancel()  # the stdin reader
        return status


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: parse ``argv`` (default ``sys.argv[1:]``), run, return the
    exit status (0 ok, 1 error, 2 usage error, 130 interrupted)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    for stream in (sys.stdout, sys.stderr):
        # Model text may hold characters the console cannot encode; never crash on them.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")
    try:
        return trio.run(
            lambda: run_program(args, stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr)
        )
    except UsageError as exc:
        # Like argparse's own errors: the subcommand's usage, then "trio-agent run: error:".
        command_parser: argparse.ArgumentParser = getattr(args, _COMMAND_PARSER, parser)
        command_parser.print_usage(sys.stderr)
        sys.stderr.write(f"{command_parser.prog}: error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C before the handler was installed
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``trio-agent run ... | head``): stop quietly, and point
        # stdout at devnull so the interpreter's final flush does not complain again.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
