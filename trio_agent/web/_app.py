"""The ASGI application: the HTTP interface of an :class:`~trio_agent.web.AgentHost`.

========================================  =================================================
``GET /``                                 the chat page (``ui=True``)
``GET /api/sessions``                     ``{"sessions": [{id, title, createdAt,
                                          running}]}``, newest first
``POST /api/sessions``                    create a session: ``201 {"id": ...}``
``GET /api/sessions/{id}``                ``{id, running, messages}``: the transcript as
                                          AG-UI messages
``POST /api/sessions/{id}/runs``          start a run and stream its AG-UI events (SSE);
                                          body ``{"prompt": "..."}`` or an AG-UI
                                          ``RunAgentInput`` (its last user message is the
                                          prompt; the transcript stays on the server);
                                          ``409`` while the session runs
``GET /api/sessions/{id}/runs/current``   attach to the running run's events from now on
                                          (SSE, ``204`` when idle)
``POST /api/sessions/{id}/steer``         ``{"text": ...}``: steer the running run
                                          (``409`` when idle: start a run instead)
``POST /api/sessions/{id}/follow_up``     ``{"text": ...}``: queue a follow-up
``POST /api/sessions/{id}/abort``         abort the running run: ``{"aborted": bool}``
``POST /api/agui``                        an AG-UI ``RunAgentInput``: its ``threadId`` is
                                          the session (created on first use); streams
                                          the run like ``.../runs``
========================================  =================================================
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ._host import AgentFactory, AgentHost, DisconnectPolicy, RunBusyError, open_agent_host
from ._sessions import SessionInfo, UnknownSessionError, WebSessions
from ._sse import EventStreamResponse

__all__ = ["create_app"]

_STATIC = {
    "index.html": "text/html; charset=utf-8",
    "chat.js": "text/javascript; charset=utf-8",
    "chat.css": "text/css; charset=utf-8",
}


class _AsgiResponse(Response):
    """Lets an endpoint return any ASGI callable (the SSE stream) as its response."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Any]) -> None:
        super().__init__()
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _info(info: SessionInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "title": info.title,
        "createdAt": info.created_at,
        "running": info.running,
    }


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _prompt_of(body: dict[str, Any]) -> str | None:
    """``{"prompt": text}``, or the last user message of an AG-UI ``RunAgentInput``."""
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return prompt
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, list):
                    return "".join(
                        part.get("text", "")
                        for part in content
                        if isinstance(part, dict) and part.get("type") == "text"
                    )
    return None


class _Api:
    def __init__(self, get_host: Callable[[], AgentHost]) -> None:
        self.host = get_host

    async def list_sessions(self, request: Request) -> Response:
        sessions = await self.host().list_sessions()
        return JSONResponse({"sessions": [_info(info) for info in sessions]})

    async def create_session(self, request: Request) -> Response:
        session_id = await self.host().create_session()
        return JSONResponse({"id": session_id}, status_code=201)

    async def transcript(self, request: Request) -> Response:
        try:
            return JSONResponse(await self.host().transcript(request.path_params["id"]))
        except UnknownSessionError:
            return _error(404, "no such session")

    async def start_run(self, request: Request) -> Response:
        host = self.host()
        prompt = _prompt_of(await _json_body(request))
        if prompt is None or not prompt.strip():
            return _error(400, 'expected {"prompt": "..."} or an AG-UI RunAgentInput')
        return await self._stream_run(host, request.path_params["id"], prompt)

    async def _stream_run(self, host: AgentHost, session_id: str, prompt: str) -> Response:
        try:
            stream = await host.start_run(session_id, prompt)
        except UnknownSessionError:
            return _error(404, "no such session")
        except RunBusyError as exc:
            return _error(409, str(exc))
        return _AsgiResponse(
            EventStreamResponse(stream.events, on_disconnect=lambda: host.detach(stream))
        )

    async def agui(self, request: Request) -> Response:
        """AG-UI's own endpoint shape: a ``RunAgentInput`` whose ``threadId`` names the
        session (created on first use)."""
        host = self.host()
        body = await _json_body(request)
        thread_id = body.get("threadId")
        prompt = _prompt_of(body)
        if not isinstance(thread_id, str) or prompt is None or not prompt.strip():
            return _error(400, "expected an AG-UI RunAgentInput with a threadId and a user message")
        try:
            await host.messages(thread_id)
        except UnknownSessionError:
            try:
                await host.create_session(thread_id)
            except ValueError as exc:
                return _error(400, str(exc))
        return await self._stream_run(host, thread_id, prompt)

    async def attach(self, request: Request) -> Response:
        host = self.host()
        stream = host.attach(request.path_params["id"])
        if stream is None:
            return Response(status_code=204)
        started = {"type": "RUN_STARTED", "threadId": stream.session_id, "runId": stream.run_id}
        # A watcher that goes away leaves the run alone: only the client that started
        # the run decides (on_disconnect).
        return _AsgiResponse(
            EventStreamResponse(stream.events, on_disconnect=lambda: None, first=[started])
        )

    async def steer(self, request: Request) -> Response:
        return await self._queue(request, self.host().steer)

    async def follow_up(self, request: Request) -> Response:
        return await self._queue(request, self.host().follow_up)

    async def _queue(self, request: Request, queue: Callable[[str, str], bool]) -> Response:
        text = (await _json_body(request)).get("text")
        if not isinstance(text, str) or not text.strip():
            return _error(400, 'expected {"text": "..."}')
        if not queue(request.path_params["id"], text):
            return _error(409, "the session is not running: start a run instead")
        return JSONResponse({"queued": True}, status_code=202)

    async def abort(self, request: Request) -> Response:
        return JSONResponse({"aborted": self.host().abort(request.path_params["id"])})


