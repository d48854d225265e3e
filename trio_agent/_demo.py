"""The offline demo of the ``trio-agent`` program: three tools and a scripted model.

With no provider configured the program runs on :class:`DemoModel`, a
:class:`~trio_agent.models.FauxProvider` whose every response is built by
:func:`demo_response` from the request: a question about the weather, a calculation or
the time becomes tool calls of :data:`DEMO_TOOLS`; the tool results become the answer;
anything else gets a short canned reply. Output is paced on Trio's clock so that
streaming is visible, and everything is deterministic apart from the clock tool.
"""

from __future__ import annotations

import ast
import datetime
import math
import operator
import re
import zlib
from collections.abc import AsyncIterable, Callable
from typing import Any

from ._compaction import SUMMARIZATION_SYSTEM_PROMPT
from ._events import AssistantMessageEvent
from ._messages import (
    AssistantContent,
    AssistantMessage,
    Message,
    Model,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ._streaming import LlmContext, StreamOptions
from ._tool_decorator import tool
from ._tools import AgentTool
from ._transcript import content_text
from .models import FauxProvider, FauxState, faux_assistant_message, faux_text, faux_tool_call

__all__ = [
    "DEMO_MODEL_ID",
    "DEMO_SYSTEM_PROMPT",
    "DEMO_TOOLS",
    "DemoModel",
    "calculate",
    "demo_response",
    "evaluate_arithmetic",
    "get_time",
    "get_weather",
]

DEMO_MODEL_ID = "demo"
DEMO_SYSTEM_PROMPT = "You are a helpful assistant. Use the tools when they help."

# ---------------------------------------------------------------------------------------
# Tools

# Canned observations; other cities get a stable pick derived from their name.
_WEATHER: dict[str, tuple[str, int, int]] = {
    "paris": ("partly cloudy", 18, 11),
    "london": ("light rain", 14, 19),
    "berlin": ("sunny", 21, 8),
    "new york": ("clear", 24, 13),
    "tokyo": ("humid and overcast", 27, 6),
}
_SKIES = ("sunny", "clear", "partly cloudy", "overcast", "light rain", "foggy")


@tool
async def get_weather(city: str) -> str:
    """Current weather of a city (demo data, no network).

    Args:
        city: City name, e.g. "Paris".
    """
    key = " ".join(city.lower().split())
    if not key:
        raise ValueError("city must not be empty")
    known = _WEATHER.get(key)
    if known is None:
        # crc32 rather than hash(): the same city gets the same weather in every process.
        seed = zlib.crc32(key.encode("utf-8"))
        known = (_SKIES[seed % len(_SKIES)], 5 + seed % 25, 3 + seed % 20)
    sky, celsius, wind = known
    return f"{sky}, {celsius} degrees Celsius, wind {wind} km/h"


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
# Bounds that keep a hostile expression from eating memory or time (``9**9**9``).
_MAX_EXPONENT = 1000
_MAX_MAGNITUDE = 10**100
_MAX_LENGTH = 200


def evaluate_arithmetic(expression: str) -> int | float:
    """Evaluate an arithmetic expression without ``eval``.

    Numbers, parentheses, unary ``+``/``-`` and the binary operators ``+ - * / // % **``
    are allowed; ``^`` means power. Nothing else (names, calls, attributes) is.

    Raises:
        ValueError: the expression is empty, too long, malformed, uses something other
            than arithmetic, or a value or exponent is too large
            (``unsupported expression: 'x + 1'``).
        ZeroDivisionError: division or modulo by zero.
    """
    text = expression.strip().replace("^", "**")
    if not text:
        raise ValueError("empty expression")
    if len(text) > _MAX_LENGTH:
        raise ValueError(f"expression longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(f"malformed expression: {expression!r}") from None
    return _evaluate(tree.body, expression)


def _evaluate(node: ast.expr, expression: str) -> int | float:
    # ``Any``: the operator table is untyped; the checks below narrow the result.
    value: Any
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = node.value
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        value = _UNARY[type(node.op)](_evaluate(node.operand, expression))
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left = _evaluate(node.left, expression)
        right = _evaluate(node.right, expression)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError(f"exponent too large: {right}")
        value = _BINARY[type(node.op)](left, right)
    else:
        raise ValueError(f"unsupported expression: {expression!r}")
    if isinstance(value, complex):  # (-8) ** 0.5
        raise ValueError(f"result is not a real number: {expression!r}")
    if abs(value) > _MAX_MAGNITUDE:
        raise ValueError(f"result too large: {expression!r}")
    result: int | float = value
    return result


@tool
async def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression exactly (``+ - * / // % **``, parentheses).

    Args:
        expression: The expression, e.g. "2 * (3 + 4)".
    """
    value = evaluate_arithmetic(expression)
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        return str(int(value)) if abs(value) < 2**53 else repr(value)
    return repr(value)


@tool
async def get_time() -> str:
    """The current date and time in UTC (ISO 8601)."""
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    return now.isoformat().replace("+00:00", "Z")


DEMO_TOOLS: tuple[AgentTool, ...] = (get_weather, calculate, get_time)
"""The built-in tools of the program (given to the demo model unless ``--no-tools``, and
to any model with ``--demo-tools``)."""

# ---------------------------------------------------------------------------------------
# The scripted model

_WEATHER_WORDS = re.compile(r"\b(weather|temperature|forecast|rain(ing|y)?|sunny|wind)\b", re.I)
_TIME_WORDS = re.compile(r"\b(time|clock|date|today)\b", re.I)
_PLACE = re.compile(r"\b(?:in|for|at)\s+([^?.!;]+)", re.I)
_PLACE_SPLIT = re.compile(r"\s*(?:,|&|\band\b)\s*", re.I)
_CAPITALIZED = re.compile(r"[A-Z][\w.'-]*(?:\s+[A-Z][\w.'-]*)*")
_ARITHMETIC = re.compile(r"[-+(]*\s*\d[\d\s.+\-*/%^()]*")
_OPERATOR_BETWEEN = re.compile(r"[\d)]\s*(?:\*\*|//|[-+*/%^])\s*[-+(]*\s*\d")
_MAX_CITIES = 5


def _cities(text: str) -> list[str]:
    """The places named after "in", "for" or "at": "weather in Paris and New York"."""
    match = _PLACE.search(text)
    if match is None:
        return []
    cities: list[str] = []
    for part in _PLACE_SPLIT.split(match.group(1)):
        words = part.strip().strip("'\"")
        if not words:
            continue
        name = _CAPITALIZED.match(words)
        city = name.group(0) if name is not None else words.split()[0].title()
        if city.lower() not in (c.lower() for c in cities):
            cities.append(city)
    return cities[:_MAX_CITIES]


def _expression(text: str) -> str | None:
    """The longest arithmetic-looking span with an operator between two operands."""
    spans = [m.group(0).strip() for m in _ARITHMETIC.finditer(text)]
    spans = [span for span in spans if _OPERATOR_BETWEEN.search(span)]
    return max(spans, key=len) if spans else None


def _plan(request: str) -> tuple[list[str], list[ToolCall]]:
    """What to say and which tools to call for one user request."""
    intents: list[str] = []
    calls: list[ToolCall] = []
    if _WEATHER_WORDS.search(request):
        cities = _cities(request)
        if cities:
            intents.append("check the weather in " + " and ".join(cities))
            calls.extend(faux_tool_call("get_weather", {"city": city}) for city in cities)
    expression = _expression(request)
    if expression is not None:
        intents.append(f"calculate {expression}")
        calls.append(faux_tool_call("calculate", {"expression": expression}))
    if _TIME_WORDS.search(request) and not _WEATHER_WORDS.search(request):
        intents.append("look at the clock")
        calls.append(faux_tool_call("get_time", {}))
    return intents, calls


def _canned_answer(request: str) -> str:
    said = " ".join(request.split())
    if len(said) > 80:
        said = said[:77] + "..."
    return (
        f'You said: "{said}". I am the offline demo model of trio-agent, so I only know '
        'a few tricks: ask me about the weather ("What is the weather in Paris?"), a '
        'calculation ("What is 6 * 7?") or the time. Run with --model provider/id to '
        "talk to a real model."
    )


def _describe(result: ToolResultMessage, call: ToolCall | None) -> str:
    text = content_text(result.content, " ").strip()
    arguments = call.arguments if call is not None else {}
    if result.is_error:
        return f"The {result.tool_name} tool failed: {text}."
    if result.tool_name == "get_weather":
        return f"The weather in {arguments.get('city', '?')}: {text} (demo data)."
    if result.tool_name == "calculate":
        return f"{arguments.get('expression', '?')} = {text}."
    if result.tool_name == "get_time":
        return f"The current time is {text}."
    return f"{result.tool_name} returned: {text}."


def demo_response(
    context: LlmContext, options: StreamOptions, state: FauxState, model: Model
) -> AssistantMessage:
    """Build the demo model's next response from the request (a faux response factory).

    Looks at the messages after the last assistant message: tool results are reported
    in the answer; user requests about the weather (with a city), a calculation or the
    time become tool calls (``stop_reason="toolUse"``); any other request gets a canned
    reply that echoes it.
    """
    messages: list[Message] = context.messages
    first = messages[0] if messages else None
    if isinstance(first, SystemMessage) and first.content == SUMMARIZATION_SYSTEM_PROMPT:
        # A compaction's summary request: the demo model cannot summarize; a stand-in.
        return faux_assistant_message(
            "## Goal\nTry the offline demo model of trio-agent.\n\n## Progress\n"
            "The earlier messages, summarized by the demo model (a stand-in for a summary)."
        )
    tail_start = 0
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            tail_start = index + 1
    calls_by_id = {
        block.id: block
        for message in messages[:tail_start]
        if isinstance(message, AssistantMessage)
        for block in message.content
        if isinstance(block, ToolCall)
    }
    tail = messages[tail_start:]
    reports = [
        _describe(m, calls_by_id.get(m.tool_call_id))
        for m in tail
        if isinstance(m, ToolResultMessage)
    ]
    requests = [content_text(m.content, " ") for m in tail if isinstance(m, UserMessage)]
    intents: list[str] = []
    calls: list[ToolCall] = []
    for request in requests:
        more_intents, more_calls = _plan(request)
        intents.extend(more_intents)
        calls.extend(more_calls)
    if calls:
        text = " ".join([*reports, "Let me " + " and ".join(intents) + "."])
        content: list[AssistantContent] = [faux_text(text), *calls]
        return faux_assistant_message(content, stop_reason="toolUse")
    if not reports:
        reports = [_canned_answer(requests[-1] if requests else "")]
    return faux_assistant_message(" ".join(reports))


class DemoModel:
    """The program's embedded offline model: a paced faux provider scripted by
    :func:`demo_response` for every request.

    Args:
        tokens_per_second: Streaming pace on Trio's clock (``None`` for no pacing).
    """

    def __init__(self, tokens_per_second: float | None = 200.0) -> None:
        self.provider = FauxProvider(models=[DEMO_MODEL_ID], tokens_per_second=tokens_per_second)
        """The underlying faux provider."""
        self.model = self.provider.get_model()
        """The model to put in the agent's state (``faux/demo``)."""

    def stream_fn(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterable[AssistantMessageEvent]:
        """A :data:`~trio_agent.StreamFn` that never runs out of scripted responses: each
        request queues the factory that answers it (requests that start at once each get
        their own)."""
        self.provider.append_responses([demo_response])
        return self.provider.stream_fn(model, context, options)
