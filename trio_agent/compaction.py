"""Context-window management: overflow detection, token estimates and compaction.

``is_context_overflow`` and the estimates are pi-ai 1.6.0's; the compaction is
pi-coding-agent 1.6.0's, over a transcript, checked before every request by
:func:`compact_if_needed`. Importing this module registers :class:`CompactionSummary`
with :func:`~trio_agent.register_message_type`. See ``docs/context.md``.
"""

from __future__ import annotations

from ._compaction import COMPACTION_SUMMARY_PREFIX as COMPACTION_SUMMARY_PREFIX
from ._compaction import COMPACTION_SUMMARY_SUFFIX as COMPACTION_SUMMARY_SUFFIX
from ._compaction import DEFAULT_COMPACTION_SETTINGS as DEFAULT_COMPACTION_SETTINGS
from ._compaction import SUMMARIZATION_PROMPT as SUMMARIZATION_PROMPT
from ._compaction import SUMMARIZATION_SYSTEM_PROMPT as SUMMARIZATION_SYSTEM_PROMPT
from ._compaction import TURN_PREFIX_SUMMARIZATION_PROMPT as TURN_PREFIX_SUMMARIZATION_PROMPT
from ._compaction import UPDATE_SUMMARIZATION_PROMPT as UPDATE_SUMMARIZATION_PROMPT
from ._compaction import CompactionDetails as CompactionDetails
from ._compaction import CompactionFailure as CompactionFailure
from ._compaction import CompactionPreparation as CompactionPreparation
from ._compaction import CompactionResult as CompactionResult
from ._compaction import CompactionSettings as CompactionSettings
from ._compaction import CompactionSummary as CompactionSummary
from ._compaction import ContextTracker as ContextTracker
from ._compaction import CutPoint as CutPoint
from ._compaction import compact as compact
from ._compaction import compact_after_overflow as compact_after_overflow
from ._compaction import compact_if_needed as compact_if_needed
from ._compaction import convert_to_llm as convert_to_llm
from ._compaction import estimate_tokens as estimate_tokens
from ._compaction import find_cut_point as find_cut_point
from ._compaction import prepare_compaction as prepare_compaction
from ._compaction import serialize_conversation as serialize_conversation
from ._compaction import should_compact as should_compact
from ._compaction import summary_to_user_message as summary_to_user_message
from ._compaction import to_llm_message as to_llm_message
from ._compaction import transcript_tokens as transcript_tokens
from ._estimate import ContextEstimate as ContextEstimate
from ._estimate import calculate_context_tokens as calculate_context_tokens
from ._estimate import estimate_context_tokens as estimate_context_tokens
from ._estimate import estimate_message_tokens as estimate_message_tokens
from ._estimate import estimate_text_tokens as estimate_text_tokens
from ._overflow import is_context_overflow as is_context_overflow
from ._overflow import is_recoverable_length as is_recoverable_length
from ._util import fixup_module_metadata as _fixup_module_metadata

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
