/**
 * Runner child process: the only module that imports node-llama-cpp (DESIGN §1).
 *
 * It loads one model with one context of N sequences and serves generation jobs from the
 * parent over IPC. A native crash here kills only this process; the parent turns it into a 500.
 *
 * Signals: the daemon's process group may receive SIGINT/SIGTERM (Ctrl+C, systemd). The runner
 * ignores them and stops only when told (`unload`) or when the parent's IPC channel closes.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { withLock } from "lifecycle-utils";
import {
  InsufficientMemoryError,
  LlamaCompletion,
  type Llama,
  type LlamaContext,
  type LlamaContextOptions,
  type LlamaGrammar,
  type LlamaModel,
  type LlamaText,
  type Token,
} from "node-llama-cpp";
import { samplingOptions, stopSequenceOf } from "./sampling.js";
import { CONTEXT_EXCEEDED } from "./protocol.js";
import type { FromRunner, GenerateJob, GenerateStats, GrammarSpec, LoadSpec, PrefixCacheSpec, RunnerFailureKind, TokenLogprob, ToRunner } from "./protocol.js";
import { commonPrefix, PrefixCache } from "./prefix-cache.js";
import { chatWrapperOf, runChat, supportsThinking, toHistory } from "./chat.js";
import { answerPrompt, thoughtTags } from "./thinking-form.js";
import type { JobRuntime, Loaded, Slot } from "./runtime.js";
import { runEmbed } from "./embed.js";
import { runDetokenize, runRender, runTokenize, vocabularySize } from "./render.js";
import { installLinearTokenizer, tokenizeAsync, tokenizeLlamaText } from "./tokens.js";
import { runRank } from "./rank.js";
import { estimateLoad } from "./estimate.js";
import { openLlama } from "./engine.js";
import { LogprobRecorder } from "./logprobs.js";
import { autoThreads } from "../cpu.js";
import { ThreadGovernor } from "./threads.js";
import { beginSpeculation, slotPredictors, type DraftResources } from "./speculative.js";
import { pausable, PauseSwitch } from "./flow.js";
import { DecodeLoop, fastEvaluate } from "./decode-loop.js";
import { Outbox } from "./outbox.js";
import { generateText, keepFirstSpace, plainTriggers, type GenerationOptions, type GenerationResult } from "./generation.js";
import { jsonGrammar } from "./json-grammar.js";

let loaded: Loaded | undefined;
/** Resolves the wait after an `estimate` message (the parent's `admit`). */
let admit: (() => void) | undefined;
const jobs = new Map<number, AbortController>();
const pauses = new Map<number, PauseSwitch>();
/** Jobs still running: `unload` waits for them before it disposes what they use. */
const running = new Set<Promise<void>>();
let useCounter = 0;

function post(msg: FromRunner): void {
  if (process.connected) process.send?.(msg);
}

/** Changes the threads while jobs run, when SERVICE_THREADS is not set. */
let governor: ThreadGovernor | undefined;
/** The decode loop of the loaded model's context. */
let decodeLoop: DecodeLoop | undefined;
/** Output after a job's first is gathered for SERVICE_STREAM_INTERVAL (runner/outbox.ts). */
const outbox = new Outbox({
  post,
  now: () => performance.now(),
  setTimer: (callback, ms) => setTimeout(callback, ms),
  clearTimer: (timer) => clearTimeout(timer as NodeJS.Timeout),
  busy: () => decodeLoop?.busy === true,
});

/** Sends a message to the parent, through the outbox. */
function send(msg: FromRunner): void {
  outbox.send(msg);
}

function log(level: "debug" | "info" | "warn" | "error", msg: string, data?: Record<string, unknown>): void {
  send({ type: "log", level, msg, ...(data ? { data } : {}) });
}

/** Error text that is safe for a client: no absolute paths of the store. */
function clientSafe(err: unknown, modelFile?: string): string {
  let text = err instanceof Error ? err.message : String(err);
  if (modelFile) text = text.split(modelFile).join(path.basename(modelFile));
  return text.replace(/\s+/g, " ").trim() || "unknown error";
}

