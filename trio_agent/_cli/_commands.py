"""The slash commands of ``trio-agent chat``.

An entry that starts with ``/`` is a command and never reaches the model; ``//`` at the
start sends the rest, starting with one ``/``, as a prompt.
"""

from __future__ import annotations

import attrs

__all__ = ["COMMANDS", "BUSY_COMMANDS", "Command", "help_text", "parse_entry"]

COMMANDS: dict[str, tuple[str, str]] = {
    "/help": ("", "show this help"),
    "/reset": ("", "start a new conversation (the system prompt stays)"),
    "/model": ("[PROVIDER/ID]", "show the model, or switch, e.g. /model openai/gpt-4o-mini"),
    "/thinking": ("LEVEL", "set the thinking level (off, minimal, low, medium, high, ...)"),
    "/compact": ("[INSTRUCTIONS]", "summarize older messages now (INSTRUCTIONS: what to keep)"),
    "/sessions": ("", "list the saved sessions (* marks this one)"),
    "/save": ("PATH", "write the conversation to PATH as JSON Lines"),
    "/followup": ("TEXT", "queue TEXT until the agent has finished (while it works)"),
    "/quit": ("", "exit (also /exit, Ctrl-D)"),
}
"""Name -> (argument, description); an argument in brackets is optional."""

_ALIASES = {"/exit": "/quit", "/follow-up": "/followup", "/?": "/help"}

BUSY_COMMANDS = frozenset({"/help", "/followup", "/quit"})
"""The commands available while the agent works."""


@attrs.frozen
class Command:
    """A parsed ``/name argument`` entry."""

    name: str
    argument: str


def parse_entry(entry: str) -> str | Command:
    """A prompt (``str``) or a :class:`Command`.

    ``/name rest`` is a command (the name is lower-cased and aliases resolved; the name is
    kept as typed when unknown); ``//rest`` is the prompt ``/rest``.
    """
    if not entry.startswith("/"):
        return entry
    if entry.startswith("//"):
        return entry[1:]
    name, _, argument = entry.partition(" ")
    if "\n" in name:  # "/x\nmore": the name ends at the line break
        name, _, rest = name.partition("\n")
        argument = rest + (" " + argument if argument else "")
    key = name.lower()
    key = _ALIASES.get(key, key)
    return Command(key if key in COMMANDS else name, argument.strip())


def help_text() -> str:
    """The ``/help`` text."""
    width = max(len(f"{name} {arg}".strip()) for name, (arg, _) in COMMANDS.items())
    lines = ["Commands:"]
    for name, (argument, description) in COMMANDS.items():
        lines.append(f"  {f'{name} {argument}'.strip():<{width}}  {description}")
    lines += [
        "",
        "Enter sends; a line ending in \\ continues on the next line, and a paste keeps its",
        "lines. Up/Down browse the history. Lines typed while the agent works steer it.",
        "Ctrl-C aborts a run, or clears the line being typed; Ctrl-C on an empty line,",
        "Ctrl-D or /quit exits. //text sends /text.",
    ]
    return "\n".join(lines)
