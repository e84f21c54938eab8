/**
 * The services behind `/api/chat`, `/api/embed(dings)` and their `/v1` adapters: resolve → schedule
 * (a lease on a slot of the loaded model) → run the runner job → release. The routes translate
 * their wire formats to these calls and back, so both APIs share one path to the model.
 */
import type { Logger } from "pino";
import type { FinalStats, ModelOptions } from "../api/types.js";
import { BadRequestError, HttpError, ModelLoadError, ModelNotFoundError } from "../errors.js";
import type { RequestContext } from "../http/router.js";
import type { ResolvedModel } from "../store/store.js";
import type { ChatResult, ChatTurn, EmbedResult, GenerateStats, GrammarSpec, ToolChoice, ToolSpec } from "../runner/protocol.js";
import type { Lease } from "../scheduler/scheduler.js";
import type { ThinkValue } from "../template/prompt.js";
import type { OnChunk } from "../runner/client.js";
import { outputFlow } from "../http/respond.js";
import { capPredict, resolveOptions, type ResolvedOptions } from "./options.js";
import { capabilities } from "../store/capabilities.js";
import { fullName } from "../store/names.js";
import type { Capability } from "../api/model-types.js";
import { ggufOf } from "../store/model-info.js";
import { goTemplateIn } from "./prompt.js";
import { usesHarmony } from "../template/harmony.js";
import { type ChatCallbacks, effectiveThink, NeedsRunner, noRunner, renderTemplateChat, runTemplateChat, runtimeOf } from "./template-chat.js";
import type { Services } from "./services.js";

/** A request resolved against the store: the model, its merged options, the keep-alive. */
export interface Target {
  /** The name as the client wrote it (for messages and the `model` field of answers). */
  name: string;
  model: ResolvedModel;
  opts: ResolvedOptions;
  keepAliveMs: number | undefined;
  /** The draft model's file when the model names one (Modelfile DRAFT): speculative decoding. */
  draftPath?: string | undefined;
}

/** Resolves the model (404 when missing) and merges its parameters with the request's options. */
export async function resolveTarget(services: Services, name: string, options: ModelOptions | undefined, keepAliveMs: number | undefined, log: Logger): Promise<Target> {
  log.setBindings({ model: name }); // the request's log line names its model (journal field LMD_MODEL)
  const model = await services.store.resolve(name);
  // The policy file's default options sit between the model's PARAMETERs and the request's options.
  const params = { ...model.params, ...services.scheduler.policyFor(model.key)?.options };
  const resolved = resolveOptions(params, options, log);
  const opts = capPredict(resolved, services.config.maxPredict, resolved.numCtx ?? numberParam(params.num_ctx) ?? services.config.contextLength);
  return { name, model, opts, keepAliveMs, draftPath: await draftPathOf(services, model) };
}

/**
 * The file of the model's draft: a model named by its `draft` parameter (lmd's `DRAFT <model>`; a
 * missing one is a load error), else its draft layer (Ollama's `DRAFT <file>`).
 */
async function draftPathOf(services: Services, model: ResolvedModel): Promise<string | undefined> {
  const draft = model.params.draft;
  if (typeof draft !== "string" || draft === "") return model.draftLayerPath;
  try {
    return (await services.store.resolve(draft)).modelPath;
  } catch (err) {
    if (err instanceof ModelNotFoundError) throw new ModelLoadError(model.display, `draft model '${draft}' not found`);
    throw err;
  }
}

/** The model's capabilities (as /api/show lists them); undefined when its GGUF cannot be read (the load then says why). */
async function capabilitiesOf(services: Services, model: ResolvedModel): Promise<Capability[] | undefined> {
  const gguf = await ggufOf(services.store, model.digest).catch(() => undefined);
  return gguf && capabilities(gguf, model.template, model.manifest, model);
}

/**
 * Ollama's capability check, before anything is loaded: a model that cannot complete (an embedding
 * model) is a 400 `"<model>" does not support generate` (or `chat`); `tools` on a model without the
 * `tools` capability (its template does not show tools) is a 400 `<full name> does not support
 * tools`, as Ollama's CheckCapabilities words it — rather than a function-calling prompt the
 * model's own template never shows. Tools that `tool_choice: "none"` turns off are not offered,
 * and need nothing.
 */
export async function requireCompletion(services: Services, target: Target, endpoint: "generate" | "chat", tools = false): Promise<void> {
  const caps = await capabilitiesOf(services, target.model);
  if (!caps) return;
  if (!caps.includes("completion")) throw new BadRequestError(`${JSON.stringify(target.name)} does not support ${endpoint}`);
  if (tools && !caps.includes("tools")) throw new BadRequestError(`${fullName(target.model.name)} does not support tools`);
}

