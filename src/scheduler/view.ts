/** What `/api/ps` and the metrics see of a loaded model. */
import type { FlashAttention, KvCacheType, RunnerInfo } from "../runner/types.js";
import type { ResolvedModel } from "../store/store.js";
import type { ModelPolicy } from "./policy.js";
import type { Loaded } from "./types.js";

/** What `/api/ps` shows for each loaded model. */
export interface LoadedModelInfo {
  model: ResolvedModel;
  /** When the idle model unloads; undefined while in use or when kept forever. */
  expiresAt: Date | undefined;
  /** The keep-alive that applies after its last request (negative = forever). */
  keepAliveMs: number;
  ramBytes: number;
  vramBytes: number;
  /** Every layer of the model is on the GPU. */
  allOnGpu: boolean;
  contextLength: number;
  active: number;
  pid: number | undefined;
  /** Requests waiting for a slot of this model. */
  queued: number;
  /** Parallel slots of this load. */
  numParallel: number;
  /** CPU threads it was loaded with, and its prompt batch size. */
  threads: number;
  batchSize: number;
  /** The KV cache's type and the flash-attention setting it was loaded with. */
  kvCacheType: KvCacheType;
  flashAttention: FlashAttention;
  /** What the policy file says about this model, if anything. */
  policy: ModelPolicy | undefined;
}

/** One loaded model as `/api/ps` shows it, with the requests queued for it and its policy. */
export function describe(e: Loaded, queued: number, policy: ModelPolicy | undefined): LoadedModelInfo {
  const info = e.runner.info;
  return {
    model: e.model,
    expiresAt: e.expiresAt,
    keepAliveMs: e.keepAliveMs,
    ramBytes: info.ramBytes,
    vramBytes: info.vramBytes,
    allOnGpu: allLayersOnGpu(info),
    contextLength: info.contextSize,
    active: e.active,
    pid: e.runner.pid,
    queued,
    numParallel: e.spec.sequences,
    threads: info.threads,
    batchSize: info.batchSize,
    kvCacheType: e.spec.kvCacheType ?? "f16",
    flashAttention: e.spec.flashAttention ?? "auto",
    policy,
  };
}

/** True when the runner offloaded every layer (it reports a GPU, and as many layers as the model has). */
export function allLayersOnGpu(info: Pick<RunnerInfo, "gpu" | "gpuLayers" | "totalLayers" | "vramBytes">): boolean {
  return info.gpu !== false && info.vramBytes > 0 && info.totalLayers !== undefined && info.totalLayers > 0 && info.gpuLayers >= info.totalLayers;
}
