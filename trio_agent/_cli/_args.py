"""The command line of ``trio-agent``: the parser, option types and model selection."""

from __future__ import annotations

import argparse
import base64
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import get_args
from urllib.parse import urlsplit

import attrs

from .. import __version__
from .._demo import DEMO_MODEL_ID, DEMO_SYSTEM_PROMPT, DEMO_TOOLS
from .._messages import ImageContent, Model, ModelCost, ThinkingLevel
from .._tools import AgentTool
from ..models import Models
from ..models._http import env_api_key
from ._files import open_regular_file

__all__ = [
    "COMMAND_PARSER",
    "CommandError",
    "DEFAULT_MAX_RETRIES",
    "DEMO_PROVIDER",
    "PLACEHOLDER_API_KEY",
    "PLAIN_SYSTEM_PROMPT",
    "PROG",
    "ModelSpec",
    "UsageError",
    "build_parser",
    "check_options",
    "is_demo_spec",
    "key_source",
    "parse_model_spec",
    "read_image",
    "resolve_model",
    "tools_for",
]

PROG = "trio-agent"
DEMO_PROVIDER = "faux"
PLAIN_SYSTEM_PROMPT = "You are a helpful assistant."
"""The default system prompt of a model without tools."""

_CUSTOM_APIS = ("openai-completions", "anthropic-messages", "openai-responses")
_CUSTOM_CONTEXT_WINDOW = 128_000
_CUSTOM_MAX_TOKENS = 8_192

COMMAND_PARSER = "_command_parser"
"""Namespace attribute holding the subcommand's parser (which reports usage errors)."""


class UsageError(Exception):
    """A command line that cannot run (reported like argparse errors, exit status 2)."""


class CommandError(Exception):
    """A command that cannot go on for a reason outside the command line: a session that
    another process is writing, a store that failed (``trio-agent: error: ...``, exit
    status 1)."""


# ---------------------------------------------------------------------------------------
# Option types


@attrs.frozen(kw_only=True)
class ModelSpec:
    """``--model provider/id``, split at the first ``/`` (ids may contain more)."""

    provider: str
    model_id: str

    def __str__(self) -> str:
        return f"{self.provider}/{self.model_id}"


