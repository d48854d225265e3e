"""The agent host: an agent per session, and the runs of every session in one nursery.

:func:`open_agent_host` opens the nursery the runs live in (no run outlives its block:
leaving it aborts the runs that are still going and waits for their closing events);
:class:`AgentHost` starts runs and hands each run's AG-UI events to its subscribers
(the HTTP response that started the run, and any client that attaches later).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Literal, TypeAlias

import attrs
import trio

from .._agent import Agent
from .._events import AgentEvent
from .._messages import AgentMessage, AssistantMessage, UserMessage
from .._util import error_text, maybe_await
from ._agui import AgUiEncoder, agui_messages
from ._sessions import MemorySessions, SessionInfo, WebSessions

__all__ = [
    "AgentFactory",
    "AgentHost",
    "DisconnectPolicy",
    "RunBusyError",
    "RunStream",
    "open_agent_host",
]

logger = logging.getLogger("trio_agent.web")

AgentFactory: TypeAlias = Callable[[str], "Agent | Awaitable[Agent]"]
"""``factory(session_id)`` returns an agent for a session (plain function or ``async
def``); the host calls it for each run and loads the session's transcript into it, so
an idle session costs no agent."""

DisconnectPolicy: TypeAlias = Literal["abort", "continue"]
"""What a client that disconnects mid-run does to the run: ``"abort"`` it (the default),
or let it ``"continue"`` to its end, its messages kept in the session."""

_SUBSCRIBER_BUFFER = 64
"""Events buffered per subscriber before the run waits for it to read (backpressure)."""

SLOW_SUBSCRIBER_SECONDS = 30.0
"""How long a run waits for a subscriber whose buffer is full before dropping it (its
stream ends, as if it had disconnected, but the run is not aborted)."""


class RunBusyError(Exception):
    """The session already has a run going on (the app answers 409)."""


@attrs.define(eq=False)
class _Run:
    session_id: str
    run_id: str
    subscribers: list[trio.MemorySendChannel[dict[str, Any]]]
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    agent: Agent | None = None
    finished: trio.Event = attrs.Factory(trio.Event)
    published: bool = False
    queued: list[tuple[Literal["steer", "follow_up"], AgentMessage]] = attrs.Factory(list)
    """Messages queued before the run's agent existed."""

    def queue(self, kind: Literal["steer", "follow_up"], message: AgentMessage) -> None:
        if self.agent is None:
            self.queued.append((kind, message))
        elif kind == "steer":
            self.agent.steer(message)
        else:
            self.agent.follow_up(message)

    async def publish(self, events: Sequence[dict[str, Any]]) -> None:
        for event in events:
            for channel in list(self.subscribers):
                # The run waits for a slow reader (backpressure), but not for ever: the
                # listener that publishes is shielded from the run's abort (SPEC §8).
                with trio.move_on_after(SLOW_SUBSCRIBER_SECONDS) as slow:
                    try:
                        await channel.send(event)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        # That client has gone; the run goes on for the others (or alone).
                        self.subscribers.remove(channel)
                if slow.cancelled_caught:
                    channel.close()  # its stream ends; the run goes on
                    self.subscribers.remove(channel)

    def close_subscribers(self) -> None:
        for channel in self.subscribers:
            channel.close()
        self.subscribers.clear()

    def abort(self, reason: str) -> None:
        agent = self.agent
        if agent is not None and agent.signal is not None:
            agent.abort(reason)
        else:
            self.scope.cancel()  # not started yet: it never starts


@attrs.define(eq=False)
class RunStream:
    """A subscription to one run: ``events`` receives its AG-UI events and ends after the
    last one. Close it (``async with``) to unsubscribe."""

    session_id: str
    """The session the run belongs to."""
    run_id: str
    """The run's id (AG-UI's ``runId``)."""
    events: trio.MemoryReceiveChannel[dict[str, Any]]
    """The run's AG-UI events; the channel ends after the last one."""
    _run: _Run

    def abort(self, reason: str = "aborted by the client") -> None:
        """Abort the run (all its subscribers see it end as ``cancelled``)."""
        self._run.abort(reason)

    async def __aenter__(self) -> RunStream:
        await trio.lowlevel.checkpoint()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.events.aclose()


