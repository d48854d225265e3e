// Node driver: runs each scenario (JSON Lines on stdin or a file) on pi's Agent with a
// scripted streamFn and prints one normalized record per line (see README.md).
//
// Usage: NODE_PATH=<dir with node_modules> node pi_driver.mjs scenarios.jsonl > pi.jsonl
// (or PI_MODULES=/path/to/node_modules; default: ../../bench/pi/ts/node_modules)

import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = process.env.PI_MODULES ?? path.join(here, "..", "..", "bench", "pi", "ts", "node_modules");
const load = async (name) => {
	// the packages are ESM-only: resolve their "." export by hand
	const dir = path.join(modules, name);
	const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
	let entry = pkg.exports?.["."] ?? pkg.main;
	while (entry && typeof entry === "object") entry = entry.import ?? entry.default;
	return import(pathToFileURL(path.join(dir, entry)).href);
};
const core = await load("@earendil-works/pi-agent-core");
const ai = await load("@earendil-works/pi-ai");
const { Agent } = core;
const { createAssistantMessageEventStream } = ai;

const MODEL = {
	id: "faux-1",
	name: "Faux",
	api: "faux-diff",
	provider: "faux-diff",
	baseUrl: "http://localhost:0",
	reasoning: false,
	input: ["text"],
	cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
	contextWindow: 1_000_000,
	maxTokens: 100_000,
};
const ZERO_USAGE = {
	input: 0,
	output: 0,
	cacheRead: 0,
	cacheWrite: 0,
	totalTokens: 0,
	cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};
const END_OF_SCRIPT = { blocks: [{ type: "text", deltas: ["(end of script)"] }], end: "normal" };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function makeStreamFn(script) {
	let calls = 0;
	return (model) => {
		const reply = script[calls++] ?? END_OF_SCRIPT;
		const stream = createAssistantMessageEventStream();
		const produce = async () => {
			const partial = {
				role: "assistant",
				content: [],
				api: model.api,
				provider: model.provider,
				model: model.id,
				usage: ZERO_USAGE,
				stopReason: "stop",
				timestamp: Date.now(),
			};
			const push = async (ev) => {
				stream.push(ev);
				await Promise.resolve();
			};
			await push({ type: "start", partial });
			let hasTool = false;
			for (let i = 0; i < reply.blocks.length; i++) {
				const b = reply.blocks[i];
				if (b.type === "text") {
					partial.content.push({ type: "text", text: "" });
					await push({ type: "text_start", contentIndex: i, partial });
					for (const d of b.deltas) {
						partial.content[i].text += d;
						await push({ type: "text_delta", contentIndex: i, delta: d, partial });
					}
					await push({ type: "text_end", contentIndex: i, content: partial.content[i].text, partial });
				} else {
					hasTool = true;
					partial.content.push({ type: "toolCall", id: b.id, name: b.name, arguments: {} });
					await push({ type: "toolcall_start", contentIndex: i, partial });
					await push({ type: "toolcall_delta", contentIndex: i, delta: JSON.stringify(b.arguments), partial });
					partial.content[i].arguments = b.arguments;
					await push({ type: "toolcall_end", contentIndex: i, toolCall: partial.content[i], partial });
				}
			}
			if (reply.end === "error") {
				partial.stopReason = "error";
				partial.errorMessage = reply.error_message;
				stream.push({ type: "error", reason: "error", error: partial });
				return;
			}
			partial.stopReason = reply.end === "length" ? "length" : hasTool ? "toolUse" : "stop";
			stream.push({ type: "done", reason: partial.stopReason, message: partial });
		};
		queueMicrotask(produce);
		return stream;
	};
}

