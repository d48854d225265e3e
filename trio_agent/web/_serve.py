"""``trio-agent serve``: the chat page on Hypercorn's Trio worker.

:func:`serve` runs the server until cancelled; :func:`main` is the command line (the
model options are those of ``trio-agent chat``; model resolution reuses the program's
read-only helpers).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any, get_args

import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

from .._agent import Agent, AgentInitialState
from .._demo import DEMO_SYSTEM_PROMPT, DEMO_TOOLS, DemoModel
from .._messages import Model, ThinkingLevel
from .._streaming import StreamFn
from .._tools import AgentTool
from .._util import collapse_exception_group
from ._app import create_app
from ._host import AgentFactory, DisconnectPolicy, open_agent_host
from ._sessions import WebSessions
from ._store import StoreSessions

__all__ = ["DEFAULT_PORT", "build_parser", "demo_factory", "main", "serve"]

DEFAULT_PORT = 8321


def _config(host: str, port: int) -> Config:
    config = Config()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.loglevel = "WARNING"  # serve's own line names the URL; errors still show
    config.graceful_timeout = 2.0
    return config


async def serve(
    agent_factory: AgentFactory | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    model: Model | None = None,
    stream_fn: StreamFn | None = None,
    tools: Sequence[AgentTool] | None = None,
    system_prompt: str | None = None,
    thinking_level: ThinkingLevel = "off",
    get_api_key: Callable[[str], Any] | None = None,
    sessions: WebSessions | None = None,
    on_disconnect: DisconnectPolicy = "abort",
    ui: bool = True,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the chat page and the API on ``host:port`` until cancelled.

    The agents are made by ``agent_factory``, else from ``model`` and ``stream_fn``
    (with ``tools``, ``system_prompt``, ``thinking_level`` and ``get_api_key``), else
    they run on the offline demo model with its demo tools. ``task_status.started()``
    reports the bound URLs (``port=0`` picks a free port).
    """
    if agent_factory is None:
        if model is None or stream_fn is None:
            agent_factory = demo_factory(
                tools=DEMO_TOOLS if tools is None else tools,
                system_prompt=DEMO_SYSTEM_PROMPT if system_prompt is None else system_prompt,
            )
        else:
            agent_factory = _factory(
                model,
                stream_fn,
                list(tools or ()),
                system_prompt or "",
                thinking_level,
                get_api_key,
            )
    async with open_agent_host(
        agent_factory, sessions=sessions, on_disconnect=on_disconnect
    ) as agent_host:
        app = create_app(agent_host, ui=ui)
        await hypercorn_serve(app, _config(host, port), task_status=task_status)  # type: ignore[arg-type]  # Starlette is an ASGI 3 app; hypercorn's Framework union does not name it


def demo_factory(
    *,
    tokens_per_second: float | None = 200.0,
    tools: Sequence[AgentTool] = DEMO_TOOLS,
    system_prompt: str = DEMO_SYSTEM_PROMPT,
) -> AgentFactory:
    """Agents on the offline demo model of ``trio-agent``, one demo model per session.

    One per session because the demo model scripts the response of a request when the
    request arrives, which is right for one conversation at a time but not for several
    sessions streaming at once.
    """

    def make(session_id: str) -> Agent:
        demo = DemoModel(tokens_per_second=tokens_per_second)
        return Agent(
            AgentInitialState(system_prompt=system_prompt, model=demo.model, tools=list(tools)),
            stream_fn=demo.stream_fn,
            session_id=session_id,
        )

    return make