async function load(requested: LoadSpec): Promise<void> {
  let spec = requested;
  if (spec.streamIntervalMs !== undefined) outbox.intervalMs = spec.streamIntervalMs;
  let usable: number | undefined;
  if (spec.threads <= 0) {
    const chosen = await autoThreads();
    log("info", "threads chosen from the free cores", chosen);
    spec = { ...spec, threads: chosen.threads };
    usable = chosen.usable;
  }
  let llama: Llama;
  /** llama.cpp's last error line: the reason behind a failure node-llama-cpp reports without one. */
  let lastEngineError = "";
  try {
    llama = await openLlama(
      spec.gpu,
      (level, message) => {
        if (level === "error") lastEngineError = message.replace(/^llama\.cpp: /, "");
        log(level, message);
      },
      undefined,
      spec.gpuOverheadBytes ?? 0,
    );
  } catch (err) {
    send({ type: "load-failed", kind: "other", message: `no usable llama.cpp backend: ${clientSafe(err)}` });
    return;
  }
  // Memory check before loading anything: the parent evicts idle models or refuses (the scheduler).
  const estimate = await estimateLoad(llama, spec).catch((err: unknown) => {
    // An unreadable header: loadModel below reports it as a corrupt file.
    log("debug", "memory estimate failed", { err: clientSafe(err, spec.path) });
    return undefined;
  });
  if (estimate) {
    const admitted = new Promise<void>((resolve) => (admit = resolve));
    send({ type: "estimate", estimate });
    await admitted;
  }
  const gpuLayers = llama.gpu !== false && estimate ? estimate.gpuLayers : spec.gpuLayers;
  let model: LlamaModel;
  try {
    model = await llama.loadModel({
      modelPath: spec.path,
      ...(gpuLayers === undefined ? {} : { gpuLayers }),
      ...(spec.useMmap === undefined ? {} : { useMmap: spec.useMmap }),
      onLoadProgress: (fraction) => send({ type: "progress", fraction }),
    });
  } catch (err) {
    const kind: RunnerFailureKind = err instanceof InsufficientMemoryError ? "memory" : "corrupt";
    send({ type: "load-failed", kind, message: clientSafe(err, spec.path) });
    return;
  }
  let context: LlamaContext;
  const contextSize = Math.min(spec.contextSize, model.trainContextSize || spec.contextSize);
  try {
    context = await model.createContext({
      contextSize,
      sequences: spec.sequences,
      threads: spec.threads,
      ...(spec.batchSize === undefined ? {} : { batchSize: spec.batchSize }),
      ...(spec.lora?.length ? { lora: { adapters: spec.lora.map((filePath) => ({ filePath })) } } : {}),
      ...cacheOptions(spec),
    });
  } catch (err) {
    await model.dispose().catch(() => undefined);
    const kind: RunnerFailureKind = err instanceof InsufficientMemoryError ? "memory" : "other";
    // A KV-cache type or flash-attention setting the model or backend cannot take fails here: say
    // which, with llama.cpp's reason (node-llama-cpp's error only says the context failed).
    const quantized = spec.kvCacheType !== undefined && spec.kvCacheType !== "f16";
    const reason = quantized && lastEngineError ? `: ${clientSafe(new Error(lastEngineError), spec.path)}` : "";
    const settings = quantized ? ` (kv cache type ${spec.kvCacheType}, flash attention ${String(spec.flashAttention ?? "auto")}${reason})` : "";
    send({ type: "load-failed", kind, message: `${clientSafe(err, spec.path)}${settings}` });
    return;
  }
  let draft: DraftResources | undefined;
  if (spec.speculation?.draftPath) {
    try {
      draft = await loadDraft(llama, spec.speculation.draftPath, contextSize, spec);
    } catch (err) {
      await context.dispose().catch(() => undefined);
      await model.dispose().catch(() => undefined);
      send({ type: "load-failed", kind: "corrupt", message: `draft model: ${clientSafe(err, spec.speculation.draftPath)}` });
      return;
    }
  }
  const predictors = spec.speculation ? slotPredictors(spec.speculation, spec.sequences, draft) : [];
  const slots: Slot[] = [];
  decodeLoop = new DecodeLoop(context, (sinceLastMs) => outbox.atDecode(sinceLastMs));
  for (let i = 0; i < spec.sequences; i++) {
    const predictor = predictors[i];
    const sequence = context.getSequence(predictor ? { tokenPredictor: predictor } : {});
    const slot: Slot = { sequence, completion: new LlamaCompletion({ contextSequence: sequence }), busy: false, lastUsed: 0, predictor };
    pausable(sequence, () => slot.pause);
    fastEvaluate(sequence, decodeLoop, () => slot.pause);
    slots.push(slot);
  }
  // Every tokenization of the model linear in its text, node-llama-cpp's own included (runner/tokens.ts).
  installLinearTokenizer(model);
  if (draft) installLinearTokenizer(draft.model);
  const prefixCache = spec.prefixCache ? await openPrefixCache(spec.prefixCache, spec, context.contextSize) : undefined;
  loaded = { llama, model, context, slots, modelFile: spec.path, lora: spec.lora ?? [], draft, prefixCache };
  // The first generation's sampler, made now rather than before its first token (runner/decode-loop.ts).
  (model as unknown as { _prepareSampler?(): void })._prepareSampler?.();
  if (usable !== undefined) governor = governThreads(loaded, usable, spec.threads);
  const usage = model.memoryUsage;
  send({
    type: "loaded",
    info: {
      contextSize: context.contextSize,
      trainContextSize: model.trainContextSize,
      sequences: spec.sequences,
      // The context's buffers are not in memoryUsage; node-llama-cpp's estimate counts them.
      ramBytes: Math.max(usage.ram + context.stateSize, estimate?.ramBytes ?? 0),
      vramBytes: Math.max(usage.vram, estimate?.vramBytes ?? 0),
      gpu: llama.gpu,
      gpuLayers: model.gpuLayers,
      totalLayers: model.fileInsights.totalLayers,
      threads: spec.threads,
      batchSize: context.batchSize,
      binary: llama.buildType,
      threadpool: readFileSync("/proc/self/maps", "utf8").includes("/lmd-threadpool.so") ? "persistent" : "per-decode",
      hasChatTemplate: typeof model.fileInfo.metadata.tokenizer?.chat_template === "string",
      embeddingLength: model.embeddingVectorSize,
      thinking: supportsThinking(model),
      thoughts: thoughtTags(model, chatWrapperOf(model)),
    },
  });
}

