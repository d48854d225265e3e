"""Providers: the :class:`Models` runtime, the built-in APIs and the faux provider."""

from __future__ import annotations

from .._util import fixup_module_metadata as _fixup_module_metadata

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
