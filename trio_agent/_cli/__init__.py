"""The ``trio-agent`` program (also ``python -m trio_agent``).

``trio-agent run PROMPT`` runs one prompt; ``trio-agent chat`` is a conversation on the
terminal (line editing, history, steering while the agent works, slash commands) or
reads prompts from stdin, one per line. Without ``--model`` the program runs offline on
the embedded demo model (:mod:`trio_agent._demo`); ``--model provider/id`` (with
``--base-url``, ``--api-key`` or the provider's environment variable) selects a real
provider.

Output: the assistant's text streams to stdout as it arrives; thinking, tool calls, tool
results, errors and notices are one-line ``[tag] ...`` forms on stderr (coloured on a
terminal unless ``NO_COLOR`` is set), so stdout holds only the answer. With ``--json``
stdout holds every agent event as one JSON line instead.

Exit status: 0 on success, 1 when the last assistant message is an error (or the
session cannot be written, or another process writes it), 2 for usage errors, 130 when
interrupted (Ctrl-C).

Modules: ``_args`` (command line, model selection), ``_render`` (output), ``_input``
(terminal and piped input), ``_commands`` (slash commands), ``_session`` (transcript
files, the sessions directory), ``_store`` (sessions of the store: ``--session ID``,
``--store``, ``trio-agent sessions``), ``_program`` (runs, chat loop, Ctrl-C), ``_main``
(entry points).
"""

from __future__ import annotations

from ._args import ModelSpec as ModelSpec
from ._args import UsageError as UsageError
from ._args import build_parser as build_parser
from ._input import read_lines as read_lines
from ._main import main as main
from ._main import run_program as run_program
from ._program import Program as Program
from ._render import Renderer as Renderer

__all__ = [
    "ModelSpec",
    "Program",
    "Renderer",
    "UsageError",
    "build_parser",
    "main",
    "read_lines",
    "run_program",
]