/** The load's saved prefixes: a state depends on the model's blob, its adapters, the context and the cache's layout. */
function openPrefixCache(cache: PrefixCacheSpec, spec: LoadSpec, contextSize: number): Promise<PrefixCache | undefined> {
  const identity = { model: path.basename(spec.path), lora: (spec.lora ?? []).map((f) => path.basename(f)), contextSize, kvCacheType: spec.kvCacheType ?? "f16", flashAttention: spec.flashAttention ?? "auto" };
  return PrefixCache.open(cache, identity, (msg, data) => log("warn", msg, data)).catch((err: unknown) => {
    log("warn", "saved prompt prefixes unavailable", { dir: cache.dir, err: clientSafe(err) });
    return undefined;
  });
}

/** The context options of the KV cache's type and flash attention (the draft's context shares them). */
function cacheOptions(spec: LoadSpec): Pick<LlamaContextOptions, "flashAttention" | "experimentalKvCacheKeyType" | "experimentalKvCacheValueType"> {
  const type = spec.kvCacheType === "q8_0" ? "Q8_0" : spec.kvCacheType === "q4_0" ? "Q4_0" : undefined;
  return {
    ...(spec.flashAttention === undefined ? {} : { flashAttention: spec.flashAttention }),
    ...(type ? { experimentalKvCacheKeyType: type, experimentalKvCacheValueType: type } : {}),
  };
}

/** Threads chosen at load follow the load while jobs run (runner/threads.ts): the contexts change between two decodes. */
function governThreads(l: Loaded, usable: number, threads: number): ThreadGovernor {
  const contexts = [l.context, l.draft?.context].filter((c) => c !== undefined);
  return new ThreadGovernor({
    usable,
    threads,
    active: () => l.slots.some((slot) => slot.busy),
    apply: async (n) => {
      for (const context of contexts) await withLock([context, "context"], () => (context as unknown as { _ctx: { setThreads(n: number): void } })._ctx.setThreads(n));
    },
    log: (msg, data) => log("info", msg, data),
  });
}

/** The draft model of speculative decoding: on the same backend, a context as long as the target's. */
async function loadDraft(llama: Llama, draftPath: string, contextSize: number, spec: LoadSpec): Promise<DraftResources> {
  const model = await llama.loadModel({ modelPath: draftPath });
  try {
    const context = await model.createContext({ contextSize, sequences: spec.sequences, threads: spec.threads, ...cacheOptions(spec) });
    return { model, context };
  } catch (err) {
    await model.dispose().catch(() => undefined);
    throw err;
  }
}

