"""Python driver: runs each scenario (JSON Lines) on trio_agent's Agent with a scripted
stream function and prints one normalized record per line, in the same form as
pi_driver.mjs (see README.md).

Usage: python ta_driver.py scenarios.jsonl > ta.jsonl
"""

from __future__ import annotations

import json
import sys
import time

import trio

import trio_agent as ta
from trio_agent.serialization import to_json

MODEL = ta.Model(
    id="faux-1", name="Faux", api="faux-diff", provider="faux-diff",
    base_url="http://localhost:0", reasoning=False, input=["text"],
    cost=ta.ModelCost(input=0, output=0, cache_read=0, cache_write=0),
    context_window=1_000_000, max_tokens=100_000,
)
ZERO_USAGE = ta.Usage(input=0, output=0, cache_read=0, cache_write=0, total_tokens=0,
                      cost=ta.Cost(input=0, output=0, cache_read=0, cache_write=0, total=0))
END_OF_SCRIPT = {"blocks": [{"type": "text", "deltas": ["(end of script)"]}], "end": "normal"}


def js(value) -> str:
    """JSON.stringify text of a plain value (numbers written as JavaScript does)."""
    return to_json(value)


def make_stream_fn(script):
    calls = 0

    async def stream_fn(model, context, options):
        nonlocal calls
        reply = script[calls] if calls < len(script) else END_OF_SCRIPT
        calls += 1
        ts = int(time.time() * 1000)
        content: list = []

        def snap(stop_reason="stop", error_message=None):
            return ta.AssistantMessage(content=list(content), api=model.api, provider=model.provider,
                                       model=model.id, usage=ZERO_USAGE, stop_reason=stop_reason,
                                       error_message=error_message, timestamp=ts)

        yield ta.StartEvent(partial=snap())
        has_tool = False
        for i, b in enumerate(reply["blocks"]):
            if b["type"] == "text":
                content.append(ta.TextContent(text=""))
                yield ta.TextStartEvent(content_index=i, partial=snap())
                t = ""
                for d in b["deltas"]:
                    t += d
                    content[i] = ta.TextContent(text=t)
                    yield ta.TextDeltaEvent(content_index=i, delta=d, partial=snap())
                yield ta.TextEndEvent(content_index=i, content=t, partial=snap())
            else:
                has_tool = True
                content.append(ta.ToolCall(id=b["id"], name=b["name"], arguments={}))
                yield ta.ToolCallStartEvent(content_index=i, partial=snap())
                yield ta.ToolCallDeltaEvent(content_index=i, delta=json.dumps(b["arguments"]),
                                            partial=snap())
                call = ta.ToolCall(id=b["id"], name=b["name"], arguments=dict(b["arguments"]))
                content[i] = call
                yield ta.ToolCallEndEvent(content_index=i, tool_call=call, partial=snap())
        if reply["end"] == "error":
            yield ta.ErrorEvent(reason="error", error=snap("error", reply["error_message"]))
            return
        reason = "length" if reply["end"] == "length" else "toolUse" if has_tool else "stop"
        yield ta.DoneEvent(reason=reason, message=snap(reason))

    return stream_fn


def make_tools(scn):
    calls = {b["id"]: b for r in scn["script"] for b in r["blocks"] if b["type"] == "toolCall"}

    async def run(call_id, on_update):
        s = calls.get(call_id, {"delay_ms": 0, "updates": 0})
        for u in range(s["updates"]):
            if on_update is not None:
                on_update(ta.AgentToolResult(content=[ta.TextContent(text=f"update {u} of {call_id}")],
                                             details={}))
            await trio.sleep(0.005)
        if s["delay_ms"] > 0:
            await trio.sleep(s["delay_ms"] / 1000)

    async def echo(tool_call_id, params, signal=None, on_update=None):
        await run(tool_call_id, on_update)
        s = calls.get(tool_call_id, {})
        return ta.AgentToolResult(content=[ta.TextContent(text=f"echo {js(params)}")], details={},
                                  is_error=True if s.get("soft_error") else None,
                                  terminate=True if s.get("terminate") else None)

    async def fail(tool_call_id, params, signal=None, on_update=None):
        await run(tool_call_id, on_update)
        raise RuntimeError(f"fail {js(params)}")

    async def count(tool_call_id, params, signal=None, on_update=None):
        await run(tool_call_id, on_update)
        return ta.AgentToolResult(content=[ta.TextContent(text=f"count {js(params)}")], details={})

    msg_schema = {"type": "object", "properties": {"msg": {"type": "string"}}}
    return [
        ta.AgentTool(name="echo", label="echo", description="echo", parameters=msg_schema, execute=echo,
                     execution_mode="sequential" if scn.get("echo_sequential") else None),
        ta.AgentTool(name="fail", label="fail", description="fail", parameters=msg_schema, execute=fail),
        ta.AgentTool(name="count", label="count", description="count",
                     parameters={"type": "object", "properties": {"n": {"type": "number"}},
                                 "required": ["n"]},
                     execute=count),
    ]


