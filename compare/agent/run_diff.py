"""Generate N scenarios, run them on pi (Node) and trio_agent (Python), diff the records.

Usage (from the repository root, with an interpreter that imports trio_agent):
    python compare/agent/run_diff.py --count 300 --seed 1 [--ties] \
        [--pi-modules /path/to/node_modules] [--out /tmp/diffrun]

Writes scenarios.jsonl, pi.jsonl, ta.jsonl and diffs.jsonl to --out and prints a summary:
for each differing scenario, the first differing field of the record.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def first_diff(a, b, path="$"):
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


def interleaving_only(p: dict, t: dict) -> bool:
    """True when the records differ only in how the tool events of parallel calls interleave:
    every call's own events, the tool_execution_end records per call, all other events and
    everything else are equal (the known, scheduler-order class; see README.md)."""
    if {k: v for k, v in p.items() if k not in ("events", "tool_ends")} != {
        k: v for k, v in t.items() if k not in ("events", "tool_ends")
    }:
        return False
    if sorted(p["tool_ends"], key=lambda e: e["id"]) != sorted(t["tool_ends"], key=lambda e: e["id"]):
        return False

    def split(events):
        rest, per_call = [], {}
        for e in events:
            kind, _, call = e.partition(":")
            if kind in ("tool_execution_update", "tool_execution_end"):
                per_call.setdefault(call, []).append(kind)
                rest.append("tool_event")
            else:
                rest.append(e)
        return rest, per_call

    return split(p["events"]) == split(t["events"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ties", action="store_true")
    ap.add_argument("--extras", action="store_true")
    ap.add_argument("--pi-modules", default=os.environ.get("PI_MODULES"))
    ap.add_argument("--out", default="diffrun")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    gen = [sys.executable, str(HERE / "gen_scenarios.py"), "--seed", str(a.seed), "--count", str(a.count)]
    if a.ties:
        gen.append("--ties")
    if a.extras:
        gen.append("--extras")
    (out / "scenarios.jsonl").write_text(subprocess.run(gen, check=True, capture_output=True,
                                                        text=True).stdout, encoding="utf-8")
    env = dict(os.environ)
    if a.pi_modules:
        env["PI_MODULES"] = a.pi_modules
    with open(out / "pi.jsonl", "w", encoding="utf-8") as f:
        subprocess.run(["node", str(HERE / "pi_driver.mjs"), str(out / "scenarios.jsonl")], stdout=f,
                       check=True, env=env)
    with open(out / "ta.jsonl", "w", encoding="utf-8") as f:
        subprocess.run([sys.executable, str(HERE / "ta_driver.py"), str(out / "scenarios.jsonl")],
                       stdout=f, check=True)
    pi = [json.loads(x) for x in (out / "pi.jsonl").read_text(encoding="utf-8").splitlines()]
    ta = [json.loads(x) for x in (out / "ta.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(pi) == len(ta) == a.count, (len(pi), len(ta))
    diffs = []
    for p, t in zip(pi, ta):
        d = first_diff(p, t)
        if d:
            diffs.append({"id": p["id"], "interleaving_only": interleaving_only(p, t), "path": d[0],
                          "pi": d[1], "trio_agent": d[2]})
    with open(out / "diffs.jsonl", "w", encoding="utf-8") as f:
        for d in diffs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    known = sum(d["interleaving_only"] for d in diffs)
    print(f"{a.count} scenarios, {len(diffs)} differ: {known} only in the interleaving of parallel"
          f" tool events, {len(diffs) - known} otherwise")
    for d in diffs:
        print(json.dumps(d, ensure_ascii=False)[:400])


if __name__ == "__main__":
    main()
