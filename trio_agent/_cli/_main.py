"""The entry points of ``trio-agent``: :func:`main` and :func:`run_program`."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import AsyncIterable, Sequence
from pathlib import Path
from typing import TextIO

import attrs
import trio

from .. import __version__
from .._agent import Agent, AgentInitialState
from .._compaction import CompactionSettings
from .._demo import DemoModel
from .._events import AssistantMessageEvent
from .._messages import AgentMessage, ImageContent, Model
from .._streaming import LlmContext, StreamOptions
from .._util import collapse_exception_group
from ..models import Models
from ..sessions import SessionBusyError, SessionError, SessionNotFoundError
from ._args import (
    COMMAND_PARSER,
    PROG,
    CommandError,
    ModelSpec,
    UsageError,
    build_parser,
    check_options,
    default_system_prompt,
    is_demo_spec,
    key_source,
    read_image,
    resolve_model,
    tools_for,
    unknown_faux_model,
)
from ._input import ChannelInput, ChatInput, TerminalInput, read_lines, terminal_restored
from ._program import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE, ModelChoice, Program
from ._render import Renderer, color_wanted, is_terminal, last_exchange, model_table
from ._session import (
    history_file,
    latest_session,
    load_session,
    sessions_directory,
)
from ._store import (
    StoreSession,
    check_session_id,
    default_store_url,
    file_format,
    is_file_name,
    new_session_id,
    opened_store,
    session_rows,
    session_table,
    show_lines,
)

__all__ = ["main", "run_program"]


async def run_program(
    args: argparse.Namespace,
    *,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    handle_signals: bool = True,
    lines: trio.MemoryReceiveChannel[str] | None = None,
    interactive: bool | None = None,
    show_usage: bool | None = None,
) -> int:
    """Run a parsed command line; return the exit status.

    Args:
        args: From :func:`build_parser`.
        stdin: Where ``chat`` reads prompts (unless ``lines`` is given), and ``run -``
            its prompt.
        stdout: Streamed text, or JSON lines with ``--json``.
        stderr: Tool lines, notices and errors.
        handle_signals: Install the Ctrl-C handler (main thread only).
        lines: For ``chat``: the input lines (the end of the channel is the end of input).
        interactive: For ``chat``: a person types (banner; lines read during a run steer
            it). Default: whether ``stdin`` is a terminal.
        show_usage: Print a usage line after every run (default: whether ``stderr`` is
            a terminal).

    Raises:
        UsageError: unknown model, unreadable session file or image, inconsistent
            options, ...
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
            show_usage=show_usage,
        )
    except BaseExceptionGroup as group:
        # Only one error is possible here (the program's own tasks never fail); see
        # collapse_exception_group for the policy.
        raise collapse_exception_group(group) from None


