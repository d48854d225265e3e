"""MCP tools (``pip install 'trio-agent[mcp]'``).

``async with open_mcp_tools(server) as tools:`` yields the tools of a Model Context
Protocol server, over stdio or streamable HTTP, as :class:`~trio_agent.AgentTool` objects.
Built on the official ``mcp`` SDK; not imported by ``import trio_agent``.
"""

from __future__ import annotations

from ._mcp import McpConnectionError as McpConnectionError
from ._mcp import open_mcp_tools as open_mcp_tools
from ._util import fixup_module_metadata as _fixup_module_metadata

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
