"""The public names of trio_agent.web, documented and reporting their public module (the
same checks as tests/test_exported_members.py makes for the other namespaces)."""

from __future__ import annotations

import inspect
import subprocess
import sys
import types

import trio_agent.web

EXPECTED = {
    "AGUI_EVENT_TYPES", "AgUiEncoder", "AgentFactory", "AgentHost", "DisconnectPolicy",
    "EventStreamResponse", "MemorySessions", "RunBusyError", "RunStream", "SessionInfo",
    "StoreSessions", "UnknownSessionError", "WebSessions", "agui_messages", "create_app",
    "demo_factory", "main", "message_id", "open_agent_host", "serve", "sse_event",
}  # fmt: skip


def test_exported_members() -> None:
    public = {
        name
        for name, value in vars(trio_agent.web).items()
        if not name.startswith("_")
        and name != "annotations"
        and not isinstance(value, types.ModuleType)
    }
    assert public == EXPECTED


def test_documented_and_public_module() -> None:
    for name in EXPECTED:
        value = getattr(trio_agent.web, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"trio_agent.web.{name} has no docstring"
            assert value.__module__ == "trio_agent.web", f"{name}: {value.__module__}"


def test_not_imported_by_trio_agent() -> None:
    names = ("trio_agent.web", "starlette", "hypercorn")
    code = f"import sys, trio_agent; print([n for n in {names!r} if n in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (out.stdout.strip(), out.stderr) == ("[]", "")
