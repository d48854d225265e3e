"""Pin trio_agent.sessions' public names; each is documented and reports its namespace."""

from __future__ import annotations

import inspect
import subprocess
import sys
import types

import trio_agent
import trio_agent.sessions

EXPECTED = {
    "BranchSummaryEntry", "CONFORMANCE_CHECKS", "CURRENT_VERSION", "CompactionEntry",
    "ContextEditEntry", "CustomEntry", "CustomMessageEntry", "DEFAULT_LEASE_SECONDS",
    "DuplicateEntryError", "INTERRUPTED_TEXT", "JsonlStore", "LabelEntry", "LoadedSession",
    "MemoryStore", "MessageEntry", "ModelChangeEntry", "RecoveredCall", "RunFinishedEntry",
    "RunOutcome", "RunStartedEntry", "Session", "SessionBackend", "SessionBusyError",
    "SessionClaimLostError", "SessionContext", "SessionEntry", "SessionError",
    "SessionExistsError", "SessionFormatError", "SessionHeader", "SessionInfoEntry",
    "SessionNotFoundError", "SessionStore", "SessionStoreError", "SqliteStore", "StoreFactory",
    "PostgresStore", "Inbox",
    "ThinkingLevelChangeEntry", "ToolStartedEntry", "UnknownEntry", "attach_agent",
    "open_store", "run_conformance",
}  # fmt: skip


def public(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and name != "annotations"
        and not isinstance(value, types.ModuleType)
    }


def test_exported_members() -> None:
    assert public(trio_agent.sessions) == EXPECTED


def test_documented_and_named_after_the_namespace() -> None:
    for name in EXPECTED:
        value = getattr(trio_agent.sessions, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{name} has no docstring"
            assert value.__module__ == "trio_agent.sessions", f"{name}: {value.__module__}"


def test_errors_are_agent_errors() -> None:
    assert issubclass(trio_agent.sessions.SessionError, trio_agent.AgentError)
    for name in EXPECTED:
        value = getattr(trio_agent.sessions, name)
        if inspect.isclass(value) and issubclass(value, Exception):
            assert issubclass(value, trio_agent.sessions.SessionError), name


def test_not_imported_by_trio_agent() -> None:
    code = (
        "import sys, trio_agent; "
        "print('trio_agent.sessions' in sys.modules, 'sqlite3' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
