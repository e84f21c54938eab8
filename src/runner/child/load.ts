/**
 * A runner child's load: the llama.cpp backend, the memory estimate the parent admits (or refuses),
 * the model, its context of N sequences (the slots), the draft model and the saved prefixes. Answers
 * the parent with `estimate`, `progress` and one `loaded` or `load-failed`.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { InsufficientMemoryError, LlamaCompletion, type Llama, type LlamaContext, type LlamaContextOptions, type LlamaModel } from "node-llama-cpp";
import type { RunnerFailureKind } from "../protocol.js";
import type { LoadSpec, PrefixCacheSpec } from "../types.js";
import { PrefixCache } from "../prefix-cache.js";
import { thoughtTags } from "../thinking-form.js";
import { installLinearTokenizer } from "../tokens.js";
import { estimateLoad } from "../estimate.js";
import { flashAttentionFor } from "../attention.js";
import { batchSizeFor } from "../batch.js";
import { openLlama } from "../engine.js";
import { autoThreads } from "../../cpu.js";
import { slotPredictors, type DraftResources } from "../speculative.js";
import { pausable } from "../flow.js";
import { DecodeLoop } from "../decode-loop.js";
import { fastEvaluate } from "../fast-evaluate.js";
import { awakeFor, awakeWhile } from "../awake.js";
import type { Outbox } from "../outbox.js";
import { clientSafe, type ChildIo } from "./io.js";
import { chatWrapperOf, supportsThinking } from "./chat-history.js";
import { LoadedModel, type Slot } from "./model.js";

/** What a load uses of the child besides its channel. */
export interface LoadHost {
  io: ChildIo;
  /** Gathers each job's output after its first (runner/outbox.ts); told the load's interval and each decode. */
  outbox: Outbox;
  /** Resolves when the parent admits the load after its estimate (`admit`). */
  admitted(): Promise<void>;
}

