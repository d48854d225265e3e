"""The low-level agent loop (like ``trio.lowlevel``): run one agent run against a context.

:class:`~trio_agent.Agent` is built only on the names exported here.
"""

from __future__ import annotations

from ._hooks import AgentContext as AgentContext
from ._loop import open_agent_loop as open_agent_loop
from ._loop import open_agent_loop_continue as open_agent_loop_continue
from ._loop import run_agent_compaction as run_agent_compaction
from ._loop import run_agent_loop as run_agent_loop
from ._loop import run_agent_loop_continue as run_agent_loop_continue
from ._run import CLOSING_GRACE_SECONDS as CLOSING_GRACE_SECONDS
from ._run import AgentLoopConfig as AgentLoopConfig
from ._run import default_convert_to_llm as default_convert_to_llm
from ._sink import AgentEventSink as AgentEventSink
from ._tool_execution import AfterToolCallHook as AfterToolCallHook
from ._tool_execution import AgentToolCallOutcome as AgentToolCallOutcome
from ._tool_execution import BeforeToolCallHook as BeforeToolCallHook
from ._tool_execution import run_tool_call as run_tool_call
from ._util import fixup_module_metadata as _fixup_module_metadata

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
