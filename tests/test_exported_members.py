"""Pin the public export lists, and check that every public name is documented and
reports its public module."""

from __future__ import annotations

import inspect
import types

import pytest

import trio_agent
import trio_agent.compaction
import trio_agent.loop
import trio_agent.mcp
import trio_agent.models
import trio_agent.otel
import trio_agent.serialization
import trio_agent.sessions
import trio_agent.testing
import trio_agent.web

EXPECTED: dict[types.ModuleType, set[str]] = {
    trio_agent.web: {
        "AGUI_EVENT_TYPES", "AgUiEncoder", "AgentFactory", "AgentHost", "DisconnectPolicy",
        "EventStreamResponse", "MemorySessions", "RunBusyError", "RunStream", "SessionInfo",
        "StoreSessions", "UnknownSessionError", "WebSessions", "agui_messages", "create_app",
        "demo_factory", "main", "message_id", "open_agent_host", "serve", "sse_event",
    },
    trio_agent.sessions: {
        "BranchSummaryEntry", "CONFORMANCE_CHECKS", "CURRENT_VERSION", "CompactionEntry",
        "ContextEditEntry", "CustomEntry", "CustomMessageEntry", "DEFAULT_LEASE_SECONDS",
        "DuplicateEntryError", "INTERRUPTED_TEXT", "JsonlStore", "LabelEntry", "LoadedSession",
        "MemoryStore", "MessageEntry", "PostgresStore", "Inbox", "ModelChangeEntry",
        "RecoveredCall", "RunFinishedEntry",
        "RunOutcome", "RunStartedEntry", "Session", "SessionBackend", "SessionBusyError",
        "SessionClaimLostError", "SessionContext", "SessionEntry", "SessionError",
        "SessionExistsError", "SessionFormatError", "SessionHeader", "SessionInfoEntry",
        "SessionNotFoundError", "SessionStore", "SessionStoreError", "SqliteStore",
        "StoreFactory", "ThinkingLevelChangeEntry", "ToolStartedEntry", "UnknownEntry",
        "attach_agent", "open_store", "run_conformance",
    },
    trio_agent.compaction: {
        "COMPACTION_SUMMARY_PREFIX", "COMPACTION_SUMMARY_SUFFIX", "CompactionDetails",
        "CompactionFailure", "CompactionPreparation", "CompactionResult", "CompactionSettings",
        "CompactionSummary", "ContextEstimate", "ContextTracker", "CutPoint",
        "DEFAULT_COMPACTION_SETTINGS", "SUMMARIZATION_PROMPT", "SUMMARIZATION_SYSTEM_PROMPT",
        "TURN_PREFIX_SUMMARIZATION_PROMPT", "UPDATE_SUMMARIZATION_PROMPT",
        "calculate_context_tokens", "compact", "compact_after_overflow", "compact_if_needed",
        "convert_to_llm", "estimate_context_tokens", "estimate_message_tokens",
        "estimate_text_tokens", "estimate_tokens", "find_cut_point", "is_context_overflow",
        "is_recoverable_length", "prepare_compaction", "serialize_conversation", "should_compact",
        "summary_to_user_message", "to_llm_message", "transcript_tokens",
    },
    trio_agent: {
        "AbortController", "AbortSignal", "AfterToolCallContext", "AfterToolCallResult",
        "Agent", "AgentBusyError", "AgentContext", "AgentEndEvent", "AgentError",
        "AgentEvent", "AgentInitialState", "AgentListener", "AgentLoopTurnUpdate",
        "AgentMessage", "AgentRequestUpdate", "AgentStartEvent", "AgentState", "AgentTool",
        "AgentToolResult", "AgentToolUpdateCallback", "AgentTurnContext", "AgentTurnDecision",
        "AssistantContent", "AssistantMessage", "AssistantMessageEvent",
        "BeforeToolCallContext", "BeforeToolCallResult", "Cost", "CustomAgentMessage",
        "DoneEvent", "ErrorEvent", "ImageContent", "LlmContext", "Message", "MessageEndEvent",
        "MessageStartEvent", "MessageUpdateEvent", "Model", "ModelCost",
        "NothingToContinueError", "PrepareNextTurnContext", "PrepareRequestContext",
        "LimitReached", "RunEnding", "RunResult", "UsageLimits", "UsageTally", "sum_usage",
        "ApproveToolCall", "ToolApproval", "pending_approvals", "RetryNotice", "CompactionEvent",
        "OutputMode",
        "ProviderResponse", "QueueMode", "SerializationError", "StartEvent", "StopReason",
        "StreamFn", "StreamOptions", "SystemMessage", "TextContent", "TextDeltaEvent",
        "TextEndEvent", "TextStartEvent", "ThinkingContent", "ThinkingDeltaEvent",
        "ThinkingEndEvent", "ThinkingLevel", "ThinkingStartEvent", "ToolArgumentsError",
        "ToolCall", "ToolCallDeltaEvent", "ToolCallEndEvent", "ToolCallStartEvent",
        "ToolDeclaration", "ToolExecutionEndEvent", "ToolExecutionMode",
        "ToolExecutionStartEvent", "ToolExecutionUpdateEvent", "ToolReference",
        "ToolResultContent", "ToolResultMessage", "ToolStateChanges", "Transport",
        "TurnEndEvent", "TurnStartEvent", "Usage", "UserContent", "UserMessage",
        "collapse_system_messages", "content_text", "create_initial_system_message",
        "declarations_equal", "get_current_system_message", "get_current_system_prompt",
        "get_current_tools", "get_default_stream_fn", "get_system_message_text",
        "get_tool_state_changes", "normalize_context", "register_message_type",
        "render_system_message_update", "set_default_stream_fn", "to_tool_declaration",
        "tool", "validate_tool_arguments",
    },
    trio_agent.loop: {
        "AfterToolCallHook", "AgentContext", "AgentEventSink", "AgentLoopConfig",
        "CLOSING_GRACE_SECONDS",
        "AgentToolCallOutcome", "BeforeToolCallHook", "default_convert_to_llm",
        "open_agent_loop", "open_agent_loop_continue", "run_agent_loop",
        "run_agent_loop_continue", "run_tool_call", "run_agent_compaction",
    },
    trio_agent.models: {
        "DEFAULT_THINKING_BUDGETS", "FauxProvider", "FauxResponse", "FauxResponseFactory",
        "FauxState", "Models", "adjust_max_tokens_for_thinking", "calculate_cost",
        "clamp_max_tokens_to_context", "clamp_thinking_level", "faux_assistant_message",
        "faux_text", "faux_thinking", "faux_tool_call", "get_supported_thinking_levels",
        "sanitize_surrogates", "transform_messages",
    },
    trio_agent.serialization: {
        "UPSTREAM_ONLY_KEYS", "converter", "dump_transcript", "from_dict", "from_json",
        "WireExtras", "load_transcript", "to_dict", "to_json",
    },
    trio_agent.testing: {
        "CassetteError", "CassetteMismatchError", "CassetteTransport", "EventGrammarError",
        "EventRecorder", "EventTrigger", "FaultInjector", "FauxConnectionError", "FauxHttpError",
        "FauxProvider", "FauxRequest", "FauxState", "FauxStep", "Interaction", "RecordMode",
        "RecordedChunk", "RecordedError", "RecordedRequest", "RecordedResponse", "abort_at",
        "assert_event_grammar", "assert_event_types", "cancel_at", "event_types",
        "faux_assistant_message", "faux_connection_error", "faux_http_error", "faux_step",
        "faux_text", "faux_thinking", "faux_tool_call", "load_cassette", "raise_at",
        "redact_request", "save_cassette",
    },
    trio_agent.otel: {"AgentTracer", "instrument_agent"},
    trio_agent.mcp: {"McpConnectionError", "open_mcp_tools"},
}  # fmt: skip