def _factory(
    model: Model,
    stream_fn: StreamFn,
    tools: list[AgentTool],
    system_prompt: str,
    thinking_level: ThinkingLevel,
    get_api_key: Callable[[str], Any] | None,
) -> AgentFactory:
    def make(session_id: str) -> Agent:
        return Agent(
            AgentInitialState(
                system_prompt=system_prompt,
                model=model,
                tools=tools,
                thinking_level=thinking_level,
            ),
            stream_fn=stream_fn,
            get_api_key=get_api_key,
            session_id=session_id,
        )

    return make


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``trio-agent serve``."""
    from .._cli._args import parse_model_spec

    parser = argparse.ArgumentParser(
        prog="trio-agent serve",
        description=(
            "Serve a chat page on http://HOST:PORT/ (offline demo model unless --model). "
            "The API streams AG-UI events; see docs/web.md."
        ),
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        help="keep the sessions in a session store: jsonl:DIR, sqlite:PATH, postgresql://... "
        "(default: in memory, lost on exit)",
    )
    parser.add_argument(
        "--on-disconnect",
        choices=get_args(DisconnectPolicy),
        default="abort",
        help="what a client that disconnects mid-run does to the run (default: abort)",
    )
    model = parser.add_argument_group("model (as for trio-agent chat)")
    model.add_argument(
        "--model",
        type=parse_model_spec,
        metavar="PROVIDER/ID",
        help="a catalog model, or with --base-url any model of an OpenAI-compatible server "
        "(default: the offline demo model faux/demo)",
    )
    model.add_argument("--base-url", metavar="URL", help="the API base URL")
    model.add_argument(
        "--api",
        choices=("openai-completions", "anthropic-messages", "openai-responses"),
        help="wire API of a --base-url model that is not in the catalog",
    )
    model.add_argument(
        "--api-key", metavar="KEY", help="API key (default: the provider's environment variable)"
    )
    model.add_argument(
        "--thinking",
        choices=get_args(ThinkingLevel),
        default="off",
        help="thinking level for reasoning models (default: off)",
    )
    model.add_argument("--temperature", type=float, metavar="T", help="sampling temperature")
    model.add_argument(
        "--max-retries", type=int, metavar="N", help="retries of a failed provider request"
    )
    model.add_argument(
        "--tokens-per-second",
        type=float,
        default=200.0,
        metavar="N",
        help="streaming pace of the demo model (default: 200)",
    )
    agent = parser.add_argument_group("agent")
    agent.add_argument("--system", metavar="PROMPT", help="the system prompt")
    tools = agent.add_mutually_exclusive_group()
    tools.add_argument(
        "--no-tools", action="store_true", help="do not offer the demo tools to the demo model"
    )
    tools.add_argument(
        "--demo-tools", action="store_true", help="offer the demo tools to any model"
    )
    return parser


def _agent_factory(args: argparse.Namespace) -> AgentFactory:
    """The agents of the command line, resolved with the program's helpers."""
    from .._cli._args import (
        check_options,
        default_system_prompt,
        is_demo_spec,
        key_source,
        resolve_model,
        tools_for,
    )
    from ..models import Models

    check_options(args)
    demo = is_demo_spec(args.model, args.base_url)
    tools = tools_for(demo, args)
    system_prompt = args.system if args.system is not None else default_system_prompt(tools)
    if demo:
        return demo_factory(
            tokens_per_second=args.tokens_per_second, tools=tools, system_prompt=system_prompt
        )
    models = Models()
    model = resolve_model(args.model, models, base_url=args.base_url, api=args.api)
    stream_fn = models.stream_simple
    get_api_key = key_source(args, model, model)

    def make(session_id: str) -> Agent:
        return Agent(
            AgentInitialState(
                system_prompt=system_prompt,
                model=model,
                tools=tools,
                thinking_level=args.thinking,
            ),
            stream_fn=stream_fn,
            get_api_key=get_api_key,
            session_id=session_id,
            temperature=args.temperature,
            max_retries=args.max_retries,
        )

    return make


class _StoreUrlError(Exception):
    """``--store`` names no store (reported as a usage error)."""


def main(argv: Sequence[str] | None = None) -> int:
    """``trio-agent serve [options]``: serve until Ctrl-C; returns the exit status."""
    from .._cli._args import UsageError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        try:
            factory = _agent_factory(args)
        except UsageError as exc:
            parser.error(str(exc))
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else 2

    async def run() -> None:
        async with contextlib.AsyncExitStack() as stack:
            sessions: WebSessions | None = None
            if args.store is not None:
                from ..sessions import open_store

                try:
                    store = await stack.enter_async_context(open_store(args.store))
                except ValueError as exc:
                    raise _StoreUrlError(str(exc)) from None
                sessions = StoreSessions(store)
            nursery = await stack.enter_async_context(trio.open_nursery())
            urls = await nursery.start(
                functools.partial(
                    serve,
                    factory,
                    host=args.host,
                    port=args.port,
                    sessions=sessions,
                    on_disconnect=args.on_disconnect,
                )
            )
            for url in urls:
                print(f"trio-agent serve: chat on {url}/ (Ctrl-C stops)", file=sys.stderr)

    try:
        trio.run(run)
    except _StoreUrlError as exc:
        parser.print_usage(sys.stderr)
        sys.stderr.write(f"{parser.prog}: error: --store: {exc}\n")
        return 2
    except BaseException as exc:
        # Ctrl-C arrives inside the server's nurseries; see collapse_exception_group for
        # the policy that puts it first.
        error = collapse_exception_group(exc) if isinstance(exc, BaseExceptionGroup) else exc
        if isinstance(error, KeyboardInterrupt):
            return 130
        raise
    return 0
