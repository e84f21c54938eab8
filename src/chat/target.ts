/**
 * A request's target: the model resolved in the store, its options merged once (PARAMETERs, the
 * policy file, the request), its effective context length, and the lease on a slot of its runner
 * that every job of the engine runs under. Ollama's capability checks come before any load.
 */
import type { Logger } from "pino";
import type { ModelOptions } from "../api/types.js";
import type { Capability } from "../api/model-types.js";
import { BadRequestError, HttpError, ModelLoadError, ModelNotFoundError } from "../errors.js";
import type { Lease } from "../scheduler/scheduler.js";
import { contextLength } from "../scheduler/context-length.js";
import { capabilities } from "../store/capabilities.js";
import { ggufOf } from "../store/model-info.js";
import { fullName } from "../store/names.js";
import type { ResolvedModel } from "../store/store.js";
import type { ChatTurn } from "../runner/types.js";
import { capPredict, resolveOptions, type ResolvedOptions } from "./options.js";
import type { Services } from "./services.js";

/** A request resolved against the store: the model, its merged options, the keep-alive. */
export interface Target {
  /** The name as the client wrote it (for messages and the `model` field of answers). */
  name: string;
  model: ResolvedModel;
  opts: ResolvedOptions;
  /** The context length the model runs with for this request (scheduler/context-length.ts). */
  numCtx: number;
  /** The context length the load asks for: `numCtx` before the trained cap, which the runner applies (and the scheduler logs). */
  loadCtx: number;
  keepAliveMs: number | undefined;
  /** The draft model's file when the model names one (Modelfile DRAFT): speculative decoding. */
  draftPath?: string | undefined;
}

/**
 * Resolves the model (404 when missing), merges its parameters with the policy file's default
 * options and the request's, and works out the context length once: the load asks for it, the
 * automatic `num_predict` cap is four of it, and a prompt's history is cut to it.
 */
export async function resolveTarget(
  services: Services,
  name: string,
  options: ModelOptions | undefined,
  keepAliveMs: number | undefined,
  log: Logger,
): Promise<Target> {
  log.setBindings({ model: name }); // the request's log line names its model (journal field LMD_MODEL)
  const model = await services.store.resolve(name);
  const policy = services.scheduler.policyFor(model.key);
  // The policy file's default options sit between the model's PARAMETERs and the request's options.
  const resolved = resolveOptions({ ...model.params, ...policy?.options }, options, log);
  const sources = { request: options?.num_ctx, policy, params: model.params, fallback: services.config.contextLength };
  const numCtx = contextLength(sources, await trainedContext(services, model));
  const opts = capPredict(resolved, services.config.maxPredict, numCtx);
  return { name, model, opts, numCtx, loadCtx: contextLength(sources), keepAliveMs, draftPath: await draftPathOf(services, model) };
}

/** The context the model was trained for, from its GGUF header; undefined when the header cannot be read (the load then says why). */
async function trainedContext(services: Services, model: ResolvedModel): Promise<number | undefined> {
  const gguf = await ggufOf(services.store, model.digest).catch(() => undefined);
  const arch = gguf?.metadata["general.architecture"];
  const trained = typeof arch === "string" ? gguf?.metadata[`${arch}.context_length`] : undefined;
  return typeof trained === "number" ? trained : typeof trained === "bigint" ? Number(trained) : undefined;
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
  return gguf && capabilities(gguf, model.template, model);
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

/** Embeddings of a reranker are its relevance scores, not vectors: a 400 in Ollama's words for a missing capability. */
export async function requireEmbedding(services: Services, target: Target): Promise<void> {
  if ((await capabilitiesOf(services, target.model))?.includes("reranking"))
    throw new BadRequestError(`${fullName(target.model.name)} does not support embedding`);
}

/** Holds a slot of the target's model (loading it first if needed) while `run` works; aborting `signal` gives up the wait. */
export async function withLease<T>(services: Services, signal: AbortSignal, target: Target, run: (lease: Lease) => Promise<T>): Promise<T> {
  const { opts } = target;
  const draft = target.draftPath
    ? {
        ...(opts.draftPMin !== undefined ? { minConfidence: opts.draftPMin } : {}),
        ...(opts.draftNumPredict !== undefined ? { maxTokens: opts.draftNumPredict } : {}),
      }
    : {};
  const speculation = { draftPath: target.draftPath, lookup: opts.promptLookup, ...draft };
  const lease = await services.scheduler.acquire(target.model, {
    keepAliveMs: target.keepAliveMs,
    numCtx: target.loadCtx,
    numGpu: opts.numGpu,
    numThread: opts.numThread,
    numBatch: opts.numBatch,
    useMmap: opts.useMmap,
    speculation,
    signal,
  });
  try {
    return await run(lease);
  } finally {
    lease.release();
  }
}

/** The load form (empty input): loads the model, or with `keep_alive: 0` unloads it. */
export async function loadOrUnload(services: Services, signal: AbortSignal, target: Target): Promise<"load" | "unload"> {
  if (target.keepAliveMs === 0) {
    // A pinned model stays loaded whatever a client asks; saying so beats ignoring the request.
    if (services.scheduler.policyFor(target.model.key)?.pinned)
      throw new HttpError(409, `model '${target.name}' is pinned by the policy file (SERVICE_MODELS_CONFIG)`);
    await services.scheduler.unload(target.model.key);
    return "unload";
  }
  await withLease(services, signal, target, async () => undefined);
  return "load";
}

/**
 * What a chat evaluates, as Ollama's ChatHandler composes it: the model's MESSAGE lines, then the
 * request's messages; the model's SYSTEM first unless the request opens with a system message.
 */
export function conversation(model: Pick<ResolvedModel, "system" | "messages">, turns: ChatTurn[]): ChatTurn[] {
  const all = [...model.messages, ...turns];
  return model.system && turns[0]?.role !== "system" ? [{ role: "system", content: model.system }, ...all] : all;
}
