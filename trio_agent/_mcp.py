"""MCP tools: the tools of a Model Context Protocol server as :class:`~trio_agent.AgentTool`
objects, through the official ``mcp`` SDK (which runs on Trio through AnyIO).

:func:`open_mcp_tools` connects (a subprocess over stdio, or streamable HTTP), lists the
server's tools and yields them; leaving the block closes the session and stops the
server process. A call is one ``tools/call`` request in the calling tool task, so the
run's abort (a cancel scope) cancels it at once; the SDK then tells the server.

The client runs in a task of its own (in the block's nursery), not in the caller's: the
SDK's transports run background tasks in a task group around the client, and one that
fails (an HTTP server that dropped the connection) cancels that whole group. Inside the
caller's task it would cancel the caller's block and end the run; here it only ends the
session, and the calls in flight and after it become error results (issue 18, item 7).

A stdio server is started by :func:`_stdio_transport` rather than the SDK's
``stdio_client``, which keeps neither the exit status nor the standard error of a
server that fails to start.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import sys
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import attrs
import mcp.types as mcp_types
import trio
from mcp import Client, MCPError, StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ._abort import AbortSignal
from ._exceptions import AgentError
from ._messages import ImageContent, TextContent, ToolResultContent
from ._redaction import _CREDENTIAL_NAMES, REDACTED, looks_like_secret, redact_url
from ._tools import AgentTool, AgentToolResult, AgentToolUpdateCallback
from ._util import exception_leaves

__all__ = ["McpConnectionError", "open_mcp_tools"]


class McpConnectionError(AgentError):
    """Connecting to an MCP server, or listing its tools, failed.

    The message names the server (a URL without credentials or query, or the command of
    a stdio server with its arguments, credential-like ones hidden) and the first
    underlying error; for a stdio server that exited on its own, also its exit status
    and a line of its standard error. ``__cause__`` is the original exception (an
    exception group keeps all of them).
    """


@attrs.define(eq=False)
class _Session:
    """One connection to a server: the client, entered in its own task (:meth:`serve`),
    and what the tools need to know about it."""

    client: Client
    where: str
    call_timeout: float | None
    open: bool = True
    lost: str | None = None
    """Why the connection ended on its own (the transport failed), once it has."""
    calls: set[trio.CancelScope] = attrs.field(factory=set)
    """The cancel scopes of the calls in flight, cancelled when the connection is lost."""
    closing: trio.Event = attrs.field(factory=trio.Event)

    async def serve(
        self, process: _ProcessRecord | None, *, task_status: trio.TaskStatus[list[mcp_types.Tool]]
    ) -> None:
        """Enter the client, list the tools, and keep the session until ``closing``."""
        started = False
        try:
            async with self.client:
                listed = await _list_tools(self.client)
                task_status.started(listed)
                started = True
                await self.closing.wait()
        except Exception as exc:
            if not started:  # also an ExceptionGroup of ordinary exceptions
                message = f"cannot use MCP server {self.where}: {_first_error(exc)}"
                if process is not None:
                    message += process.describe_exit()
                raise McpConnectionError(message) from exc
            # The transport failed (a task of the SDK raised): the session is over, but
            # the caller's block goes on; the calls return error results.
            self.lost = _first_error(exc)
        finally:
            self.open = False
            for scope in self.calls:
                scope.cancel()


@asynccontextmanager
async def open_mcp_tools(
    server: str | StdioServerParameters | Client,
    *,
    name_prefix: str = "",
    call_timeout: float | None = None,
) -> AsyncIterator[list[AgentTool]]:
    """Connect to an MCP server and yield its tools as :class:`~trio_agent.AgentTool`.

    ``async with open_mcp_tools(server) as tools:`` — the tools work only inside the
    block: leaving it closes the session, stops a stdio server's process and closes the
    HTTP connections (also on error and cancellation). A call after that fails with an
    error result.

    Each tool declares the server's input schema as its ``parameters`` (so the agent
    validates the model's arguments against it before the call) and its output schema
    as ``output_schema``. A result maps to an :class:`~trio_agent.AgentToolResult`:

    - text and image blocks are passed on; an audio block, a resource link or a binary
      resource becomes a short text placeholder, an embedded text resource its text;
    - ``structuredContent`` becomes ``structured_content`` and ``details`` (and the text,
      as JSON, when the server sent no content blocks);
    - ``isError`` and protocol errors (``MCP error <code>: <message>``) become error
      results;
    - a lost connection (a stdio server that exited, an HTTP server that dropped the
      connection) and a call that ran out of ``call_timeout`` become error results
      too; the block goes on and leaves normally;
    - progress notifications are reported through ``on_update``.

    The session runs in a task of the block's own nursery, so that a failing transport
    ends the session, not the block.

    Args:
        server: A URL (streamable HTTP), :class:`mcp.StdioServerParameters` (start that
            command and talk over its stdin and stdout), or an unentered
            :class:`mcp.Client`, for any other transport or client setting. The block
            enters and exits the client.
        name_prefix: Prepended to every tool name (to tell several servers apart); the
            server is called with its own name.
        call_timeout: Seconds a tool call may wait for its answer; then the request is
            cancelled (the server is told) and the call returns an error result.
            ``None`` (the default) waits until the run is aborted or cancelled. It
            bounds each call of these tools; to bound the whole block, use
            ``trio.move_on_after`` around it.

    Raises:
        TypeError: ``server`` is none of the above, or ``call_timeout`` is not a number.
        ValueError: ``server`` is a string that is not a valid URL (the message shows it
            without credentials), or ``call_timeout`` is not positive.
        McpConnectionError: The server could not be started or reached, or listing its
            tools failed.
    """
    if not isinstance(server, str | StdioServerParameters | Client):
        raise TypeError(
            "open_mcp_tools() needs a URL, an mcp.StdioServerParameters or an mcp.Client, "
            f"got {server!r}"
        )
    _check_call_timeout(call_timeout)
    where = _describe(server)
    process: _ProcessRecord | None = None
    if isinstance(server, Client):
        client = server
    elif isinstance(server, StdioServerParameters):
        process = _ProcessRecord()
        client = Client(_stdio_transport(server, process))
    else:
        client = Client(server)
    session = _Session(client=client, where=where, call_timeout=call_timeout)
    error: BaseException | None = None  # what connecting or the block raised
    try:
        async with trio.open_nursery() as nursery:
            try:
                listed = await nursery.start(session.serve, process)
                yield [_agent_tool(session, tool, name_prefix) for tool in listed]
            except BaseException as exc:
                error = exc
                raise
            finally:
                session.closing.set()
    except BaseExceptionGroup as group:
        # The nursery wraps an error raised in its body (McpConnectionError, or the
        # block's). Policy: when the group holds that one error and otherwise only
        # cancellations (their echoes), the error is provably the only one and leaves
        # as it was; any other group stays whole.
        if error is not None and _only(group, error):
            raise error from error.__cause__
        raise


def _check_call_timeout(value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"open_mcp_tools(): call_timeout must be a number or None, got {value!r}")
    if not value > 0 or math.isnan(value):
        raise ValueError(f"open_mcp_tools(): call_timeout must be positive, got {value!r}")


async def _list_tools(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def _agent_tool(session: _Session, tool: mcp_types.Tool, name_prefix: str) -> AgentTool:
    name = tool.name

    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        if session.lost is not None:
            return _lost_result(session)
        if not session.open:
            raise RuntimeError(
                f"MCP server {session.where} is closed: its tools work only inside the "
                "open_mcp_tools() block"
            )

        async def report(progress: float, total: float | None, message: str | None) -> None:
            on_update(_progress_result(progress, total, message))

        timeout = session.call_timeout
        scope = trio.CancelScope(
            deadline=math.inf if timeout is None else trio.current_time() + timeout
        )
        session.calls.add(scope)
        try:
            with scope:
                result = await session.client.call_tool(name, params, progress_callback=report)
        except MCPError as exc:
            return AgentToolResult(
                content=[TextContent(text=f"MCP error {exc.code}: {exc.message}")],
                details={"code": exc.code, "message": exc.message, "data": exc.data},
                is_error=True,
            )
        except Exception:
            if session.lost is None:
                raise
            # The transport failed under the call (it may then raise about the closed
            # streams): the loss is the error to report.
            return _lost_result(session)
        finally:
            session.calls.discard(scope)
        if scope.cancelled_caught:
            if session.lost is not None:
                return _lost_result(session)
            return AgentToolResult(
                content=[
                    TextContent(
                        text=f"MCP server {session.where} did not answer within "
                        f"{timeout:g} s (call_timeout); the call was cancelled"
                    )
                ],
                details={"timeout": timeout},
                is_error=True,
            )
        return _convert_result(result)

    title = tool.title or (tool.annotations.title if tool.annotations is not None else None)
    return AgentTool(
        name=f"{name_prefix}{name}",
        label=title or name,
        description=tool.description or "",
        parameters=tool.input_schema,
        execute=execute,
        output_schema=tool.output_schema,
    )


def _lost_result(session: _Session) -> AgentToolResult:
    return AgentToolResult(
        content=[TextContent(text=f"MCP server {session.where}: connection lost: {session.lost}")],
        details={"lost": session.lost},
        is_error=True,
    )


def _progress_result(value: float, total: float | None, message: str | None) -> AgentToolResult:
    amount = f"{value:g}" if total is None else f"{value:g}/{total:g}"
    text = f"{amount} {message}" if message else amount
    return AgentToolResult(
        content=[TextContent(text=text)],
        details={"progress": value, "total": total, "message": message},
    )


def _convert_result(result: mcp_types.CallToolResult) -> AgentToolResult:
    content = [_convert_block(block) for block in result.content]
    structured = result.structured_content
    if not content and structured is not None:
        content = [TextContent(text=json.dumps(structured, ensure_ascii=False))]
    return AgentToolResult(
        content=content,
        details=structured,
        structured_content=structured,
        is_error=True if result.is_error else None,
    )


def _convert_block(block: Any) -> ToolResultContent:
    if isinstance(block, mcp_types.TextContent):
        return TextContent(text=block.text)
    if isinstance(block, mcp_types.ImageContent):
        return ImageContent(data=block.data, mime_type=block.mime_type)
    if isinstance(block, mcp_types.AudioContent):
        return TextContent(text=f"[audio: {block.mime_type}]")
    if isinstance(block, mcp_types.ResourceLink):
        return TextContent(text=f"[resource: {block.uri}]")
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return TextContent(text=resource.text)
        mime_type = resource.mime_type or "application/octet-stream"
        if mime_type.startswith("image/"):
            return ImageContent(data=resource.blob, mime_type=mime_type)
        return TextContent(text=f"[resource: {resource.uri} ({mime_type})]")
    return TextContent(text=f"[unsupported MCP content: {getattr(block, 'type', block)!r}]")


def _describe(server: str | StdioServerParameters | Client) -> str:
    """Name the server in messages, without credentials or query."""
    if isinstance(server, str):
        try:
            url = urllib.parse.urlsplit(server)
            port = url.port
        except ValueError as exc:
            raise ValueError(
                f"open_mcp_tools(): not a valid URL: {redact_url(server)!r} ({exc})"
            ) from None
        host = url.hostname or ""
        if port is not None:
            host = f"{host}:{port}"
        return repr(urllib.parse.urlunsplit((url.scheme, host, url.path, "", "")))
    if isinstance(server, StdioServerParameters):
        words = [server.command, *_shown_args(server.args)]
        # As a shell would read it; a hidden value is shown as is, not quoted.
        return f"(command: {' '.join(w if REDACTED in w else shlex.quote(w) for w in words)})"
    return "(client)"


def _shown_args(args: list[str]) -> list[str]:
    """``args`` with credential-like values hidden: ``--token=[REDACTED]``, the value
    after ``--api-key``, and anything that looks like a key."""
    shown: list[str] = []
    hide_next = False
    for arg in args:
        name, equals, value = arg.partition("=")
        if hide_next or looks_like_secret(arg):
            arg = REDACTED
        elif equals and value and _CREDENTIAL_NAMES.search(name):
            arg = f"{name}={REDACTED}"
        hide_next = arg.startswith("-") and not equals and bool(_CREDENTIAL_NAMES.search(arg))
        shown.append(arg)
    return shown


# ---------------------------------------------------------------------------------------
# A stdio server. The SDK's shutdown sequence (MCP lifecycle, "Shutdown"): close its
# stdin, wait, then SIGTERM and SIGKILL its process group.

_EXIT_GRACE = 2.0
"""Seconds a server may take to exit after its stdin is closed, and after SIGTERM."""
_STDERR_KEPT = 65536
"""Bytes of a server's standard error kept for the error message."""


