"""Scenario S6 against trio_agent's built-in providers (``Models.stream_simple``).

Usage: python ta_s6.py <api> <kind> [n]   (api: openai-completions | anthropic-messages |
openai-responses; kind: text | tool; n: deltas, default 20000 for text and 2000 for tool)

Starts the loopback server (``server.py``), streams one warm-up response of n/10 deltas,
then the measured one, consuming every event as an application would (counting the
deltas that carry text; an empty first piece of arguments is not one of the n), and prints one JSON line: ``us_per_delta`` (wall time of the whole stream, from
the call to the terminal event, over the deltas), ``wall_ms``, ``peak_rss_mb`` (the
process's peak resident set) and ``rss_delta_mb`` (growth over the measured stream).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import subprocess
import sys
import time

import trio

import bodies
from trio_agent import AbortController
from trio_agent._messages import Message, Model, UserMessage
from trio_agent._streaming import LlmContext, StreamOptions
from trio_agent.models import Models
from trio_agent.serialization import from_dict

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


async def stream_once(models: Models, api: str, kind: str, n: int, port: int) -> tuple[float, int, object]:
    model = from_dict(bodies.model(api, f"http://127.0.0.1:{port}/{api}/{kind}/{n}/v1"), Model)
    context = LlmContext(messages=[UserMessage(content="go")])
    # with an abort signal, as the agent streams (and pi_s6.mjs does)
    options = StreamOptions(api_key="sk-s6-0123456789", signal=AbortController().signal)
    deltas = 0
    final = None
    t0 = time.perf_counter()
    async for event in models.stream_simple(model, context, options):
        kind_ = event.type
        if (kind_ == "text_delta" or kind_ == "toolcall_delta") and event.delta:
            deltas += 1
        elif kind_ == "done":
            final = event.message
        elif kind_ == "error":
            raise AssertionError(event.error.error_message)
    wall = time.perf_counter() - t0
    return wall, deltas, final


def check(final: object, kind: str, n: int, deltas: int) -> None:
    if deltas != n:
        raise AssertionError(f"{deltas} deltas, expected {n}")
    block = final.content[0]  # type: ignore[attr-defined]
    got = block.text if kind == "text" else block.arguments
    if got != bodies.expected(kind, n):
        raise AssertionError("final message differs from what was sent")


async def main(api: str, kind: str, n: int) -> None:
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "server.py"), "--prepare",
                               f"{api}:{kind}:{n}", f"{api}:{kind}:{max(n // 10, 1)}"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=HERE)
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]
        async with Models() as models:
            warm = max(n // 10, 1)
            _, deltas, final = await stream_once(models, api, kind, warm, port)
            check(final, kind, warm, deltas)
            gc.collect()
            rss0 = rss_bytes()
            wall, deltas, final = await stream_once(models, api, kind, n, port)
            rss1 = rss_bytes()
            check(final, kind, n, deltas)
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(10)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"impl": "trio_agent", "scenario": f"s6-{api}-{kind}", "deltas": n,
                      "wall_ms": wall * 1000, "us_per_delta": wall * 1e6 / n,
                      "peak_rss_mb": round(peak / 2**20, 1), "rss_delta_mb": round((rss1 - rss0) / 2**20, 1)}))


if __name__ == "__main__":
    api_, kind_ = sys.argv[1], sys.argv[2]
    n_ = int(sys.argv[3]) if len(sys.argv) > 3 else (20_000 if kind_ == "text" else 2_000)
    trio.run(main, api_, kind_, n_)