class _Models:
    """The demo model and the catalog behind one stream function, for ``--model`` and
    ``/model``."""

    def __init__(self, args: argparse.Namespace, demo: DemoModel, models: Models) -> None:
        self.args = args
        self.demo = demo
        self.models = models
        self.main = self._model(args.model, args.base_url, args.api)
        """The model of ``--model`` (the one ``--api-key`` was given for)."""

    def _model(self, spec: ModelSpec | None, base_url: str | None, api: str | None) -> Model:
        if is_demo_spec(spec, base_url):
            return self.demo.model
        assert spec is not None
        if spec.provider == self.demo.model.provider and base_url is None:
            raise UsageError(unknown_faux_model(spec))
        return resolve_model(spec, self.models, base_url=base_url, api=api)

    def choose(self, spec: ModelSpec | None) -> ModelChoice:
        """The model of ``spec`` with its tools and key source (``--base-url`` and
        ``--api`` apply only to the model of ``--model``)."""
        model = self.main if spec == self.args.model else self._model(spec, None, None)
        return ModelChoice(
            model=model,
            tools=tools_for(model is self.demo.model, self.args),
            get_api_key=key_source(self.args, model, self.main),
        )

    def stream(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterable[AssistantMessageEvent]:
        if model == self.demo.model:
            return self.demo.stream_fn(model, context, options)
        return self.models.stream_simple(model, context, options)


def _banner(agent: Agent, demo: bool) -> str:
    model = agent.state.model
    tools = ", ".join(tool.name for tool in agent.state.tools) or "none"
    if demo:
        what = f"faux/{model.id}, the offline demo model (canned answers; tools: {tools})"
    else:
        what = (
            f"{model.provider}/{model.id} (thinking: {agent.state.thinking_level}; tools: {tools})"
        )
    return (
        f"{PROG} {__version__} · {what}\n"
        "Enter sends, a trailing \\ continues the line, /help lists the commands;\n"
        "Ctrl-C aborts a run or clears the line; on an empty line Ctrl-C, Ctrl-D or /quit exits."
    )


async def _run_program(
    args: argparse.Namespace,
    *,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    handle_signals: bool,
    lines: trio.MemoryReceiveChannel[str] | None,
    interactive: bool | None,
    show_usage: bool | None,
) -> int:
    if args.command == "models":
        return await _list_models(args.provider, stdout, stderr)
    if args.command == "sessions":
        return await _sessions_command(args, stdout, stderr)
    check_options(args)
    chat = args.command == "chat"
    if interactive is None:
        interactive = chat and lines is None and is_terminal(stdin)
    # The session: --session, --continue, or (a chat on a terminal) a new one of the store.
    target = await _session_target(
        args, autosave=chat and interactive and not args.no_session and lines is None
    )
    session = target if isinstance(target, Path) else None
    stored = target if isinstance(target, StoreSession) else None
    autosave = stored is not None and stored.create and not args.session
    # Files are read in threads that Ctrl-C abandons (the program ends; the thread with
    # it): a slow disk or a file that never ends must not hold the program.
    messages: list[AgentMessage] | None = None
    if session is not None:
        messages = await trio.to_thread.run_sync(load_session, session, abandon_on_cancel=True)
    images: list[ImageContent] = [
        await trio.to_thread.run_sync(read_image, path, abandon_on_cancel=True)
        for path in args.image
    ]
    prompt = ""
    if not chat:
        prompt = args.prompt
        origin = ""
        if prompt == "-":
            prompt = (await trio.to_thread.run_sync(stdin.read, abandon_on_cancel=True)).strip()
            origin = " read from stdin ('-')"
        # One rule for both: nothing to say is a usage error, never an empty request.
        if not prompt.strip():
            raise UsageError(f"the prompt{origin} is empty")
    renderer = Renderer(
        stdout,
        stderr,
        json_lines=args.json,
        color=not args.json and color_wanted(args.color, stderr),
        max_retries=args.max_retries,
    )
    if show_usage is None:
        show_usage = is_terminal(stderr)
    async with Models() as catalog:
        demo_model = DemoModel(tokens_per_second=args.tokens_per_second)
        models = _Models(args, demo_model, catalog)
        choice = models.choose(args.model)
        model, tools = choice.model, choice.tools
        demo = model is demo_model.model
        agent = Agent(
            AgentInitialState(
                system_prompt=args.system
                if args.system is not None
                else default_system_prompt(tools),
                model=model,
                thinking_level=args.thinking or "off",
                tools=tools,
                messages=messages,
            ),
            stream_fn=models.stream,
            get_api_key=choice.get_api_key,
            max_retries=args.max_retries,
            temperature=args.temperature,
            compaction=None if args.no_compaction else CompactionSettings(),
        )
        agent.subscribe(renderer)
        program = Program(
            agent,
            renderer,
            session=session,
            store=stored,
            store_url=args.store or default_store_url(),
            interactive=interactive,
            show_usage=show_usage and not args.json,
            choose_model=models.choose,
            new_session_only=autosave,
        )
        where = repr(str(session)) if session is not None else stored.label if stored else ""
        async with contextlib.AsyncExitStack() as attached:
            if stored is not None and not autosave:
                # Claimed for the whole program: a second trio-agent on it stops at once.
                await attached.enter_async_context(stored.open(agent, tools))
                messages = list(agent.state.messages)
                if args.thinking is not None:  # given: it overrides the session's level
                    agent.state.thinking_level = args.thinking
            status = await _start(
                args,
                program,
                renderer,
                stdin=stdin,
                stdout=stdout,
                handle_signals=handle_signals,
                lines=lines,
                interactive=interactive,
                demo=demo,
                images=images,
                prompt=prompt,
                messages=messages,
                where=where,
            )
    return status


async def _start(
    args: argparse.Namespace,
    program: Program,
    renderer: Renderer,
    *,
    stdin: TextIO,
    stdout: TextIO,
    handle_signals: bool,
    lines: trio.MemoryReceiveChannel[str] | None,
    interactive: bool,
    demo: bool,
    images: list[ImageContent],
    prompt: str,
    messages: list[AgentMessage] | None,
    where: str,
) -> int:
    """What follows the agent's creation: the banner and notices, then the run or the
    chat."""
    agent = program.agent
    session = program.options.session
    stored = program.options.store
    autosave = program.options.new_session_only
    if interactive and not args.json:
        renderer.notice(renderer.style("bold", _banner(agent, demo)))
    if stored is not None and stored.session is not None and not args.json:
        for note in stored.session.dropped:
            renderer.info("session", note)
    said = messages and any(m.role != "system" for m in messages)
    if messages and (said or session is not None) and not args.json:
        renderer.info("session", f"resumed {len(messages)} messages from {where}")
        if args.continue_:
            for tag, text in last_exchange(messages):
                renderer.info(tag, text)
    if demo and images and not args.json:
        renderer.info(
            "image",
            "the offline demo model ignores images: it answers as if none were attached "
            "(--model PROVIDER/ID selects a model that reads them)",
        )
    elif autosave and stored is not None:
        directory = sessions_directory()
        try:
            if args.store is None:
                await trio.to_thread.run_sync(
                    functools.partial(directory.mkdir, parents=True, exist_ok=True)
                )
        except OSError as exc:
            renderer.error(f"cannot save the chat in {str(directory)!r}: {exc.strerror}")
            program.options = attrs.evolve(program.options, store=None)
        else:
            renderer.info("session", f"saving to {stored.url} as session {stored.session_id!r}")
    if args.command != "chat":
        return await program.run(
            lambda: program.run_once(prompt, images), handle_signals=handle_signals
        )
    async with trio.open_nursery() as nursery:
        source: ChatInput
        stack = contextlib.ExitStack()
        if lines is not None:
            source = ChannelInput(lines, interactive=interactive)
        elif interactive:
            terminal = TerminalInput(stdin, stdout, history=history_file())
            if terminal.history_error:
                renderer.error(terminal.history_error)
            stack.enter_context(terminal_restored(stdin, stdout))
            source = terminal
        else:
            send, receive = trio.open_memory_channel[str](0)
            nursery.start_soon(read_lines, stdin, send)
            source = ChannelInput(receive, interactive=False)
        with stack:
            status = await program.run(
                lambda: program.chat(source, images), handle_signals=handle_signals
            )
            if interactive and status == EXIT_INTERRUPTED:
                stdout.write("\n")  # leave the shell's prompt on a line of its own
                stdout.flush()
        nursery.cancel_scope.cancel()  # the stdin reader
    return status


async def _session_target(
    args: argparse.Namespace, *, autosave: bool
) -> Path | StoreSession | None:
    """Where the conversation is kept: a transcript file (as in earlier versions), a
    session of the store, or nowhere.

    ``--session FILE`` (a ``/`` in it, or the ``.jsonl`` ending): a pi session file is
    opened through ``jsonl:`` of its directory, any other file (one that does not exist
    yet included) is a transcript file. ``--session ID``: that session of the store, new
    or not. ``--continue``: the most recently written session of the sessions directory
    (either kind), or of ``--store``'s store the newest. A chat on a terminal: a new
    session of the store.

    Raises:
        UsageError: a file with ``--store``, a bad id, a bad store URL, nothing to
            continue.
    """
    url: str = args.store or default_store_url()
    name: str | None = args.session
    if name is not None and is_file_name(name):
        if args.store is not None:
            raise UsageError(f"--session {name!r} names a file; with --store give a session id")
        path = Path(name)
        found = await trio.to_thread.run_sync(file_format, path, abandon_on_cancel=True)
        if found is not None and found[0] == "pi":
            if not found[1]:
                raise UsageError(f"cannot load session {name!r}: its header has no id")
            return StoreSession(url=f"jsonl:{path.parent}", session_id=found[1])
        return path
    if name is not None:
        return StoreSession(url=url, session_id=check_session_id(name), create=True)
    if args.continue_:
        if args.store is None:
            latest = latest_session(sessions_directory())
            found = await trio.to_thread.run_sync(file_format, latest, abandon_on_cancel=True)
            if found is not None and found[0] == "pi" and found[1]:
                return StoreSession(url=url, session_id=found[1])
            return latest
        async with opened_store(url) as store:
            headers = await store.list()
        if not headers:
            raise UsageError(f"no session to continue in {url}")
        return StoreSession(url=url, session_id=headers[0].id)
    if autosave:
        return StoreSession(url=url, session_id=new_session_id(), create=True)
    if args.store is not None and args.command == "run":
        raise UsageError("--store needs --session ID or --continue")
    return None


async def _sessions_command(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """``trio-agent sessions list|show|delete``."""
    url: str = args.store or default_store_url()
    if args.action == "list":
        async with opened_store(url) as store:
            rows = await session_rows(store, url)
        if not rows:
            stderr.write(f"no sessions in {url}\n")
            return 0
        stdout.write("".join(line + "\n" for line in session_table(rows)))
        stdout.flush()
        return 0
    name: str = args.session
    if is_file_name(name):
        if args.store is not None:
            raise UsageError(f"{name!r} names a file; with --store give a session id")
        path = Path(name)
        found = await trio.to_thread.run_sync(file_format, path, abandon_on_cancel=True)
        if found is None:
            raise UsageError(f"no session file {name!r}")
        if found[0] == "transcript":
            messages = await trio.to_thread.run_sync(load_session, path) or []
            if args.action == "show":
                stdout.write("".join(line + "\n" for line in show_lines(messages)))
                stdout.flush()
            else:
                await trio.to_thread.run_sync(path.unlink)
                stderr.write(f"[deleted] {name!r}\n")
            return 0
        url, name = f"jsonl:{path.parent}", found[1] or ""
    else:
        check_session_id(name)
    async with opened_store(url) as store:
        try:
            if args.action == "show":
                session = await store.open(name)
                stdout.write("".join(line + "\n" for line in show_lines(session.messages())))
                stdout.flush()
                return 0
            # Refused while another process writes it: claim it first.
            async with store.open_for_writing(name):
                pass
            await store.delete(name)
        except SessionNotFoundError:
            raise UsageError(f"no session {name!r} in {url}") from None
        except SessionBusyError as exc:
            raise CommandError(f"{exc}; it is not deleted") from None
    stderr.write(f"[deleted] session {name!r}\n")
    return 0


async def _list_models(provider: str | None, stdout: TextIO, stderr: TextIO) -> int:
    """``trio-agent models [PROVIDER]``: the demo model and the catalog, one per line."""
    await trio.lowlevel.checkpoint()
    demo = DemoModel().model
    known = [demo, *Models().get_models()]
    providers = list(dict.fromkeys(model.provider for model in known))
    if provider is not None and provider not in providers:
        raise UsageError(f"unknown provider {provider!r} (known: {', '.join(providers)})")
    chosen = [model for model in known if provider is None or model.provider == provider]
    stdout.write(model_table(chosen, demo=demo))
    stdout.flush()
    stderr.write(
        "Prices are indicative, in USD per million tokens. With --base-url any model id "
        "of an OpenAI-compatible server works too.\n"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: parse ``argv`` (default ``sys.argv[1:]``), run, return the
    exit status (0 ok, 1 error, 2 usage error, 130 interrupted)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["serve"]:
        try:
            from ..web import main as serve_main
        except ImportError as exc:
            sys.stderr.write(f"{PROG} serve: {exc} (pip install 'trio-agent[web]')\n")
            return EXIT_USAGE
        return serve_main(arguments[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(arguments)
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
    except (CommandError, SessionError) as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return EXIT_ERROR
    except UsageError as exc:
        # Like argparse's own errors: the subcommand's usage, then "trio-agent run: error:".
        command_parser: argparse.ArgumentParser = getattr(args, COMMAND_PARSER, parser)
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
