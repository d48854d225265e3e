"""``python -m bench [S1 S2 S3 S4] [--runs N]``: run scenarios, one JSON line each."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from . import s1_stream, s2_turns, s3_tools, s4_agents
from ._common import emit_line

SCENARIOS: dict[str, Callable[[int], list[dict[str, Any]]]] = {
    "S1": s1_stream.run,
    "S2": s2_turns.run,
    "S3": s3_tools.run,
    "S4": s4_agents.run,
}


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and run the chosen scenarios in the order given."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="trio_agent benchmarks S1-S4 against the raw Trio floor.",
    )
    parser.add_argument(
        "scenarios",
        nargs="*",
        metavar="SCENARIO",
        help="scenarios to run (S1 S2 S3 S4; default: all)",
    )
    parser.add_argument(
        "--runs", type=int, default=5, help="measured runs per scenario (default: 5)"
    )
    args = parser.parse_args(argv)
    names = [name.upper() for name in args.scenarios] or list(SCENARIOS)
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}; choose from S1 S2 S3 S4")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    for name in names:
        for line in SCENARIOS[name](args.runs):
            emit_line(line)


if __name__ == "__main__":
    main()