@attrs.define(eq=False)
class AgentHost:
    """Keeps an agent per session and runs them in a nursery it was given.

    Build one with :func:`open_agent_host`. Runs are in the host's nursery, not in the
    task that asked for them, so a run can outlive the HTTP request that started it
    (``on_disconnect="continue"``) and never outlives the host.
    """

    _nursery: trio.Nursery = attrs.field(alias="nursery")
    agent_factory: AgentFactory
    """Makes the agent of each run."""
    sessions: WebSessions
    """Where transcripts are kept."""
    on_disconnect: DisconnectPolicy = "abort"
    """What a client's disconnection does to its run."""
    _runs: dict[str, _Run] = attrs.field(factory=dict, init=False)

    # -- sessions ---------------------------------------------------------------------

    async def create_session(self, session_id: str | None = None) -> str:
        """Create an empty session; returns its id (``session_id``, or a new one).

        Raises:
            ValueError: ``session_id`` is taken or not a valid id.
        """
        return await self.sessions.create(session_id)

    async def list_sessions(self) -> list[SessionInfo]:
        """The sessions, newest first, with ``running`` set for those running here."""
        infos = await self.sessions.list()
        return [attrs.evolve(info, running=info.id in self._runs) for info in infos]

    async def messages(self, session_id: str) -> list[AgentMessage]:
        """The session's transcript: the live one while it runs here.

        Raises:
            UnknownSessionError: no session has the id.
        """
        run = self._runs.get(session_id)
        if run is not None and run.agent is not None and run.agent.state.is_streaming:
            await trio.lowlevel.checkpoint()
            return list(run.agent.state.messages)
        return await self.sessions.messages(session_id)

    async def transcript(self, session_id: str) -> dict[str, Any]:
        """The session as JSON: ``id``, ``running`` and its AG-UI ``messages``."""
        messages = await self.messages(session_id)
        return {
            "id": session_id,
            "running": session_id in self._runs,
            "messages": agui_messages(session_id, messages),
        }

    def is_running(self, session_id: str) -> bool:
        """Whether a run of the session goes on in this process."""
        return session_id in self._runs

    async def _agent(self, session_id: str) -> Agent:
        agent = await maybe_await(self.agent_factory(session_id))
        if not isinstance(agent, Agent):
            raise TypeError(f"the agent factory returned {agent!r}, not an Agent")
        return agent

    # -- runs -------------------------------------------------------------------------

    async def start_run(
        self, session_id: str, input: str | AgentMessage | Sequence[AgentMessage]
    ) -> RunStream:
        """Start a run of the session on ``input`` (a text, a message or messages) in the
        host's nursery; returns the subscription of the caller. A checkpoint.

        Raises:
            UnknownSessionError: no session has the id.
            RunBusyError: the session already runs.
        """
        await self.sessions.messages(session_id)  # raises UnknownSessionError
        if session_id in self._runs:
            raise RunBusyError(f"session {session_id!r} is already running")
        send, receive = trio.open_memory_channel[dict[str, Any]](_SUBSCRIBER_BUFFER)
        run = _Run(session_id=session_id, run_id=secrets.token_hex(8), subscribers=[send])
        self._runs[session_id] = run
        messages: list[AgentMessage]
        if isinstance(input, str):
            messages = [UserMessage(content=input)]
        elif isinstance(input, Sequence):
            messages = [message for message in input if not isinstance(message, str)]
        else:
            messages = [input]
        self._nursery.start_soon(self._run, run, messages)
        return RunStream(session_id=session_id, run_id=run.run_id, events=receive, run=run)

    def attach(self, session_id: str) -> RunStream | None:
        """Subscribe to the session's current run from now on (``None`` when idle)."""
        run = self._runs.get(session_id)
        if run is None:
            return None
        send, receive = trio.open_memory_channel[dict[str, Any]](_SUBSCRIBER_BUFFER)
        run.subscribers.append(send)
        return RunStream(session_id=session_id, run_id=run.run_id, events=receive, run=run)

    def steer(self, session_id: str, text: str) -> bool:
        """Queue ``text`` as steering for the session's run; ``False`` when it is idle."""
        return self._queue(session_id, text, "steer")

    def follow_up(self, session_id: str, text: str) -> bool:
        """Queue ``text`` as a follow-up of the session's run; ``False`` when it is idle."""
        return self._queue(session_id, text, "follow_up")

    def _queue(self, session_id: str, text: str, kind: Literal["steer", "follow_up"]) -> bool:
        run = self._runs.get(session_id)
        if run is None:
            return False
        run.queue(kind, UserMessage(content=text))
        return True

    def abort(self, session_id: str, reason: str = "aborted by the client") -> bool:
        """Abort the session's run; ``False`` when it is idle."""
        run = self._runs.get(session_id)
        if run is None:
            return False
        run.abort(reason)
        return True

    def detach(self, stream: RunStream) -> None:
        """A subscriber went away: apply :attr:`on_disconnect` to its run."""
        if self.on_disconnect == "abort":
            stream.abort("the client disconnected")

    async def wait_idle(self, session_id: str) -> None:
        """Wait until the session has no run going on here (a checkpoint)."""
        run = self._runs.get(session_id)
        if run is None:
            await trio.lowlevel.checkpoint()
        else:
            await run.finished.wait()

    async def _run(self, run: _Run, messages: list[AgentMessage]) -> None:
        encoder = AgUiEncoder(thread_id=run.session_id, run_id=run.run_id)
        try:
            agent = await self._agent(run.session_id)
            with run.scope:
                async with self.sessions.open_run(run.session_id, agent):
                    run.agent = agent
                    for kind, message in run.queued:
                        run.queue(kind, message)
                    run.queued.clear()

                    async def listener(event: AgentEvent) -> None:
                        if event.type == "agent_start":
                            nonlocal encoder
                            encoder = AgUiEncoder(
                                thread_id=run.session_id,
                                run_id=run.run_id,
                                first_message_index=len(agent.state.messages),
                            )
                        events = encoder.encode(event)
                        if events:
                            run.published = True
                            await run.publish(events)

                    unsubscribe = agent.subscribe(listener)
                    try:
                        await agent.prompt(messages)
                        # Steering or a follow-up that arrived after the run's last poll
                        # (while its closing events were being sent, say) is not left
                        # queued for some later prompt: the run goes on with it, as a
                        # next AG-UI run on the same stream.
                        while agent.has_queued_messages() and _ended_normally(agent):
                            run.run_id = secrets.token_hex(8)
                            await agent.continue_()
                    finally:
                        unsubscribe()
        except Exception as exc:
            # A run's failure is the run's (its client sees RUN_ERROR), never the host's.
            logger.exception("run %s of session %s failed", run.run_id, run.session_id)
            events = [encoder.run_error(error_text(exc))]
            if not run.published:
                events.insert(0, encoder.run_started())
            with trio.move_on_after(1, shield=True):
                await run.publish(events)
        finally:
            del self._runs[run.session_id]
            run.close_subscribers()
            run.finished.set()


