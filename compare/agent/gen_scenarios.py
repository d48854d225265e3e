"""Random scenarios for the Agent/loop differential check (seeded, JSON Lines).

Usage: python gen_scenarios.py --seed 1 --count 300 > scenarios.jsonl

A scenario is one prompt to a fresh Agent with four tools (see README.md):
  echo  returns a text built from its arguments (optionally after tool updates)
  fail  throws an error
  ghost is not registered (unknown tool)
  count has the schema {"n": number} (required); called with 5, "5", "x", or {}
and a script of 1-4 assistant responses, each text and/or 0-3 tool calls, that the faux
stream function plays in order (then "(end of script)" answers any further request).
"""

from __future__ import annotations

import argparse
import json
import random

WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", " ", "\n", "ü", "🙂"]


def text(rng: random.Random, lo: int = 1, hi: int = 4) -> str:
    return "".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def deltas(rng: random.Random, s: str) -> list[str]:
    if len(s) < 2 or rng.random() < 0.3:
        return [s]
    cuts = sorted(rng.sample(range(1, len(s)), min(len(s) - 1, rng.randint(1, 2))))
    parts, prev = [], 0
    for c in [*cuts, len(s)]:
        parts.append(s[prev:c])
        prev = c
    return parts


def tool_call(rng: random.Random, call_id: str, delays: list[int]) -> dict:
    name = rng.choice(["echo", "echo", "fail", "ghost", "count", "count"])
    if name == "count":
        args = rng.choice([{"n": 5}, {"n": "5"}, {"n": "x"}, {}, {"n": 2.5}, {"n": "  7 "}])
    elif name == "ghost":
        args = {"q": text(rng, 1, 2)}
    else:
        args = {"msg": text(rng, 1, 2)}
    return {
        "id": call_id,
        "name": name,
        "arguments": args,
        "delay_ms": delays.pop(0),  # 0: no await at all in the tool
        "updates": rng.choice([0, 0, 1, 2]) if name == "echo" else 0,
    }


def add_extras(scn: dict, seed: int) -> None:
    """--extras: echo calls that return isError or terminate, an echo tool with
    executionMode "sequential", more `count` arguments, empty replies (drawn from a second generator, so the base scenario of a
    seed is the same with and without --extras)."""
    rng = random.Random(seed * 7 + 3)
    scn["echo_sequential"] = rng.random() < 0.2
    for reply in scn["script"]:
        for b in reply["blocks"]:
            if b["type"] == "toolCall" and b["name"] == "echo":
                b["soft_error"] = rng.random() < 0.2
                b["terminate"] = rng.random() < 0.25
            if b["type"] == "toolCall" and b["name"] == "count" and rng.random() < 0.5:
                b["arguments"] = {"n": rng.choice(["", "0x10", "1e3", True, None, [5], "-3", {"a": 1}])}
        if rng.random() < 0.05:  # an empty reply
            reply["blocks"] = []


def scenario(seed: int, ties: bool) -> dict:
    rng = random.Random(seed)
    script = []
    for k in range(rng.randint(1, 4)):
        n_calls = rng.choice([0, 0, 1, 2, 3])
        has_text = n_calls == 0 or rng.random() < 0.5
        # distinct delays within a batch make completion order well defined; with
        # ties=True several calls may share a delay (including 0)
        pool = [0, 40, 80, 120]
        delays = [rng.choice(pool) for _ in range(n_calls)] if ties else rng.sample(pool, n_calls)
        blocks = []
        if has_text:
            t = text(rng)
            blocks.append({"type": "text", "deltas": deltas(rng, t)})
        calls = [tool_call(rng, f"call_{k}_{j}", delays) for j in range(n_calls)]
        for c in calls:
            blocks.append({"type": "toolCall", **c})
        if has_text and calls and rng.random() < 0.3:  # text after the calls
            blocks.append(blocks.pop(0))
        r = rng.random()
        end = "error" if r < 0.07 else "length" if r < 0.14 else "normal"
        script.append({"blocks": blocks, "end": end, "error_message": f"provider failed {k}"})
    finish = None
    r = rng.random()
    if r < 0.25:
        finish = {"action": "end", "after_turn": rng.randint(1, 3)}
    elif r < 0.33:
        finish = {"action": "continue", "after_turn": rng.randint(1, 2)}
    return {
        "id": f"seed{seed}",
        "seed": seed,
        "prompt": text(rng, 1, 3),
        "tool_execution": rng.choice(["parallel", "sequential"]),
        "steering_mode": rng.choice(["one-at-a-time", "all"]),
        "follow_up_mode": rng.choice(["one-at-a-time", "all"]),
        "steer": [f"steer {i}: {text(rng, 1, 2)}" for i in range(rng.choice([0, 0, 1, 2]))],
        "follow_up": [f"follow {i}: {text(rng, 1, 2)}" for i in range(rng.choice([0, 0, 1, 2]))],
        "finish_turn": finish,
        "script": script,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--ties", action="store_true", help="allow equal tool delays in a batch")
    ap.add_argument("--extras", action="store_true", help="isError/terminate results, sequential tool")
    a = ap.parse_args()
    for i in range(a.count):
        seed = a.seed * 1_000_000 + i
        scn = scenario(seed, a.ties)
        if a.extras:
            add_extras(scn, seed)
        print(json.dumps(scn, ensure_ascii=False))


if __name__ == "__main__":
    main()