/** Tools are offered to the model: given, and not turned off by `tool_choice: "none"`. */
function offersTools(call: ChatCall): boolean {
  return Boolean(call.tools?.length) && call.toolChoice !== "none";
}

/** Embeddings of a reranker are its relevance scores, not vectors: a 400 in Ollama's words for a missing capability. */
async function requireEmbedding(services: Services, target: Target): Promise<void> {
  if ((await capabilitiesOf(services, target.model))?.includes("reranking")) throw new BadRequestError(`${fullName(target.model.name)} does not support embedding`);
}

/** Holds a slot of the target's model (loading it first if needed) while `run` works. */
export async function withLease<T>(services: Services, ctx: RequestContext, target: Target, run: (lease: Lease) => Promise<T>): Promise<T> {
  const { opts } = target;
  const draft = target.draftPath ? { ...(opts.draftPMin !== undefined ? { minConfidence: opts.draftPMin } : {}), ...(opts.draftNumPredict !== undefined ? { maxTokens: opts.draftNumPredict } : {}) } : {};
  const speculation = { draftPath: target.draftPath, lookup: opts.promptLookup, ...draft };
  const lease = await services.scheduler.acquire(target.model, { keepAliveMs: target.keepAliveMs, numCtx: opts.numCtx, numGpu: opts.numGpu, numThread: opts.numThread, numBatch: opts.numBatch, useMmap: opts.useMmap, speculation, signal: ctx.signal });
  try {
    return await run(lease);
  } finally {
    lease.release();
  }
}

/** The load form (empty input): loads the model, or with `keep_alive: 0` unloads it. */
export async function loadOrUnload(services: Services, ctx: RequestContext, target: Target): Promise<"load" | "unload"> {
  if (target.keepAliveMs === 0) {
    // A pinned model stays loaded whatever a client asks; saying so beats ignoring the request.
    if (services.scheduler.policyFor(target.model.key)?.pinned) throw new HttpError(409, `model '${target.name}' is pinned by the policy file (SERVICE_MODELS_CONFIG)`);
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
    truncated_tokens: stats.truncatedTokens,
    // lmd: what speculative decoding did (llama-server reports draft_n / draft_n_accepted likewise).
    ...(stats.draft ? { draft_count: stats.draft.proposed, draft_accepted_count: stats.draft.accepted } : {}),
  };
}

export interface ChatCall {
  turns: ChatTurn[];
  tools?: ToolSpec[] | undefined;
  toolChoice?: ToolChoice | undefined;
  grammar?: GrammarSpec | undefined;
  /** true/false or a level ("low", "medium", "high"); undefined: the model's default. */
  think?: ThinkValue;
  /** Logprobs of the content tokens with this many alternatives (0–20); undefined = off. */
  logprobs?: number | undefined;
  /** false: a prompt over the context is a 400 instead of losing its oldest turns. */
  truncate?: boolean | undefined;
}

export interface ChatOutput {
  result: ChatResult;
  loadNs: number;
}

/**
 * Runs a chat on the target's model: through its Go template when it has one (rendered here, as
 * Ollama does), else through the GGUF's chat template in the runner. The model's SYSTEM and
 * MESSAGE lines come first (`conversation`). `think` on a model without thoughts is a 400.
 */
export async function runChat(services: Services, ctx: RequestContext, target: Target, call: ChatCall, on: ChatCallbacks): Promise<ChatOutput> {
  await requireCompletion(services, target, "chat", offersTools(call));
  const { opts, model } = target;
  const t = goTemplateIn(model);
  return withLease(services, ctx, target, async (lease) => {
    if (t) {
      const tc = { name: target.name, opts, ...call, turns: conversation(model, call.turns), truncate: call.truncate ?? services.config.truncate, harmony: usesHarmony(model) };
      if (opts.maxTokens === 0) {
        effectiveThink(t, target.name, call.think, tc.harmony); // the 400 comes first, as in a real run
        return { loadNs: lease.loadNs, result: { toolCalls: [], stats: emptyStats("length") } };
      }
      return { loadNs: lease.loadNs, result: await runTemplateChat(lease, t, tc, on, ctx.signal, outputFlow(ctx.res)) };
    }
    const think = call.think === undefined ? undefined : call.think !== false;
    if (think === true && !lease.runner.info.thinking) throw new BadRequestError(`"${target.name}" does not support thinking`);
    if (opts.maxTokens === 0) return { loadNs: lease.loadNs, result: { toolCalls: [], stats: emptyStats("length") } };
    const job = { turns: conversation(model, call.turns), sampling: opts.sampling, maxTokens: opts.maxTokens, fillContext: opts.fillContext, stop: opts.stop, grammar: call.grammar, tools: call.tools, toolChoice: call.toolChoice, think, logprobs: call.logprobs, truncate: call.truncate ?? services.config.truncate };
    const result = await lease.runner.chat(job, on, ctx.signal, outputFlow(ctx.res));
    return { loadNs: lease.loadNs, result };
  });
}