def parse_model_spec(text: str) -> ModelSpec:
    """``PROVIDER/ID`` as a :class:`ModelSpec`.

    Raises:
        argparse.ArgumentTypeError: there is no ``/`` or one side is empty.
    """
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


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _temperature(text: str) -> float:
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _retries(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


# ---------------------------------------------------------------------------------------
# The parser


class _Parser(argparse.ArgumentParser):
    """An argument parser whose unknown arguments are reported by the subcommand that was
    given them (``trio-agent run --bogus`` shows ``run``'s usage, not the program's)."""

    def parse_known_args(  # type: ignore[override]  # the base's overloads, one used here
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        command: argparse.ArgumentParser | None = getattr(parsed, COMMAND_PARSER, None)
        if extras and command is not None and command is not self:
            command.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


DEFAULT_MAX_RETRIES = 2
"""Retries of a failed provider request when ``--max-retries`` is not given (the official
OpenAI and Anthropic clients retry twice too)."""


def build_parser() -> argparse.ArgumentParser:
    """The program's argument parser (``run`` and ``chat`` share every option)."""
    parser = _Parser(
        prog=PROG,
        description=(
            "Run an LLM agent on Trio. Without --model it runs offline on a built-in demo "
            "model with demo tools (get_weather, calculate, get_time)."
        ),
        epilog=(
            "Text streams to stdout; tool calls, results and notices go to stderr as "
            "one-line '[tag] ...' forms. Ctrl-C aborts the run, a second Ctrl-C exits "
            "(status 130). In chat, /help lists the commands. 'trio-agent models' lists "
            "the models, 'trio-agent sessions list' the saved chats."
        ),
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="run one prompt", description="Run one prompt.")
    run.add_argument("prompt", metavar="PROMPT", help="the user message ('-' reads it from stdin)")
    chat = commands.add_parser(
        "chat",
        help="an interactive conversation (or prompts from stdin, one per line)",
        description=(
            "Read prompts from the terminal with line editing and history, or from stdin, "
            "one per line; a line ending in a backslash continues on the next line. Blank "
            "lines are ignored; /quit, Ctrl-D or the end of input exits. Lines typed while "
            "the agent works are queued as steering. /help lists the commands."
        ),
    )
    for command in (run, chat):
        _add_options(command)
    # Only for the listing: 'trio-agent serve' is parsed by trio_agent.web (main() hands it
    # the arguments before this parser sees them).
    commands.add_parser(
        "serve",
        help="serve a chat page on http://127.0.0.1:8321/ (needs trio-agent[web]; "
        "'trio-agent serve --help' lists its options)",
        add_help=False,
    )
    models = commands.add_parser(
        "models",
        help="list the models of the built-in catalog",
        description=(
            "List the models that --model and /model know: the offline demo model and the "
            "catalog's models, with context window, input kinds, thinking support and "
            "indicative prices (USD per million input and output tokens). Any model of an "
            "OpenAI-compatible server also works, with --base-url."
        ),
    )
    models.add_argument(
        "provider", metavar="PROVIDER", nargs="?", help="list only this provider's models"
    )
    sessions = commands.add_parser(
        "sessions",
        help="list, show or delete saved sessions",
        description=(
            "The sessions of the session store: by default the chats saved in the "
            "sessions directory, as pi's JSONL session files; --store URL picks another "
            "store."
        ),
    )
    actions = sessions.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list",
        help="list the sessions, most recent first",
        description="List the sessions: id, creation time, messages and first prompt.",
    )
    show = actions.add_parser(
        "show", help="print a session's conversation", description="Print a session's messages."
    )
    delete = actions.add_parser(
        "delete",
        help="delete a session",
        description="Delete a session (refused while another process is writing it).",
    )
    for action in (show, delete):
        action.add_argument(
            "session", metavar="ID|FILE.jsonl", help="a session id of the store, or a file"
        )
    for action in (listing, show, delete):
        _add_store_option(action)
    for command in (run, chat, models, sessions):
        command.set_defaults(**{COMMAND_PARSER: command})
    for action in (listing, show, delete):
        action.set_defaults(**{COMMAND_PARSER: action})
    return parser


def _add_store_option(group: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--store",
        metavar="URL",
        help="the session store: jsonl:DIR, sqlite:PATH, postgresql://..., memory: "
        "(default: jsonl: of the sessions directory, pi's session files)",
    )


def _add_options(common: argparse.ArgumentParser) -> None:
    """The options that ``run`` and ``chat`` share."""
    model = common.add_argument_group("model")
    model.add_argument(
        "--model",
        type=parse_model_spec,
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
        help="thinking level for reasoning models (default: off, or a resumed session's)",
    )
    model.add_argument("--temperature", type=_temperature, metavar="T", help="sampling temperature")
    model.add_argument(
        "--max-retries",
        type=_retries,
        metavar="N",
        default=DEFAULT_MAX_RETRIES,
        help="retries of a provider request that failed before its answer started: rate "
        f"limits (429), server errors (5xx), lost connections (default: {DEFAULT_MAX_RETRIES})",
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
    tools = agent.add_mutually_exclusive_group()
    tools.add_argument(
        "--no-tools", action="store_true", help="do not offer the demo tools to the demo model"
    )
    tools.add_argument(
        "--demo-tools",
        action="store_true",
        help="offer the demo tools to any model (by default only the demo model gets them)",
    )
    agent.add_argument(
        "--no-compaction",
        action="store_true",
        help="never compact automatically (by default, when the context nears the model's "
        "window, older messages become a summary; /compact does it on demand)",
    )
    agent.add_argument(
        "--image",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="attach a PNG, JPEG, GIF or WebP image to the (first) prompt; repeatable",
    )
    sessions = common.add_argument_group("session")
    where = sessions.add_mutually_exclusive_group()
    where.add_argument(
        "--session",
        metavar="ID|FILE.jsonl",
        help="a session of the store (created if new; every message is saved as it "
        "ends), or a file (a name with a '/' or ending in .jsonl): a transcript file is "
        "loaded if it exists and written back after each run, a pi session file is "
        "opened in its directory",
    )
    where.add_argument(
        "-c",
        "--continue",
        dest="continue_",
        action="store_true",
        help="resume the most recent saved chat session",
    )
    where.add_argument(
        "--no-session",
        action="store_true",
        help="chat: do not save the conversation in the sessions directory",
    )
    _add_store_option(sessions)
    output = common.add_argument_group("output")
    output.add_argument(
        "--json", action="store_true", help="print every event as one JSON line on stdout"
    )
    output.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the output (default: auto, i.e. on a terminal unless NO_COLOR is set)",
    )


# ---------------------------------------------------------------------------------------
# Checks and model selection


def is_demo_spec(spec: ModelSpec | None, base_url: str | None = None) -> bool:
    """Whether ``--model`` selects the embedded demo model (the default)."""
    return spec is None or (
        spec.provider == DEMO_PROVIDER and spec.model_id == DEMO_MODEL_ID and base_url is None
    )


def check_options(args: argparse.Namespace) -> None:
    """Reject option combinations that cannot run.

    Raises:
        UsageError: a provider option without ``--model``, or an unknown ``faux`` model.
    """
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
    if spec.provider == DEMO_PROVIDER and spec.model_id != DEMO_MODEL_ID and not args.base_url:
        raise UsageError(unknown_faux_model(spec))


def unknown_faux_model(spec: ModelSpec) -> str:
    """The message for a ``faux`` model other than the demo model."""
    # The built-in provider is not in the catalog: name its one model.
    return (
        f"unknown model {spec.model_id!r} for provider {DEMO_PROVIDER!r} (known: {DEMO_MODEL_ID})"
    )


def resolve_model(
    spec: ModelSpec,
    models: Models,
    *,
    base_url: str | None = None,
    api: str | None = None,
) -> Model:
    """The model of ``spec``: a catalog model (with ``base_url``/``api`` overrides) or,
    with ``base_url``, any model of an OpenAI-compatible (or ``api``) server.

    Raises:
        UsageError: the model is not in the catalog and there is no ``base_url``.
    """
    try:
        model = models.get_model(spec.provider, spec.model_id)
    except KeyError:
        if base_url is None:
            raise UsageError(_unknown_model_message(spec, models)) from None
        # Any id of an OpenAI-compatible (or --api) server: Ollama, llama.cpp, vLLM, ...
        return Model(
            id=spec.model_id,
            name=spec.model_id,
            api=api or "openai-completions",
            provider=spec.provider,
            base_url=base_url,
            cost=ModelCost(),
            context_window=_CUSTOM_CONTEXT_WINDOW,
            max_tokens=_CUSTOM_MAX_TOKENS,
        )
    if base_url is not None:
        model = attrs.evolve(model, base_url=base_url)
    if api is not None:
        model = attrs.evolve(model, api=api)
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
        f"(known: {DEMO_PROVIDER}, {providers}); {hint}"
    )