def _static_routes() -> list[Route]:
    files = resources.files(__package__).joinpath("static")
    pages = {name: files.joinpath(name).read_bytes() for name in _STATIC}

    def serve(name: str) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            return Response(
                pages[name], media_type=_STATIC[name], headers={"cache-control": "no-cache"}
            )

        return endpoint

    routes = [Route("/", serve("index.html"))]
    routes.extend(Route(f"/static/{name}", serve(name)) for name in _STATIC)
    return routes


def create_app(
    source: AgentHost | AgentFactory,
    *,
    ui: bool = True,
    sessions: WebSessions | None = None,
    on_disconnect: DisconnectPolicy = "abort",
) -> Starlette:
    """The ASGI app serving a host's sessions (see the module's table of routes).

    Given an :class:`AgentHost` (from :func:`open_agent_host`), the app uses it and its
    nursery: the runs live in the caller's ``async with`` block. Given an agent factory,
    the app opens its own host in its ASGI lifespan (``sessions`` and ``on_disconnect``
    go to :func:`open_agent_host`), for servers that import an app object
    (``hypercorn -k trio module:app``).

    Args:
        source: The host, or ``factory(session_id) -> Agent``.
        ui: Serve the chat page at ``/``.
    """
    host: AgentHost | None = source if isinstance(source, AgentHost) else None

    def get_host() -> AgentHost:
        if host is None:
            raise RuntimeError("the app's lifespan has not started (run it under an ASGI server)")
        return host

    api = _Api(get_host)
    routes = _static_routes() if ui else []
    routes += [
        Route("/api/sessions", api.list_sessions, methods=["GET"]),
        Route("/api/sessions", api.create_session, methods=["POST"]),
        Route("/api/sessions/{id}", api.transcript, methods=["GET"]),
        Route("/api/sessions/{id}/runs", api.start_run, methods=["POST"]),
        Route("/api/sessions/{id}/runs/current", api.attach, methods=["GET"]),
        Route("/api/sessions/{id}/steer", api.steer, methods=["POST"]),
        Route("/api/sessions/{id}/follow_up", api.follow_up, methods=["POST"]),
        Route("/api/sessions/{id}/abort", api.abort, methods=["POST"]),
        Route("/api/agui", api.agui, methods=["POST"]),
    ]
    if host is not None:
        return Starlette(routes=routes)
    factory: AgentFactory = source  # type: ignore[assignment]  # not a host: a factory

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        nonlocal host
        async with open_agent_host(
            factory, sessions=sessions, on_disconnect=on_disconnect
        ) as opened:
            host = opened
            try:
                yield
            finally:
                host = None

    return Starlette(routes=routes, lifespan=lifespan)