/** The prompt a chat would evaluate, without running the model (`_debug_render_only`). */
export async function renderChat(services: Services, ctx: RequestContext, target: Target, call: ChatCall): Promise<string> {
  await requireCompletion(services, target, "chat", offersTools(call));
  const { model } = target;
  const t = goTemplateIn(model);
  const tc = { name: target.name, opts: target.opts, ...call, turns: conversation(model, call.turns), harmony: usesHarmony(model) };
  if (t) {
    // A Go template renders here; the model is loaded only if its tokenizer must cut the history.
    const numCtx = target.opts.numCtx ?? numberParam(model.params.num_ctx) ?? services.config.contextLength;
    const quick = await renderTemplateChat(noRunner(numCtx), t, tc).catch((err: unknown) => {
      if (err instanceof NeedsRunner) return undefined;
      throw err;
    });
    if (quick) return quick.prompt;
  }
  return withLease(services, ctx, target, async (lease) => {
    if (t) return (await renderTemplateChat(runtimeOf(lease, ctx.signal), t, tc)).prompt;
    const think = call.think === undefined ? undefined : call.think !== false;
    return lease.runner.render({ turns: conversation(model, call.turns), tools: call.toolChoice === "none" ? undefined : call.tools, think }, ctx.signal);
  });
}

/**
 * What a chat evaluates, as Ollama's ChatHandler composes it: the model's MESSAGE lines, then the
 * request's messages; the model's SYSTEM first unless the request opens with a system message.
 */
export function conversation(model: Pick<ResolvedModel, "system" | "messages">, turns: ChatTurn[]): ChatTurn[] {
  const all = [...model.messages, ...turns];
  return model.system && turns[0]?.role !== "system" ? [{ role: "system", content: model.system }, ...all] : all;
}

function numberParam(v: unknown): number | undefined {
  return typeof v === "number" ? v : undefined;
}

/** Tokens of the prompt a chat call renders to (system, tools and turns), evaluating nothing. */
export async function countChatTokens(services: Services, ctx: RequestContext, target: Target, call: ChatCall): Promise<number> {
  await requireCompletion(services, target, "chat", offersTools(call));
  const { opts, model } = target;
  const t = goTemplateIn(model);
  return withLease(services, ctx, target, async (lease) => {
    if (t) {
      const { prompt } = await renderTemplateChat(runtimeOf(lease, ctx.signal), t, { name: target.name, opts, ...call, turns: conversation(model, call.turns), harmony: usesHarmony(model) });
      return (await lease.runner.tokenize(prompt, ctx.signal)).length;
    }
    const think = call.think === undefined ? undefined : call.think !== false;
    const job = { turns: conversation(model, call.turns), sampling: opts.sampling, stop: [], tools: call.tools, toolChoice: call.toolChoice, think, countOnly: true };
    const result = await lease.runner.chat(job, { onChunk: () => undefined }, ctx.signal);
    return result.stats.promptTokens;
  });
}

/** Raw text completion (for `/v1/completions`): the prompt is evaluated as given, no template. */
export function runCompletion(services: Services, ctx: RequestContext, target: Target, prompt: string, grammar: GrammarSpec | undefined, onChunk: OnChunk, logprobs?: number): Promise<{ stats: GenerateStats; loadNs: number }> {
  const { opts } = target;
  return withLease(services, ctx, target, async (lease) => {
    if (opts.maxTokens === 0) return { loadNs: lease.loadNs, stats: emptyStats("length") };
    const job = { prompt: { kind: "text" as const, text: prompt }, sampling: opts.sampling, maxTokens: opts.maxTokens, fillContext: opts.fillContext, stop: opts.stop, grammar, logprobs, truncate: services.config.truncate };
    const stats = await lease.runner.generate(job, onChunk, ctx.signal, outputFlow(ctx.res));
    return { stats, loadNs: lease.loadNs };
  });
}

/** Raw embedding vectors of `inputs` (one job; the runner evaluates them in turn). */
export async function runEmbed(services: Services, ctx: RequestContext, target: Target, inputs: string[], truncate: boolean, dimensions?: number): Promise<{ result: EmbedResult; loadNs: number }> {
  // The load form (no input) loads any model, as Ollama's does.
  if (inputs.length > 0) await requireEmbedding(services, target);
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