/** Loads the model `requested` names; undefined (after `load-failed`) when it cannot be loaded. */
export async function loadModel(requested: LoadSpec, host: LoadHost): Promise<LoadedModel | undefined> {
  const { io, outbox } = host;
  let spec = requested;
  if (spec.streamIntervalMs !== undefined) outbox.intervalMs = spec.streamIntervalMs;
  let usable: number | undefined;
  if (spec.threads <= 0) {
    const chosen = await autoThreads();
    io.log("info", "threads chosen from the free cores", chosen);
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
        io.log(level, message);
      },
      undefined,
      spec.gpuOverheadBytes ?? 0,
    );
  } catch (err) {
    io.send({ type: "load-failed", kind: "other", message: `no usable llama.cpp backend: ${clientSafe(err)}` });
    return undefined;
  }
  // Memory check before loading anything: the parent evicts idle models or refuses (the scheduler).
  const estimate = await estimateLoad(llama, spec).catch((err: unknown) => {
    // An unreadable header: loadModel below reports it as a corrupt file.
    io.log("debug", "memory estimate failed", { err: clientSafe(err, spec.path) });
    return undefined;
  });
  if (estimate) {
    const admitted = host.admitted();
    io.send({ type: "estimate", estimate });
    await admitted;
  }
  const gpuLayers = llama.gpu !== false && estimate ? estimate.gpuLayers : spec.gpuLayers;
  let model: LlamaModel;
  try {
    model = await llama.loadModel({
      modelPath: spec.path,
      ...(gpuLayers === undefined ? {} : { gpuLayers }),
      ...(spec.useMmap === undefined ? {} : { useMmap: spec.useMmap }),
      onLoadProgress: (fraction) => io.send({ type: "progress", fraction }),
    });
  } catch (err) {
    const kind: RunnerFailureKind = err instanceof InsufficientMemoryError ? "memory" : "corrupt";
    io.send({ type: "load-failed", kind, message: clientSafe(err, spec.path) });
    return undefined;
  }
  let context: LlamaContext;
  const contextSize = Math.min(spec.contextSize, model.trainContextSize || spec.contextSize);
  const batchSize = batchSizeFor({ ...spec, contextSize }, model.gpuLayers);
  try {
    context = await model.createContext({
      contextSize,
      sequences: spec.sequences,
      threads: spec.threads,
      ...(batchSize === undefined ? {} : { batchSize }),
      ...(spec.lora?.length ? { lora: { adapters: spec.lora.map((filePath) => ({ filePath })) } } : {}),
      ...cacheOptions({ ...spec, flashAttention: flashAttentionFor(spec, model.fileInsights, model.gpuLayers) }),
    });
  } catch (err) {
    await model.dispose().catch(() => undefined);
    const kind: RunnerFailureKind = err instanceof InsufficientMemoryError ? "memory" : "other";
    // A KV-cache type or flash-attention setting the model or backend cannot take fails here: say
    // which, with llama.cpp's reason (node-llama-cpp's error only says the context failed).
    const quantized = spec.kvCacheType !== undefined && spec.kvCacheType !== "f16";
    const reason = quantized && lastEngineError ? `: ${clientSafe(new Error(lastEngineError), spec.path)}` : "";
    const settings = quantized ? ` (kv cache type ${spec.kvCacheType}, flash attention ${String(spec.flashAttention ?? "auto")}${reason})` : "";
    io.send({ type: "load-failed", kind, message: `${clientSafe(err, spec.path)}${settings}` });
    return undefined;
  }
  let draft: DraftResources | undefined;
  if (spec.speculation?.draftPath) {
    try {
      draft = await loadDraft(llama, spec.speculation.draftPath, contextSize, spec);
    } catch (err) {
      await context.dispose().catch(() => undefined);
      await model.dispose().catch(() => undefined);
      io.send({ type: "load-failed", kind: "corrupt", message: `draft model: ${clientSafe(err, spec.speculation.draftPath)}` });
      return undefined;
    }
  }
  const predictors = spec.speculation ? slotPredictors(spec.speculation, spec.sequences, draft) : [];
  const slots: Slot[] = [];
  // Every layer on a GPU: the runner's main thread stays awake while a step decodes (runner/awake.ts).
  const awake = awakeFor(model.gpuLayers, model.fileInsights.totalLayers) ? awakeWhile(() => decodeLoop.busy) : undefined;
  const decodeLoop: DecodeLoop = new DecodeLoop(context, (expectedMs) => outbox.atDecode(expectedMs), undefined, awake);
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
  const prefixCache = spec.prefixCache ? await openPrefixCache(spec.prefixCache, spec, context.contextSize, io) : undefined;
  const loaded = new LoadedModel({ llama, model, context, slots, decodeLoop, modelFile: spec.path, lora: spec.lora ?? [], draft, prefixCache }, io);
  // The first generation's sampler, made now rather than before its first token (runner/fast-evaluate.ts).
  (model as unknown as { _prepareSampler?(): void })._prepareSampler?.();
  if (usable !== undefined) loaded.governThreads(usable, spec.threads);
  const usage = model.memoryUsage;
  io.send({
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
  return loaded;
}

/** The load's saved prefixes: a state depends on the model's blob, its adapters, the context and the cache's layout. */
function openPrefixCache(cache: PrefixCacheSpec, spec: LoadSpec, contextSize: number, io: ChildIo): Promise<PrefixCache | undefined> {
  const identity = {
    model: path.basename(spec.path),
    lora: (spec.lora ?? []).map((f) => path.basename(f)),
    contextSize,
    kvCacheType: spec.kvCacheType ?? "f16",
    flashAttention: spec.flashAttention ?? "auto",
  };
  return PrefixCache.open(cache, identity, (msg, data) => io.log("warn", msg, data)).catch((err: unknown) => {
    io.log("warn", "saved prompt prefixes unavailable", { dir: cache.dir, err: clientSafe(err) });
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
