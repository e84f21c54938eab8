/**
 * The services behind `/api/chat`, `/api/embed(dings)` and their `/v1` adapters: resolve → schedule
 * (a lease on a slot of the loaded model) → run the runner job → release. The routes translate
 * their wire formats to these calls and back, so both APIs share one path to the model.
 */
import type { Logger } from "pino";
import type { FinalStats, ModelOptions } from "../api/types.js";
import { BadRequestError } from "../errors.js";
import type { RequestContext } from "../http/router.js";
import type { ResolvedModel } from "../models/store.js";
import type { ChatResult, ChatTurn, EmbedResult, GenerateStats, GrammarSpec, ToolChoice, ToolSpec } from "../runner/protocol.js";
import type { Lease } from "../scheduler/scheduler.js";
import { resolveOptions, type ResolvedOptions } from "./options.js";
import type { Services } from "./services.js";

/** A request resolved against the store: the model, its merged options, the keep-alive. */
export interface Target {
  /** The name as the client wrote it (for messages and the `model` field of answers). */
  name: string;
  model: ResolvedModel;
  opts: ResolvedOptions;
  keepAliveMs: number | undefined;
}

/** Resolves the model (404 when missing) and merges its parameters with the request's options. */
export async function resolveTarget(services: Services, name: string, options: ModelOptions | undefined, keepAliveMs: number | undefined, log: Logger): Promise<Target> {
  const model = await services.store.resolve(name);
  return { name, model, opts: resolveOptions(model.params, options, log), keepAliveMs };
}

/** Holds a slot of the target's model (loading it first if needed) while `run` works. */
export async function withLease<T>(services: Services, ctx: RequestContext, target: Target, run: (lease: Lease) => Promise<T>): Promise<T> {
  const { opts } = target;
  const lease = await services.scheduler.acquire(target.model, { keepAliveMs: target.keepAliveMs, numCtx: opts.numCtx, numGpu: opts.numGpu, signal: ctx.signal });
  try {
    return await run(lease);
  } finally {
    lease.release();
  }
}

/** The load form (empty input): loads the model, or with `keep_alive: 0` unloads it. */
export async function loadOrUnload(services: Services, ctx: RequestContext, target: Target): Promise<"load" | "unload"> {
  if (target.keepAliveMs === 0) {
    await services.scheduler.unload(target.model.key);
    return "unload";
  }
  await withLease(services, ctx, target, async () => undefined);
  return "load";
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
  };
}

export interface ChatCall {
  turns: ChatTurn[];
  tools?: ToolSpec[] | undefined;
  toolChoice?: ToolChoice | undefined;
  grammar?: GrammarSpec | undefined;
  think?: boolean | undefined;
}

export interface ChatOutput {
  result: ChatResult;
  loadNs: number;
}

/**
 * Runs a chat on the target's model. The model's SYSTEM prompt comes first unless the messages
 * bring their own. `think: true` on a template without thoughts is a 400.
 */
export function runChat(services: Services, ctx: RequestContext, target: Target, call: ChatCall, on: { onChunk: (text: string) => void; onThinking?: (text: string) => void }): Promise<ChatOutput> {
  const { opts, model } = target;
  const turns = model.system && !call.turns.some((t) => t.role === "system") ? [{ role: "system" as const, content: model.system }, ...call.turns] : call.turns;
  return withLease(services, ctx, target, async (lease) => {
    if (call.think === true && !lease.runner.info.thinking) throw new BadRequestError(`"${target.name}" does not support thinking`);
    if (opts.maxTokens === 0) return { loadNs: lease.loadNs, result: { toolCalls: [], stats: emptyStats("length") } };
    const job = { turns, sampling: opts.sampling, maxTokens: opts.maxTokens, fillContext: opts.fillContext, stop: opts.stop, grammar: call.grammar, tools: call.tools, toolChoice: call.toolChoice, think: call.think };
    const result = await lease.runner.chat(job, on, ctx.signal);
    return { result, loadNs: lease.loadNs };
  });
}

/** Raw text completion (for `/v1/completions`): the prompt is evaluated as given, no template. */
export function runCompletion(services: Services, ctx: RequestContext, target: Target, prompt: string, grammar: GrammarSpec | undefined, onChunk: (text: string) => void): Promise<{ stats: GenerateStats; loadNs: number }> {
  const { opts } = target;
  return withLease(services, ctx, target, async (lease) => {
    if (opts.maxTokens === 0) return { loadNs: lease.loadNs, stats: emptyStats("length") };
    const job = { prompt: { kind: "text" as const, text: prompt }, sampling: opts.sampling, maxTokens: opts.maxTokens, fillContext: opts.fillContext, stop: opts.stop, grammar };
    const stats = await lease.runner.generate(job, onChunk, ctx.signal);
    return { stats, loadNs: lease.loadNs };
  });
}

/** Raw embedding vectors of `inputs` (one job; the runner evaluates them in turn). */
export function runEmbed(services: Services, ctx: RequestContext, target: Target, inputs: string[], truncate: boolean, dimensions?: number): Promise<{ result: EmbedResult; loadNs: number }> {
  return withLease(services, ctx, target, async (lease) => {
    const length = lease.runner.info.embeddingLength;
    if (dimensions !== undefined && dimensions > length) throw new BadRequestError(`dimensions must be between 1 and ${length}`);
    const result = inputs.length === 0 ? { embeddings: [], promptTokens: 0 } : await lease.runner.embed({ inputs, truncate }, ctx.signal);
    return { result, loadNs: lease.loadNs };
  });
}

/** Keeps the first `dimensions` components (when given) and scales the vector to unit length. */
export function normalize(vector: readonly number[], dimensions?: number): number[] {
  const v = dimensions === undefined ? vector : vector.slice(0, dimensions);
  let sum = 0;
  for (const x of v) sum += x * x;
  const norm = Math.sqrt(sum);
  return norm === 0 ? [...v] : v.map((x) => x / norm);
}

/** Stats of a job that generated nothing (`num_predict: 0`). */
export function emptyStats(doneReason: GenerateStats["doneReason"], context: number[] = []): GenerateStats {
  return { promptTokens: 0, promptEvalCount: 0, promptEvalNs: 0, evalCount: 0, evalNs: 0, doneReason, context, truncatedTokens: 0 };
}
