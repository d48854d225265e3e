"""Providers: the :class:`Models` runtime, the built-in APIs and the faux provider."""

from __future__ import annotations

# --- faux provider (_faux.py) ----------------------------------------------------------
from ._faux import FauxProvider as FauxProvider
from ._faux import FauxResponse as FauxResponse
from ._faux import FauxResponseFactory as FauxResponseFactory
from ._faux import FauxState as FauxState
from ._faux import faux_assistant_message as faux_assistant_message
from ._faux import faux_text as faux_text
from ._faux import faux_thinking as faux_thinking
from ._faux import faux_tool_call as faux_tool_call

# --- Models runtime, catalog, openai-completions (_models.py, ...) -----------------------
from ._cost import DEFAULT_THINKING_BUDGETS as DEFAULT_THINKING_BUDGETS
from ._cost import adjust_max_tokens_for_thinking as adjust_max_tokens_for_thinking
from ._cost import calculate_cost as calculate_cost
from ._cost import clamp_max_tokens_to_context as clamp_max_tokens_to_context
from ._cost import clamp_thinking_level as clamp_thinking_level
from ._cost import get_supported_thinking_levels as get_supported_thinking_levels
from ._models import Models as Models
from ._transform import sanitize_surrogates as sanitize_surrogates
from ._transform import transform_messages as transform_messages
# --- anthropic-messages, openai-responses ------------------------------------------------

from .._util import fixup_module_metadata as _fixup_module_metadata

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
