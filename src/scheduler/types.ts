/**
 * The scheduler's shapes: what it is built with, what a request asks for, what it hands back, and
 * what it keeps for each loaded model. It knows a runner only through {@link RunnerHandle}; how a
 * runner is started is a function given to it (the daemon's starts a child process, tests a fake).
 */
import type { Logger } from "pino";
import type { RunnerHandle } from "../runner/handle.js";
import type { FlashAttention, KvCacheType, LoadSpec, MemoryEstimate, PrefixCacheSpec, RunnerGpu, SpeculationLoad } from "../runner/types.js";
import type { ResolvedModel } from "../store/store.js";
import type { PolicyTable } from "./policy.js";

/** Token counts and timings of one finished job, as the runner reports them. */
export type JobStats = Parameters<NonNullable<RunnerHandle["onStats"]>>[0];

/** What the scheduler gives a runner's start besides the spec: the memory check and the load's cancellation. */
export interface LoadHooks {
  /**
   * Decides on the runner's memory estimate before anything is loaded: resolves to let the load go
   * ahead (after making room), rejects (a ModelLoadError) to refuse it.
   */
  admit?: ((estimate: MemoryEstimate) => Promise<void>) | undefined;
  /** Aborted when every request waiting for the load gave up, or at shutdown: the start rejects. */
  signal?: AbortSignal | undefined;
}

/** Starts a runner for `model` with `spec`; resolves once the model is loaded. */
export type StartRunner = (spec: LoadSpec, model: ResolvedModel, hooks: LoadHooks) => Promise<RunnerHandle>;

export interface SchedulerOptions {
  log: Logger;
  /** Starts runners (the daemon's forks a child process per model; tests give a fake). */
  startRunner: StartRunner;
  numParallel: number;
  /** 0 = auto: 1 on CPU (3 per GPU once GPU runners are detected). */
  maxLoaded: number;
  maxQueue: number;
  defaultKeepAliveMs: number;
  defaultContextLength: number;
  /** undefined = the runner chooses at each load (src/cpu.ts). */
  threads: number | undefined;
  gpu: RunnerGpu;
  /** SERVICE_GPU_OVERHEAD: VRAM (bytes) kept free on each GPU; the memory check leaves it out. */
  gpuOverheadBytes?: number | undefined;
  /** SERVICE_STREAM_INTERVAL, passed to each runner in its load spec; undefined = the runner's default. */
  streamIntervalMs?: number | undefined;
  /** Saved prompt prefixes, passed to each runner in its load spec; undefined = none. */
  prefixCache?: PrefixCacheSpec | undefined;
  /** SERVICE_KV_CACHE_TYPE and SERVICE_FLASH_ATTENTION: the defaults a model's policy may override. */
  kvCacheType?: KvCacheType | undefined;
  flashAttention?: FlashAttention | undefined;
  /** Called with each finished job's token counts and timings (metrics). */
  onJobStats?: (model: ResolvedModel, stats: JobStats) => void;
  /** The per-model policy in force (SERVICE_MODELS_CONFIG); read on every decision, so a reload applies at once. */
  policy?: () => PolicyTable;
}

export interface AcquireOptions {
  /** Keep-alive requested by this request (ms); undefined = the default. */
  keepAliveMs?: number | undefined;
  /** Context length requested (num_ctx); undefined = the default. */
  numCtx?: number | undefined;
  /** GPU layers requested (num_gpu). */
  numGpu?: number | undefined;
  /** CPU threads (num_thread; over SERVICE_THREADS and the free-core rule), prompt batch (num_batch), mmap (use_mmap). */
  numThread?: number | undefined;
  numBatch?: number | undefined;
  useMmap?: boolean | undefined;
  /** Speculative decoding for the load: the draft model's file (Modelfile DRAFT), prompt lookup. */
  speculation?: SpeculationLoad | undefined;
  signal?: AbortSignal | undefined;
}

/** A slot of a loaded model, held by one request until `release()`. */
export interface Lease {
  readonly runner: RunnerHandle;
  readonly model: ResolvedModel;
  /** Nanoseconds this request spent waiting for the model to load (0 when it was loaded). */
  readonly loadNs: number;
  release(): void;
}

/** A loaded model: its runner, what it was loaded with, who holds it and when it goes away. */
export interface Loaded {
  model: ResolvedModel;
  runner: RunnerHandle;
  spec: LoadSpec;
  /** Leases held now. */
  active: number;
  /** The keep-alive that applies after its last request (negative = forever). */
  keepAliveMs: number;
  /** When the idle model unloads; undefined while in use or when kept forever. */
  expiresAt: Date | undefined;
  timer: NodeJS.Timeout | undefined;
  /** Grows with each use: the least recently used idle model is evicted first. */
  lastUsed: number;
}