/**
 * Tokens to evaluate for a job, without the BOS that LlamaCompletion prepends itself. A chat prompt
 * renders first, between `render-start` and `prompt-ready` (the parent's render budget times that
 * span: runner/render-budget.ts); tokenizing follows, in chunks that a cancel stops.
 */
async function promptTokens(l: Loaded, id: number, job: GenerateJob, signal: AbortSignal): Promise<{ tokens: Token[]; stopTriggers: LlamaText[] }> {
  const { model } = l;
  const context = (job.prompt.context ?? []) as Token[];
  const size = vocabularySize(model);
  // An id past the vocabulary fails llama.cpp's decode (the size is unknown only without a token list).
  const outside = size > 0 ? context.find((t) => t >= size) : undefined;
  if (outside !== undefined) throw new JobFailure(`context token ${outside} is not in the model's vocabulary (size ${size})`);
  if (job.prompt.kind === "text") return { tokens: [...context, ...(await tokenizeAsync(model, job.prompt.text, true, undefined, signal))], stopTriggers: [] };
  send({ type: "render-start", id });
  const { text, stopTriggers } = answerPrompt(model, chatWrapperOf(model), toHistory(job.prompt.turns), job.prompt.think);
  send({ type: "prompt-ready", id });
  let tokens = await tokenizeLlamaText(model, text, signal);
  if (tokens[0] !== undefined && tokens[0] === model.tokens.bos) tokens = tokens.slice(1);
  return { tokens: [...context, ...tokens], stopTriggers };
}

/** A job the request itself makes impossible: answered as `invalid` (a 400). */
class JobFailure extends Error {}

/** The generation on node-llama-cpp's LlamaCompletion, for stop triggers that are not plain text. */
async function completeWith(completion: LlamaCompletion, model: LlamaModel, tokens: Token[], o: GenerationOptions, stopTriggers: LlamaText[]): Promise<GenerationResult> {
  const keep = keepFirstSpace(model);
  let since: Token[] = [];
  const { metadata } = await completion.generateCompletionWithMeta(tokens, {
    signal: o.signal,
    stopOnAbortSignal: true,
    ...(o.fillContext ? { disableContextShift: true } : {}),
    ...(o.maxTokens !== undefined ? { maxTokens: o.maxTokens } : {}),
    ...o.sampling,
    ...(o.grammar ? { grammar: o.grammar } : {}),
    customStopTriggers: [...o.stop, ...stopTriggers],
    onToken: (t) => {
      since.push(...t);
      o.onToken(t);
    },
    onTextChunk: (text) => {
      o.onTextChunk(keep(since, text));
      since = [];
    },
  });
  return { stopReason: metadata.stopReason, stop: stopSequenceOf(metadata) };
}

/** The free slot whose evaluated tokens share the longest prefix with `tokens` (the prompt cache). */
function pickSlot(l: Loaded, tokens: readonly Token[]): { slot: Slot; cached: number } | undefined {
  let best: { slot: Slot; cached: number } | undefined;
  for (const slot of l.slots) {
    if (slot.busy) continue;
    const cached = commonPrefix(slot.sequence.contextTokens, tokens);
    // A shared BOS alone is no reason to overwrite a slot's cache: compare such slots by age (LRU).
    const useful = (n: number) => (n > 1 ? n : 0);
    if (!best || useful(cached) > useful(best.cached) || (useful(cached) === useful(best.cached) && slot.lastUsed < best.slot.lastUsed)) best = { slot, cached };
  }
  return best;
}

async function grammarFor(l: Loaded, spec: GrammarSpec | undefined): Promise<LlamaGrammar | undefined> {
  if (!spec) return undefined;
  if (spec.kind === "json") return jsonGrammar(l.llama);
  // The schema type is node-llama-cpp's GbnfJsonSchema; it rejects what it cannot express.
  return l.llama.createGrammarForJsonSchema(spec.schema as Parameters<Llama["createGrammarForJsonSchema"]>[0]);
}

/**
 * Marks the slot `pickSlot` chose busy, and restores into it a saved prefix longer than what it
 * holds; shared by generate and the chat jobs (the prompt cache).
 */