def _public(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and name != "annotations"  # from __future__ import annotations
        and not isinstance(value, types.ModuleType)
    }


@pytest.mark.parametrize("module", list(EXPECTED), ids=lambda m: m.__name__)
def test_exported_members(module: types.ModuleType) -> None:
    assert _public(module) == EXPECTED[module]


@pytest.mark.parametrize("module", list(EXPECTED), ids=lambda m: m.__name__)
def test_public_classes_and_functions_are_documented(module: types.ModuleType) -> None:
    for name in EXPECTED[module]:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{module.__name__}.{name} has no docstring"
            # Reprs name the public namespace, never a private module.
            public_modules = {m.__name__ for m in EXPECTED}
            assert value.__module__ in public_modules, f"{name}: {value.__module__}"


def test_optional_namespaces_are_not_imported_by_trio_agent() -> None:
    import subprocess
    import sys

    # The test helpers, and the integrations with their optional dependencies.
    names = [
        "trio_agent.testing",
        "trio_agent.otel",
        "trio_agent.mcp",
        "trio_agent.sessions",
        "trio_agent.web",
        "starlette",
        "hypercorn",
        "opentelemetry",
        "mcp",
    ]
    code = f"import sys, trio_agent; print([n for n in {names!r} if n in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (out.stdout.strip(), out.stderr) == ("[]", "")
