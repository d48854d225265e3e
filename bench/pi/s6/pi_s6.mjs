// Scenario S6 against pi-ai 1.6.0's streamSimple (Node), on the bytes ta_s6.py gets.
//
// Usage: node pi_s6.mjs <api> <kind> [n]   (PI_MODULES=<node_modules>, default ../ts/node_modules)
// Starts the loopback server (server.py, with python3 or $S6_PYTHON), streams one warm-up
// response of n/10 deltas, then the measured one, and prints one JSON line with the same
// metrics as ta_s6.py: us_per_delta, wall_ms, peak_rss_mb, rss_delta_mb.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = process.env.PI_MODULES ?? path.join(here, "..", "ts", "node_modules");
const ai = await import(pathToFileURL(path.join(modules, "@earendil-works", "pi-ai", "dist", "compat.js")).href);
const { streamSimple } = ai;

const [api, kind, nArg] = process.argv.slice(2);
const n = nArg ? Number(nArg) : kind === "text" ? 20000 : 2000;
const warm = Math.max(Math.floor(n / 10), 1);

// The expected final content, as bodies.py builds it (printed by a helper call of python).
function expected(python, k) {
	return new Promise((resolve, reject) => {
		const p = spawn(python, ["-c", `import bodies, json, sys; sys.stdout.write(json.dumps(bodies.expected(${JSON.stringify(kind)}, ${k})))`], { cwd: here });
		let out = "";
		p.stdout.on("data", (d) => (out += d));
		p.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error("expected() failed"))));
	});
}

function model(port, k) {
	const provider = api === "anthropic-messages" ? "anthropic" : "openai";
	return {
		id: "model-a", name: "Model A", api, provider, baseUrl: `http://127.0.0.1:${port}/${api}/${kind}/${k}/v1`,
		reasoning: false, input: ["text"], cost: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
		contextWindow: 200000, maxTokens: 32000,
	};
}

async function streamOnce(port, k) {
	const context = { messages: [{ role: "user", content: "go", timestamp: Date.now() }] };
	let deltas = 0;
	let final;
	const t0 = process.hrtime.bigint();
	for await (const event of streamSimple(model(port, k), context, {
		apiKey: "sk-s6-0123456789",
		signal: new AbortController().signal, // as the agent streams (and ta_s6.py does)
	})) {
		const t = event.type;
		if ((t === "text_delta" || t === "toolcall_delta") && event.delta) deltas += 1;
		else if (t === "done") final = event.message;
		else if (t === "error") throw new Error(event.error.errorMessage);
	}
	const wall = Number(process.hrtime.bigint() - t0) / 1e6;
	return { wall, deltas, final };
}

function check(r, k, want) {
	if (r.deltas !== k) throw new Error(`${r.deltas} deltas, expected ${k}`);
	const block = r.final.content[0];
	const got = kind === "text" ? block.text : block.arguments;
	if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error("final message differs from what was sent");
}

const python = process.env.S6_PYTHON ?? "python3";
const server = spawn(python, [path.join(here, "server.py"), "--prepare", `${api}:${kind}:${n}`, `${api}:${kind}:${warm}`],
	{ cwd: here, stdio: ["pipe", "pipe", "inherit"] });
const port = Number(await new Promise((resolve) => createInterface({ input: server.stdout }).once("line", resolve)));
try {
	const [wantWarm, want] = await Promise.all([expected(python, warm), expected(python, n)]);
	check(await streamOnce(port, warm), warm, wantWarm);
	globalThis.gc?.();
	const rss0 = process.memoryUsage().rss;
	const r = await streamOnce(port, n);
	const rss1 = process.memoryUsage().rss;
	check(r, n, want);
	const peak = process.resourceUsage().maxRSS * 1024;
	console.log(JSON.stringify({
		impl: "pi-ai 1.6.0", scenario: `s6-${api}-${kind}`, deltas: n, wall_ms: r.wall, us_per_delta: (r.wall * 1000) / n,
		peak_rss_mb: Math.round((peak / 2 ** 20) * 10) / 10, rss_delta_mb: Math.round(((rss1 - rss0) / 2 ** 20) * 10) / 10,
	}));
} finally {
	server.stdin.end();
}
