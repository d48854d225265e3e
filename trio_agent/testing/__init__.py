"""Test helpers (not imported by ``import trio_agent``, like ``trio.testing``)."""

from __future__ import annotations

# --- faux re-exports, recorder, assertions ---------------------------------------------
from ..models._faux import FauxConnectionError as FauxConnectionError
from ..models._faux import FauxHttpError as FauxHttpError
from ..models._faux import FauxProvider as FauxProvider
from ..models._faux import FauxRequest as FauxRequest
from ..models._faux import FauxState as FauxState
from ..models._faux import FauxStep as FauxStep
from ..models._faux import faux_assistant_message as faux_assistant_message
from ..models._faux import faux_connection_error as faux_connection_error
from ..models._faux import faux_http_error as faux_http_error
from ..models._faux import faux_step as faux_step
from ..models._faux import faux_text as faux_text
from ..models._faux import faux_thinking as faux_thinking
from ..models._faux import faux_tool_call as faux_tool_call
from ._recorder import EventRecorder as EventRecorder
from ._recorder import assert_event_types as assert_event_types
from ._recorder import event_types as event_types

# --- event grammar (_grammar.py) --------------------------------------------------------
from ._grammar import EventGrammarError as EventGrammarError
from ._grammar import assert_event_grammar as assert_event_grammar

# --- fault injection (_faults.py) -------------------------------------------------------
from ._faults import EventTrigger as EventTrigger
from ._faults import FaultInjector as FaultInjector
from ._faults import abort_at as abort_at
from ._faults import cancel_at as cancel_at
from ._faults import raise_at as raise_at

# --- cassettes (_cassette.py, _cassette_file.py) -----------------------------------------
from ._cassette import CassetteMismatchError as CassetteMismatchError
from ._cassette import CassetteTransport as CassetteTransport
from ._cassette import RecordMode as RecordMode
from ._cassette_file import CassetteError as CassetteError
from ._cassette_file import Interaction as Interaction
from ._cassette_file import RecordedChunk as RecordedChunk
from ._cassette_file import RecordedError as RecordedError
from ._cassette_file import RecordedRequest as RecordedRequest
from ._cassette_file import RecordedResponse as RecordedResponse
from ._cassette_file import load_cassette as load_cassette
from ._cassette_file import redact_request as redact_request
from ._cassette_file import save_cassette as save_cassette


def _fixup() -> None:
    # The names still reporting a private module: this package's own, and the faux
    # helpers that only this namespace exports (trio_agent.models re-exports the others,
    # which already report it).
    from .._util import fixup_module_metadata

    fixup_module_metadata(
        __name__,
        {
            name: value
            for name, value in globals().items()
            if getattr(value, "__module__", "").startswith(
                ("trio_agent.testing._", "trio_agent.models._")
            )
        },
    )


_fixup()
del _fixup
