"""A small MCP server for the tests, built with the ``mcp`` SDK.

``python demo_server.py`` serves over stdio; ``python demo_server.py http PORT`` serves
streamable HTTP on 127.0.0.1:PORT at ``/mcp``; ``python demo_server.py broken`` serves
over stdio but fails to list its tools; ``python demo_server.py crash`` fails to start
(a traceback on stderr, exit status 1).
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from mcp.types import Tool as McpTool
from pydantic import BaseModel


class DemoServer(MCPServer):
    broken = False

    async def list_tools(self) -> list[McpTool]:
        if self.broken:
            raise MCPError(code=-32603, message="listing is broken")
        return await super().list_tools()


server = DemoServer("demo")
calls = 0
cancelled = 0


class Rectangle(BaseModel):
    width: float
    height: float


@server.tool(title="Adder")
def add(a: int, b: int) -> int:
    """Add two integers."""
    global calls
    calls += 1
    return a + b


@server.tool()
def area(rectangle: Rectangle) -> float:
    """Area of a rectangle."""
    global calls
    calls += 1
    return rectangle.width * rectangle.height


@server.tool(structured_output=False)
def media() -> list[TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource]:
    """Every kind of content block."""
    return [
        TextContent(text="a picture:"),
        ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
        AudioContent(data="UklGRg==", mime_type="audio/wav"),
        ResourceLink(uri="file:///notes.txt", name="notes"),
        EmbeddedResource(resource=TextResourceContents(uri="file:///a.txt", text="embedded text")),
        EmbeddedResource(
            resource=BlobResourceContents(
                uri="file:///b.bin", blob="AAEC", mime_type="application/octet-stream"
            )
        ),
    ]


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ToolError(reason)


@server.tool()
def protocol_error() -> str:
    """Fails with a JSON-RPC error."""
    raise MCPError(code=-32602, message="no such thing")


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Report progress, then sleep."""
    global cancelled
    await ctx.report_progress(1, 2, "started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        cancelled += 1
        raise
    return "slept"


@server.tool()
async def die(ctx: Context, progress: bool = True) -> str:
    """End the server process at once (a crash mid-call), after reporting progress."""
    if progress:
        await ctx.report_progress(1, 2, "dying")
        await anyio.sleep(0.2)
    os._exit(3)


@server.tool()
def stats() -> dict[str, int]:
    """The process id, completed calls of add and area, and cancelled slow calls."""
    return {"pid": os.getpid(), "calls": calls, "cancelled": cancelled}


if __name__ == "__main__":
    if sys.argv[1:2] == ["crash"]:
        raise RuntimeError("the demo server cannot start: no configuration")
    server.broken = sys.argv[1:2] == ["broken"]
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
