"""Shared pieces of the web tests."""

from __future__ import annotations

from trio_agent import tool


@tool
async def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: What to echo.
    """
    return f"echo: {text}"


echo_tool = echo