async function takeSlot(l: Loaded, tokens: readonly Token[], signal: AbortSignal): Promise<{ slot: Slot; cached: number } | undefined> {
  const picked = pickSlot(l, tokens);
  if (!picked) return undefined;
  picked.slot.busy = true;
  governor?.wake();
  picked.slot.lastUsed = ++useCounter;
  if (l.prefixCache) {
    const sequence = picked.slot.sequence;
    picked.cached = await l.prefixCache.restore(sequence, tokens, picked.cached, signal).catch((err: unknown) => {
      log("warn", "saved prompt prefix not restored", { err: clientSafe(err, l.modelFile) });
      return commonPrefix(sequence.contextTokens, tokens);
    });
  }
  return picked;
}

/** What chat.ts and embed.ts use of this process. */
const runtime: JobRuntime = { loaded: () => loaded, takeSlot, grammarFor, jobs, pauses, send, log, clientSafe };

async function generate(id: number, job: GenerateJob): Promise<void> {
  const l = loaded;
  if (!l) return send({ type: "failed", id, kind: "other", message: "model is not loaded" });
  const abort = new AbortController();
  jobs.set(id, abort);
  const pause = new PauseSwitch(abort.signal);
  pauses.set(id, pause);
  let slot: Slot | undefined;
  let recorder: LogprobRecorder | undefined;
  try {
    const { tokens: all, stopTriggers } = await promptTokens(l, id, job, abort.signal);
    abort.signal.throwIfAborted();
    let grammar: LlamaGrammar | undefined;
    try {
      grammar = await grammarFor(l, job.grammar);
    } catch (err) {
      return send({ type: "failed", id, kind: "invalid", message: `invalid format schema: ${clientSafe(err)}` });
    }
    const bos = l.model.tokens.bos;
    const hasBos = bos !== null && l.model.tokens.shouldPrependBosToken;
    const contextSize = l.context.contextSize;
    const shift = Math.max(1, Math.floor(contextSize / 10));
    const maxInput = Math.max(1, contextSize - shift - (hasBos ? 1 : 0));
    const truncatedTokens = Math.max(0, all.length - maxInput);
    if (truncatedTokens > 0 && job.truncate === false) return send({ type: "failed", id, kind: "invalid", message: CONTEXT_EXCEEDED });
    const tokens = truncatedTokens > 0 ? all.slice(truncatedTokens) : all;
    const evaluated = hasBos && bos !== null ? [bos, ...tokens] : tokens;
    const picked = await takeSlot(l, evaluated, abort.signal);
    if (!picked) return send({ type: "failed", id, kind: "other", message: "no free slot in the runner" });
    slot = picked.slot;
    slot.pause = pause;
    // LlamaCompletion re-evaluates at least the last prompt token, so at most length-1 come from cache.
    const cached = Math.min(picked.cached, evaluated.length - 1);
    const generated: Token[] = [];
    const speculation = beginSpeculation(slot.sequence, slot.predictor, job.sampling.speculative);
    const start = process.hrtime.bigint();
    let firstToken: bigint | undefined;
    if (job.logprobs !== undefined) recorder = new LogprobRecorder(slot.sequence, l.model, job.logprobs);
    // onToken and onTextChunk are called in pairs for the same tokens: the chunk carries their logprobs.
    let pending: TokenLogprob[] | undefined;
    const onToken = (t: Token[]) => {
      firstToken ??= process.hrtime.bigint();
      generated.push(...t);
      if (recorder) pending = [...(pending ?? []), ...recorder.take(t)];
    };
    const onTextChunk = (text: string) => {
      if (text || pending?.length) send({ type: "chunk", id, text, ...(pending ? { logprobs: pending } : {}) });
      pending = undefined;
    };
    const options = { signal: abort.signal, maxTokens: job.maxTokens, fillContext: job.fillContext, sampling: samplingOptions(job.sampling, contextSize), stop: job.stop, grammar, specialTokens: job.specialTokens, onToken, onTextChunk };
    // lmd's own generation (Ollama's stop rules) where every stop is plain text; a chat template's
    // stop triggers (special tokens among them) go through node-llama-cpp's completion.
    const { stopReason: reason, stop } =
      stopTriggers.length > 0 || plainTriggers(grammar) === undefined ? await completeWith(slot.completion, l.model, tokens, options, stopTriggers) : await generateText(slot.sequence, tokens, options);
    const end = process.hrtime.bigint();
    const firstAt = firstToken ?? end;
    const stats: GenerateStats = {
      promptTokens: evaluated.length,
      promptEvalCount: evaluated.length - cached,
      promptEvalNs: Number(firstAt - start),
      evalCount: generated.length,
      evalNs: Number(end - firstAt),
      doneReason: reason === "abort" ? "cancelled" : reason === "maxTokens" ? "length" : "stop",
      context: [...tokens, ...generated],
      truncatedTokens: truncatedTokens + (job.droppedTokens ?? 0),
      // The chat wrapper's own triggers are custom ones here too: only the request's count.
      stopSequence: stop !== undefined && job.stop.includes(stop) ? stop : undefined,
      draft: speculation(),
    };
    send({ type: "done", id, stats });
  } catch (err) {
    if (err instanceof JobFailure) return send({ type: "failed", id, kind: "invalid", message: err.message });
    // Cancelled before anything was generated (while the prompt was tokenized): as any cancel, `done`.
    if (abort.signal.aborted) return send({ type: "done", id, stats: { promptTokens: 0, promptEvalCount: 0, promptEvalNs: 0, evalCount: 0, evalNs: 0, doneReason: "cancelled", context: [], truncatedTokens: 0 } });
    const oom = err instanceof InsufficientMemoryError || /out of memory/i.test(String(err));
    log("error", "generation failed", { err: err instanceof Error ? { message: err.message, stack: err.stack } : String(err) });
    send({ type: "failed", id, kind: oom ? "memory" : "other", message: oom ? "out of memory" : clientSafe(err, l.modelFile) });
  } finally {
    recorder?.restore();
    if (slot) {
      slot.busy = false;
      slot.pause = undefined;
    }
    jobs.delete(id);
    pauses.delete(id);
  }
}

