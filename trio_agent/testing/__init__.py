"""Test helpers (not imported by ``import trio_agent``, like ``trio.testing``)."""

from __future__ import annotations

# --- faux re-exports, recorder, assertions ---------------------------------------------
from ..models._faux import FauxProvider as FauxProvider
from ..models._faux import FauxState as FauxState
from ..models._faux import faux_assistant_message as faux_assistant_message
from ..models._faux import faux_text as faux_text
from ..models._faux import faux_thinking as faux_thinking
from ..models._faux import faux_tool_call as faux_tool_call
from ._recorder import EventRecorder as EventRecorder
from ._recorder import assert_event_types as assert_event_types
from ._recorder import event_types as event_types


def _fixup() -> None:
    # Only the recorder names: the faux names already report ``trio_agent.models``.
    from .._util import fixup_module_metadata

    fixup_module_metadata(
        __name__,
        {
            "EventRecorder": EventRecorder,
            "assert_event_types": assert_event_types,
            "event_types": event_types,
        },
    )


_fixup()
del _fixup
