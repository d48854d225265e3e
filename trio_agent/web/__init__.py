"""Serving agents to web pages: a run's events as AG-UI Server-Sent Events, an ASGI app
that keeps an agent per session, and ``trio-agent serve``'s chat page.

Needs the ``web`` extra (``pip install 'trio-agent[web]'``: Starlette and Hypercorn); it
runs on Trio (Starlette on anyio, under Hypercorn's Trio worker). See ``docs/web.md``.
"""

from __future__ import annotations

try:  # the ``web`` extra
    import hypercorn as _hypercorn  # noqa: F401
    import starlette as _starlette  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on the installation
    raise ImportError("trio_agent.web needs the web extra: pip install 'trio-agent[web]'") from _exc

# --- the protocol (_agui.py, _sse.py) --------------------------------------------------------
from ._agui import AGUI_EVENT_TYPES as AGUI_EVENT_TYPES
from ._agui import AgUiEncoder as AgUiEncoder
from ._agui import agui_messages as agui_messages
from ._agui import message_id as message_id
from ._sse import EventStreamResponse as EventStreamResponse
from ._sse import sse_event as sse_event

# --- sessions and runs (_sessions.py, _host.py) -------------------------------------------
from ._sessions import MemorySessions as MemorySessions
from ._sessions import SessionInfo as SessionInfo
from ._sessions import UnknownSessionError as UnknownSessionError
from ._sessions import WebSessions as WebSessions
from ._store import StoreSessions as StoreSessions
from ._host import AgentFactory as AgentFactory
from ._host import AgentHost as AgentHost
from ._host import DisconnectPolicy as DisconnectPolicy
from ._host import RunBusyError as RunBusyError
from ._host import RunStream as RunStream
from ._host import open_agent_host as open_agent_host

# --- the app and the server (_app.py, _serve.py) -------------------------------------------
from ._app import create_app as create_app
from ._serve import demo_factory as demo_factory
from ._serve import main as main
from ._serve import serve as serve

from .._util import fixup_module_metadata as _fixup_module_metadata


_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