async function unload(): Promise<void> {
  governor?.stop();
  governor = undefined;
  for (const abort of jobs.values()) abort.abort();
  // An aborted job still finishes its current step; disposing the context under it throws
  // DisposedError from inside node-llama-cpp. Aborted, each job ends within a token or so.
  await Promise.allSettled(running);
  const l = loaded;
  loaded = undefined;
  if (l) {
    // What the slots evaluated outlives the load: saved for the next one (prefix-cache.ts).
    for (const slot of l.slots) await l.prefixCache?.save(slot.sequence);
    await l.context.dispose().catch(() => undefined);
    await l.model.dispose().catch(() => undefined);
    await l.draft?.context.dispose().catch(() => undefined);
    await l.draft?.model.dispose().catch(() => undefined);
    await l.llama.dispose().catch(() => undefined);
  }
}

async function exitCleanly(code: number): Promise<void> {
  await unload();
  process.exit(code);
}

/** Runs a job, remembered until it settles (a rejection still surfaces as before: a crash). */
function track(job: Promise<void>): void {
  running.add(job);
  void job.finally(() => running.delete(job));
}

function onMessage(msg: ToRunner): void {
  switch (msg.type) {
    case "load":
      void load(msg.spec);
      break;
    case "generate":
      track(generate(msg.id, msg.job));
      break;
    case "chat":
      track(runChat(runtime, msg.id, msg.job));
      break;
    case "embed":
      track(runEmbed(runtime, msg.id, msg.job));
      break;
    case "render":
      runRender(runtime, msg.id, msg.job);
      break;
    case "tokenize":
      track(runTokenize(runtime, msg.id, msg.text, msg.addSpecial === true, msg.parseSpecial !== false));
      break;
    case "detokenize":
      runDetokenize(runtime, msg.id, msg.tokens);
      break;
    case "rank":
      track(runRank(runtime, msg.id, msg.job));
      break;
    case "cancel":
      jobs.get(msg.id)?.abort(); // also resumes a paused job, so that it ends
      break;
    case "pause":
      pauses.get(msg.id)?.pause();
      break;
    case "resume":
      pauses.get(msg.id)?.resume();
      break;
    case "admit":
      admit?.();
      admit = undefined;
      break;
    case "unload":
      void exitCleanly(0);
      break;
  }
}

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(signal, () => log("debug", `runner ignored ${signal}; it stops when the daemon tells it to`));
}
process.on("message", (msg) => onMessage(msg as ToRunner));
// The daemon is gone (crashed, SIGKILLed): nobody can use this model any more.
process.on("disconnect", () => void exitCleanly(0));
