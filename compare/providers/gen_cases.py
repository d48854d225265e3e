"""Seeded generator of provider cases (JSON Lines on stdout).

Usage: python gen_cases.py --count N --seed S [--api openai-completions|anthropic-messages|openai-responses]
"""

from __future__ import annotations

import argparse
import json
import random
import sys

import gen_anthropic
import gen_completions
import gen_responses

GENERATORS = {
    "openai-completions": gen_completions.make_case,
    "anthropic-messages": gen_anthropic.make_case,
    "openai-responses": gen_responses.make_case,
}


def generate(count: int, seed: int, apis: list[str]) -> list[dict]:
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        api = apis[i % len(apis)]
        case = GENERATORS[api](random.Random(rng.getrandbits(64)), f"s{seed}-{i:05d}")
        case["api"] = api
        cases.append(case)
    return cases


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--api", action="append", choices=sorted(GENERATORS))
    args = parser.parse_args()
    for case in generate(args.count, args.seed, args.api or sorted(GENERATORS)):
        sys.stdout.write(json.dumps(case, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
