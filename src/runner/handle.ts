/**
 * What the scheduler and the chat engine know of a loaded model's runner: its facts, its jobs and its
 * end. The IPC class (`client.ts`) implements it; unit tests implement it with a fake in memory.
 */
import type { JobStats, OnChunk, OutputFlow } from "./client.js";
import type { ChatJob, ChatResult, EmbedJob, EmbedResult, GenerateJob, GenerateStats, RankJob, RankResult, RenderJob, RunnerInfo } from "./protocol.js";

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

  generate(job: GenerateJob, onChunk: OnChunk, signal?: AbortSignal, flow?: OutputFlow): Promise<GenerateStats>;
  chat(job: ChatJob, on: { onChunk: OnChunk; onThinking?: (text: string) => void }, signal?: AbortSignal, flow?: OutputFlow): Promise<ChatResult>;
  embed(job: EmbedJob, signal?: AbortSignal): Promise<EmbedResult>;
  render(job: RenderJob, signal?: AbortSignal): Promise<string>;
  tokenize(text: string, signal?: AbortSignal, addSpecial?: boolean, parseSpecial?: boolean): Promise<Uint32Array>;
  detokenize(tokens: number[], signal?: AbortSignal): Promise<string>;
  rank(job: RankJob, signal?: AbortSignal): Promise<RankResult>;

  /** Unloads the model and ends the runner; jobs still running fail with `reason`. */
  stop(reason?: Error, timeoutMs?: number): Promise<void>;
  /** Ends the runner at once. */
  kill(): void;
}
