// Node driver of the provider differential check: streams each case (JSON Lines file) through
// pi-ai 1.6.0's `streamSimple` against the loopback server and prints one record per line:
// {id, events: [each event as JSON without `partial`], thrown?}.
//
// Usage: node pi_driver.mjs cases.jsonl <port>   (PI_MODULES=<node_modules>, default ../../bench/pi/ts/node_modules)

import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = process.env.PI_MODULES ?? path.join(here, "..", "..", "bench", "pi", "ts", "node_modules");
const dir = path.join(modules, "@earendil-works", "pi-ai");
const ai = await import(pathToFileURL(path.join(dir, "dist", "compat.js")).href);
const { streamSimple } = ai;

const [casesFile, port] = process.argv.slice(2);
const cases = readFileSync(casesFile, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));

function scrub(value) {
	if (Array.isArray(value)) return value.map(scrub);
	if (value && typeof value === "object") {
		const out = {};
		for (const [k, v] of Object.entries(value)) {
			if (k === "partial" || v === undefined) continue;
			out[k] = scrub(v);
		}
		return out;
	}
	return value;
}

for (const c of cases) {
	const model = { ...c.model, baseUrl: `http://127.0.0.1:${port}/pi/${c.id}${c.model.baseUrl ?? ""}` };
	const controller = new AbortController();
	// trio_agent reads pi's `cacheRetention` option from `model.compat.cacheRetention` (documented).
	const retention = c.model.compat?.cacheRetention;
	const options = {
		apiKey: "sk-diff-0123456789",
		...(retention !== undefined ? { cacheRetention: retention } : {}),
		...c.options,
		signal: controller.signal,
	};
	const record = { id: c.id, events: [] };
	try {
		const stream = streamSimple(model, c.context, options);
		let n = 0;
		for await (const event of stream) {
			record.events.push(scrub(JSON.parse(JSON.stringify(event))));
			n += 1;
			if (c.abortAfter !== undefined && n === c.abortAfter) controller.abort();
		}
	} catch (err) {
		record.thrown = String(err?.message ?? err);
	}
	process.stdout.write(`${JSON.stringify(record)}\n`);
}
