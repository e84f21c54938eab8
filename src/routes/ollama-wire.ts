/**
 * Pieces of Ollama's answers shared by `/api/chat` and `/api/generate`: tool calls as its API
 * writes them, and the timing and count fields of a final object.
 */
import { randomInt } from "node:crypto";
import type { ChatToolCall } from "../api/chat-types.js";
import type { FinalStats } from "../api/types.js";
import type { GenerateStats, ToolCallSpec } from "../chat/types.js";

/**
 * Parsed calls as Ollama's API writes them (`index` counts from `first`: the calls streamed before);
 * with `ids` (/api/chat) each gets Ollama's `call_` and 8 random lower-case letters or digits.
 */
export function toOllamaCalls(calls: ToolCallSpec[], first = 0, ids = false): ChatToolCall[] {
  return calls.map((c, i) => ({ ...(ids ? { id: callId() } : {}), function: { index: first + i, name: c.name, arguments: c.arguments } }));
}

const ID_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789";
function callId(): string {
  return `call_${Array.from({ length: 8 }, () => ID_CHARS[randomInt(ID_CHARS.length)]).join("")}`;
}

/** The timing and count fields of a final answer (nanoseconds). */
export function finalStats(started: bigint, loadNs: number, stats: GenerateStats): FinalStats {
  return {
    total_duration: Number(process.hrtime.bigint() - started),
    load_duration: loadNs,
    prompt_eval_count: stats.promptEvalCount,
    prompt_eval_duration: stats.promptEvalNs,
    eval_count: stats.evalCount,
    eval_duration: stats.evalNs,
    truncated_tokens: stats.truncatedTokens,
    // lmd: what speculative decoding did (llama-server reports draft_n / draft_n_accepted likewise).
    ...(stats.draft ? { draft_count: stats.draft.proposed, draft_accepted_count: stats.draft.accepted } : {}),
  };
}
