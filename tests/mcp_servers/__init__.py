"""MCP servers the tests start in a subprocess."""
