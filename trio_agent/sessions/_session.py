"""One session of a store: its entries, current branch, context and run journal."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from .._messages import (
    AgentMessage,
    AssistantMessage,
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
)
from .._transcript import get_current_system_message
from ._backend import SessionBackend
from ._context import SessionContext, branch_path, build_context
from ._entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    RecoveredCall,
    RunFinishedEntry,
    RunOutcome,
    RunStartedEntry,
    SessionEntry,
    SessionHeader,
    ThinkingLevelChangeEntry,
    ToolStartedEntry,
    decode_entry,
    encode_entry,
    iso_now,
    new_entry_id,
)

if TYPE_CHECKING:
    from .._tools import AgentTool

__all__ = ["Session"]


@attrs.define(eq=False)
class Session:
    """A session loaded from a store (see :meth:`SessionStore.open` and
    :meth:`SessionStore.open_for_writing`).

    The session keeps the entries it loaded and those it appended; reading (``entries``,
    ``current_branch()``, ``context()``, ``messages()``) never touches the store, and
    :meth:`reload` reads what others appended since. Appends go to the store first and
    join the session only once committed.

    A session opened with :meth:`SessionStore.open` appends only while nobody holds the
    session's claim (otherwise :class:`SessionBusyError`); one opened with
    :meth:`SessionStore.open_for_writing` appends under its claim.
    """

    _backend: SessionBackend = attrs.field(alias="backend")
    _clock: Callable[[], float] = attrs.field(alias="clock")
    _header: SessionHeader = attrs.field(alias="header")
    _entries: list[SessionEntry] = attrs.field(alias="entries")
    _claim_token: str | None = attrs.field(default=None, alias="claim_token")
    dropped: tuple[str, ...] = attrs.field(default=())
    """What loading left out (a torn last line of a JSONL file), described for a person;
    empty when nothing was dropped."""
    _by_id: dict[str, SessionEntry] = attrs.field(init=False)
    _leaf_id: str | None = attrs.field(init=False)
    _lock: trio.Lock = attrs.field(init=False, factory=trio.Lock)

    def __attrs_post_init__(self) -> None:
        self._index()

    def _index(self) -> None:
        self._by_id = {entry.id: entry for entry in self._entries}
        self._leaf_id = self._entries[-1].id if self._entries else None

    # --- reading --------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The session id."""
        return self._header.id

    @property
    def header(self) -> SessionHeader:
        """The session's header."""
        return self._header

    @property
    def entries(self) -> list[SessionEntry]:
        """Every entry, of every branch, in append order (a copy)."""
        return list(self._entries)

    @property
    def leaf_id(self) -> str | None:
        """The entry the next append follows: the last one appended, unless
        :meth:`branch` moved it; ``None`` before the first entry."""
        return self._leaf_id

    @property
    def is_writer(self) -> bool:
        """True for a session opened with :meth:`SessionStore.open_for_writing`."""
        return self._claim_token is not None

    def entry(self, entry_id: str) -> SessionEntry | None:
        """The entry with this id, or ``None``."""
        return self._by_id.get(entry_id)

    def current_branch(self) -> list[SessionEntry]:
        """The entries from the root to the leaf."""
        return branch_path(self._by_id, self._leaf_id)

    def context(self) -> SessionContext:
        """The messages, thinking level and model an agent resumes with (pi's
        ``buildSessionContext()``; see :class:`SessionContext`)."""
        return build_context(self.current_branch())

    def messages(self) -> list[AgentMessage]:
        """The transcript an agent resumes with: the current branch's messages with
        compactions applied, ready for any provider."""
        return self.context().messages

    def branch(self, entry_id: str | None) -> None:
        """Move the leaf to an earlier entry (``None``: before the first), so that the
        next append starts a new branch there. Nothing is written until that append.

        Raises:
            KeyError: no entry has the id.
        """
        if entry_id is not None and entry_id not in self._by_id:
            raise KeyError(f"session {self.id!r} has no entry {entry_id!r}")
        self._leaf_id = entry_id

    async def reload(self) -> None:
        """Read the session again from the store (the leaf goes back to the last entry)."""
        loaded = await self._backend.load_session(self.id)
        where = f"session {self.id!r}"
        self._entries = [decode_entry(data, where) for data in loaded.entries]
        self.dropped = loaded.dropped
        self._index()

    # --- appending ------------------------------------------------------------------------

    async def append(self, entries: Sequence[SessionEntry]) -> list[SessionEntry]:
        """Append entries as one batch: all are committed, or none is.

        Each entry follows the one before it, the first follows the leaf; an empty ``id``
        gets a fresh one and an empty ``timestamp`` the current time (the ``parent_id``
        given is ignored). Returns the entries as stored. A checkpoint. If cancelled, the
        batch is committed or not, never in part, and the session matches the store.

        Raises:
            DuplicateEntryError: an id is taken (or repeated); nothing was appended.
            SessionBusyError: someone else holds the session's claim.
            SessionClaimLostError: this writer's claim expired or was taken over.
            SessionStoreError: the storage failed; nothing was appended.
        """
        async with self._lock:
            batch = self._prepare(entries)
            if not batch:
                await trio.lowlevel.checkpoint()
                return []
            await self._backend.append_entries(
                self.id,
                [encode_entry(entry) for entry in batch],
                claim_token=self._claim_token,
                now=self._clock(),
            )
            self._joined(batch)
            return batch

    def _append_nowait(self, entries: Sequence[SessionEntry]) -> list[SessionEntry] | None:
        """:meth:`append` without waiting, when the backend can commit at once (see
        :meth:`SessionBackend.try_append_entries`); ``None`` when the batch must be
        awaited (nothing was written), and then :meth:`append` commits it."""
        if self._lock.locked():
            return None
        batch = self._prepare(entries)
        if not batch or not self._backend.try_append_entries(
            self.id,
            [encode_entry(entry) for entry in batch],
            claim_token=self._claim_token,
            now=self._clock(),
        ):
            return None
        self._joined(batch)
        return batch

    def _prepare(self, entries: Sequence[SessionEntry]) -> list[SessionEntry]:
        """The entries as they will be stored: each follows the one before, the first
        the leaf, with fresh ids and the current time where they are empty."""
        batch: list[SessionEntry] = []
        taken: set[str] = set()
        parent = self._leaf_id
        timestamp = ""
        for entry in entries:
            entry_id = entry.id or new_entry_id(lambda c: c in self._by_id or c in taken)
            taken.add(entry_id)
            if not entry.timestamp:
                timestamp = timestamp or iso_now()
            stored = attrs.evolve(
                entry,
                id=entry_id,
                parent_id=parent,
                timestamp=entry.timestamp or timestamp,
            )
            batch.append(stored)
            parent = entry_id
        return batch

    def _joined(self, batch: list[SessionEntry]) -> None:
        """Committed: the batch joins the session."""
        self._entries.extend(batch)
        self._by_id.update((entry.id, entry) for entry in batch)
        self._leaf_id = batch[-1].id

    async def append_messages(self, messages: Sequence[AgentMessage]) -> list[MessageEntry]:
        """Append messages as one batch (see :meth:`append`)."""
        stored = await self.append([MessageEntry(message=message) for message in messages])
        return [entry for entry in stored if isinstance(entry, MessageEntry)]

    async def append_message(self, message: AgentMessage) -> MessageEntry:
        """Append one message (see :meth:`append`)."""
        (entry,) = await self.append_messages([message])
        return entry

    async def append_model_change(self, provider: str, model_id: str) -> ModelChangeEntry:
        """Record that later runs use another model."""
        (entry,) = await self.append([ModelChangeEntry(provider=provider, model_id=model_id)])
        assert isinstance(entry, ModelChangeEntry)
        return entry

    async def append_thinking_level_change(
        self, thinking_level: ThinkingLevel
    ) -> ThinkingLevelChangeEntry:
        """Record that later runs use another thinking level."""
        (entry,) = await self.append([ThinkingLevelChangeEntry(thinking_level=thinking_level)])
        assert isinstance(entry, ThinkingLevelChangeEntry)
        return entry

    async def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        *,
        details: Any = None,
    ) -> CompactionEntry:
        """Replace the branch before ``first_kept_entry_id`` (``None``: everything) by
        ``summary`` in the context; the current system message is kept with it, as pi
        does."""
        entry_id = new_entry_id(self._by_id.__contains__)
        system = get_current_system_message(self.messages())
        compaction = CompactionEntry(
            id=entry_id,
            summary=summary,
            first_kept_entry_id=first_kept_entry_id or entry_id,
            tokens_before=tokens_before,
            details=details,
            system_message=system,
        )
        (entry,) = await self.append([compaction])
        assert isinstance(entry, CompactionEntry)
        return entry

    async def append_custom(self, custom_type: str, data: Any = None) -> CustomEntry:
        """Keep application data in the session (not part of the context)."""
        (entry,) = await self.append([CustomEntry(custom_type=custom_type, data=data)])
        assert isinstance(entry, CustomEntry)
        return entry

    async def append_label(self, target_id: str, label: str | None) -> LabelEntry:
        """Put a label on an entry (``None`` clears it).

        Raises:
            KeyError: no entry has ``target_id``.
        """
        if target_id not in self._by_id:
            raise KeyError(f"session {self.id!r} has no entry {target_id!r}")
        (entry,) = await self.append([LabelEntry(target_id=target_id, label=label)])
        assert isinstance(entry, LabelEntry)
        return entry

    async def branch_with_summary(self, entry_id: str | None, summary: str) -> BranchSummaryEntry:
        """Start a new branch at ``entry_id`` with a summary of the branch being left
        (pi's ``branchWithSummary()``)."""
        from_id = self._leaf_id or "root"
        previous = self._leaf_id
        self.branch(entry_id)
        try:
            (entry,) = await self.append([BranchSummaryEntry(from_id=from_id, summary=summary)])
        except BaseException:
            self._leaf_id = previous
            raise
        assert isinstance(entry, BranchSummaryEntry)
        return entry

    # --- the run journal -------------------------------------------------------------------

    async def start_run(self, run_id: str | None = None) -> RunStartedEntry:
        """Journal: a run starts (``run_id`` defaults to a fresh one)."""
        (entry,) = await self.append([RunStartedEntry(run_id=run_id or secrets.token_hex(8))])
        assert isinstance(entry, RunStartedEntry)
        return entry

    async def start_tool(
        self,
        run_id: str,
        tool_call_id: str,
        tool_name: str,
        replay: Literal["never", "safe"] | None,
    ) -> ToolStartedEntry:
        """Journal: a tool call starts executing, with its tool's replay policy."""
        entry = ToolStartedEntry(
            run_id=run_id, tool_call_id=tool_call_id, tool_name=tool_name, replay=replay
        )
        (stored,) = await self.append([entry])
        assert isinstance(stored, ToolStartedEntry)
        return stored

    async def finish_run(
        self,
        run_id: str,
        outcome: RunOutcome,
        *,
        messages: Sequence[AgentMessage] = (),
        recovered: Sequence[RecoveredCall] = (),
    ) -> RunFinishedEntry:
        """Journal: a run ended; ``messages`` are committed in the same batch, before it."""
        batch: list[SessionEntry] = [MessageEntry(message=m) for m in messages]
        batch.append(RunFinishedEntry(run_id=run_id, outcome=outcome, recovered=tuple(recovered)))
        stored = await self.append(batch)
        last = stored[-1]
        assert isinstance(last, RunFinishedEntry)
        return last

    def unfinished_run(self) -> RunStartedEntry | None:
        """The run of the current branch that started and never finished, if any."""
        started: RunStartedEntry | None = None
        for entry in self.current_branch():
            if isinstance(entry, RunStartedEntry):
                started = entry
            elif (
                isinstance(entry, RunFinishedEntry)
                and started is not None
                and entry.run_id == started.run_id
            ):
                started = None
        return started

    def unanswered_tool_calls(self) -> list[ToolCall]:
        """The tool calls of the branch's last assistant message that have no result."""
        calls: list[ToolCall] = []
        answered: set[str] = set()
        for entry in self.current_branch():
            if not isinstance(entry, MessageEntry):
                continue
            message = entry.message
            if isinstance(message, AssistantMessage):
                calls = [block for block in message.content if isinstance(block, ToolCall)]
                answered = set()
            elif isinstance(message, ToolResultMessage):
                answered.add(message.tool_call_id)
        return [call for call in calls if call.id not in answered]

    def tool_replay_policy(self, tool_call_id: str) -> Literal["never", "safe"] | None:
        """The replay policy journaled when the call started (``None`` if it never did)."""
        for entry in reversed(self.current_branch()):
            if isinstance(entry, ToolStartedEntry) and entry.tool_call_id == tool_call_id:
                return entry.replay
        return None

    async def recover(self, tools: Sequence[AgentTool] = ()) -> RunFinishedEntry | None:
        """Close a run that never finished (a crash) so the session can go on.

        Every tool call of the run's last assistant message without a result is answered
        once: re-run when its tool (looked up by name in ``tools``) says
        ``replay="safe"``, otherwise by an error result saying that the run was
        interrupted and the tool was not re-run. The results and a
        :class:`RunFinishedEntry` (``outcome="recovered"``, listing what was done) are
        committed as one batch. Returns that entry, or ``None`` when no run was
        unfinished. :meth:`SessionStore.open_for_writing` calls it.
        """
        from ._recovery import recover_session

        return await recover_session(self, tools)
