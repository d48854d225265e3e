"""JSON for messages, events and models, in the upstream wire format.

``to_json`` / ``from_json`` and ``to_dict`` / ``from_dict`` convert single values (``cls``
may be a union such as :data:`~trio_agent.AgentMessage` or :data:`~trio_agent.AgentEvent`);
``dump_transcript`` / ``load_transcript`` read and write JSON Lines transcripts. Keys are
camelCase, ``None`` optionals are omitted, timestamps are integer milliseconds; loading
rejects unknown roles, types and keys (except :data:`UPSTREAM_ONLY_KEYS`) with a
:class:`~trio_agent.SerializationError`. The upstream-only keys of a loaded message, and the
order of its keys, are kept in its :class:`WireExtras`, so a transcript written by pi dumps
back byte for byte.
"""

from __future__ import annotations

from ._messages import WireExtras as WireExtras
from ._serialization import UPSTREAM_ONLY_KEYS as UPSTREAM_ONLY_KEYS
from ._serialization import converter as converter
from ._serialization import from_dict as from_dict
from ._serialization import from_json as from_json
from ._serialization import to_dict as to_dict
from ._serialization import to_json as to_json
from ._transcript_files import dump_transcript as dump_transcript
from ._transcript_files import load_transcript as load_transcript
from ._util import fixup_module_metadata as _fixup_module_metadata

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
