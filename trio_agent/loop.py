"""The low-level agent loop (like ``trio.lowlevel``): run one agent run against a context.

:class:`~trio_agent.Agent` is built only on the names exported here.
"""

from __future__ import annotations

from ._util import fixup_module_metadata as _fixup_module_metadata

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
