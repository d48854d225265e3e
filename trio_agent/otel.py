"""OpenTelemetry tracing of agent runs (``pip install 'trio-agent[otel]'``).

:func:`instrument_agent` records every run of an :class:`~trio_agent.Agent` as spans that
follow the OpenTelemetry GenAI semantic conventions (``invoke_agent``, ``chat``,
``execute_tool``); :class:`AgentTracer` is the listener it subscribes. Not imported by
``import trio_agent``.
"""

from __future__ import annotations

from ._otel import AgentTracer as AgentTracer
from ._otel import instrument_agent as instrument_agent
from ._util import fixup_module_metadata as _fixup_module_metadata

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
