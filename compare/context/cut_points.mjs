// Runs pi-coding-agent 1.6.0's compaction preparation on transcripts read from stdin
// and prints what it decides, for tests/test_compaction_pi.py to compare with
// trio_agent.compaction. Input: {"cases": [{"messages": [wire messages], "keep": N}]};
// a transcript may hold one {"role": "compactionSummary"} message (a previous
// compaction), preceded by the system message it replays.
// Output: {"results": [...]} with, per case, findCutPoint over the part after the
// summary, prepareCompaction over the equivalent session branch, estimateTokens of every
// message and serializeConversation of the messages to summarize.
import { readFileSync } from "node:fs";
// The package index needs Node 22 (fs.globSync in unrelated modules); the compaction
// modules themselves run on Node 20, so they are imported by path.
const base = new URL("./node_modules/@earendil-works/pi-coding-agent/dist/core/", import.meta.url);
const { findCutPoint, estimateTokens, prepareCompaction } = await import(new URL("compaction/compaction.js", base));
const { serializeConversation, computeFileLists, SUMMARIZATION_SYSTEM_PROMPT } = await import(new URL("compaction/utils.js", base));
const { convertToLlm, COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX } = await import(new URL("messages.js", base));

const input = JSON.parse(readFileSync(0, "utf8"));
const iso = (ms) => new Date(ms).toISOString();

function run({ messages, keep }) {
  const summaryIndex = messages.findIndex((m) => m.role === "compactionSummary");
  // findCutPoint over entries, the summary standing as pi's compaction entry.
  // An application message the model never sees ("custom-entry") is a custom entry.
  const entries = messages.map((message, i) =>
    message.role === "custom-entry"
      ? { type: "custom", id: `e${i}`, parentId: i ? `e${i - 1}` : null, timestamp: iso(message.timestamp),
          customType: "note", data: { text: message.text } }
      : message.role === "compactionSummary"
      ? { type: "compaction", id: `e${i}`, parentId: i ? `e${i - 1}` : null, timestamp: iso(message.timestamp),
          summary: message.summary, firstKeptEntryId: "none", tokensBefore: message.tokensBefore,
          ...(message.details ? { details: message.details } : {}) }
      : { type: "message", id: `e${i}`, parentId: i ? `e${i - 1}` : null, timestamp: iso(message.timestamp), message });
  const cut = findCutPoint(entries, summaryIndex + 1, entries.length, keep);

  // prepareCompaction over the session branch that projects to this transcript: an old
  // entry the compaction summarized, the compaction entry carrying the system message
  // before the summary, then every message after the summary.
  let branch;
  if (summaryIndex < 0) {
    branch = entries;
  } else {
    const summary = messages[summaryIndex];
    const system = summaryIndex > 0 ? messages[summaryIndex - 1] : undefined;
    branch = [
      { type: "message", id: "old", parentId: null, timestamp: iso(0), message: { role: "user", content: "old", timestamp: 0 } },
      { ...entries[summaryIndex], parentId: "old", ...(system ? { systemMessage: system } : {}) },
      ...entries.slice(summaryIndex + 1).map((entry, i) => ({ ...entry, parentId: i ? entry.parentId : entries[summaryIndex].id })),
    ];
  }
  const preparation = prepareCompaction(branch, { enabled: true, reserveTokens: 16384, keepRecentTokens: keep });
  let prepared = null;
  if (preparation) {
    const files = computeFileLists(preparation.fileOps);
    prepared = {
      firstKeptIndex: Number(preparation.firstKeptEntryId.slice(1)),
      isSplitTurn: preparation.isSplitTurn,
      messagesToSummarize: preparation.messagesToSummarize,
      turnPrefixMessages: preparation.turnPrefixMessages,
      previousSummary: preparation.previousSummary ?? null,
      readFiles: files.readFiles,
      modifiedFiles: files.modifiedFiles,
      serialized: serializeConversation(convertToLlm(preparation.messagesToSummarize)),
      serializedPrefix: serializeConversation(convertToLlm(preparation.turnPrefixMessages)),
    };
  }
  return {
    cut: { firstKeptIndex: cut.firstKeptEntryIndex, turnStartIndex: cut.turnStartIndex, isSplitTurn: cut.isSplitTurn },
    prepared,
    tokens: messages.map((m) => estimateTokens(m)),
  };
}

process.stdout.write(JSON.stringify({
  constants: { SUMMARIZATION_SYSTEM_PROMPT, COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX },
  results: input.cases.map(run),
}) + "\n");
