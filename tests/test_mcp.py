"""MCP tools (``trio_agent.mcp``) against real MCP servers built with the ``mcp`` SDK,
started by the tests: one over stdio, one over streamable HTTP on 127.0.0.1.

These tests run on Trio's real clock (the servers are other processes)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from trio_agent import (
    AbortController,
    Agent,
    AgentEvent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolResultMessage,
)
from trio_agent.mcp import McpConnectionError, open_mcp_tools
from trio_agent.models import FauxProvider, faux_assistant_message, faux_tool_call

SERVER = Path(__file__).resolve().parent / "mcp_servers" / "demo_server.py"


def stdio_server() -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(SERVER)])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
async def http_server() -> AsyncIterator[str]:
    """The demo server over streamable HTTP in a subprocess; yields its URL."""
    port = free_port()
    process = await trio.lowlevel.open_process(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with trio.fail_after(60):
            while True:
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                except OSError:
                    assert process.poll() is None, "the MCP server exited"
                    await trio.sleep(0.05)
                else:
                    await stream.aclose()
                    break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


def by_name(tools: list[AgentTool]) -> dict[str, AgentTool]:
    return {tool.name: tool for tool in tools}


async def call(
    tool: AgentTool, arguments: dict[str, Any], updates: list[AgentToolResult] | None = None
) -> AgentToolResult:
    """Run a tool outside an agent."""
    sink = updates if updates is not None else []
    return await tool.execute("call", arguments, AbortController().signal, sink.append)


async def server_stats(tools: list[AgentTool], name: str = "stats") -> dict[str, int]:
    result = await call(by_name(tools)[name], {})
    stats: dict[str, int] = result.structured_content
    return stats


async def server_saw_a_cancellation(tools: list[AgentTool]) -> None:
    """Poll the server (another process) until a cancelled call was counted."""
    with trio.fail_after(30):
        for _ in range(600):
            if (await server_stats(tools))["cancelled"]:
                return
            await trio.sleep(0.05)
    raise AssertionError("the server never saw a cancellation")


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def tool_results(agent: Agent) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in agent.state.messages if isinstance(m, ToolResultMessage)}


async def test_stdio_tools_run_in_an_agent() -> None:
    async with open_mcp_tools(stdio_server(), name_prefix="demo_") as tools:
        named = by_name(tools)
        assert sorted(named) == [
            "demo_add",
            "demo_area",
            "demo_die",
            "demo_fail",
            "demo_media",
            "demo_protocol_error",
            "demo_slow",
            "demo_stats",
        ]
        add = named["demo_add"]
        assert (add.label, add.description) == ("Adder", "Add two integers.")
        assert add.parameters == {
            "type": "object",
            "properties": {
                "a": {"title": "A", "type": "integer"},
                "b": {"title": "B", "type": "integer"},
            },
            "required": ["a", "b"],
            "title": "addArguments",
        }
        assert add.output_schema == {
            "properties": {"result": {"title": "Result", "type": "integer"}},
            "required": ["result"],
            "title": "addOutput",
            "type": "object",
        }
        assert named["demo_media"].label == "media"

        provider = FauxProvider(
            [
                faux_assistant_message(
                    [
                        # Validation coerces "2" to 2 before the call...
                        faux_tool_call("demo_add", {"a": "2", "b": 3}, id="add"),
                        # ...and rejects "two" without calling the server.
                        faux_tool_call("demo_add", {"a": "two", "b": 3}, id="bad"),
                        faux_tool_call(
                            "demo_area", {"rectangle": {"width": 2, "height": "3.5"}}, id="area"
                        ),
                        faux_tool_call("demo_media", {}, id="media"),
                        faux_tool_call("demo_fail", {"reason": "out of paper"}, id="fail"),
                        faux_tool_call("demo_protocol_error", {}, id="protocol"),
                    ],
                    stop_reason="toolUse",
                ),
                faux_assistant_message("Done."),
            ]
        )
        agent = Agent(
            AgentInitialState(model=provider.get_model(), tools=tools),
            stream_fn=provider.stream_fn,
        )
        with trio.fail_after(60):
            await agent.prompt("Use every tool")

        results = tool_results(agent)
        assert (results["add"].content, results["add"].is_error) == ([TextContent(text="5")], False)
        assert results["add"].details == {"result": 5}
        assert results["bad"].is_error
        assert results["bad"].content == [
            TextContent(
                text='Validation failed for tool "demo_add":\n'
                "  - a: expected integer, got string\n\n"
                'Received arguments:\n{\n  "a": "two",\n  "b": 3\n}'
            )
        ]
        assert results["area"].content == [TextContent(text="7.0")]
        assert results["media"].content == [
            TextContent(text="a picture:"),
            ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
            TextContent(text="[audio: audio/wav]"),
            TextContent(text="[resource: file:///notes.txt]"),
            TextContent(text="embedded text"),
            TextContent(text="[resource: file:///b.bin (application/octet-stream)]"),
        ]
        assert (results["media"].is_error, results["media"].details) == (False, None)
        assert results["fail"].is_error
        assert results["fail"].content == [
            TextContent(text="Error executing tool fail: out of paper")
        ]
        assert results["protocol"].is_error
        assert results["protocol"].content == [TextContent(text="MCP error -32602: no such thing")]
        assert results["protocol"].details == {
            "code": -32602,
            "message": "no such thing",
            "data": None,
        }
        stats = await server_stats(tools, "demo_stats")
        assert stats["calls"] == 2  # add and area; the invalid call never left the agent

        # Structured content is passed on; the SDK's server also sends it as JSON text.
        result = await call(named["demo_stats"], {})
        assert result.structured_content == stats
        assert result.details == stats
        assert result.is_error is None
        [block] = result.content
        assert isinstance(block, TextContent)
        assert json.loads(block.text) == stats
        assert process_exists(stats["pid"])
    assert not process_exists(stats["pid"])  # the server stopped with the block


async def test_abort_cancels_an_in_flight_call_at_once() -> None:
    async with open_mcp_tools(stdio_server()) as tools:
        provider = FauxProvider(
            [
                faux_assistant_message(
                    [faux_tool_call("slow", {"seconds": 60}, id="slow")], stop_reason="toolUse"
                )
            ]
        )
        agent = Agent(
            AgentInitialState(model=provider.get_model(), tools=tools),
            stream_fn=provider.stream_fn,
        )
        updates: list[AgentToolResult] = []

        aborted_at: list[float] = []

        def on_event(event: AgentEvent) -> None:
            if event.type == "tool_execution_update":
                updates.append(event.partial_result)
                aborted_at.append(trio.current_time())
                agent.abort()  # the call is in flight: the server reported progress

        agent.subscribe(on_event)
        with trio.fail_after(50):  # the call would take 60 s
            await agent.prompt("Sleep for a minute")
        # Nothing waited for the server after the abort.
        assert trio.current_time() - aborted_at[0] < 5
        assert updates == [
            AgentToolResult(
                content=[TextContent(text="1/2 started")],
                details={"progress": 1.0, "total": 2.0, "message": "started"},
            )
        ]
        [result] = tool_results(agent).values()
        assert result.is_error
        # The server was told, and the session still serves calls.
        await server_saw_a_cancellation(tools)


async def test_the_server_process_ends_with_the_block() -> None:
    # An error in the block (with a client given by the caller) propagates as it was.
    with pytest.raises(KeyError) as caught:
        async with open_mcp_tools(Client(stdio_client(stdio_server()))) as tools:
            pid = (await server_stats(tools))["pid"]
            assert process_exists(pid)
            raise KeyError("mine")
    assert caught.value.args == ("mine",)
    assert not process_exists(pid)
    with pytest.raises(RuntimeError, match=r"^MCP server \(client\) is closed: its tools work"):
        await call(by_name(tools)["add"], {"a": 1, "b": 2})

    # A cancelled exit, while a call is in flight.
    pids: list[int] = []
    with trio.fail_after(60), trio.CancelScope() as scope:
        async with open_mcp_tools(stdio_server()) as tools:
            pids.append((await server_stats(tools))["pid"])
            await tool_call_cancelling(by_name(tools)["slow"], scope)
    assert scope.cancelled_caught
    assert not process_exists(pids[0])


async def tool_call_cancelling(tool: AgentTool, scope: trio.CancelScope) -> None:
    """Call ``tool`` (slow) and cancel ``scope`` once the server reports progress."""

    def on_update(result: AgentToolResult) -> None:
        scope.cancel()

    await tool.execute("call", {"seconds": 60}, AbortController().signal, on_update)
    raise AssertionError("not cancelled")


async def test_streamable_http(http_server: str) -> None:
    before = open_fds()
    async with open_mcp_tools(http_server) as tools:
        named = by_name(tools)
        assert sorted(named) == [
            "add",
            "area",
            "die",
            "fail",
            "media",
            "protocol_error",
            "slow",
            "stats",
        ]
        provider = FauxProvider(
            [
                faux_assistant_message(
                    [
                        faux_tool_call("add", {"a": 40, "b": 2}, id="add"),
                        faux_tool_call("slow", {"seconds": 60}, id="slow"),
                    ],
                    stop_reason="toolUse",
                )
            ]
        )
        agent = Agent(
            AgentInitialState(model=provider.get_model(), tools=tools),
            stream_fn=provider.stream_fn,
        )

        seen: set[str] = set()

        def on_event(event: AgentEvent) -> None:
            # Abort once the addition is done and the slow call reported progress.
            if event.type == "tool_execution_end":
                seen.add(event.tool_call_id)
            elif event.type == "tool_execution_update":
                seen.add("progress")
            if {"add", "progress"} <= seen:
                agent.abort()

        agent.subscribe(on_event)
        with trio.fail_after(30):
            await agent.prompt("Add, then sleep")
        results = tool_results(agent)
        assert (results["add"].content, results["add"].is_error) == (
            [TextContent(text="42")],
            False,
        )
        assert results["slow"].is_error
        await server_saw_a_cancellation(tools)
    # Every connection was closed with the block.
    assert open_fds() == before


async def test_connection_failures_name_the_server_without_secrets() -> None:
    port = free_port()
    url = f"http://user:password@127.0.0.1:{port}/mcp?key=secret"
    with pytest.raises(McpConnectionError) as caught:
        async with open_mcp_tools(url):
            raise AssertionError("connected")
    message = str(caught.value)
    assert message == (
        f"cannot use MCP server 'http://127.0.0.1:{port}/mcp': "
        f"ConnectError: all attempts to connect to 127.0.0.1:{port} failed"
    )
    assert caught.value.__cause__ is not None

    missing = StdioServerParameters(
        command="/nonexistent/mcp-server",
        args=["--token=secret", "--api-key", "secret-2", "--verbose", "-p", "8"],
    )
    with pytest.raises(McpConnectionError) as caught:
        async with open_mcp_tools(missing):
            raise AssertionError("connected")
    assert str(caught.value) == (
        "cannot use MCP server (command: /nonexistent/mcp-server --token=[REDACTED] --api-key "
        "[REDACTED] --verbose -p 8): FileNotFoundError: [Errno 2] No such file or directory: "
        "'/nonexistent/mcp-server'"
    )

    # Connected, but listing the tools fails: the error is not wrapped in the SDK's groups,
    # and the server's exit (closed by the client) is not mentioned.
    broken = StdioServerParameters(command=sys.executable, args=[str(SERVER), "broken"])
    with trio.fail_after(60), pytest.raises(McpConnectionError) as caught:
        async with open_mcp_tools(broken):
            raise AssertionError("listed")
    assert str(caught.value) == (
        f"cannot use MCP server (command: {sys.executable} {SERVER} broken): "
        "MCPError: listing is broken"
    )


async def test_a_stdio_server_that_fails_to_start_is_named_with_its_exit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A Python server: its traceback's last line says what went wrong.
    crash = StdioServerParameters(command=sys.executable, args=[str(SERVER), "crash"])
    with trio.fail_after(60), pytest.raises(McpConnectionError) as caught:
        async with open_mcp_tools(crash):
            raise AssertionError("connected")
    assert str(caught.value) == (
        f"cannot use MCP server (command: {sys.executable} {SERVER} crash): "
        "MCPError: Connection closed; the server exited with status 1; "
        "stderr: RuntimeError: the demo server cannot start: no configuration"
    )
    # Its standard error still reaches ours, whole.
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n")
    assert err.endswith("RuntimeError: the demo server cannot start: no configuration\n")

    # Any other program: the first line of its standard error.
    usage = StdioServerParameters(
        command="sh", args=["-c", "echo usage: server --port N >&2; echo more >&2; exit 2"]
    )
    with trio.fail_after(60), pytest.raises(McpConnectionError) as caught:
        async with open_mcp_tools(usage):
            raise AssertionError("connected")
    assert str(caught.value) == (
        "cannot use MCP server (command: sh -c 'echo usage: server --port N >&2; echo more "
        ">&2; exit 2'): MCPError: Connection closed; the server exited with status 2; "
        "stderr: usage: server --port N"
    )


async def test_the_docs_example_runs(tmp_path: Path) -> None:
    # docs/mcp.md shows a server file and an agent file: run them as a reader would.
    from test_docs_examples import ROOT, parse_blocks

    blocks = {
        block.marker: block
        for block in parse_blocks((ROOT / "docs" / "mcp.md").read_text(encoding="utf-8"))
    }
    server = blocks["% file: weather_server.py"]
    agent = blocks["% file: agent.py"]
    expected = blocks["% output of agent.py"]
    assert (server.language, agent.language, expected.language) == ("python", "python", "text")
    (tmp_path / "weather_server.py").write_text(server.code, encoding="utf-8")
    (tmp_path / "agent.py").write_text(agent.code, encoding="utf-8")
    with trio.fail_after(120):
        result = await trio.run_process(
            [sys.executable, "agent.py"], cwd=tmp_path, capture_stdout=True, capture_stderr=True
        )
    assert result.stdout.decode() == expected.code


def test_structured_content_alone_is_also_sent_as_json_text() -> None:
    # The SDK's servers always add a text block; other servers may send structured
    # content alone, which the model would then not see.
    from mcp.types import CallToolResult

    from trio_agent._mcp import _convert_result

    result = _convert_result(CallToolResult(content=[], structured_content={"ok": True}))
    assert result == AgentToolResult(
        content=[TextContent(text='{"ok": true}')],
        details={"ok": True},
        structured_content={"ok": True},
    )


async def test_a_server_of_another_kind_is_named() -> None:
    with pytest.raises(TypeError) as caught:
        async with open_mcp_tools(["python", "server.py"]):  # type: ignore[arg-type]  # the error under test
            raise AssertionError("opened")
    assert str(caught.value) == (
        "open_mcp_tools() needs a URL, an mcp.StdioServerParameters or an mcp.Client, "
        "got ['python', 'server.py']"
    )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "http://[::1",
            "open_mcp_tools(): not a valid URL: 'http://[::1' (Invalid IPv6 URL)",
        ),
        (
            "http://user:pw@h:99999/x",
            "open_mcp_tools(): not a valid URL: 'http://[REDACTED]@h:99999/x' "
            "(Port out of range 0-65535)",
        ),
    ],
)
async def test_a_malformed_url_is_refused_by_name(url: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        async with open_mcp_tools(url):
            raise AssertionError("connected")
    assert str(caught.value) == message


async def test_a_stdio_server_that_dies_mid_call_gives_error_results() -> None:
    agent = await crash_the_server_then_add(stdio_server())
    results = tool_results(agent)
    assert results["add"].content == [TextContent(text="MCP error -32000: Connection closed")]
    assert results["add"].is_error


async def test_an_http_server_that_dies_mid_call_gives_error_results(http_server: str) -> None:
    # The dropped connection fails a task of the SDK's transport, which used to cancel
    # the caller's block and end it with ExceptionGroup([RemoteProtocolError(...)]).
    agent = await crash_the_server_then_add(http_server)
    results = tool_results(agent)
    assert results["add"].content == [
        TextContent(
            text=f"MCP server {http_server!r}: connection lost: "
            "RemoteProtocolError: Server disconnected without sending a response."
        )
    ]
    assert results["add"].is_error


async def crash_the_server_then_add(server: str | StdioServerParameters) -> Agent:
    """Run an agent that calls ``die`` (the server exits mid-call), then ``add``; the
    block must leave normally, the run end normally, and ``die`` be an error result."""
    provider = FauxProvider(
        [
            faux_assistant_message(
                [faux_tool_call("die", {"progress": False}, id="die")], stop_reason="toolUse"
            ),
            faux_assistant_message(
                [faux_tool_call("add", {"a": 1, "b": 2}, id="add")], stop_reason="toolUse"
            ),
            faux_assistant_message("The server is gone."),
        ]
    )
    with trio.fail_after(60):
        async with open_mcp_tools(server) as tools:
            agent = Agent(
                AgentInitialState(model=provider.get_model(), tools=tools),
                stream_fn=provider.stream_fn,
            )
            await agent.prompt("Crash the server, then add")
    die = tool_results(agent)["die"]
    assert (die.content, die.is_error) == (
        [TextContent(text="MCP error -32000: Connection closed")],
        True,
    )
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.content, last.stop_reason) == ([TextContent(text="The server is gone.")], "stop")
    return agent


async def test_a_call_without_an_answer_ends_at_call_timeout() -> None:
    with trio.fail_after(60):
        async with open_mcp_tools(stdio_server(), call_timeout=1.5) as tools:
            named = by_name(tools)
            started = trio.current_time()
            result = await call(named["slow"], {"seconds": 60})
            assert 1.5 <= trio.current_time() - started < 10
            assert result == AgentToolResult(
                content=[
                    TextContent(
                        text=f"MCP server (command: {sys.executable} {SERVER}) did not answer "
                        "within 1.5 s (call_timeout); the call was cancelled"
                    )
                ],
                details={"timeout": 1.5},
                is_error=True,
            )
            # The server was told, and the session goes on.
            await server_saw_a_cancellation(tools)
            assert (await call(named["add"], {"a": 1, "b": 2})).content == [TextContent(text="3")]


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("5", TypeError, "open_mcp_tools(): call_timeout must be a number or None, got '5'"),
        (True, TypeError, "open_mcp_tools(): call_timeout must be a number or None, got True"),
        (0, ValueError, "open_mcp_tools(): call_timeout must be positive, got 0"),
        (float("nan"), ValueError, "open_mcp_tools(): call_timeout must be positive, got nan"),
    ],
)
async def test_call_timeout_is_checked(value: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as caught:
        async with open_mcp_tools(stdio_server(), call_timeout=value):
            raise AssertionError("opened")
    assert str(caught.value) == message
