/**
 * The message protocol between the daemon and a runner child: only the IPC envelopes. What they
 * carry (jobs, results, the load spec) is the vocabulary of types.ts.
 *
 * One runner process holds one loaded model with one llama.cpp context of N sequences. The
 * parent sends a `load` first, then any number of jobs, each identified by a numeric `id`;
 * the child answers each job with `chunk` messages and exactly one `done` or `failed`.
 * This file is shared by both sides and imports only types.ts.
 */
import type {
  ChatJob,
  ChatResult,
  EmbedJob,
  EmbedResult,
  GenerateJob,
  GenerateStats,
  LoadSpec,
  MemoryEstimate,
  RankJob,
  RankResult,
  RenderJob,
  RunnerInfo,
  TokenLogprob,
} from "./types.js";

/** The error of a prompt over the context under `truncate: false` (Ollama's words). */
export const CONTEXT_EXCEEDED = "the input length exceeds the context length";

export type ToRunner =
  | { type: "load"; spec: LoadSpec }
  /** After an `estimate`: the parent found room, load now. */
  | { type: "admit" }
  | { type: "generate"; id: number; job: GenerateJob }
  | { type: "chat"; id: number; job: ChatJob }
  | { type: "embed"; id: number; job: EmbedJob }
  | { type: "render"; id: number; job: RenderJob }
  /** Text → tokens, special tokens parsed (as a rendered prompt is) unless `parseSpecial: false`; BOS/EOS only with `addSpecial` (/api/tokenize). */
  | { type: "tokenize"; id: number; text: string; addSpecial?: boolean | undefined; parseSpecial?: boolean | undefined }
  /** Tokens → text, special tokens written out (/api/detokenize); answered with `rendered`. */
  | { type: "detokenize"; id: number; tokens: number[] }
  | { type: "rank"; id: number; job: RankJob }
  | { type: "cancel"; id: number }
  /** Backpressure (runner/flow.ts): the job's client takes no more output for now; compute no further token. */
  | { type: "pause"; id: number }
  /** The client drains again: go on where the job paused. */
  | { type: "resume"; id: number }
  | { type: "unload" };

/** corrupt: bad model file; memory: does not fit; invalid: the request cannot be served (a bad JSON Schema); other: anything else. */
export type RunnerFailureKind = "corrupt" | "memory" | "invalid" | "other";

export type FromRunner =
  | { type: "progress"; fraction: number }
  /** Sent before loading anything; the child waits for `admit` (or is stopped). */
  | { type: "estimate"; estimate: MemoryEstimate }
  | { type: "loaded"; info: RunnerInfo }
  /** The child starts rendering the job's prompt with the model's chat template (the parent's render budget starts: runner/render-budget.ts). */
  | { type: "render-start"; id: number }
  /** The job's prompt was rendered with the model's chat template (the parent's render budget stops). */
  | { type: "prompt-ready"; id: number }
  | { type: "load-failed"; kind: RunnerFailureKind; message: string }
  /** `logprobs`: one per token of `text`, when the job asked for them. */
  | { type: "chunk"; id: number; text: string; logprobs?: TokenLogprob[] | undefined }
  | { type: "done"; id: number; stats: GenerateStats }
  | { type: "thinking"; id: number; text: string }
  | { type: "chat-done"; id: number; result: ChatResult }
  | { type: "embedded"; id: number; result: EmbedResult }
  | { type: "rendered"; id: number; text: string }
  /** Tokens, packed (runner/token-parts.ts): little-endian 32-bit integers in base64; `more`: further parts follow. */
  | { type: "tokens"; id: number; data: string; more?: boolean | undefined }
  | { type: "ranked"; id: number; result: RankResult }
  | { type: "failed"; id: number; kind: RunnerFailureKind; message: string }
  | { type: "log"; level: "debug" | "info" | "warn" | "error"; msg: string; data?: Record<string, unknown> }
  /**
   * The `chunk` and `thinking` messages gathered for the runner's output delay (at most 2 ms), in order: with
   * several sequences decoding together, one message per decode step instead of one per stream
   * (each message wakes the parent, whose work then competes with the next decode for the cores).
   */
  | { type: "batch"; messages: FromRunner[] };
