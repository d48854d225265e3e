"""trio_agent: a Trio-native runtime for LLM agents.

The stateful :class:`Agent`, the data model (messages, events, tools), transcript helpers,
tool-argument validation and the stream-function contract. The low-level loop lives in
:mod:`trio_agent.loop`, providers in :mod:`trio_agent.models`, JSON in
:mod:`trio_agent.serialization` and test helpers in :mod:`trio_agent.testing` (not
imported here).
"""

from __future__ import annotations

# --- messages -------------------------------------------------------------------------
from ._messages import AgentMessage as AgentMessage
from ._messages import AssistantContent as AssistantContent
from ._messages import AssistantMessage as AssistantMessage
from ._messages import Cost as Cost
from ._messages import CustomAgentMessage as CustomAgentMessage
from ._messages import ImageContent as ImageContent
from ._messages import Message as Message
from ._messages import Model as Model
from ._messages import ModelCost as ModelCost
from ._messages import QueueMode as QueueMode
from ._messages import StopReason as StopReason
from ._messages import SystemMessage as SystemMessage
from ._messages import TextContent as TextContent
from ._messages import ThinkingContent as ThinkingContent
from ._messages import ThinkingLevel as ThinkingLevel
from ._messages import ToolCall as ToolCall
from ._messages import ToolDeclaration as ToolDeclaration
from ._messages import ToolExecutionMode as ToolExecutionMode
from ._messages import ToolReference as ToolReference
from ._messages import ToolResultContent as ToolResultContent
from ._messages import ToolResultMessage as ToolResultMessage
from ._messages import Usage as Usage
from ._messages import UserContent as UserContent
from ._messages import UserMessage as UserMessage
from ._messages import register_message_type as register_message_type

# --- events ---------------------------------------------------------------------------
from ._events import AgentEndEvent as AgentEndEvent
from ._events import AgentEvent as AgentEvent
from ._events import AgentStartEvent as AgentStartEvent
from ._events import CompactionEvent as CompactionEvent
from ._events import AssistantMessageEvent as AssistantMessageEvent
from ._events import DoneEvent as DoneEvent
from ._events import ErrorEvent as ErrorEvent
from ._events import MessageEndEvent as MessageEndEvent
from ._events import MessageStartEvent as MessageStartEvent
from ._events import MessageUpdateEvent as MessageUpdateEvent
from ._events import StartEvent as StartEvent
from ._events import TextDeltaEvent as TextDeltaEvent
from ._events import TextEndEvent as TextEndEvent
from ._events import TextStartEvent as TextStartEvent
from ._events import ThinkingDeltaEvent as ThinkingDeltaEvent
from ._events import ThinkingEndEvent as ThinkingEndEvent
from ._events import ThinkingStartEvent as ThinkingStartEvent
from ._events import ToolCallDeltaEvent as ToolCallDeltaEvent
from ._events import ToolCallEndEvent as ToolCallEndEvent
from ._events import ToolCallStartEvent as ToolCallStartEvent
from ._events import ToolExecutionEndEvent as ToolExecutionEndEvent
from ._events import ToolExecutionStartEvent as ToolExecutionStartEvent
from ._events import ToolExecutionUpdateEvent as ToolExecutionUpdateEvent
from ._events import TurnEndEvent as TurnEndEvent
from ._events import TurnStartEvent as TurnStartEvent

# --- abort, streaming, tools, hooks, exceptions -----------------------------------------
from ._abort import AbortController as AbortController
from ._abort import AbortSignal as AbortSignal
from ._streaming import LlmContext as LlmContext
from ._streaming import ProviderResponse as ProviderResponse
from ._streaming import RetryNotice as RetryNotice
from ._streaming import StreamFn as StreamFn
from ._streaming import StreamOptions as StreamOptions
from ._streaming import Transport as Transport
from ._streaming import get_default_stream_fn as get_default_stream_fn
from ._streaming import set_default_stream_fn as set_default_stream_fn
from ._tools import AgentTool as AgentTool
from ._tools import AgentToolResult as AgentToolResult
from ._tools import AgentToolUpdateCallback as AgentToolUpdateCallback
from ._hooks import AfterToolCallContext as AfterToolCallContext
from ._hooks import AfterToolCallResult as AfterToolCallResult
from ._hooks import AgentContext as AgentContext
from ._hooks import AgentLoopTurnUpdate as AgentLoopTurnUpdate
from ._hooks import AgentRequestUpdate as AgentRequestUpdate
from ._hooks import AgentTurnContext as AgentTurnContext
from ._hooks import AgentTurnDecision as AgentTurnDecision
from ._hooks import BeforeToolCallContext as BeforeToolCallContext
from ._hooks import BeforeToolCallResult as BeforeToolCallResult
from ._hooks import PrepareNextTurnContext as PrepareNextTurnContext
from ._hooks import PrepareRequestContext as PrepareRequestContext
from ._exceptions import AgentBusyError as AgentBusyError
from ._exceptions import AgentError as AgentError
from ._exceptions import NothingToContinueError as NothingToContinueError
from ._exceptions import SerializationError as SerializationError
from ._exceptions import ToolArgumentsError as ToolArgumentsError

# --- transcript helpers (_transcript.py) -------------------------------------------------
from ._transcript import ToolStateChanges as ToolStateChanges
from ._transcript import collapse_system_messages as collapse_system_messages
from ._transcript import content_text as content_text
from ._transcript import create_initial_system_message as create_initial_system_message
from ._transcript import declarations_equal as declarations_equal
from ._transcript import get_current_system_message as get_current_system_message
from ._transcript import get_current_system_prompt as get_current_system_prompt
from ._transcript import get_current_tools as get_current_tools
from ._transcript import get_system_message_text as get_system_message_text
from ._transcript import get_tool_state_changes as get_tool_state_changes
from ._transcript import normalize_context as normalize_context
from ._transcript import render_system_message_update as render_system_message_update
from ._transcript import to_tool_declaration as to_tool_declaration

# --- validation (_validation.py) -------------------------------------------------------
from ._validation import validate_tool_arguments as validate_tool_arguments

# --- tool decorator (_tool_decorator.py) -----------------------------------------------
from ._tool_decorator import tool as tool

# --- run results and usage limits (_run_result.py) -------------------------------------
from ._run_result import LimitReached as LimitReached
from ._run_result import RunEnding as RunEnding
from ._run_result import RunResult as RunResult
from ._run_result import UsageLimits as UsageLimits
from ._run_result import UsageTally as UsageTally
from ._run_result import sum_usage as sum_usage

# --- structured output (_output.py) ---------------------------------------------------
from ._output import OutputMode as OutputMode

# --- tool approval (_approval.py) ------------------------------------------------------
from ._approval import ApproveToolCall as ApproveToolCall
from ._approval import ToolApproval as ToolApproval
from ._approval import pending_approvals as pending_approvals

# --- agent (_agent.py) -----------------------------------------------------------------
from ._agent import Agent as Agent
from ._agent import AgentInitialState as AgentInitialState
from ._agent import AgentListener as AgentListener
from ._agent import AgentState as AgentState

from ._util import fixup_module_metadata as _fixup_module_metadata

__version__ = "0.1.0"

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
