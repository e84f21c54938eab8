/**
 * Ollama's chatPrompt (server/prompt.go) for Go templates: render the conversation through the
 * template, and when it does not fit the context, drop the fewest oldest messages (keeping every
 * system message and always the last message) for it to fit. Token counts come from the model's runner.
 */
import type { OllamaMessage } from "./ollama.js";
import { renderInWorker } from "./render-pool.js";
import type { Template } from "./template.js";

export type ThinkValue = boolean | "high" | "medium" | "low" | "max" | undefined;

/** Ollama's ThinkValue.Bool()/String() and IsThinkSet, as the template sees them. */
export function thinkValues(think: ThinkValue): { think: boolean; thinkLevel: string; isThinkSet: boolean } {
  if (think === undefined) return { think: false, thinkLevel: "", isThinkSet: false };
  if (typeof think === "string") return { think: true, thinkLevel: think, isThinkSet: true };
  return { think, thinkLevel: think ? "medium" : "", isThinkSet: true };
}

export interface ChatPromptInput {
  messages: OllamaMessage[];
  tools?: unknown[] | undefined;
  think?: ThinkValue;
  /** The context length the prompt must fit (num_ctx). */
  numCtx: number;
  /** Tokens of a rendered prompt (special tokens parsed). */
  tokenize: (text: string) => Promise<ArrayLike<number>>;
  /** false: render everything, never drop messages. */
  truncate?: boolean | undefined;
}

function render(t: Template, messages: OllamaMessage[], tools: unknown[] | undefined, think: ThinkValue): Promise<string> {
  return renderInWorker(t, { messages, ...(tools ? { tools } : {}), ...thinkValues(think) });
}

/**
 * The prompt for the next chat turn, truncated from the front as Ollama does: the fewest oldest
 * messages dropped for the rest to fit. Found by a binary search over how many go (fewer messages
 * render to fewer tokens), so a long history costs a few renders and tokenizations, not one per
 * message. Returns the prompt and the messages dropped.
 */
export async function fitHistory(t: Template, input: ChatPromptInput): Promise<{ prompt: string; dropped: number }> {
  const { messages: msgs, tools, think, numCtx } = input;
  const last = msgs.length - 1;
  // Dropping the first `i` messages keeps the system messages among them.
  const from = (i: number) => render(t, [...msgs.slice(0, i).filter((m) => m.role === "system"), ...msgs.slice(i)], tools, think);
  const whole = await from(0);
  if (input.truncate === false) return { prompt: whole, dropped: 0 };
  // Every token covers at least one byte of the text, so a prompt of at most numCtx bytes fits
  // without asking the runner: the common case costs no tokenization.
  const fits = async (p: string) => Buffer.byteLength(p, "utf8") <= numCtx || (await input.tokenize(p)).length <= numCtx;
  if (await fits(whole)) return { prompt: whole, dropped: 0 };
  // Always the last message stays, even when it alone does not fit.
  let dropped = Math.max(0, last);
  let prompt: string | undefined;
  let low = 1;
  let high = last;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const p = await from(mid);
    if (await fits(p)) {
      dropped = mid;
      prompt = p;
      high = mid - 1;
    } else low = mid + 1;
  }
  return { prompt: prompt ?? (await from(dropped)), dropped };
}
