"""Python driver of the provider differential check: the same cases through trio_agent's
``Models.stream_simple`` (see README.md). Prints one record per line.

Usage: python ta_driver.py cases.jsonl <port>
"""

from __future__ import annotations

import json
import sys
from typing import Any

import trio

from trio_agent import AbortController
from trio_agent._messages import Message, Model
from trio_agent._streaming import LlmContext, StreamOptions
from trio_agent.models import Models
from trio_agent.serialization import from_dict, to_dict

_OPTION_NAMES = {
    "reasoning": "reasoning",
    "maxTokens": "max_tokens",
    "temperature": "temperature",
    "sessionId": "session_id",
    "thinkingBudgets": "thinking_budgets",
    "headers": "headers",
    "maxRetries": "max_retries",
    "maxRetryDelayMs": "max_retry_delay_ms",
    "apiKey": "api_key",
}


def scrub(value: Any) -> Any:
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if k != "partial"}
    return value


async def run_case(models: Models, case: dict[str, Any], port: str) -> dict[str, Any]:
    wire_model = dict(case["model"])
    wire_model["baseUrl"] = f"http://127.0.0.1:{port}/ta/{case['id']}{wire_model.get('baseUrl', '')}"
    raw = {"apiKey": "sk-diff-0123456789", **case.get("options", {})}
    if "cacheRetention" in raw:  # pi's option is a compat switch of the model here
        wire_model["compat"] = {**(wire_model.get("compat") or {}), "cacheRetention": raw.pop("cacheRetention")}
    model = from_dict(wire_model, Model)
    messages = [from_dict(m, Message) for m in case["context"]["messages"]]
    controller = AbortController()
    options = StreamOptions(
        signal=controller.signal, **{_OPTION_NAMES[k]: v for k, v in raw.items()}
    )
    record: dict[str, Any] = {"id": case["id"], "events": []}
    try:
        n = 0
        async for event in models.stream_simple(model, LlmContext(messages=messages), options):
            record["events"].append(scrub(to_dict(event)))
            n += 1
            if case.get("abortAfter") == n:
                controller.abort()
    except Exception as exc:  # what the caller would see
        record["thrown"] = str(exc)
    return record


async def main(path: str, port: str) -> None:
    with open(path, encoding="utf-8") as lines:
        cases = [json.loads(line) for line in lines if line.strip()]
    async with Models() as models:
        for case in cases:
            record = await run_case(models, case, port)
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2])