def text_of(content) -> str:
    if isinstance(content, str):
        return content
    return "|".join(c["text"] if c["type"] == "text" else f"[{c['type']}]" for c in content or [])


def norm_message(msg) -> dict:
    m = json.loads(to_json(msg))
    out = {"role": m["role"]}
    if m["role"] == "assistant":
        out["content"] = [
            {"type": "text", "text": c["text"]} if c["type"] == "text"
            else {"type": "toolCall", "id": c["id"], "name": c["name"], "arguments": c["arguments"]}
            if c["type"] == "toolCall" else {"type": c["type"]}
            for c in m["content"]
        ]
        out["stopReason"] = m["stopReason"]
        out["errorMessage"] = m.get("errorMessage")
    elif m["role"] == "toolResult":
        out["toolCallId"] = m["toolCallId"]
        out["toolName"] = m["toolName"]
        out["isError"] = m["isError"]
        out["text"] = text_of(m["content"])
    elif m["role"] == "system":
        out["text"] = text_of(m["content"])
        out["toolsAdded"] = [t["name"] for t in m.get("toolsAdded") or []]
        out["toolsRemoved"] = m.get("toolsRemoved") or []
    else:
        out["text"] = text_of(m["content"])
    return out


def user_msg(text):
    return ta.UserMessage(content=[ta.TextContent(text=text)])


async def run_scenario(scn) -> dict:
    kwargs = {}
    if scn["finish_turn"]:
        turns = 0

        async def finish_turn(ctx, signal=None):
            nonlocal turns
            turns += 1
            if turns == scn["finish_turn"]["after_turn"]:
                return ta.AgentTurnDecision(action=scn["finish_turn"]["action"])
            return None

        kwargs["finish_turn"] = finish_turn
    agent = ta.Agent(
        initial_state=ta.AgentInitialState(system_prompt="diff", model=MODEL, tools=make_tools(scn),
                                           messages=[]),
        stream_fn=make_stream_fn(scn["script"]),
        tool_execution=scn["tool_execution"],
        steering_mode=scn["steering_mode"],
        follow_up_mode=scn["follow_up_mode"],
        **kwargs,
    )
    events: list[str] = []
    tool_ends: list[dict] = []
    agent_end = None

    def listener(ev, signal=None):
        nonlocal agent_end
        t = ev.type
        if t in ("message_start", "message_end"):
            events.append(f"{t}:{ev.message.role}")
        elif t == "message_update":
            events.append(f"{t}:{ev.assistant_message_event.type}")
        elif t in ("tool_execution_start", "tool_execution_update"):
            events.append(f"{t}:{ev.tool_call_id}")
        elif t == "tool_execution_end":
            events.append(f"{t}:{ev.tool_call_id}")
            result = json.loads(to_json(ev.result)) if ev.result is not None else {}
            tool_ends.append({"id": ev.tool_call_id, "isError": ev.is_error,
                              "text": text_of(result.get("content"))})
        elif t == "agent_end":
            events.append(t)
            agent_end = [m.role for m in ev.messages]
        else:
            events.append(t)

    agent.subscribe(listener)
    for s in scn["steer"]:
        agent.steer(user_msg(s))
    for f in scn["follow_up"]:
        agent.follow_up(user_msg(f))
    raised = None
    try:
        await agent.prompt(scn["prompt"])
        await agent.wait_for_idle()
    except Exception as e:  # noqa: BLE001
        raised = str(e)
    return {
        "id": scn["id"],
        "events": events,
        "tool_ends": tool_ends,
        "transcript": [norm_message(m) for m in agent.state.messages],
        "agent_end": agent_end,
        "error_message": agent.state.error_message,
        "queued_left": agent.has_queued_messages(),
        "raised": raised,
    }


async def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rec = await run_scenario(json.loads(line))
                sys.stdout.write(json.dumps(rec, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
