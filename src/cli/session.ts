/**
 * A conversation with one model for `lmd run`: the message history, the options set with
 * `/set`, and one call per turn. Turns go to /api/chat; when the daemon has no /api/chat
 * (404 `path '/api/chat' not found`), to /api/generate, carrying the history as `context`.
 */
import { ClientError, type Client } from "../api/client.js";
import type { FinalStats, Format, GenerateChunk, GenerateFinal, ModelOptions } from "../api/types.js";
import type { ChatChunk, ChatMessage, ShowResponse } from "./wire.js";

export interface SessionOptions {
  keepAlive?: string | number;
  format?: Format;
  system?: string;
}

/** What a finished turn reports (stats are absent when the turn was interrupted). */
export interface TurnResult {
  text: string;
  interrupted: boolean;
  stats?: Partial<FinalStats>;
}

export class Session {
  messages: ChatMessage[] = [];
  /** Token context of the generate fallback (its form of history). */
  private context: number[] | undefined;
  private useGenerate = false;
  options: ModelOptions = {};
  format: Format | undefined;
  system: string | undefined;
  keepAlive: string | number | undefined;

  constructor(private readonly client: Client, public model: string, opts: SessionOptions = {}) {
    this.format = opts.format;
    this.system = opts.system;
    this.keepAlive = opts.keepAlive;
  }

  /** Loads the model (generate's load form) so that a missing model is reported before the prompt. */
  async load(): Promise<void> {
    await this.client.json<GenerateFinal>("POST", "/api/generate", { model: this.model, prompt: "", stream: false, ...this.common() });
  }

  /** The model's details (`/show`). */
  show(): Promise<ShowResponse> {
    return this.client.json<ShowResponse>("POST", "/api/show", { model: this.model });
  }

  /** Forgets the conversation (`/clear`). */
  clear(): void {
    this.messages = [];
    this.context = undefined;
  }

  /**
   * Sends one user turn and streams the answer to `onText`. On abort the partial answer is shown
   * but the turn is left out of the history, as Ollama does.
   */
  async send(prompt: string, onText: (text: string) => void, signal?: AbortSignal): Promise<TurnResult> {
    if (!this.useGenerate) {
      try {
        return await this.chat(prompt, onText, signal);
      } catch (err) {
        if (!(err instanceof ClientError && err.status === 404 && err.message.startsWith("path '/api/chat'"))) throw err;
        this.useGenerate = true;
      }
    }
    return this.generate(prompt, onText, signal);
  }

  private common(): Record<string, unknown> {
    const body: Record<string, unknown> = {};
    if (this.keepAlive !== undefined) body.keep_alive = this.keepAlive;
    if (this.format !== undefined && this.format !== "") body.format = this.format;
    if (Object.keys(this.options).length > 0) body.options = this.options;
    return body;
  }

  private async chat(prompt: string, onText: (text: string) => void, signal?: AbortSignal): Promise<TurnResult> {
    const history = this.system !== undefined ? [{ role: "system" as const, content: this.system }, ...this.messages] : this.messages;
    const user: ChatMessage = { role: "user", content: prompt };
    const body = { model: this.model, messages: [...history, user], stream: true, ...this.common() };
    let text = "";
    let stats: Partial<FinalStats> | undefined;
    try {
      for await (const chunk of this.client.stream<ChatChunk>("POST", "/api/chat", body, { signal })) {
        const piece = chunk.message?.content ?? "";
        if (piece !== "") {
          text += piece;
          onText(piece);
        }
        if (chunk.done) stats = chunk;
      }
    } catch (err) {
      if (signal?.aborted) return { text, interrupted: true };
      throw err;
    }
    this.messages.push(user, { role: "assistant", content: text });
    return { text, interrupted: false, stats };
  }

  private async generate(prompt: string, onText: (text: string) => void, signal?: AbortSignal): Promise<TurnResult> {
    const body: Record<string, unknown> = { model: this.model, prompt, stream: true, ...this.common() };
    if (this.system !== undefined) body.system = this.system;
    if (this.context?.length) body.context = this.context;
    let text = "";
    let final: GenerateFinal | undefined;
    try {
      for await (const chunk of this.client.stream<GenerateChunk | GenerateFinal>("POST", "/api/generate", body, { signal })) {
        if (chunk.response !== "") {
          text += chunk.response;
          onText(chunk.response);
        }
        if (chunk.done) final = chunk;
      }
    } catch (err) {
      if (signal?.aborted) return { text, interrupted: true };
      throw err;
    }
    this.context = final?.context;
    this.messages.push({ role: "user", content: prompt }, { role: "assistant", content: text });
    return { text, interrupted: false, stats: final };
  }
}

/** Ollama's `--verbose` timing block. */
export function formatStats(s: Partial<FinalStats>): string {
  const dur = (ns = 0) => (ns >= 1e9 ? `${(ns / 1e9).toFixed(3)}s` : ns >= 1e6 ? `${(ns / 1e6).toFixed(3)}ms` : `${(ns / 1e3).toFixed(3)}µs`);
  const rate = (count = 0, ns = 0) => (ns > 0 ? `${((count * 1e9) / ns).toFixed(2)} tokens/s` : "n/a");
  return [
    `total duration:       ${dur(s.total_duration)}`,
    `load duration:        ${dur(s.load_duration)}`,
    `prompt eval count:    ${s.prompt_eval_count ?? 0} token(s)`,
    `prompt eval duration: ${dur(s.prompt_eval_duration)}`,
    `prompt eval rate:     ${rate(s.prompt_eval_count, s.prompt_eval_duration)}`,
    `eval count:           ${s.eval_count ?? 0} token(s)`,
    `eval duration:        ${dur(s.eval_duration)}`,
    `eval rate:            ${rate(s.eval_count, s.eval_duration)}`,
  ].join("\n") + "\n";
}
