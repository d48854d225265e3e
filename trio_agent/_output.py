"""Structured output: a run that ends with a typed value, through a final-result tool.

The model answers by calling the ``final_result`` tool, whose parameters are the JSON
Schema of the output type (the same machinery as :func:`~trio_agent.tool`, so it works on
every provider and every OpenAI-compatible server). Arguments that fail the schema or the
conversion go back to the model as the tool's error result, and an answer in plain text
gets one reminder; each counts against the retry budget. The value lands in
:attr:`RunResult.output <trio_agent.RunResult.output>`.
"""

from __future__ import annotations

import json
from typing import Any, Literal, TypeAlias

import attrs

from ._abort import AbortSignal
from ._hooks import AgentTurnContext, AgentTurnDecision
from ._messages import AssistantMessage, TextContent, ToolCall, UserMessage
from ._run_result import RunResult
from ._tool_decorator import type_schema
from ._tools import AgentTool, AgentToolResult, AgentToolUpdateCallback
from ._transcript import content_text
from ._util import error_text

__all__ = ["FINAL_RESULT_TOOL", "OutputMode", "OutputRun"]

FINAL_RESULT_TOOL = "final_result"
"""The name of the tool the model answers with."""

REMINDER = f"Please answer by calling the {FINAL_RESULT_TOOL} tool."
"""The user message sent when the model answers in plain text instead."""

OutputMode: TypeAlias = Literal["auto", "tool", "native"]
"""How a structured answer is asked for: ``"tool"`` (a ``final_result`` tool, on every
provider), ``"native"`` (the API's own JSON-schema mode: ``StreamOptions.response_schema``,
the answer is the message's text) or ``"auto"`` (native where the model's
``compat["supportsJsonSchema"]`` is true, else the tool)."""


class OutputRun:
    """The structured output of one run: its tool, its budget and, in the end, its value."""

    def __init__(self, output_type: Any, retries: int, native: bool = False) -> None:
        if type(retries) is not int or retries < 0:
            raise ValueError(f"output_retries must be an int >= 0, got {retries!r}")
        schema, self._convert = type_schema(output_type, "output_type")
        self.output_type = output_type
        self.native = native
        """The answer is the final message's text, JSON of :attr:`response_schema`."""
        self.retries = retries
        self.attempts = 0
        self.value: Any = None
        self.has_value = False
        self.exhausted = False
        wrapped = {
            "type": "object",
            "properties": {"result": schema},
            "required": ["result"],
            "additionalProperties": False,
        }
        self.response_schema: dict[str, Any] = {"name": FINAL_RESULT_TOOL, "schema": wrapped}
        """What a native request asks for (see ``StreamOptions.response_schema``)."""
        self.tool = AgentTool(
            name=FINAL_RESULT_TOOL,
            label="Final result",
            description="Give the final answer of the task. Call it once, with the whole answer.",
            parameters={
                "type": "object",
                "properties": {"result": schema},
                "required": ["result"],
                "additionalProperties": False,
            },
            execute=self._execute,
            prepare_arguments=self._count,
        )

    def _count(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.attempts += 1
        return arguments

    async def _execute(
        self,
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        self.value = self._convert(params["result"])  # an error becomes the tool's result
        self.has_value = True
        return AgentToolResult(content=[TextContent(text="Final result received.")], terminate=True)

    def finish_turn(self, turn: AgentTurnContext, steer: Any) -> AgentTurnDecision | None:
        """After each turn: end the run once the budget is spent, or remind a model that
        answered in plain text (through ``steer``)."""
        message = turn.message
        if self.has_value or not isinstance(message, AssistantMessage):
            return None
        called = any(
            isinstance(block, ToolCall) and block.name == FINAL_RESULT_TOOL
            for block in message.content
        )
        if self.native and message.stop_reason == "stop":
            return self._native_answer(message, steer)
        if message.stop_reason == "stop" and not called:
            self.attempts += 1
            if self.attempts <= self.retries:
                steer(UserMessage(content=REMINDER))
                return None
        if self.attempts > self.retries:
            self.exhausted = True
            return AgentTurnDecision(action="end")
        return None

    def _native_answer(self, message: AssistantMessage, steer: Any) -> AgentTurnDecision | None:
        """Read the answer from the text (native mode); a wrong one is sent back."""
        try:
            value = json.loads(content_text(message.content))
            if not isinstance(value, dict) or set(value) != {"result"}:
                raise ValueError('the answer must be an object with one key, "result"')
            self.value = self._convert(value["result"])
        except (ValueError, TypeError) as exc:
            self.attempts += 1
            if self.attempts <= self.retries:
                steer(
                    UserMessage(
                        content=f"Your answer is not valid ({error_text(exc)}). "
                        "Answer again with only the JSON the schema asks for."
                    )
                )
                return None
            self.exhausted = True
            return AgentTurnDecision(action="end")
        self.has_value = True
        return None

    @property
    def _what(self) -> str:
        return "answer" if self.native else FINAL_RESULT_TOOL

    def apply(self, result: RunResult[Any]) -> RunResult[Any]:
        """``result`` with the output, or as an error when no valid answer came."""
        if self.has_value:
            return attrs.evolve(result, output=self.value)
        if self.exhausted and result.ending not in ("aborted", "limit"):
            return attrs.evolve(
                result,
                ending="error",
                error=f"no valid {self._what} after {self.attempts} attempts",
            )
        return result
