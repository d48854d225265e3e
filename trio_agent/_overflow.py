"""Context overflow: is this response the provider saying the request was too large?

The facts come from pi-ai 1.6.0 (``utils/overflow.js``): the providers' overflow wordings,
the error texts that only look like overflow (rate limits, throttling), Cerebras' body-less
400/413, silent overflow (a successful response whose input exceeds the window) and the
length stop of a server that truncated the input to fill the window.

The regular expressions are written for Python's :mod:`re` so they match exactly what
JavaScript's do: ``re.ASCII`` (JavaScript's ``\\d`` and ``\\w`` are ASCII, and its
case-insensitive matching without the ``u`` flag never folds a non-ASCII letter onto an
ASCII one), JavaScript's ``\\s`` spelled out (it includes the Unicode spaces), ``.``
excluding JavaScript's four line terminators, and ``\\Z`` for ``$`` (Python's ``$`` also
matches before a final newline). ``tests/context/overflow_table.json``, generated from
pi-ai's own module by ``compare/context/gen_overflow_table.mjs``, pins all of it.
"""

from __future__ import annotations

import re
from typing import Final

from ._messages import AssistantMessage

__all__ = ["is_context_overflow", "is_recoverable_length"]

# JavaScript's \s: ASCII whitespace plus the Unicode space separators, NBSP, the line and
# paragraph separators and the byte-order mark.
_JS_SPACE: Final = (
    "[\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]"
)
# JavaScript's `.` without the s flag: anything but its four line terminators.
_JS_DOT: Final = "[^\\n\\r\\u2028\\u2029]"


def _js(pattern: str) -> re.Pattern[str]:
    pattern = pattern.replace("\\s", _JS_SPACE).replace(".*", _JS_DOT + "*")
    return re.compile(pattern, re.IGNORECASE | re.ASCII)


# One entry per provider wording, in pi-ai's order (the fixture checks each one alone).
_OVERFLOW_PATTERNS: Final[tuple[re.Pattern[str], ...]] = tuple(
    _js(pattern)
    for pattern in (
        r"prompt (?:is )?too long",  # Anthropic, z.ai
        r"prompt exceeds max length",  # z.ai (CN endpoint)
        r"request_too_large",  # Anthropic request size (HTTP 413)
        r"input is too long for requested model",  # Amazon Bedrock
        r"exceeds the context window",  # OpenAI Completions and Responses
        # OpenAI-compatible proxies (LiteLLM)
        r"exceeds (?:the )?(?:model'?s )?maximum context length"
        r"(?: of [\d,]+ tokens?|\s*\([\d,]+\))",
        r"context window exceeded",  # LiteLLM pre-call check
        r"input token count.*exceeds the maximum",  # Google Gemini
        r"maximum prompt length is \d+",  # xAI
        r"reduce the length of the messages",  # Groq
        r"maximum context length is \d+ tokens",  # OpenRouter
        r"exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?",  # OpenRouter/Poolside
        # Together AI
        r"input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",
        r"exceeds the limit of \d+",  # GitHub Copilot
        r"exceeds the available context size",  # llama.cpp server
        r"greater than the context length",  # LM Studio
        r"context window exceeds limit",  # MiniMax
        r"exceeded model token limit",  # Kimi For Coding
        r"too large for model with \d+ maximum context length",  # Mistral
        r"prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?",  # DS4
        r"model_context_window_exceeded",  # z.ai finish reason surfaced as an error
        r"prompt too long; exceeded (?:max )?context length",  # Ollama
        r"range of input length should be",  # DashScope / Qwen
        r"context[_ ]length[_ ]exceeded",  # generic
        r"too many tokens",  # generic
        r"token limit exceeded",  # generic
        # HTTP 413 is a request-size overflow whatever the body says: the SDKs' raw error
        # and the "<provider> API error (413):" prefix, not a 413 mentioned in a body.
        r"^(?:[\w -]+ API error \(413\):|413(?:\s|:|\Z))",
    )
)

_CEREBRAS_BODYLESS: Final = _js(r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)")

# Texts that match an overflow wording but are not overflow (Bedrock's throttling says
# "Too many tokens, please wait"); they win over _OVERFLOW_PATTERNS.
_NOT_OVERFLOW: Final[tuple[re.Pattern[str], ...]] = tuple(
    _js(pattern)
    for pattern in (
        r"^(Throttling error|Service unavailable):",  # Amazon Bedrock
        r"rate limit",
        r"too many requests",
    )
)


def is_context_overflow(message: AssistantMessage, context_window: int | None = None) -> bool:
    """Whether ``message`` says its request did not fit the model's context window.

    True in three cases, as pi-ai 1.6.0 decides them:

    1. ``stop_reason`` is ``"error"`` and ``error_message`` matches one of the providers'
       overflow wordings (Anthropic, OpenAI, Google, xAI, Groq, OpenRouter, Together,
       GitHub Copilot, llama.cpp, LM Studio, MiniMax, Kimi, Mistral, DS4, z.ai, Ollama,
       DashScope, Bedrock, LiteLLM, an HTTP 413, Cerebras' body-less 400/413), unless it
       also reads as a rate limit or throttling error;
    2. silent overflow: ``stop_reason`` is ``"stop"`` and ``usage.input +
       usage.cache_read`` is above ``context_window``;
    3. ``stop_reason`` is ``"length"`` with no output and an input of at least 99 % of
       ``context_window`` (a server that truncated the input to fill the window).

    Cases 2 and 3 need ``context_window`` (``None`` or 0 skips them).
    """
    text = message.error_message
    if (
        message.stop_reason == "error"
        and text
        and not any(pattern.search(text) for pattern in _NOT_OVERFLOW)
    ):
        if any(pattern.search(text) for pattern in _OVERFLOW_PATTERNS):
            return True
        if message.provider == "cerebras" and _CEREBRAS_BODYLESS.search(text):
            return True
    if context_window:
        usage = message.usage
        used = usage.input + usage.cache_read
        if message.stop_reason == "stop" and used > context_window:
            return True
        if message.stop_reason == "length" and usage.output == 0:
            return used >= context_window * 0.99
    return False


def is_recoverable_length(message: AssistantMessage, desired_max_output: int) -> bool:
    """Whether a ``"length"`` stop ended below the intended output limit.

    Such a response may come from context pressure or a provider that truncated, so a
    caller may make one compact-and-retry attempt (pi-ai 1.6.0 ``isRecoverableLength``).
    ``desired_max_output`` is the limit before any clamping to the context window.
    """
    return (
        message.stop_reason == "length"
        and desired_max_output > 0
        and message.usage.output < desired_max_output
    )
