"""Test helpers (not imported by ``import trio_agent``, like ``trio.testing``)."""

from __future__ import annotations
