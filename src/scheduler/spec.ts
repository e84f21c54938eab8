/**
 * What a runner is loaded with: the load spec a request's options, the model's parameters, its
 * policy and the daemon's defaults make, and whether a loaded runner already serves a request.
 */
import os from "node:os";
import type { FlashAttention, KvCacheType, LoadSpec, RunnerGpu } from "../runner/types.js";
import type { ResolvedModel } from "../store/store.js";
import { contextLength, numberParam, withinTrained } from "./context-length.js";
import type { ModelPolicy } from "./policy.js";
import type { AcquireOptions, SchedulerOptions } from "./types.js";

/** The daemon's defaults a spec starts from. */
export type SpecDefaults = Pick<
  SchedulerOptions,
  "numParallel" | "defaultContextLength" | "threads" | "gpuOverheadBytes" | "streamIntervalMs" | "prefixCache" | "kvCacheType" | "flashAttention"
>;

/** The load spec for `model`: the request's options over the policy's, over the model's, over the defaults. */
export function specFor(model: ResolvedModel, options: AcquireOptions, policy: ModelPolicy | undefined, defaults: SpecDefaults, gpu: RunnerGpu): LoadSpec {
  const numCtx = contextLength({ request: options.numCtx, policy, params: model.params, fallback: defaults.defaultContextLength });
  const numGpu = options.numGpu ?? numberParam(model.params.num_gpu);
  const numThread = options.numThread ?? numberParam(model.params.num_thread);
  const numBatch = options.numBatch ?? numberParam(model.params.num_batch);
  const useMmap = options.useMmap ?? (typeof model.params.use_mmap === "boolean" ? model.params.use_mmap : undefined);
  return {
    path: model.modelPath,
    contextSize: numCtx,
    sequences: policy?.numParallel ?? defaults.numParallel,
    // A request's or a model's num_thread is capped at the CPUs this process may run on: more never
    // helps (llama.cpp's threads meet at spinning barriers) and a huge count wedges the runner.
    threads: numThread !== undefined && numThread > 0 ? Math.min(numThread, os.availableParallelism()) : (defaults.threads ?? 0),
    // `gpus: []` in the policy file: no GPU for this model, so no backend probing in its runner.
    gpu: policy?.gpus?.length === 0 ? false : gpu,
    ...(policy?.gpus !== undefined ? { gpus: policy.gpus } : {}),
    ...(defaults.gpuOverheadBytes ? { gpuOverheadBytes: defaults.gpuOverheadBytes } : {}),
    gpuLayers: numGpu !== undefined && numGpu >= 0 ? numGpu : undefined,
    ...(numBatch !== undefined ? { batchSize: numBatch } : {}),
    ...(useMmap !== undefined ? { useMmap } : {}),
    speculation: options.speculation?.draftPath || options.speculation?.lookup ? options.speculation : undefined,
    ...(model.adapterPaths?.length ? { lora: model.adapterPaths } : {}),
    ...(defaults.streamIntervalMs !== undefined ? { streamIntervalMs: defaults.streamIntervalMs } : {}),
    ...cacheFor(policy, defaults),
    ...(defaults.prefixCache ? { prefixCache: defaults.prefixCache } : {}),
  };
}

/** The KV cache's type and flash attention: the policy's over the defaults; a policy's explicit flash attention off keeps the cache f16. */
function cacheFor(policy: ModelPolicy | undefined, defaults: SpecDefaults): { kvCacheType: KvCacheType; flashAttention: FlashAttention } {
  const kvCacheType = policy?.kvCacheType ?? defaults.kvCacheType ?? "f16";
  const flashAttention = policy?.flashAttention ?? defaults.flashAttention ?? "auto";
  if (kvCacheType === "f16") return { kvCacheType, flashAttention };
  return flashAttention === false ? { kvCacheType: "f16", flashAttention } : { kvCacheType, flashAttention: true };
}

/**
 * Whether a runner loaded with `loaded` serves a request that wants `wanted`. Settings are compared
 * as they take effect: a requested context over the model's trained one (`trainContextSize`, 0 when
 * unknown) is the trained one, so `num_ctx` 4096, unset and 5000 on a 4096-context model are one load.
 * Adapters and speculation too: a runner keeps what it was loaded with.
 */
export function specMatches(loaded: LoadSpec, wanted: LoadSpec, trainContextSize: number): boolean {
  const effective = (n: number): number => withinTrained(n, trainContextSize);
  return (
    effective(wanted.contextSize) === effective(loaded.contextSize) &&
    wanted.gpuLayers === loaded.gpuLayers &&
    wanted.sequences === loaded.sequences &&
    wanted.threads === loaded.threads &&
    wanted.batchSize === loaded.batchSize &&
    wanted.useMmap === loaded.useMmap &&
    wanted.kvCacheType === loaded.kvCacheType &&
    wanted.flashAttention === loaded.flashAttention &&
    wanted.gpu === loaded.gpu &&
    (wanted.gpus ?? "all").toString() === (loaded.gpus ?? "all").toString() &&
    (wanted.lora ?? []).join("\n") === (loaded.lora ?? []).join("\n") &&
    JSON.stringify(wanted.speculation ?? null) === JSON.stringify(loaded.speculation ?? null)
  );
}
