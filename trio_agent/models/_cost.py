"""Usage cost, thinking levels and token budgets."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

import attrs

from .._messages import (
    AssistantMessage,
    Cost,
    ImageContent,
    Message,
    Model,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .._serialization import to_json
from .._transcript import get_system_message_text
from ._http import compact_json

__all__ = [
    "DEFAULT_THINKING_BUDGETS",
    "THINKING_LEVELS",
    "adjust_max_tokens_for_thinking",
    "calculate_cost",
    "clamp_max_tokens_to_context",
    "clamp_thinking_level",
    "estimate_context_tokens",
    "get_supported_thinking_levels",
    "is_openrouter",
    "provider_billed_total",
    "with_billed_total",
]

THINKING_LEVELS: Final[tuple[ThinkingLevel, ...]] = (
    "off",
    "minimal",
    "low",
    "medium",
    "high",
    "xhigh",
    "max",
)
"""Every thinking level, from least to most effort."""

DEFAULT_THINKING_BUDGETS: Final[Mapping[str, int]] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
}
"""Thinking-token budgets per level for budget-based APIs (``xhigh``/``max`` use ``high``)."""


def calculate_cost(model: Model, usage: Usage, *, cache_write_1h: int = 0) -> Usage:
    """Return ``usage`` with its cost computed from ``model.cost`` (USD per million tokens).

    Each of ``input``, ``output``, ``cache_read`` and ``cache_write`` is priced at its
    rate; ``total`` is their sum. ``cache_write_1h`` of the cache-write tokens were written
    with the one-hour retention: they cost twice the input rate instead.
    """
    rates = model.cost
    long_writes = min(max(cache_write_1h, 0), usage.cache_write)
    cost = Cost(
        input=rates.input / 1e6 * usage.input,
        output=rates.output / 1e6 * usage.output,
        cache_read=rates.cache_read / 1e6 * usage.cache_read,
        cache_write=(
            rates.cache_write / 1e6 * (usage.cache_write - long_writes)
            + rates.input * 2 / 1e6 * long_writes
        ),
    )
    total = cost.input + cost.output + cost.cache_read + cost.cache_write
    return attrs.evolve(usage, cost=attrs.evolve(cost, total=total))


def is_openrouter(model: Model) -> bool:
    """Whether ``model`` is served by OpenRouter (its provider, or an ``openrouter.ai`` URL)."""
    return model.provider == "openrouter" or "openrouter.ai" in model.base_url


def _finite_cost(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(value)


def provider_billed_total(model: Model, usage: Mapping[str, object]) -> float | None:
    """The total an OpenRouter usage object reports as billed, else ``None``.

    Only for an OpenRouter model (see :func:`is_openrouter`) whose usage has a finite
    ``cost`` of at least 0 and a boolean ``is_byok``: without BYOK the total is ``cost``;
    with it, ``cost`` plus ``cost_details.upstream_inference_cost`` (else plus the
    prompt and completion upstream costs, when both are valid).
    """
    if not is_openrouter(model):
        return None
    cost = _finite_cost(usage.get("cost"))
    byok = usage.get("is_byok")
    if cost is None or not isinstance(byok, bool):
        return None
    if not byok:
        return cost
    details = usage.get("cost_details")
    if not isinstance(details, Mapping):
        return None
    upstream = details.get("upstream_inference_cost")
    if upstream is not None:
        value = _finite_cost(upstream)
        return None if value is None else cost + value
    prompt = _finite_cost(details.get("upstream_inference_prompt_cost"))
    completion = _finite_cost(details.get("upstream_inference_completions_cost"))
    if prompt is None or completion is None:
        return None
    return cost + prompt + completion


def with_billed_total(usage: Usage, total: float | None) -> Usage:
    """``usage`` with ``cost.total`` replaced by ``total`` (unchanged for ``None``)."""
    if total is None:
        return usage
    return attrs.evolve(usage, cost=attrs.evolve(usage.cost, total=total))


def get_supported_thinking_levels(model: Model) -> list[ThinkingLevel]:
    """The levels ``model`` accepts, in order.

    ``["off"]`` for a model without reasoning. Otherwise every level except those mapped
    to ``None`` in ``model.thinking_level_map``; ``xhigh`` and ``max`` only when mapped to
    a provider value.
    """
    if not model.reasoning:
        return ["off"]
    mapping = model.thinking_level_map or {}
    levels: list[ThinkingLevel] = []
    for level in THINKING_LEVELS:
        if level in mapping and mapping[level] is None:
            continue
        if level in ("xhigh", "max") and not isinstance(mapping.get(level), str):
            continue
        levels.append(level)
    return levels


def clamp_thinking_level(model: Model, level: ThinkingLevel) -> ThinkingLevel:
    """The supported level closest to ``level``: itself, else the nearest above, else
    the nearest below (else the first supported)."""
    supported = get_supported_thinking_levels(model)
    if level in supported:
        return level
    position = THINKING_LEVELS.index(level)
    for candidate in THINKING_LEVELS[position + 1 :]:
        if candidate in supported:
            return candidate
    for candidate in reversed(THINKING_LEVELS[:position]):
        if candidate in supported:
            return candidate
    return supported[0]


def requested_thinking_level(model: Model, level: ThinkingLevel | None) -> ThinkingLevel:
    """The level a request asks ``model`` for: ``"off"`` for no level or ``"off"`` (the
    agent's "off" means none, never the model's lowest level), else ``level`` clamped to
    what the model supports (which may be ``"off"``)."""
    if level is None or level == "off":
        return "off"
    return clamp_thinking_level(model, level)


def adjust_max_tokens_for_thinking(
    base_max_tokens: int,
    model_max_tokens: int,
    level: ThinkingLevel,
    budgets: Mapping[str, int] | None = None,
) -> tuple[int, int]:
    """Output-token limit and thinking budget for budget-based thinking.

    ``max_tokens = min(base + budget, model_max)``; when that leaves no room for the
    answer (``max_tokens <= budget``) the budget shrinks to ``max(0, max_tokens - 1024)``.

    Args:
        base_max_tokens: The requested output limit.
        model_max_tokens: The model's output limit.
        level: The thinking level (``xhigh``/``max`` use the ``high`` budget).
        budgets: Overrides of :data:`DEFAULT_THINKING_BUDGETS` per level.

    Returns:
        ``(max_tokens, thinking_budget)``.
    """
    merged = {**DEFAULT_THINKING_BUDGETS, **(budgets or {})}
    key = "high" if level in ("xhigh", "max") else level
    budget = merged.get(key, 0)
    max_tokens = min(base_max_tokens + budget, model_max_tokens)
    if max_tokens <= budget:
        budget = min(budget, max(0, max_tokens - 1024))
    return max_tokens, budget


_IMAGE_CHARS = 4800
_CHARS_PER_TOKEN = 3.5


def _js_length(text: str) -> int:
    # JavaScript string length: UTF-16 code units.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _tokens(chars: int) -> int:
    return math.ceil(chars / _CHARS_PER_TOKEN)


def _json_tokens(value: object) -> int:
    # The wire form (camelCase keys), as upstream stringifies it.
    return _tokens(_js_length(to_json(value)))


def _message_tokens(message: Message) -> int:
    if isinstance(message, SystemMessage):
        tokens = _tokens(_js_length(get_system_message_text(message)))
        if message.tools_added is not None:
            tokens += _json_tokens(message.tools_added)
        if message.tools_removed is not None:
            tokens += _json_tokens(message.tools_removed)
        return tokens
    if isinstance(message, UserMessage | ToolResultMessage):
        if isinstance(message.content, str):
            return _tokens(_js_length(message.content))
        return _tokens(
            sum(
                _IMAGE_CHARS if isinstance(block, ImageContent) else _js_length(block.text)
                for block in message.content
            )
        )
    if isinstance(message, AssistantMessage):
        chars = 0
        for block in message.content:
            if isinstance(block, TextContent):
                chars += _js_length(block.text)
            elif isinstance(block, ThinkingContent):
                chars += _js_length(block.thinking)
            elif isinstance(block, ToolCall):
                chars += _js_length(block.name) + _js_length(compact_json(block.arguments))
        return _tokens(chars)
    return 0  # pragma: no cover - every Message variant is handled above


def _usage_total(usage: Usage) -> int:
    if usage.total_tokens:
        return usage.total_tokens
    return usage.input + usage.output + usage.cache_read + usage.cache_write


def estimate_context_tokens(messages: Sequence[Message]) -> int:
    """Rough input-token count of a transcript, as upstream estimates it.

    Every message counts ceil(characters / 3.5) on its own (JavaScript string lengths;
    an image counts 4800 characters; a system message adds the same for the compact JSON
    of its added and removed tools; an assistant message counts its text, thinking, and
    each tool call's name and compact JSON arguments). The last assistant response that
    did not fail, has a usage total (``total_tokens``, else the sum of the counts) above 0
    and is not older than any earlier message replaces everything up to itself with that
    total.
    """
    anchor = -1
    newest = None
    for index, message in enumerate(messages):
        stamp = getattr(message, "timestamp", None)
        if (
            isinstance(message, AssistantMessage)
            and message.stop_reason not in ("error", "aborted")
            and _usage_total(message.usage) > 0
            and (newest is None or stamp is None or stamp >= newest)
        ):
            anchor = index
        if isinstance(stamp, int | float) and (newest is None or stamp > newest):
            newest = stamp
    if anchor < 0:
        return sum(_message_tokens(message) for message in messages)
    anchor_message = messages[anchor]
    assert isinstance(anchor_message, AssistantMessage)
    later = sum(_message_tokens(message) for message in messages[anchor + 1 :])
    return _usage_total(anchor_message.usage) + later


def clamp_max_tokens_to_context(model: Model, messages: Sequence[Message], max_tokens: int) -> int:
    """Lower ``max_tokens`` so input plus output fit ``model.context_window``.

    A window of 0 or less keeps the value. Otherwise, with ``input`` estimated by
    :func:`estimate_context_tokens`: ``room = window - input - max(4096, ceil(input *
    0.15))``; if that is below 32768, ``room = min(32768, window - input - 4096)``; the
    result is ``min(max_tokens, max(1, room))``.
    """
    window = model.context_window
    if window <= 0:
        return max_tokens
    used = estimate_context_tokens(messages)
    margin = max(4096, math.ceil(used * 0.15))
    room = window - used - margin
    if room < 32768:
        room = min(32768, window - used - 4096)
    return min(max_tokens, max(1, room))
