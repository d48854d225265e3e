"""Benchmarks S1-S4 (docs/performance.md): a real :class:`trio_agent.Agent` against the Trio floor.

Run ``python -m bench [S1 S2 S3 S4] [--runs N]`` (or ``nox -s bench``); each scenario
prints one JSON line (S3 two: parallel and sequential). See ``docs/performance.md``.
"""
