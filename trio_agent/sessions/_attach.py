"""Attaching an :class:`~trio_agent.Agent` to a session, through its public API only.

The agent's listeners are awaited in order, and a run does not go on until they have
handled an event (SPEC §8): a listener that commits each message while its
``message_end`` is handled makes every message durable before the next event. Listeners
are outside the run's work scope and an awaiting listener is shielded, so an abort or a
cancellation never interrupts a commit, and the closing events of an aborted or failed run
(the aborted message, the ``Operation aborted`` tool results, the failure message) are
committed like any other.
"""

from __future__ import annotations

import contextlib
import secrets
import typing
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, Final

from .._abort import AbortSignal
from .._exceptions import AgentBusyError
from .._messages import AssistantMessage, SystemMessage, ThinkingLevel
from ._entries import (
    MessageEntry,
    ModelChangeEntry,
    RunFinishedEntry,
    RunOutcome,
    RunStartedEntry,
    SessionEntry,
    ThinkingLevelChangeEntry,
    ToolStartedEntry,
)
from ._inbox import queued_entry_id
from ._session import Session

if TYPE_CHECKING:
    from .._agent import Agent

__all__ = ["attach_agent"]


_RECORDED: Final = frozenset(
    {"message_end", "tool_execution_start", "agent_start", "agent_end", "compaction"}
)


class _Recorder:
    def __init__(self, agent: Agent, session: Session) -> None:
        self.agent = agent
        self.session = session
        self.run_id: str | None = None
        context = session.context()
        self.model = context.model
        self.thinking_level = context.thinking_level
        # The session entry of each message object the agent holds, for a compaction's
        # first kept entry.
        self.entry_of: dict[int, str] = {
            id(entry.message): entry.id
            for entry in session.current_branch()
            if isinstance(entry, MessageEntry)
        }

    def _changes(self) -> list[SessionEntry]:
        """Model and thinking-level entries for what changed since they were recorded."""
        state = self.agent.state
        changes: list[SessionEntry] = []
        model = (state.model.provider, state.model.id)
        if model != self.model:
            changes.append(ModelChangeEntry(provider=model[0], model_id=model[1]))
            self.model = model
        if state.thinking_level != self.thinking_level:
            changes.append(ThinkingLevelChangeEntry(thinking_level=state.thinking_level))
            self.thinking_level = state.thinking_level
        return changes

    def __call__(self, event: Any, signal: AbortSignal) -> Awaitable[None] | None:
        # A plain listener: it commits at once when the store can (no checkpoint), and
        # otherwise returns an awaitable that commits, which the agent awaits before
        # going on. Events it does not record (every message_update) cost nothing more.
        kind = event.type
        if kind not in _RECORDED:
            return None
        if kind == "compaction":
            return None if event.messages is None else self._compaction(event)
        batch = self._batch(event, signal)
        stored = self.session._append_nowait(batch)
        if stored is None:
            return self._commit(event, batch)
        self._committed(event, stored)
        return None

    def _batch(self, event: Any, signal: AbortSignal) -> list[SessionEntry]:
        """The entries that record ``event``."""
        kind = event.type
        if kind == "message_end":
            message = event.message
            if isinstance(message, AssistantMessage):
                # The model of the message is the model of the branch from now on.
                self.model = (message.provider, message.model)
            # A message an inbox delivered keeps its queue id (see _inbox.py).
            entry = MessageEntry(id=queued_entry_id(self.session, message), message=message)
            return [*self._changes(), entry]
        if kind == "tool_execution_start":
            replay = next(
                (tool.replay for tool in self.agent.state.tools if tool.name == event.tool_name),
                None,
            )
            return [
                ToolStartedEntry(
                    run_id=self.run_id or "",
                    tool_call_id=event.tool_call_id,
                    tool_name=event.tool_name,
                    replay=replay,
                )
            ]
        if kind == "agent_start":
            self.run_id = secrets.token_hex(8)
            return [*self._changes(), RunStartedEntry(run_id=self.run_id)]
        # agent_end
        messages = event.messages
        last = messages[-1] if messages else None
        outcome: RunOutcome = "completed"
        if signal.aborted or (isinstance(last, AssistantMessage) and last.stop_reason == "aborted"):
            outcome = "aborted"
        elif isinstance(last, AssistantMessage) and last.stop_reason == "error":
            outcome = "failed"
        run_id, self.run_id = self.run_id or "", None
        return [RunFinishedEntry(run_id=run_id, outcome=outcome)]

    async def _commit(self, event: Any, batch: list[SessionEntry]) -> None:
        self._committed(event, await self.session.append(batch))

    def _committed(self, event: Any, stored: list[SessionEntry]) -> None:
        if event.type == "message_end":
            self.entry_of[id(event.message)] = stored[-1].id

    async def _compaction(self, event: Any) -> None:
        """pi's ``compaction`` entry for a compaction of the agent's transcript: its
        summary, the entry of the first message kept, the size before, the details."""
        summary = event.summary
        kept = [
            message
            for message in event.messages
            if message is not summary and not isinstance(message, SystemMessage)
        ]
        first_kept = self.entry_of.get(id(kept[0])) if kept else None
        await self.session.append_compaction(
            getattr(summary, "summary", ""),
            first_kept,
            event.tokens_before,
            details=_details_json(getattr(summary, "details", None)),
        )