function makeTools(scn) {
	const calls = new Map();
	for (const r of scn.script) for (const b of r.blocks) if (b.type === "toolCall") calls.set(b.id, b);
	const spec = (id) => calls.get(id) ?? { delay_ms: 0, updates: 0 };
	const run = async (id, onUpdate) => {
		const s = spec(id);
		for (let u = 0; u < s.updates; u++) {
			onUpdate?.({ content: [{ type: "text", text: `update ${u} of ${id}` }], details: {} });
			await sleep(5);
		}
		if (s.delay_ms > 0) await sleep(s.delay_ms);
	};
	return [
		{
			name: "echo",
			label: "echo",
			description: "echo",
			parameters: { type: "object", properties: { msg: { type: "string" } } },
			...(scn.echo_sequential ? { executionMode: "sequential" } : {}),
			execute: async (id, params, _signal, onUpdate) => {
				await run(id, onUpdate);
				const s = spec(id);
				const result = { content: [{ type: "text", text: `echo ${JSON.stringify(params)}` }], details: {} };
				if (s.soft_error) result.isError = true;
				if (s.terminate) result.terminate = true;
				return result;
			},
		},
		{
			name: "fail",
			label: "fail",
			description: "fail",
			parameters: { type: "object", properties: { msg: { type: "string" } } },
			execute: async (id, params, _signal, onUpdate) => {
				await run(id, onUpdate);
				throw new Error(`fail ${JSON.stringify(params)}`);
			},
		},
		{
			name: "count",
			label: "count",
			description: "count",
			parameters: { type: "object", properties: { n: { type: "number" } }, required: ["n"] },
			execute: async (id, params, _signal, onUpdate) => {
				await run(id, onUpdate);
				return { content: [{ type: "text", text: `count ${JSON.stringify(params)}` }], details: {} };
			},
		},
	];
}

const userMsg = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: Date.now() });

function textOf(content) {
	if (typeof content === "string") return content;
	return (content ?? []).map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join("|");
}

function normMessage(m) {
	const out = { role: m.role };
	if (m.role === "assistant") {
		out.content = m.content.map((c) =>
			c.type === "text"
				? { type: "text", text: c.text }
				: c.type === "toolCall"
					? { type: "toolCall", id: c.id, name: c.name, arguments: c.arguments }
					: { type: c.type },
		);
		out.stopReason = m.stopReason;
		out.errorMessage = m.errorMessage ?? null;
	} else if (m.role === "toolResult") {
		out.toolCallId = m.toolCallId;
		out.toolName = m.toolName;
		out.isError = m.isError;
		out.text = textOf(m.content);
	} else if (m.role === "system") {
		out.text = textOf(m.content);
		out.toolsAdded = (m.toolsAdded ?? []).map((t) => t.name);
		out.toolsRemoved = m.toolsRemoved ?? [];
	} else {
		out.text = textOf(m.content);
	}
	return out;
}

async function runScenario(scn) {
	const opts = {
		initialState: { systemPrompt: "diff", model: MODEL, tools: makeTools(scn), messages: [] },
		streamFn: makeStreamFn(scn.script),
		toolExecution: scn.tool_execution,
		steeringMode: scn.steering_mode,
		followUpMode: scn.follow_up_mode,
	};
	if (scn.finish_turn) {
		let turns = 0;
		opts.finishTurn = async () => {
			turns++;
			if (turns === scn.finish_turn.after_turn) return { action: scn.finish_turn.action };
			return undefined;
		};
	}
	const agent = new Agent(opts);
	const events = [];
	const toolEnds = [];
	let agentEnd = null;
	agent.subscribe((ev) => {
		switch (ev.type) {
			case "message_start":
			case "message_end":
				events.push(`${ev.type}:${ev.message.role}`);
				break;
			case "message_update":
				events.push(`${ev.type}:${ev.assistantMessageEvent.type}`);
				break;
			case "tool_execution_start":
			case "tool_execution_update":
				events.push(`${ev.type}:${ev.toolCallId}`);
				break;
			case "tool_execution_end":
				events.push(`${ev.type}:${ev.toolCallId}`);
				toolEnds.push({ id: ev.toolCallId, isError: ev.isError, text: textOf(ev.result?.content) });
				break;
			case "agent_end":
				events.push(ev.type);
				agentEnd = ev.messages.map((m) => m.role);
				break;
			default:
				events.push(ev.type);
		}
	});
	for (const s of scn.steer) agent.steer(userMsg(s));
	for (const f of scn.follow_up) agent.followUp(userMsg(f));
	let raised = null;
	try {
		await agent.prompt(scn.prompt);
		await agent.waitForIdle();
	} catch (e) {
		raised = String(e?.message ?? e);
	}
	return {
		id: scn.id,
		events,
		tool_ends: toolEnds,
		transcript: agent.state.messages.map(normMessage),
		agent_end: agentEnd,
		error_message: agent.state.errorMessage ?? null,
		queued_left: agent.hasQueuedMessages(),
		raised,
	};
}

const input = readFileSync(process.argv[2] ?? 0, "utf8");
for (const line of input.split("\n")) {
	if (!line.trim()) continue;
	const rec = await runScenario(JSON.parse(line));
	process.stdout.write(`${JSON.stringify(rec)}\n`);
}
