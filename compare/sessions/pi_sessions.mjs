// Drives pi-coding-agent 1.6.0's SessionManager for tests/sessions/test_sessions_pi_interop.py.
//
//   node pi_sessions.mjs write DIR     pi writes a session with every kind of entry into DIR;
//                                      prints {"file", "id"}
//   node pi_sessions.mjs read FILE     prints what pi reads from FILE: {"id", "leafId",
//                                      "entries", "context": {"messages", "thinkingLevel",
//                                      "model"}} where messages are
//                                      convertToLlm(buildSessionContext().messages)
//   node pi_sessions.mjs continue FILE pi opens FILE, appends a user and an assistant message,
//                                      then prints what `read` prints
//
// The package index needs Node 22 (fs.globSync in unrelated modules); the session modules
// run on Node 20, so they are imported by path.
const base = new URL("./node_modules/@earendil-works/pi-coding-agent/dist/core/", import.meta.url);
const { SessionManager } = await import(new URL("session-manager.js", base));
const { convertToLlm } = await import(new URL("messages.js", base));

const usage = {
  input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};
const assistant = (content, stopReason = "stop") => ({
  role: "assistant", content, api: "faux", provider: "faux", model: "faux-1", usage,
  stopReason, timestamp: 1_700_000_000_500,
});

function read(manager) {
  const context = manager.buildSessionContext();
  return {
    id: manager.getSessionId(),
    leafId: manager.getLeafId(),
    entries: manager.getEntries(),
    context: {
      messages: convertToLlm(context.messages),
      thinkingLevel: context.thinkingLevel,
      model: context.model,
    },
  };
}

const [command, target] = process.argv.slice(2);
if (command === "write") {
  const manager = SessionManager.create("/work/interop", target);
  manager.appendModelChange("faux", "faux-1");
  manager.appendThinkingLevelChange("medium");
  const system = manager.appendMessage({ role: "system", content: "You are terse.", timestamp: 0 });
  const first = manager.appendMessage({ role: "user", content: "hello", timestamp: 1_700_000_000_000 });
  manager.appendMessage(assistant([{ type: "text", text: "hi" }]));
  manager.appendMessage({ role: "user", content: [{ type: "text", text: "use a tool" }], timestamp: 1_700_000_001_000 });
  manager.appendMessage(assistant([{ type: "toolCall", id: "call-1", name: "look", arguments: { q: 1 } }], "toolUse"));
  const result = manager.appendMessage({
    role: "toolResult", toolCallId: "call-1", toolName: "look",
    content: [{ type: "text", text: "seen" }], isError: false, timestamp: 1_700_000_002_000,
  });
  manager.appendLabelChange(first, "start");
  manager.appendCustomEntry("my-extension", { state: [1, 2] });
  manager.appendCustomMessageEntry("note", "a note for the model", true, { k: "v" });
  manager.appendCompaction("the start of the chat", result, 1234, { files: [] });
  const bash = manager.appendMessage({
    role: "bashExecution", command: "ls", output: "a.txt", exitCode: 0, cancelled: false,
    truncated: false, timestamp: 1_700_000_003_000,
  });
  manager.appendMessage(assistant([{ type: "text", text: "after the compaction" }]));
  manager.branchWithSummary(bash, "left a branch");
  manager.appendMessage({ role: "user", content: "on the new branch", timestamp: 1_700_000_004_000 });
  manager.appendSessionInfo("interop");
  void system;
  process.stdout.write(JSON.stringify({ file: manager.getSessionFile(), id: manager.getSessionId() }));
} else if (command === "read") {
  process.stdout.write(JSON.stringify(read(SessionManager.open(target))));
} else if (command === "continue") {
  const manager = SessionManager.open(target);
  manager.appendMessage({ role: "user", content: "from pi", timestamp: 1_700_000_009_000 });
  manager.appendMessage(assistant([{ type: "text", text: "pi answers" }]));
  process.stdout.write(JSON.stringify(read(manager)));
} else {
  process.stderr.write("usage: node pi_sessions.mjs write DIR | read FILE | continue FILE\n");
  process.exit(2);
}
