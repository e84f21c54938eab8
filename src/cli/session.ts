/**
 * A conversation with one model for `lmd run`: the message history, the options set with
 * `/set`, and one call per turn. Turns go to /api/chat; when the daemon has no /api/chat
 * (404 `path '/api/chat' not found`), to /api/generate, carrying the history as `context`.
 */
import { ClientError, type Client } from "../api/client.js";
import type { FinalStats, Format, GenerateChunk, GenerateFinal, ModelOptions } from "../api/types.js";
import type { ProgressResponse } from "../api/model-types.js";
import type { ChatChunk, ChatMessage, ShowResponse } from "./wire.js";

/** `think` of a request: on, off, or a level (`high`, `medium`, `low`; the daemon checks it). */
export type Think = boolean | string;

/** Where a turn's streamed text goes: the answer, and the model's thinking when it thinks. */
export interface TurnOutput {
  text: (text: string) => void;
  thinking?: (text: string) => void;
}

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
  /** `/set think` / `/set nothink`; undefined leaves it to the daemon. */
  think: Think | undefined;

  constructor(private readonly client: Client, public model: string, opts: SessionOptions = {}) {
    this.format = opts.format;
    this.system = opts.system;
    this.keepAlive = opts.keepAlive;
  }

  /** Loads the model (generate's load form) so that a missing model is reported before the prompt. */
  async load(): Promise<void> {
    await this.client.json<GenerateFinal>("POST", "/api/generate", { model: this.model, prompt: "", stream: false, ...this.common() });
  }

  /** A model's details (`/show`), this session's model by default. */
  show(model = this.model): Promise<ShowResponse> {
    return this.client.json<ShowResponse>("POST", "/api/show", { model });
  }

  /**
   * Saves the session as a new model (`/save`): this model, plus the session's system message,
   * parameters and conversation, through /api/create (Ollama's /save does the same).
   */
  async save(name: string): Promise<void> {
    const body: Record<string, unknown> = { model: name, from: this.model, stream: false };
    if (this.system !== undefined) body.system = this.system;
    if (Object.keys(this.options).length > 0) body.parameters = this.options;
    const messages = this.messages.map((m) => ({ role: m.role, content: m.content ?? "" }));
    if (messages.length > 0) body.messages = messages;
    await this.client.json<ProgressResponse>("POST", "/api/create", body);
  }

  /**
   * Switches to another model (`/load`) and loads it; the conversation and the session's system
   * message belong to the old model and are dropped, the parameters stay (as in Ollama). On a
   * failure (a ClientError: not found, cannot load) the session stays as it was.
   */
  async switchModel(model: string): Promise<void> {
    await this.show(model); // 404 before anything changes
    const before = { model: this.model, system: this.system };
    this.model = model;
    this.system = undefined;
    try {
      await this.load();
    } catch (err) {
      this.model = before.model;
      this.system = before.system;
      throw err;
    }
    this.clear();
  }

  /** Forgets the conversation (`/clear`). */
  clear(): void {
    this.messages = [];
    this.context = undefined;
  }

  /**
   * Sends one user turn and streams the answer (and any thinking) to `output`. On abort the
   * partial answer is shown but the turn is left out of the history, as Ollama does.
   */
  async send(prompt: string, output: TurnOutput | ((text: string) => void), signal?: AbortSignal): Promise<TurnResult> {
    const out = typeof output === "function" ? { text: output } : output;
    if (!this.useGenerate) {
      try {
        return await this.chat(prompt, out, signal);
      } catch (err) {
        if (!(err instanceof ClientError && err.status === 404 && err.message.startsWith("path '/api/chat'"))) throw err;
        this.useGenerate = true;
      }
    }
    return this.generate(prompt, out, signal);
  }

  private common(): Record<string, unknown> {
    const body: Record<string, unknown> = {};
    if (this.keepAlive !== undefined) body.keep_alive = this.keepAlive;
    if (this.format !== undefined && this.format !== "") body.format = this.format;
    if (Object.keys(this.options).length > 0) body.options = this.options;
    return body;
  }

  private async chat(prompt: string, out: TurnOutput, signal?: AbortSignal): Promise<TurnResult> {
    const history = this.system !== undefined ? [{ role: "system" as const, content: this.system }, ...this.messages] : this.messages;
    const user: ChatMessage = { role: "user", content: prompt };
    const body = {
      model: this.model,
      messages: [...history, user],
      stream: true,
      ...this.common(),
      ...(this.think !== undefined ? { think: this.think } : {}),
    };
    let text = "";
    let thinking = "";
    let stats: Partial<FinalStats> | undefined;
    try {
      for await (const chunk of this.client.stream<ChatChunk>("POST", "/api/chat", body, { signal })) {
        const thought = chunk.message?.thinking ?? "";
        if (thought !== "") {
          thinking += thought;
          out.thinking?.(thought);
        }
        const piece = chunk.message?.content ?? "";
        if (piece !== "") {
          text += piece;
          out.text(piece);
        }
        if (chunk.done) stats = chunk;
      }
    } catch (err) {
      if (signal?.aborted) return { text, interrupted: true };
      throw err;
    }
    this.messages.push(user, { role: "assistant", content: text, ...(thinking !== "" ? { thinking } : {}) });
    return { text, interrupted: false, stats };
  }

  private async generate(prompt: string, out: TurnOutput, signal?: AbortSignal): Promise<TurnResult> {
    const body: Record<string, unknown> = { model: this.model, prompt, stream: true, ...this.common() };
    if (this.think !== undefined) body.think = this.think;
    if (this.system !== undefined) body.system = this.system;
    if (this.context?.length) body.context = this.context;
    let text = "";
    let final: GenerateFinal | undefined;
    try {
      for await (const chunk of this.client.stream<GenerateChunk | GenerateFinal>("POST", "/api/generate", body, { signal })) {
        if (chunk.thinking) out.thinking?.(chunk.thinking);
        if (chunk.response !== "") {
          text += chunk.response;
          out.text(chunk.response);
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
  const dur = (ns = 0) => goDuration(ns);
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

/**
 * A duration in nanoseconds as Go prints a time.Duration (Ollama's `--verbose` block): `0s`, `850ns`,
 * `12.5µs`, `3.204ms`, `1.5s`, `2m3.25s`, `1h2m3s`; fractions to three places, trailing zeros dropped.
 */
export function goDuration(ns: number): string {
  if (!Number.isFinite(ns) || ns <= 0) return "0s";
  const trim = (v: number) => v.toFixed(3).replace(/\.?0+$/, "");
  if (ns < 1e3) return `${Math.round(ns)}ns`;
  if (ns < 1e6) return `${trim(ns / 1e3)}µs`;
  if (ns < 1e9) return `${trim(ns / 1e6)}ms`;
  const s = ns / 1e9;
  if (s < 60) return `${trim(s)}s`;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return `${h > 0 ? `${h}h` : ""}${m}m${trim(s % 60)}s`;
}
