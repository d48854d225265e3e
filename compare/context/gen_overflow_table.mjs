// Dumps pi-ai 1.6.0's overflow patterns and evaluates its isContextOverflow,
// isRecoverableLength and token estimates on a set of cases, as the JSON fixture
// tests/context/overflow_table.json. Run from this folder after `npm ci`:
//   node gen_overflow_table.mjs > ../../tests/context/overflow_table.json
import { getOverflowPatterns, isContextOverflow, isRecoverableLength } from "@earendil-works/pi-ai";
import { estimateContextTokens, estimateMessageTokens } from "@earendil-works/pi-ai/utils/estimate";

const patterns = getOverflowPatterns();

// Wordings the providers send (pi-ai's own examples), plus variants that probe the
// regular-expression details a port can get wrong: case, surrounding text, digits and
// commas, line terminators, non-ASCII spaces and letters, anchors.
const wordings = [
  "prompt is too long: 213462 tokens > 200000 maximum",
  "Prompt too long",
  '{"code":"1261","message":"Prompt too long"}',
  '{"code":"1261","message":"Prompt exceeds max length"}',
  '413 {"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}',
  "Input is too long for requested model.",
  "Your input exceeds the context window of this model",
  "Requested token count exceeds the model's maximum context length of 131072 tokens",
  "Requested token count exceeds the models maximum context length of 131,072 tokens",
  "exceeds maximum context length of 1 token",
  "Input length (265330) exceeds model's maximum context length (262144).",
  "Input length (265330) exceeds model's maximum context length   (262,144).",
  "exceeds the maximum context length",
  "exceeds the model's maximum context length",
  "litellm.ContextWindowExceededError: litellm.BadRequestError: Context Window exceeded for given call.",
  "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)",
  "The input token count\n(1196265) exceeds the maximum number of tokens allowed",
  "The input token count\u2028(1196265) exceeds the maximum number of tokens allowed",
  "The input token count\u00a0(1196265) exceeds the maximum number of tokens allowed",
  "This model's maximum prompt length is 131072 but the request contains 537812 tokens",
  "maximum prompt length is \u0661\u0662",
  "Please reduce the length of the messages or completion",
  "This endpoint's maximum context length is 8192 tokens. However, you requested about 9000 tokens",
  "maximum context length is 8,192 tokens",
  "Input length 9000 exceeds the maximum allowed input length of 8192 tokens.",
  "Input length 9000 exceeds maximum allowed input length of 8,192 token",
  "The input (9000 tokens) is longer than the model's context length (8192 tokens).",
  "The input (9000 tokens) is longer than the models context length (8192 tokens).",
  "prompt token count of 130000 exceeds the limit of 128000",
  "the request exceeds the available context size, try increasing it",
  "tokens to keep from the initial prompt is greater than the context length",
  "invalid params, context window exceeds limit",
  "Your request exceeded model token limit: 262144 (requested: 300000)",
  "Prompt contains 140000 tokens and 0 draft tokens, too large for model with 131072 maximum context length",
  "Prompt has 9,000 tokens, but the configured context size is 8,192 tokens",
  "Prompt has 1 token, but the configured context size is 0 token",
  "finish_reason: model_context_window_exceeded",
  "prompt too long; exceeded max context length by 1200 tokens",
  "prompt too long; exceeded context length by 1200 tokens",
  "<400> InternalError.Algo.InvalidParameter: Range of input length should be [1, 129024]",
  "context_length_exceeded",
  "Context length exceeded",
  "context length_exceeded",
  "Too many tokens in the request",
  "Token limit exceeded",
  "github-copilot API error (413): {\"message\":\"failed to parse request\",\"code\":\"\"}",
  "anthropic API error (413): Request Entity Too Large",
  "Some-Provider_2 API error (413): x",
  "413",
  "413 Payload Too Large",
  "413:",
  "413\n",
  "413\u00a0Payload",
  "413\u2028",
  "413Payload",
  "4130 tokens",
  "Error: 413 Payload Too Large",
  "upstream said: API error (413):",
  "400 status code (no body)",
  "413 status code (no body)",
  "400(no body)",
  "413 \u00a0status code\u00a0(no body)",
  "400 status code (no body) trailing",
  "500 status code (no body)",
  "ThrottlingException: Too many tokens, please wait before trying again.",
  "Throttling error: Too many tokens, please wait before trying again.",
  "Service unavailable: prompt is too long",
  "429 Too Many Requests: prompt is too long",
  "Rate limit reached: context_length_exceeded",
  "rate-limit: context_length_exceeded",
  "PROMPT IS TOO LONG",
  "prompt is too lonG",
  "prompt \u212ais too long",
  "context window exceeded",
  "Context\u00a0window exceeded",
  "Internal server error",
  "Connection refused",
  "",
];

function assistant(fields) {
  return {
    role: "assistant",
    content: [],
    api: "openai-completions",
    provider: fields.provider ?? "openai",
    model: "m",
    usage: {
      input: fields.input ?? 0,
      output: fields.output ?? 0,
      cacheRead: fields.cacheRead ?? 0,
      cacheWrite: fields.cacheWrite ?? 0,
      totalTokens: 0,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
    },
    stopReason: fields.stopReason,
    ...(fields.errorMessage !== undefined ? { errorMessage: fields.errorMessage } : {}),
    timestamp: 0,
  };
}