def _details_json(details: Any) -> Any:
    """The summary's details as pi writes them (``readFiles`` / ``modifiedFiles``)."""
    if details is None:
        return None
    return {
        "readFiles": list(getattr(details, "read_files", []) or []),
        "modifiedFiles": list(getattr(details, "modified_files", []) or []),
    }


@contextlib.asynccontextmanager
async def attach_agent(agent: Agent, session: Session) -> AsyncIterator[Session]:
    """Keep ``agent``'s transcript in ``session`` while the block runs.

    On entry, if the session's current branch has messages, the agent starts from them:
    ``agent.state.messages`` becomes :meth:`Session.messages` (compactions applied) and
    ``agent.state.thinking_level`` the branch's thinking level, if one was recorded. If
    the session has no messages yet, the agent's transcript (its system message, say) is
    committed as the first batch, with its model and thinking level.

    While the block runs, a listener subscribed now (put it before listeners that must
    see only committed messages) commits:

    - each message while its ``message_end`` is handled, before the run goes on, the
      closing messages of an aborted or failed run included;
    - a :class:`ModelChangeEntry` / :class:`ThinkingLevelChangeEntry` when a run starts
      or a message ends with another model or level than the branch has;
    - a :class:`CompactionEntry` (pi's) for each compaction of the agent's transcript
      (the ``compaction`` event): its summary, the entry of the first message kept, the
      size before and the file details, so a reopened session resumes from the summary;
    - the run journal: :class:`RunStartedEntry` at ``agent_start``,
      :class:`ToolStartedEntry` (with the tool's ``replay``) at ``tool_execution_start``,
      :class:`RunFinishedEntry` at ``agent_end``.

    A commit that fails (the claim was lost, the disk is full) fails the run as any
    listener error does. On exit the listener is removed. Use it with a session from
    :meth:`SessionStore.open_for_writing`, which also recovers an interrupted run before
    the agent starts from it.

    Raises:
        AgentBusyError: the agent is running.
    """
    if agent.state.is_streaming:
        raise AgentBusyError("cannot attach a session to an agent while it is running")
    context = session.context()
    recorder = _Recorder(agent, session)
    if context.messages:
        agent.state.messages = context.messages
        if any(isinstance(e, ThinkingLevelChangeEntry) for e in session.current_branch()):
            level = context.thinking_level
            if level in typing.get_args(ThinkingLevel):
                agent.state.thinking_level = level  # type: ignore[assignment]  # checked
                recorder.thinking_level = level
    else:
        first: list[SessionEntry] = [*recorder._changes()]
        first.extend(MessageEntry(message=m) for m in agent.state.messages)
        await session.append(first)
    unsubscribe = agent.subscribe(recorder)
    try:
        yield session
    finally:
        unsubscribe()