def tools_for(demo: bool, args: argparse.Namespace) -> list[AgentTool]:
    """The tools of a model: the demo tools for the demo model (unless ``--no-tools``)
    and for any model with ``--demo-tools``; none otherwise."""
    if args.demo_tools or (demo and not args.no_tools):
        return list(DEMO_TOOLS)
    return []


def default_system_prompt(tools: list[AgentTool]) -> str:
    """The system prompt when ``--system`` is not given."""
    return DEMO_SYSTEM_PROMPT if tools else PLAIN_SYSTEM_PROMPT


PLACEHOLDER_API_KEY = "none"
"""Sent to a ``--base-url`` server when no key is configured: local servers (Ollama,
llama.cpp) need none, but the providers refuse to send a request without one."""


def key_source(
    args: argparse.Namespace, model: Model, main: Model
) -> Callable[[str], str | None] | None:
    """The agent's ``get_api_key`` while ``model`` is selected; ``main`` is the model of
    ``--model``.

    ``--api-key`` was given for ``main``: it is used for a model of the same provider and
    base URL only, never sent anywhere else. A model of the ``--base-url`` server without
    a key gets the placeholder. Otherwise ``None``: the provider reads its environment
    variable. Resolved again on every ``/model``.
    """
    api_key: str | None = args.api_key
    if api_key is not None and (model.provider, model.base_url) == (main.provider, main.base_url):
        key: str | None = api_key
    elif args.base_url is not None and model.base_url == args.base_url:
        if env_api_key(model.provider):
            return None
        key = PLACEHOLDER_API_KEY
    else:
        return None
    provider_of_key = model.provider
    return lambda provider: key if provider == provider_of_key else None


# ---------------------------------------------------------------------------------------
# Images

_IMAGE_SIGNATURES: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),
)
MAX_IMAGE_BYTES = 20 * 1024 * 1024


def read_image(path: Path) -> ImageContent:
    """The image at ``path`` (PNG, JPEG, GIF or WebP, recognised by its content).

    Raises:
        UsageError: the file cannot be read, is too large or is not such an image.
    """
    try:
        with open_regular_file(path) as file:
            data = file.read(MAX_IMAGE_BYTES + 1)
            if len(data) > MAX_IMAGE_BYTES:
                size = os.fstat(file.fileno()).st_size
                raise UsageError(
                    f"--image {str(path)!r}: {size} bytes is larger than the "
                    f"{MAX_IMAGE_BYTES // (1024 * 1024)} MiB limit"
                )
    except OSError as exc:
        raise UsageError(f"--image {str(path)!r}: {exc.strerror or exc}") from None
    for signature, offset, mime_type in _IMAGE_SIGNATURES:
        if data[offset : offset + len(signature)] == signature:
            if mime_type == "image/webp" and not data.startswith(b"RIFF"):
                continue
            return ImageContent(data=base64.b64encode(data).decode("ascii"), mime_type=mime_type)
    raise UsageError(f"--image {str(path)!r}: not a PNG, JPEG, GIF or WebP image")
