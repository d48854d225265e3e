"""Shared pieces of the web tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import httpx
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from trio_agent import Agent, AgentInitialState, tool
from trio_agent.models import FauxProvider
from trio_agent.web import AgentHost, DisconnectPolicy, create_app, open_agent_host


@tool
async def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: What to echo.
    """
    return f"echo: {text}"


echo_tool = echo


@tool
async def pause(seconds: float) -> str:
    """Wait, then say so.

    Args:
        seconds: How long to wait.
    """
    import trio

    await trio.sleep(seconds)
    return f"waited {seconds} s"


def faux_factory(provider: FauxProvider) -> Callable[[str], Agent]:
    def make(session_id: str) -> Agent:
        return Agent(
            AgentInitialState(model=provider.get_model(), tools=[echo_tool, pause]),
            stream_fn=provider.stream_fn,
        )

    return make


class Server:
    """A Hypercorn server of the app on 127.0.0.1, in the test's nursery."""

    def __init__(self, host: AgentHost, url: str, client: httpx.AsyncClient) -> None:
        self.host = host
        self.url = url
        self.client = client

    async def new_session(self) -> str:
        response = await self.client.post("/api/sessions")
        assert response.status_code == 201
        session_id: str = response.json()["id"]
        return session_id


def _config() -> Config:
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 1.0
    return config


async def start_server(
    nursery: trio.Nursery,
    host: AgentHost,
) -> str:
    urls: list[str] = await nursery.start(
        serve,
        create_app(host),
        _config(),
    )
    return urls[0]


@contextlib.asynccontextmanager
async def running_server(
    provider: FauxProvider, on_disconnect: DisconnectPolicy = "abort"
) -> AsyncIterator[Server]:
    """The app of a host of faux agents, served on 127.0.0.1 until the block ends."""
    async with (
        open_agent_host(faux_factory(provider), on_disconnect=on_disconnect) as host,
        trio.open_nursery() as nursery,
    ):
        url = await start_server(nursery, host)
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            yield Server(host, url, client)
        nursery.cancel_scope.cancel()
