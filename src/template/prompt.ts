/**
 * Ollama's chatPrompt (server/prompt.go) for Go templates: render the conversation through the
 * template, and when it does not fit the context, drop the oldest messages (keeping every system
 * message and always the last message) until it does. Token counts come from the model's runner.
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
  tokenize: (text: string) => Promise<number[]>;
  /** false: render everything, never drop messages. */
  truncate?: boolean | undefined;
}

function render(t: Template, messages: OllamaMessage[], tools: unknown[] | undefined, think: ThinkValue): Promise<string> {
  return renderInWorker(t, { messages, ...(tools ? { tools } : {}), ...thinkValues(think) });
}

/** The prompt for the next chat turn, truncated from the front as Ollama does. Returns it and the messages dropped. */
export async function chatPrompt(t: Template, input: ChatPromptInput): Promise<{ prompt: string; dropped: number }> {
  const { messages: msgs, tools, think, numCtx } = input;
  const last = msgs.length - 1;
  let current = 0;
  let system: OllamaMessage[] = [];
  if (input.truncate !== false) {
    for (let i = 0; i <= last; i++) {
      system = msgs.slice(0, i).filter((m) => m.role === "system");
      const p = await render(t, [...system, ...msgs.slice(i)], tools, think);
      // Every token covers at least one byte of the text, so a prompt of at most numCtx bytes fits
      // without asking the runner: the common case costs no tokenization.
      const fits = Buffer.byteLength(p, "utf8") <= numCtx || (await input.tokenize(p)).length <= numCtx;
      if (fits) {
        current = i;
        if (i === 0) return { prompt: p, dropped: 0 };
        break;
      }
      if (i === last) current = last;
    }
  }
  return { prompt: await render(t, [...system, ...msgs.slice(current)], tools, think), dropped: current };
}
