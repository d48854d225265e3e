"""Serving agents to web pages: a run's events as AG-UI Server-Sent Events, an ASGI app
that keeps an agent per session, and ``trio-agent serve``'s chat page.

Needs the ``web`` extra (``pip install 'trio-agent[web]'``: Starlette and Hypercorn). The
app runs on Trio (Starlette on anyio, under Hypercorn's Trio worker). See ``docs/web.md``.
"""

from __future__ import annotations

from ._agui import AGUI_EVENT_TYPES as AGUI_EVENT_TYPES
from ._agui import AgUiEncoder as AgUiEncoder
from ._agui import agui_messages as agui_messages
from ._agui import message_id as message_id

from .._util import fixup_module_metadata as _fixup_module_metadata

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