const cases = [];
for (const text of wordings) {
  for (const provider of ["openai", "cerebras"]) {
    for (const stopReason of ["error", "stop"]) {
      cases.push({ provider, stopReason, errorMessage: text, contextWindow: null });
    }
  }
}
// Silent overflow (usage above the window) and the length stop that filled the window.
for (const stopReason of ["stop", "length", "toolUse", "error", "aborted"]) {
  for (const [input, cacheRead, output] of [
    [1000, 0, 0], [1001, 0, 0], [600, 401, 0], [990, 0, 0], [989, 0, 0], [989, 1, 0],
    [990, 0, 1], [2000, 0, 5], [0, 0, 0],
  ]) {
    for (const contextWindow of [1000, 0, null]) {
      cases.push({ provider: "zai", stopReason, input, cacheRead, output, contextWindow });
    }
  }
}
cases.push({ provider: "openai", stopReason: "error", errorMessage: "prompt is too long", input: 5, contextWindow: 1 });
cases.push({ provider: "openai", stopReason: "error", contextWindow: null });

const overflowCases = cases.map((c) => {
  const message = assistant(c);
  const text = message.errorMessage;
  return {
    ...c,
    expected: isContextOverflow(message, c.contextWindow ?? undefined),
    // Which patterns match the text on their own (indices into `patterns`).
    matching: text === undefined ? [] : patterns.flatMap((p, i) => (p.test(text) ? [i] : [])),
  };
});

const recoverableCases = [];
for (const stopReason of ["length", "stop", "error"]) {
  for (const output of [0, 99, 100, 101]) {
    for (const desired of [100, 0, -1]) {
      const message = assistant({ stopReason, output });
      recoverableCases.push({ stopReason, output, desired, expected: isRecoverableLength(message, desired) });
    }
  }
}

// Token estimates on messages in the wire format (the fixture loads them with
// trio_agent's serializer).
const usage = (total, input = 0, output = 0) => ({
  input, output, cacheRead: 0, cacheWrite: 0, totalTokens: total,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
});
const tool = { name: "read", description: "Read a file \u00e9\ud83d\ude00", parameters: { type: "object", properties: { path: { type: "string" } } } };
const reply = (content, extra = {}) => ({
  role: "assistant", content, api: "openai-completions", provider: "p", model: "m",
  usage: usage(0), stopReason: "stop", timestamp: 10, ...extra,
});
const estimateMessages = [
  { role: "system", content: "Sys.", timestamp: 0 },
  { role: "system", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }], sections: { rules: "Be brief.", gone: null, empty: "" }, timestamp: 0 },
  { role: "system", content: "", toolsAdded: [tool], toolsRemoved: [{ name: "old" }], timestamp: 0 },
  { role: "system", content: "x", toolsAdded: [], toolsRemoved: [], timestamp: 0 },
  { role: "user", content: "Hello", timestamp: 1 },
  { role: "user", content: "\ud83d\ude00".repeat(7), timestamp: 1 },
  { role: "user", content: [{ type: "text", text: "abc" }, { type: "image", data: "AAAA", mimeType: "image/png" }], timestamp: 1 },
  { role: "user", content: [], timestamp: 1 },
  reply([{ type: "text", text: "Hi there" }, { type: "thinking", thinking: "hmm" }, { type: "toolCall", id: "c1", name: "read", arguments: { path: "/a \u00e9", n: 1.5, list: [1, 2], nested: { k: null } } }]),
  reply([{ type: "toolCall", id: "c2", name: "x", arguments: {} }]),
  reply([]),
  { role: "toolResult", toolCallId: "c1", toolName: "read", content: [{ type: "text", text: "file body ".repeat(13) }], isError: false, timestamp: 11 },
];
const perMessage = estimateMessages.map((message) => ({ message, tokens: estimateMessageTokens(message) }));

const transcripts = [];
const sys = { role: "system", content: "You are terse.", timestamp: 0 };
const u = (text, timestamp) => ({ role: "user", content: text, timestamp });
const a = (text, timestamp, total, stopReason = "stop", input = 0) => reply([{ type: "text", text }], { timestamp, usage: usage(total, input), stopReason });
transcripts.push([]);
transcripts.push([sys, u("hello there", 1)]);
transcripts.push([sys, u("hello there", 1), a("answer", 2, 120), u("and now?", 3)]);
transcripts.push([sys, u("q", 1), a("one", 2, 120), u("q2", 3), a("two", 4, 300), u("q3", 5)]);
transcripts.push([sys, u("q", 1), a("one", 2, 120), u("q2", 3), a("two", 4, 300, "error"), u("q3", 5)]);
transcripts.push([sys, u("q", 1), a("one", 2, 120), u("q2", 3), a("two", 4, 300, "aborted")]);
transcripts.push([sys, u("q", 1), a("one", 2, 0, "stop", 55), u("q2", 3)]);
transcripts.push([sys, u("q", 1), a("one", 2, 0)]);
// A summary inserted after the response (newer timestamp): its usage no longer applies.
transcripts.push([sys, u("summary of earlier work", 50), a("kept answer", 20, 900), u("next", 60)]);
transcripts.push([sys, u("q", 5), a("same time", 5, 77), u("q2", 6)]);
const contextCases = transcripts.map((messages) => ({ messages, expected: estimateContextTokens(messages) }));

process.stdout.write(JSON.stringify({
  generator: "compare/context/gen_overflow_table.mjs",
  source: "@earendil-works/pi-ai 1.6.0 dist/utils/overflow.js, dist/utils/estimate.js",
  patterns: patterns.map((p) => ({ source: p.source, flags: p.flags })),
  overflow: overflowCases,
  recoverableLength: recoverableCases,
  messageTokens: perMessage,
  contextTokens: contextCases,
}, null, 1) + "\n");
