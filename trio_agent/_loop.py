"""The public entry points of the agent loop (:mod:`trio_agent.loop`).

A run is a nursery with a cancel scope for abort: its work (provider request, hooks, tool
executions) happens inside one cancel scope linked to the run's
:class:`~trio_agent.AbortSignal`, so an abort interrupts whatever is being awaited at once.
The run itself is :class:`~trio_agent._run.Run`; where its events go,
:mod:`trio_agent._sink`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import trio

from ._abort import AbortSignal
from ._compaction import CompactionFailure, CompactionResult
from ._events import AgentEvent
from ._exceptions import NothingToContinueError
from ._hooks import AgentContext
from ._messages import AgentMessage
from ._run import AgentLoopConfig, Run
from ._sink import AgentEventSink, AnySink, ChannelSink, as_sink
from ._streaming import StreamFn
from ._transcript import declare_tool_changes
from ._util import collapse_exception_group

__all__ = [
    "open_agent_loop",
    "run_agent_compaction",
    "open_agent_loop_continue",
    "run_agent_loop",
    "run_agent_loop_continue",
]


def _working_context(context: AgentContext) -> AgentContext:
    return AgentContext(messages=list(context.messages), tools=list(context.tools))


async def run_agent_loop(
    prompts: Sequence[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    emit: AnySink,
    *,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> list[AgentMessage]:
    """Run the agent on new prompt messages and return the messages the run delivered.

    Emits ``agent_start``, ``turn_start``, the prompts' (and tool declarations')
    ``message_start``/``message_end``, then turns until the model stops asking for tools
    and the queues are empty. ``emit`` (an :class:`AgentEventSink`, or a callable
    ``emit(event)`` that may return an awaitable) handles every event before the loop goes
    on; it is never called concurrently, and events of parallel tools reach it from this
    task. The caller's ``context`` is not modified.

    Every run ends with ``agent_end``, with the event grammar closed (see the guide,
    "Abort and cancellation" and "Failures"):

    - aborting ``signal`` cancels whatever the run awaits (provider read, tool, hook) at
      once and closes the run; the function then returns normally;
    - an ``Exception`` from a hook, the stream function or ``emit`` is reported in-band
      by a synthesized failure message (``stop_reason`` ``"error"``, or ``"aborted"`` after
      an abort), and the function returns normally;
    - cancelling the caller's scope closes the run like an abort (the signal becomes
      aborted with reason ``"cancelled"``) and re-raises ``trio.Cancelled``; a
      ``BaseException`` does the same and propagates as itself. ``emit`` then has
      :data:`CLOSING_GRACE_SECONDS` to take the closing events.

    Raises:
        Exception: what ``emit`` raised on ``agent_end`` (nothing may follow it), or what it
            raised again while a failure was being reported (several as a group).
    """
    initial = declare_tool_changes(context.messages, list(prompts), context.tools)
    run = Run(_working_context(context), config, as_sink(emit), signal, stream_fn)
    return await run.run(initial)


async def run_agent_compaction(
    context: AgentContext,
    config: AgentLoopConfig,
    emit: AnySink,
    *,
    instructions: str | None = None,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> CompactionResult | CompactionFailure:
    """Compact ``context``'s transcript now, as a run of its own: ``agent_start``, one
    ``compaction`` event (its ``messages`` are the transcript from now on), ``agent_end``.

    Uses ``config.compaction`` (default settings when ``None``) and ``config.model`` for
    the summary request, with ``instructions`` added to the summary prompt. Aborting
    ``signal`` cancels the summary request; the transcript then stays as it was. The
    caller's ``context`` is not modified.

    Returns:
        A :class:`~trio_agent.compaction.CompactionResult`, or a
        :class:`~trio_agent.compaction.CompactionFailure` (nothing to compact, the summary
        failed, or the run was aborted).
    """
    run = Run(_working_context(context), config, as_sink(emit), signal, stream_fn)
    await run.run([], compact_only=instructions or "")
    outcome = run.compaction_result
    if outcome is None:
        return CompactionFailure(
            error_message="Compaction cancelled", aborted=True, tokens_before=0
        )
    return outcome


def _check_continuable(context: AgentContext) -> None:
    if not context.messages:
        raise NothingToContinueError("Cannot continue: no messages in context")
    last = context.messages[-1]
    if last.role == "assistant":
        raise NothingToContinueError("Cannot continue from message role: assistant")


async def run_agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    emit: AnySink,
    *,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> list[AgentMessage]:
    """Continue from an existing context (its last message must not be an assistant one).

    Like :func:`run_agent_loop` without prompts: no message events for existing messages;
    the returned list holds only new messages.

    Raises:
        NothingToContinueError: ``Cannot continue: no messages in context`` or
            ``Cannot continue from message role: assistant`` (before any event).
    """
    _check_continuable(context)
    run = Run(_working_context(context), config, as_sink(emit), signal, stream_fn)
    return await run.run(())


@asynccontextmanager
async def _open_loop(
    runner: Callable[[AgentEventSink], Awaitable[list[AgentMessage]]], max_buffer_size: float
) -> AsyncIterator[trio.MemoryReceiveChannel[AgentEvent]]:
    send, receive = trio.open_memory_channel[AgentEvent](max_buffer_size)

    async def drive() -> None:
        try:
            await runner(ChannelSink(send))
        finally:
            # close(), not aclose(): aclose() is a checkpoint, and the cancellation that
            # the consumer's exit (on end of channel) triggers would replace the run's
            # exception there, losing it.
            send.close()

    error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery, receive:
            nursery.start_soon(drive)
            try:
                yield receive
            finally:
                # Leaving the block (early or not) ends the loop: nothing outlives it.
                nursery.cancel_scope.cancel(reason="open_agent_loop block exited")
    except BaseExceptionGroup as group:
        error = collapse_exception_group(group)
    if error is not None:
        raise error  # after the except clause: its own cause and context stay


def open_agent_loop(
    prompts: Sequence[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    *,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    max_buffer_size: float = 0,
) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[AgentEvent]]:
    """Run :func:`run_agent_loop` in a nursery this context manager owns and yield a
    receive channel of its events.

    The channel ends after ``agent_end``. With ``max_buffer_size=0`` the loop waits until
    the consumer has received each event. Leaving the block early cancels the loop. An
    exception of the run (one it cannot report in-band) propagates out of the block.
    """
    return _open_loop(
        lambda sink: run_agent_loop(
            prompts, context, config, sink, signal=signal, stream_fn=stream_fn
        ),
        max_buffer_size,
    )


def open_agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    *,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    max_buffer_size: float = 0,
) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[AgentEvent]]:
    """Like :func:`open_agent_loop` for :func:`run_agent_loop_continue`.

    Raises:
        NothingToContinueError: at the call, when the context cannot be continued.
    """
    _check_continuable(context)
    return _open_loop(
        lambda sink: run_agent_loop_continue(
            context, config, sink, signal=signal, stream_fn=stream_fn
        ),
        max_buffer_size,
    )
