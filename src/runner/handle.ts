/**
 * What the scheduler and the chat engine know of a loaded model's runner: its facts, its jobs and its
 * end. The IPC class (`client.ts`) implements it; unit tests implement it with a fake in memory.
 *
 * A completion's output goes to one sink object, as an HTTP client's response goes to one dispatch
 * handler: text (with logprobs), thoughts and tool calls arrive through its methods, the request's
 * abort signal and the consumer's backpressure ride on it, and the promise of `complete` settles
 * with the stats once the job ended.
 */
import type {
  ChatJob,
  EmbedJob,
  EmbedResult,
  GenerateJob,
  GenerateStats,
  RankJob,
  RankResult,
  RenderJob,
  RunnerInfo,
  TokenLogprob,
  ToolCallSpec,
} from "./types.js";

/** What metrics learn about each finished job. */
export type JobStats = Pick<GenerateStats, "promptEvalCount" | "promptEvalNs" | "evalCount" | "evalNs" | "truncatedTokens">;

/**
 * Backpressure of whoever takes a job's output: a streaming response whose socket does not drain.
 * Checked after each piece of output is handed on; while `blocked`, the runner computes no further
 * token of that job (runner/flow.ts).
 */
export interface OutputFlow {
  /** True while the consumer can take no more (its socket's buffer is full). */
  readonly blocked: boolean;
  /** Calls `then` once, when the consumer can take more again or is gone. */
  whenReady(then: () => void): void;
}

/** Receives generated text as it comes, with its tokens' logprobs when the job asked for them. */
export type OnText = (text: string, logprobs?: TokenLogprob[]) => void;

/** Where a completion's output goes, and how its consumer steers it. */
export interface CompletionSink {
  /** Answer text as it is produced, with its tokens' logprobs when the job asked for them. */
  onText: OnText;
  /** Thought text (a chat job that reports thoughts apart). */
  onThinking?: ((text: string) => void) | undefined;
  /** Tool calls, as soon as they are known (a chat job's: when it ends). */
  onToolCalls?: ((calls: ToolCallSpec[]) => void) | undefined;
  /** Aborting it cancels the job; its promise then settles with `doneReason: "cancelled"`. */
  signal?: AbortSignal | undefined;
  /** The consumer's backpressure: while blocked, the job pauses. */
  flow?: OutputFlow | undefined;
}

/**
 * One completion: text (already rendered, or turns the runner renders with the model's own chat
 * template) continued by the model (`generate`), or a conversation run by node-llama-cpp's chat
 * session, with tools and thoughts (`chat`).
 */
export type CompletionRequest = { kind: "generate"; job: GenerateJob } | { kind: "chat"; job: ChatJob };

export interface RunnerHandle {
  /** What the load made: context, memory, placement, the template's traits. */
  readonly info: RunnerInfo;
  /** The child's process id (for /api/ps and logs); undefined for a runner with no process. */
  readonly pid: number | undefined;
  /** False once the runner ended or was retired; a lease is never given on a runner that is not alive. */
  readonly alive: boolean;
  /** Called once when the runner ends without being asked to. */
  onCrash: ((reason: string) => void) | undefined;
  /** Called with the token counts and timings of each finished job (metrics). */
  onStats: ((stats: JobStats) => void) | undefined;

  /** Runs a completion; its output goes to `sink`, and the promise settles with its stats. */
  complete(request: CompletionRequest, sink: CompletionSink): Promise<GenerateStats>;
  embed(job: EmbedJob, signal?: AbortSignal): Promise<EmbedResult>;
  rank(job: RankJob, signal?: AbortSignal): Promise<RankResult>;
  /** The prompt the model's own chat template makes of these turns (nothing evaluated). */
  render(job: RenderJob, signal?: AbortSignal): Promise<string>;
  tokenize(text: string, signal?: AbortSignal, addSpecial?: boolean, parseSpecial?: boolean): Promise<Uint32Array>;
  detokenize(tokens: number[], signal?: AbortSignal): Promise<string>;

  /** Unloads the model and ends the runner; jobs still running fail with `reason`. */
  stop(reason?: Error, timeoutMs?: number): Promise<void>;
  /** Ends the runner at once. */
  kill(): void;
}
