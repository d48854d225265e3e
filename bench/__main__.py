"""``python -m bench [S1 S2 S3 S4 S2S S4S] [--runs N] [--profile]``: run scenarios, one JSON line
each; with ``--profile``, profile one agent run per scenario with pyinstrument instead."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import s1_stream, s2_sessions, s2_turns, s3_tools, s4_agents
from ._common import emit_line

SCENARIOS: dict[str, Callable[[int], list[dict[str, Any]]]] = {
    "S1": s1_stream.run,
    "S2": s2_turns.run,
    "S3": s3_tools.run,
    "S4": s4_agents.run,
    "S2S": s2_sessions.run_s2s,
    "S4S": s2_sessions.run_s4s,
}

PROFILE_TARGETS: dict[str, Callable[[], Callable[[], object]]] = {
    "S1": s1_stream.profile_target,
    "S2": s2_turns.profile_target,
    "S3": s3_tools.profile_target,
    "S4": s4_agents.profile_target,
    "S2S": s2_sessions.profile_target,
    "S4S": s2_sessions.profile_target_s4s,
}


def profile(name: str) -> None:
    """Run scenario ``name``'s agent once unprofiled (warm-up), once under pyinstrument,
    and print the call tree to stderr. Floors are not run."""
    from pyinstrument import Profiler  # the "bench" dependency group

    target = PROFILE_TARGETS[name]()
    target()
    # async_mode="disabled": sample the real stack, so Trio's scheduler shows too.
    profiler = Profiler(interval=0.0005, async_mode="disabled")
    profiler.start()
    target()
    profiler.stop()
    print(f"=== {name} ===", file=sys.stderr)
    print(profiler.output_text(unicode=True, color=False), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and run the chosen scenarios in the order given."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=(
            "trio_agent benchmarks: S1-S4 against the raw Trio floor, S2S and S4S "
            "(sessions) against the same runs without a session."
        ),
    )
    parser.add_argument(
        "scenarios",
        nargs="*",
        metavar="SCENARIO",
        help="scenarios to run (S1 S2 S3 S4 S2S S4S; default: all)",
    )
    parser.add_argument(
        "--runs", type=int, default=5, help="measured runs per scenario (default: 5)"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile one agent run per scenario (pyinstrument, to stderr); no JSON",
    )
    args = parser.parse_args(argv)
    names = [name.upper() for name in args.scenarios] or list(SCENARIOS)
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown:
        parser.error(
            f"unknown scenario(s): {', '.join(unknown)}; choose from {' '.join(SCENARIOS)}"
        )
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    for name in names:
        if args.profile:
            profile(name)
            continue
        for line in SCENARIOS[name](args.runs):
            emit_line(line)


if __name__ == "__main__":
    main()
