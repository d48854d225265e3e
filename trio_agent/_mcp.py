"""MCP tools: the tools of a Model Context Protocol server as :class:`~trio_agent.AgentTool`
objects, through the official ``mcp`` SDK (which runs on Trio through AnyIO).

:func:`open_mcp_tools` connects (a subprocess over stdio, or streamable HTTP), lists the
server's tools and yields them; leaving the block closes the session and stops the
server process. A call is one ``tools/call`` request in the calling tool task, so the
run's abort (a cancel scope) cancels it at once; the SDK then tells the server.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import attrs
import mcp.types as mcp_types
import trio
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from ._abort import AbortSignal
from ._exceptions import AgentError
from ._messages import ImageContent, TextContent, ToolResultContent
from ._redaction import redact_url
from ._tools import AgentTool, AgentToolResult, AgentToolUpdateCallback
from ._util import exception_leaves

__all__ = ["McpConnectionError", "open_mcp_tools"]


class McpConnectionError(AgentError):
    """Connecting to an MCP server, or listing its tools, failed.

    The message names the server (a URL without credentials or query, or the command of
    a stdio server) and the first underlying error; ``__cause__`` is the original
    exception (an exception group keeps all of them).
    """


@attrs.define(eq=False)
class _Session:
    client: Client
    where: str
    open: bool = True


@asynccontextmanager
async def open_mcp_tools(
    server: str | StdioServerParameters | Client,
    *,
    name_prefix: str = "",
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
    - progress notifications are reported through ``on_update``.

    Args:
        server: A URL (streamable HTTP), :class:`mcp.StdioServerParameters` (start that
            command and talk over its stdin and stdout), or an unentered
            :class:`mcp.Client`, for any other transport or client setting. The block
            enters and exits the client.
        name_prefix: Prepended to every tool name (to tell several servers apart); the
            server is called with its own name.

    Raises:
        TypeError: ``server`` is none of the above.
        ValueError: ``server`` is a string that is not a valid URL (the message shows it
            without credentials).
        McpConnectionError: The server could not be started or reached, or listing its
            tools failed.
    """
    if not isinstance(server, str | StdioServerParameters | Client):
        raise TypeError(
            "open_mcp_tools() needs a URL, an mcp.StdioServerParameters or an mcp.Client, "
            f"got {server!r}"
        )
    where = _describe(server)
    if isinstance(server, Client):
        client = server
    elif isinstance(server, StdioServerParameters):
        client = Client(stdio_client(server))
    else:
        client = Client(server)
    error: BaseException | None = None  # what the block (or listing the tools) raised
    try:
        async with AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(client)
                listed = await _list_tools(client)
            except Exception as exc:  # also an ExceptionGroup of ordinary exceptions
                error = McpConnectionError(f"cannot use MCP server {where}: {_first_error(exc)}")
                raise error from exc
            session = _Session(client=client, where=where)
            try:
                yield [_agent_tool(session, tool, name_prefix) for tool in listed]
            except BaseException as exc:
                error = exc
                raise
            finally:
                session.open = False
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap an error raised inside them. Policy: when the group
        # holds that one error and otherwise only cancellations (their echoes), the error
        # is provably the only one and leaves as it was; any other group stays whole.
        if error is not None and _only(group, error):
            raise error from error.__cause__
        raise


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
        if not session.open:
            raise RuntimeError(
                f"MCP server {session.where} is closed: its tools work only inside the "
                "open_mcp_tools() block"
            )

        async def report(progress: float, total: float | None, message: str | None) -> None:
            on_update(_progress_result(progress, total, message))

        try:
            result = await session.client.call_tool(name, params, progress_callback=report)
        except MCPError as exc:
            return AgentToolResult(
                content=[TextContent(text=f"MCP error {exc.code}: {exc.message}")],
                details={"code": exc.code, "message": exc.message, "data": exc.data},
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
    """Name the server in messages, without credentials, query or arguments."""
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
        return f"(command {server.command!r})"
    return "(client)"


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