def _ended_normally(agent: Agent) -> bool:
    """Whether the agent's last run ended neither aborted nor failed."""
    messages = agent.state.messages
    last = messages[-1] if messages else None
    return not (isinstance(last, AssistantMessage) and last.stop_reason in ("aborted", "error"))


@contextlib.asynccontextmanager
async def open_agent_host(
    agent_factory: AgentFactory,
    *,
    sessions: WebSessions | None = None,
    on_disconnect: DisconnectPolicy = "abort",
) -> AsyncIterator[AgentHost]:
    """Open an :class:`AgentHost` whose runs live in a nursery owned by this block.

    Leaving the block (or cancelling it) aborts the runs still going on; their closing
    events are delivered and committed before it returns.

    Args:
        agent_factory: ``factory(session_id)`` returns an :class:`Agent` for the
            session (called for each run; the session's transcript is loaded into it).
        sessions: The session store (default: :class:`MemorySessions`).
        on_disconnect: ``"abort"`` a run whose client disconnects, or let it
            ``"continue"``.
    """
    if on_disconnect not in ("abort", "continue"):
        raise ValueError(f"on_disconnect must be 'abort' or 'continue', not {on_disconnect!r}")
    async with trio.open_nursery() as nursery:
        host = AgentHost(
            nursery=nursery,
            agent_factory=agent_factory,
            sessions=sessions if sessions is not None else MemorySessions(),
            on_disconnect=on_disconnect,
        )
        try:
            yield host
        finally:
            for session_id in list(host._runs):
                host.abort(session_id, "the server is shutting down")