@attrs.define(eq=False)
class _ProcessRecord:
    """What an error message may tell about a stdio server process."""

    returncode: int | None = None
    ended_first: bool = False
    """The server closed its stdout before the client closed the session (it exited, or
    is exiting, on its own)."""
    stderr: bytearray = attrs.field(factory=bytearray)
    """The start of its standard error (at most :data:`_STDERR_KEPT` bytes)."""

    def describe_exit(self) -> str:
        """``"; the server exited with status 1; stderr: <line>"`` when the server ended
        on its own, else ``""``."""
        if not self.ended_first or self.returncode is None:
            return ""
        code = self.returncode
        if code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        text = f"; the server {how}"
        line = _stderr_line(self.stderr.decode("utf-8", "replace"))
        if line:
            text += f"; stderr: {line}"
        return text


def _stderr_line(text: str) -> str:
    """The line of a server's standard error that says what went wrong: the first, or
    for a Python traceback its last (the exception)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[0]
    if line == "Traceback (most recent call last):":
        line = lines[-1]
    return line if len(line) <= 200 else line[:197] + "..."


@asynccontextmanager
async def _stdio_transport(
    server: StdioServerParameters, record: _ProcessRecord
) -> AsyncIterator[TransportStreams]:
    """Start ``server`` and exchange newline-delimited JSON-RPC over its stdin and stdout
    (the SDK's ``stdio_client``, keeping its exit status and standard error in
    ``record``; the standard error is also passed on to ours)."""
    process = await trio.lowlevel.open_process(
        [server.command, *server.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=get_default_environment() | (server.env or {}),
        cwd=server.cwd,
        start_new_session=True,  # its own process group, stopped as a whole
    )
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr
    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    stderr_done = trio.Event()
    closing = False

    async def read_stdout() -> None:
        async with to_session:
            buffer = b""
            while chunk := await stdout.receive_some():
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    text = line.decode(server.encoding, server.encoding_error_handler)
                    try:
                        message: SessionMessage | Exception = SessionMessage(
                            mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False)
                        )
                    except ValueError as exc:  # pydantic's ValidationError included
                        message = exc
                    try:
                        await to_session.send(message)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return
            record.ended_first = not closing

    async def write_stdin() -> None:
        try:
            async with from_session:
                async for message in from_session:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    data = (text + "\n").encode(server.encoding, server.encoding_error_handler)
                    await stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The server is gone: the session sees the connection end.
            await to_session.aclose()

    async def read_stderr() -> None:
        try:
            while chunk := await stderr.receive_some():
                if len(record.stderr) < _STDERR_KEPT:
                    record.stderr += chunk[: _STDERR_KEPT - len(record.stderr)]
                if sys.stderr is not None:  # None under pythonw
                    sys.stderr.write(chunk.decode("utf-8", "replace"))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            stderr_done.set()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_stdout)
            nursery.start_soon(write_stdin)
            nursery.start_soon(read_stderr)
            try:
                yield from_server, to_server
            finally:
                closing = True
                with trio.CancelScope(shield=True):
                    await to_server.aclose()
                    await _stop(process, stdin)
                    record.returncode = process.returncode
                    with trio.move_on_after(_EXIT_GRACE):
                        await stderr_done.wait()  # the last words of a server that crashed
                # A process the kill did not end may hold the pipes open.
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await stdout.aclose()
            await stderr.aclose()


async def _stop(process: trio.Process, stdin: trio.abc.SendStream) -> None:
    """Close the server's stdin, wait, then SIGTERM and SIGKILL its process group."""
    await stdin.aclose()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            try:
                if sys.platform == "win32":  # pragma: no cover
                    process.kill()
                else:
                    os.killpg(process.pid, sig)
            except ProcessLookupError:
                pass
        with trio.move_on_after(_EXIT_GRACE):
            await process.wait()
            return


def _only(group: BaseExceptionGroup[BaseException], error: BaseException) -> bool:
    """Whether ``group`` holds ``error`` and otherwise only cancellations."""
    leaves = exception_leaves(group)
    return any(leaf is error for leaf in leaves) and all(
        leaf is error or isinstance(leaf, trio.Cancelled) for leaf in leaves
    )


def _first_error(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
