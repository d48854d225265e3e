"""Provider differential check: the same cases through pi-ai 1.6.0 and trio_agent.

Generates N cases, serves them from one loopback server, runs both drivers, then compares
per case (1) the HTTP requests each client sent and (2) the events each stream produced
(with the final message). Writes cases.jsonl, pi.jsonl, ta.jsonl, requests.jsonl and
diffs.jsonl to --out and prints a summary grouped by API and first differing field.

Usage (from the repository root, with an interpreter that imports trio_agent):
    python compare/providers/run_diff.py --count 300 --seed 1 --out /tmp/provdiff
        [--api openai-completions] [--pi-modules path/to/node_modules]
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen_cases  # noqa: E402
from server import DiffServer  # noqa: E402

# Headers that name the client rather than the request: each side's HTTP stack sets them.
CLIENT_HEADERS = {
    "host",
    "content-length",
    "user-agent",
    "accept-encoding",
    "accept-language",
    "connection",
    "sec-fetch-mode",
}
VOLATILE_KEYS = {"timestamp", "durationMs"}
# Documented differences (docs/differences.md) the comparison leaves out, so that what is
# left is new. Each entry names its section.
DOCUMENTED_MESSAGE_KEYS = {
    # "Omitted fields": pi-only message fields trio_agent does not model
    "rawStopReason",
    "diagnostics",
    "providerThinkingLevel",
    "cacheWrite1h",
    "totalFromProvider",
    "namespace",
}


def documented_header(name: str) -> bool:
    """Headers that differ by design: the OpenAI/Anthropic SDKs' platform headers
    (``x-stainless-*``, not sent by trio_agent) and ``accept`` (U39)."""
    return name.startswith("x-stainless-") or name == "accept"


Rule = Callable[[dict[str, Any], str, Any, Any], tuple[Any, Any]]


def documented_rules(api: str) -> list[tuple[str, Rule]]:
    """The rules of the case's API generator: ``DOCUMENTED``, a list of ``(section of
    docs/differences.md, normalize)`` where ``normalize(case, kind, pi, ta)`` (kind
    ``"request"`` or ``"events"``) returns both views with that documented difference
    removed, as narrowly as it can, so that the comparison still sees everything else."""
    module = sys.modules[gen_cases.GENERATORS[api].__module__]
    return list(getattr(module, "DOCUMENTED", []))


def scrub(value: Any) -> Any:
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, dict):
        return {
            k: scrub(v)
            for k, v in value.items()
            if k not in VOLATILE_KEYS and k not in DOCUMENTED_MESSAGE_KEYS
        }
    return value


def request_view(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "method": r["method"],
            "path": r["path"],
            "headers": {k: v for k, v in r["headers"].items() if k not in CLIENT_HEADERS and not documented_header(k)},
            "body": r["body"],
        }
        for r in records
    ]


def first_diff(a: Any, b: Any, path: str = "$") -> tuple[str, Any, Any] | None:
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool) and not isinstance(b, bool):
        return None if abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b)) else (path, a, b)
    if type(a) is not type(b):
        return path, a, b
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}", a.get(k, "<missing>"), b.get(k, "<missing>")
            d = first_diff(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_diff(x, y, f"{path}[{i}]")
            if d:
                return d
        if len(a) != len(b):
            return f"{path}.length", len(a), len(b)
        return None
    return None if a == b else (path, a, b)


def run_driver(cmd: list[str], env: dict[str, str], out: Path) -> list[dict[str, Any]]:
    with out.open("w", encoding="utf-8") as f:
        subprocess.run(cmd, stdout=f, env=env, check=True)
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--api", action="append", choices=sorted(gen_cases.GENERATORS))
    parser.add_argument("--out", default="/tmp/provdiff")
    parser.add_argument("--pi-modules", default=os.environ.get("PI_MODULES"))
    parser.add_argument("--cases", help="run these cases (JSON Lines) instead of generating")
    args = parser.parse_args()
    sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.cases:
        cases = [json.loads(l) for l in Path(args.cases).read_text(encoding="utf-8").splitlines() if l.strip()]
    else:
        cases = gen_cases.generate(args.count, args.seed, args.api or sorted(gen_cases.GENERATORS))
    cases_file = out / "cases.jsonl"
    cases_file.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8")

    server = DiffServer({c["id"]: c for c in cases})
    server.start()
    env = dict(os.environ)
    for key in list(env):
        if key.endswith("_API_KEY"):
            del env[key]
    if args.pi_modules:
        env["PI_MODULES"] = args.pi_modules
    port = str(server.port)
    pi = run_driver(["node", str(HERE / "pi_driver.mjs"), str(cases_file), port], env, out / "pi.jsonl")
    ta = run_driver([sys.executable, str(HERE / "ta_driver.py"), str(cases_file), port], env, out / "ta.jsonl")
    server.shutdown()
    with (out / "requests.jsonl").open("w", encoding="utf-8") as f:
        for (side, case_id), records in sorted(server.requests.items()):
            f.write(json.dumps({"side": side, "id": case_id, "requests": records}, ensure_ascii=False) + "\n")

    by_id = {c["id"]: c for c in cases}
    pi_by, ta_by = {r["id"]: r for r in pi}, {r["id"]: r for r in ta}
    diffs = []
    documented_counts: collections.Counter[str] = collections.Counter()
    for case_id, case in by_id.items():
        views = {
            "request": (
                request_view(server.requests.get(("pi", case_id), [])),
                request_view(server.requests.get(("ta", case_id), [])),
            ),
            "events": (scrub(pi_by.get(case_id)), scrub(ta_by.get(case_id))),
        }
        for kind, (p, t) in views.items():
            for section, normalize in documented_rules(case["api"]):
                p2, t2 = normalize(case, kind, copy.deepcopy(p), copy.deepcopy(t))
                if (p2, t2) != (p, t):
                    documented_counts[section] += 1
                p, t = p2, t2
            d = first_diff(p, t)
            if d:
                diffs.append({"id": case_id, "api": case["api"], "kind": kind, "path": d[0], "pi": d[1], "ta": d[2]})
    # a differing value may hold half a surrogate pair (a delta cut inside an escape)
    with (out / "diffs.jsonl").open("w", encoding="utf-8", errors="backslashreplace") as f:
        for d in diffs:
            f.write(json.dumps(d, ensure_ascii=False, default=str) + "\n")

    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for d in diffs:
        groups[(d["api"], d["kind"], re.sub(r"\[\d+\]", "[]", d["path"]))].append(d)
    differing = len({d["id"] for d in diffs})
    print(f"{len(cases)} cases, {differing} differ ({len(diffs)} differences)")
    for section, n in documented_counts.most_common():
        print(f"  documented, left out: {n:4d}x {section}")
    for (api, kind, path), items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        sample = items[0]
        print(f"  {len(items):4d}  {api:20s} {kind:8s} {path}")
        print(f"        e.g. {sample['id']}: pi={json.dumps(sample['pi'], ensure_ascii=False, default=str)[:160]}")
        print(f"                      ta={json.dumps(sample['ta'], ensure_ascii=False, default=str)[:160]}")


if __name__ == "__main__":
    main()
