"""Durable sessions: pi's session format in memory, JSONL files or SQLite.

A :class:`SessionStore` keeps sessions (a header and a tree of entries: messages, model
and thinking-level changes, compactions, custom entries, labels, branch summaries);
:func:`open_store` opens one from a URL. :meth:`SessionStore.open_for_writing` claims a
session for one writer and recovers an interrupted run; :func:`attach_agent` commits an
agent's messages as they end. See ``docs/sessions.md``.
"""

from __future__ import annotations

# --- errors --------------------------------------------------------------------------------
from ._errors import DuplicateEntryError as DuplicateEntryError
from ._errors import SessionBusyError as SessionBusyError
from ._errors import SessionClaimLostError as SessionClaimLostError
from ._errors import SessionError as SessionError
from ._errors import SessionExistsError as SessionExistsError
from ._errors import SessionFormatError as SessionFormatError
from ._errors import SessionNotFoundError as SessionNotFoundError
from ._errors import SessionStoreError as SessionStoreError

# --- entries -------------------------------------------------------------------------------
from ._entries import CURRENT_VERSION as CURRENT_VERSION
from ._entries import BranchSummaryEntry as BranchSummaryEntry
from ._entries import CompactionEntry as CompactionEntry
from ._entries import ContextEditEntry as ContextEditEntry
from ._entries import CustomEntry as CustomEntry
from ._entries import CustomMessageEntry as CustomMessageEntry
from ._entries import LabelEntry as LabelEntry
from ._entries import MessageEntry as MessageEntry
from ._entries import ModelChangeEntry as ModelChangeEntry
from ._entries import RecoveredCall as RecoveredCall
from ._entries import RunFinishedEntry as RunFinishedEntry
from ._entries import RunOutcome as RunOutcome
from ._entries import RunStartedEntry as RunStartedEntry
from ._entries import SessionEntry as SessionEntry
from ._entries import SessionHeader as SessionHeader
from ._entries import SessionInfoEntry as SessionInfoEntry
from ._entries import ThinkingLevelChangeEntry as ThinkingLevelChangeEntry
from ._entries import ToolStartedEntry as ToolStartedEntry
from ._entries import UnknownEntry as UnknownEntry

# --- sessions and stores -----------------------------------------------------------------
from ._context import SessionContext as SessionContext
from ._session import Session as Session
from ._recovery import INTERRUPTED_TEXT as INTERRUPTED_TEXT
from ._backend import LoadedSession as LoadedSession
from ._backend import SessionBackend as SessionBackend
from ._store import DEFAULT_LEASE_SECONDS as DEFAULT_LEASE_SECONDS
from ._store import MemoryStore as MemoryStore
from ._store import SessionStore as SessionStore
from ._open import open_store as open_store
from ._jsonl import JsonlStore as JsonlStore
from ._sqlite import SqliteStore as SqliteStore
from ._postgres import PostgresStore as PostgresStore
from ._inbox import Inbox as Inbox
from ._attach import attach_agent as attach_agent
from ._conformance import CONFORMANCE_CHECKS as CONFORMANCE_CHECKS
from ._conformance import StoreFactory as StoreFactory
from ._conformance import run_conformance as run_conformance

from .._util import fixup_module_metadata as _fixup_module_metadata

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
