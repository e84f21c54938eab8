/**
 * The scheduler (DESIGN §1): which models are loaded, which request runs where, and when a
 * model goes away.
 *
 * - Each loaded model is one runner with `numParallel` slots (sequences of one context).
 * - A request that finds no free slot waits in one bounded FIFO queue (`maxQueue`; beyond → 503).
 * - One load at a time. When `maxLoaded` models are resident, the least recently used idle
 *   model is evicted to make room; if none is idle, the request waits.
 * - After its last request a model stays loaded for its keep-alive (per request or the default),
 *   then unloads; 0 unloads at once, negative never.
 * - A runner that crashes is dropped; its requests fail with a 500 and the next request reloads.
 * - Before a load, the runner reports node-llama-cpp's memory estimate; idle models are evicted
 *   (least recently used first) if that makes room, else the load is refused without trying.
 * - A load that every waiting request gave up on is stopped.
 * - Shutdown (app.ts): `startDraining()`, then `drain()` serves what was already received, queued
 *   and loading requests included, then `unloadAll()` refuses what is left (503) and stops runners.
 */
import type { Logger } from "pino";
import { ModelLoadError, ServiceBusyError, ShuttingDownError } from "../errors.js";
import type { ResolvedModel } from "../store/store.js";
import type { FlashAttention, KvCacheType, LoadSpec, PrefixCacheSpec, MemoryEstimate, RunnerGpu, RunnerInfo, SpeculationLoad } from "../runner/protocol.js";
import { Runner, type JobStats, type RunnerOptions } from "../runner/client.js";
import { keepAliveOrForever, MAX_TIMER_MS } from "../units.js";
import { availableRam, notEnoughMemory, shortfall, vramRoom, type Room } from "./memory.js";
import { PolicyTable, type ModelPolicy } from "./policy.js";

export interface SchedulerOptions {
  log: Logger;
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
  loadTimeoutMs: number;
  /** SERVICE_RENDER_TIMEOUT: the budget of a chat template's render in a runner; undefined = none. */
  renderTimeoutMs?: number | undefined;
  /** SERVICE_STREAM_INTERVAL, passed to each runner in its load spec; undefined = the runner's default. */
  streamIntervalMs?: number | undefined;
  /** Saved prompt prefixes, passed to each runner in its load spec; undefined = none. */
  prefixCache?: PrefixCacheSpec | undefined;
  /** SERVICE_KV_CACHE_TYPE and SERVICE_FLASH_ATTENTION: the defaults a model's policy may override. */
  kvCacheType?: KvCacheType | undefined;
  flashAttention?: FlashAttention | undefined;
  /** Starts a runner; tests may replace it. `hooks` carry the memory check and the load's cancellation. */
  startRunner?: (spec: LoadSpec, model: ResolvedModel, hooks?: Pick<RunnerOptions, "admit" | "signal">) => Promise<Runner>;
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
  readonly runner: Runner;
  readonly model: ResolvedModel;
  /** Nanoseconds this request spent waiting for the model to load (0 when it was loaded). */
  readonly loadNs: number;
  release(): void;
}

interface Loaded {
  model: ResolvedModel;
  runner: Runner;
  spec: LoadSpec;
  active: number;
  keepAliveMs: number;
  expiresAt: Date | undefined;
  timer: NodeJS.Timeout | undefined;
  lastUsed: number;
}

interface Waiter {
  model: ResolvedModel;
  options: AcquireOptions;
  queuedAt: bigint;
  resolve: (lease: Lease) => void;
  reject: (err: unknown) => void;
  onAbort: () => void;
}

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

export class Scheduler {
  private readonly loaded = new Map<string, Loaded>();
  private readonly waiting: Waiter[] = [];
  private loading: { key: string; promise: Promise<void>; abort?: AbortController } | undefined;
  /** Models whose capped context length has been logged. */
  private readonly capNoted = new Set<string>();
  /** A runner reported a GPU: the automatic `maxLoaded` becomes 3. */
  private gpuSeen = false;
  /** Shutting down: readiness says so and preloads stop; requests already received are still served. */
  private draining = false;
  /** Shut down: every request is refused. */
  private stopped = false;
  private useCounter = 0;
  private readonly idleWaiters = new Set<() => void>();
  /** The `gpu` of new load specs: SERVICE_GPU until the backend report says otherwise ({@link useGpu}). */
  private gpu: RunnerGpu;
  /** Loads that would use the GPU are refused with this (SERVICE_GPU insists on a broken backend). */
  private gpuRefusal: string | undefined;

  constructor(private readonly options: SchedulerOptions) {
    this.gpu = options.gpu;
  }

  /**
   * What the start's backend report found (src/backend.ts runnerGpu): the `gpu` that new runners get,
   * and a reason to refuse loads that would use the GPU. A model loaded before the report came in
   * (a preload) keeps its runner until that is idle: its spec no longer matches, so the next request
   * reloads it with the new setting; if the broken backend crashes it first, the next request loads
   * it anew, with the new setting too.
   */
  useGpu(gpu: RunnerGpu, refusal?: string): void {
    this.gpu = gpu;
    this.gpuRefusal = refusal;
  }

  /** Models resident at most at once. */
  get maxLoaded(): number {
    if (this.options.maxLoaded > 0) return this.options.maxLoaded;
    return this.gpuSeen ? 3 : 1;
  }

  /** Key of the model being loaded now, if any (tests, metrics). */
  get loadingModel(): string | undefined {
    return this.loading?.abort ? this.loading.key : undefined;
  }

  /** Requests waiting for a slot or a load. */
  get queueDepth(): number {
    return this.waiting.length;
  }

  /** Waits for a free slot of `model`, loading it if needed. */
  acquire(model: ResolvedModel, options: AcquireOptions = {}): Promise<Lease> {
    // While draining, a request that reaches this point was received before the signal (the
    // HTTP server refuses later ones), so it is served like any other.
    if (this.stopped) return Promise.reject(new ShuttingDownError());
    if (options.signal?.aborted) return Promise.reject(options.signal.reason);
    const ready = this.tryGrant(model, options, process.hrtime.bigint());
    if (ready) return Promise.resolve(ready);
    // Admission fails fast instead of queueing without bound.
    if (this.waiting.length >= this.options.maxQueue) return Promise.reject(new ServiceBusyError());
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = {
        model,
        options,
        queuedAt: process.hrtime.bigint(),
        resolve,
        reject,
        onAbort: () => {
          // Cancelled while queued: leave no trace in the queue.
          const i = this.waiting.indexOf(waiter);
          if (i >= 0) this.waiting.splice(i, 1);
          reject(options.signal?.reason);
          // Nobody else waits for the model being loaded: stop the load too.
          const loading = this.loading;
          if (loading?.key === model.key && !this.waiting.some((w) => w.model.key === model.key)) loading.abort?.abort();
          this.pump();
          this.notifyIdle();
        },
      };
      options.signal?.addEventListener("abort", waiter.onAbort, { once: true });
      this.waiting.push(waiter);
      this.pump();
    });
  }

  /** Unloads a model now if it is idle, else as soon as its last request finishes (keep_alive 0). */
  async unload(key: string): Promise<void> {
    const entry = this.loaded.get(key);
    if (!entry) return;
    entry.keepAliveMs = 0;
    if (entry.active === 0) await this.evict(entry);
  }

  /** Loaded models, most recently used first. */
  list(): LoadedModelInfo[] {
    return [...this.loaded.values()]
      .sort((a, b) => b.lastUsed - a.lastUsed)
      .map((e) => ({
        model: e.model,
        expiresAt: e.expiresAt,
        keepAliveMs: e.keepAliveMs,
        ramBytes: e.runner.info.ramBytes,
        vramBytes: e.runner.info.vramBytes,
        allOnGpu: allLayersOnGpu(e.runner.info),
        contextLength: e.runner.info.contextSize,
        active: e.active,
        pid: e.runner.pid,
        queued: this.waiting.filter((w) => w.model.key === e.model.key).length,
        numParallel: e.spec.sequences,
        threads: e.runner.info.threads,
        batchSize: e.runner.info.batchSize,
        kvCacheType: e.spec.kvCacheType ?? "f16",
        flashAttention: e.spec.flashAttention ?? "auto",
        policy: this.policyFor(e.model.key),
      }));
  }

  /**
   * What `/readyz` reports: whether new requests are accepted and, for a model, whether it is
   * loaded with a free slot right now. Reads state only; never loads anything.
   */
  readiness(key?: string): { accepting: boolean; loaded: boolean; freeSlots: number; queued: number } {
    const entry = key === undefined ? undefined : this.loaded.get(key);
    const queued = key === undefined ? this.waiting.length : this.waiting.filter((w) => w.model.key === key).length;
    const freeSlots = entry ? Math.max(0, entry.spec.sequences - entry.active) : 0;
    return { accepting: !this.draining, loaded: entry !== undefined, freeSlots, queued };
  }

  /** True while any request holds a slot of the model with this key. */
  inUse(key: string): boolean {
    return (this.loaded.get(key)?.active ?? 0) > 0 || this.waiting.some((w) => w.model.key === key);
  }

  /**
   * Shutdown step 1: `/readyz` turns unready and preloads stop. Requests already queued or waiting
   * for a load stay: a client that sent its request before the signal is served if it can be
   * within the shutdown timeout (`systemctl restart` during a load is the common case).
   */
  startDraining(): void {
    this.draining = true;
  }

  /** Shutdown step 2: resolves when no request holds a slot, waits in the queue or waits for a load. */
  drain(): Promise<void> {
    const idle = () => this.activeTotal() === 0 && this.waiting.length === 0 && !this.loading;
    if (idle()) return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => {
        if (idle()) {
          this.idleWaiters.delete(check);
          resolve();
        }
      };
      this.idleWaiters.add(check);
    });
  }

  /**
   * Shutdown step 3 (after the drain, or when the timeout ends it): requests still queued or
   * waiting for a load get 503, a load in progress is stopped, jobs still running end with 503
   * (a stream's last line), and every runner disposes its model and exits.
   */
  async unloadAll(): Promise<void> {
    this.stopped = true;
    for (const w of this.waiting.splice(0)) {
      w.options.signal?.removeEventListener("abort", w.onAbort);
      w.reject(new ShuttingDownError());
    }
    this.loading?.abort?.abort();
    await this.loading?.promise.catch(() => undefined);
    await Promise.all([...this.loaded.values()].map((e) => this.evict(e, new ShuttingDownError())));
  }

  /** Lets `drain()` look again. */
  private notifyIdle(): void {
    for (const check of [...this.idleWaiters]) check();
  }

  private activeTotal(): number {
    let n = 0;
    for (const e of this.loaded.values()) n += e.active;
    return n;
  }

  /** A lease on a free slot of an already loaded, matching runner; undefined if there is none. */
  private tryGrant(model: ResolvedModel, options: AcquireOptions, queuedAt: bigint, loadNs = 0): Lease | undefined {
    const entry = this.loaded.get(model.key);
    if (!entry || !entry.runner.alive || entry.model.digest !== model.digest) return undefined;
    if (!this.specMatches(entry, model, options)) return undefined;
    if (entry.active >= entry.spec.sequences) return undefined;
    entry.active++;
    entry.lastUsed = ++this.useCounter;
    clearTimeout(entry.timer);
    entry.timer = undefined;
    entry.expiresAt = undefined;
    if (options.keepAliveMs !== undefined && !this.policyFor(model.key)?.pinned) entry.keepAliveMs = keepAliveOrForever(options.keepAliveMs);
    let released = false;
    const waitedNs = loadNs > 0 ? Number(process.hrtime.bigint() - queuedAt) : 0;
    return {
      runner: entry.runner,
      model: entry.model,
      loadNs: waitedNs,
      release: () => {
        if (released) return;
        released = true;
        this.release(entry);
      },
    };
  }

  private release(entry: Loaded): void {
    entry.active--;
    if (entry.active === 0 && this.loaded.get(entry.model.key) === entry) this.scheduleExpiry(entry);
    this.pump();
    this.notifyIdle();
  }

  private scheduleExpiry(entry: Loaded): void {
    const ms = entry.keepAliveMs;
    if (ms < 0) {
      entry.expiresAt = undefined;
      return;
    }
    if (ms === 0) {
      void this.evict(entry);
      return;
    }
    entry.expiresAt = new Date(Date.now() + ms);
    // Timers over ~24.8 days overflow; such keep-alives are effectively forever.
    if (ms < MAX_TIMER_MS) {
      entry.timer = setTimeout(() => {
        if (entry.active === 0) void this.evict(entry);
      }, ms);
      entry.timer.unref();
    }
  }

  /** The policy of the model with this key (SERVICE_MODELS_CONFIG), if the file names it. */
  policyFor(key: string): ModelPolicy | undefined {
    return this.options.policy?.().for(key);
  }

  /** After the policy changed (SIGHUP): loaded models take their new keep-alive or pin now. */
  applyPolicy(): void {
    for (const entry of this.loaded.values()) {
      entry.keepAliveMs = this.keepAliveFor(entry.model.key);
      if (entry.active > 0) continue;
      clearTimeout(entry.timer);
      entry.timer = undefined;
      this.scheduleExpiry(entry);
    }
    this.pump(); // a changed num_parallel or num_ctx reloads a model once it is idle
  }

  private keepAliveFor(key: string): number {
    const policy = this.policyFor(key);
    return policy?.pinned ? -1 : keepAliveOrForever(policy?.keepAliveMs ?? this.options.defaultKeepAliveMs);
  }

  /** Idle models that may be unloaded to make room, least recently used first (never a pinned one). */
  private evictable(except?: string): Loaded[] {
    return [...this.loaded.values()].filter((e) => e.active === 0 && e.model.key !== except && !this.policyFor(e.model.key)?.pinned).sort((a, b) => a.lastUsed - b.lastUsed);
  }

  private specFor(model: ResolvedModel, options: AcquireOptions): LoadSpec {
    const policy = this.policyFor(model.key);
    const numCtx = options.numCtx ?? policy?.numCtx ?? numberParam(model.params.num_ctx) ?? this.options.defaultContextLength;
    const numGpu = options.numGpu ?? numberParam(model.params.num_gpu);
    const numThread = options.numThread ?? numberParam(model.params.num_thread);
    const numBatch = options.numBatch ?? numberParam(model.params.num_batch);
    const useMmap = options.useMmap ?? (typeof model.params.use_mmap === "boolean" ? model.params.use_mmap : undefined);
    return {
      path: model.modelPath,
      contextSize: numCtx,
      sequences: policy?.numParallel ?? this.options.numParallel,
      threads: numThread !== undefined && numThread > 0 ? numThread : (this.options.threads ?? 0),
      // `gpus: []` in the policy file: no GPU for this model, so no backend probing in its runner.
      gpu: policy?.gpus?.length === 0 ? false : this.gpu,
      ...(policy?.gpus !== undefined ? { gpus: policy.gpus } : {}),
      ...(this.options.gpuOverheadBytes ? { gpuOverheadBytes: this.options.gpuOverheadBytes } : {}),
      gpuLayers: numGpu !== undefined && numGpu >= 0 ? numGpu : undefined,
      ...(numBatch !== undefined ? { batchSize: numBatch } : {}),
      ...(useMmap !== undefined ? { useMmap } : {}),
      speculation: options.speculation?.draftPath || options.speculation?.lookup ? options.speculation : undefined,
      ...(model.adapterPaths?.length ? { lora: model.adapterPaths } : {}),
      ...(this.options.streamIntervalMs !== undefined ? { streamIntervalMs: this.options.streamIntervalMs } : {}),
      ...this.cacheFor(policy),
      ...(this.options.prefixCache ? { prefixCache: this.options.prefixCache } : {}),
    };
  }

  /** Says once per model that a requested context was capped to what the model was trained for. */
  private noteCap(model: ResolvedModel, spec: LoadSpec, contextSize: number): void {
    if (spec.contextSize <= contextSize || this.capNoted.has(model.key)) return;
    this.capNoted.add(model.key);
    this.options.log.info({ model: model.display, requested: spec.contextSize, contextLength: contextSize }, "context length capped to the model's trained context");
  }

  /** The KV cache's type and flash attention: the policy's over the defaults; a policy's explicit flash attention off keeps the cache f16. */
  private cacheFor(policy: ModelPolicy | undefined): { kvCacheType: KvCacheType; flashAttention: FlashAttention } {
    const kvCacheType = policy?.kvCacheType ?? this.options.kvCacheType ?? "f16";
    const flashAttention = policy?.flashAttention ?? this.options.flashAttention ?? "auto";
    if (kvCacheType === "f16") return { kvCacheType, flashAttention };
    return flashAttention === false ? { kvCacheType: "f16", flashAttention } : { kvCacheType, flashAttention: true };
  }

  /**
   * Whether a loaded runner serves these options. Settings are compared as they take effect: a
   * requested context over the model's trained one is the trained one, so `num_ctx` 4096, unset and
   * 5000 on a 4096-context model are one load.
   */
  private specMatches(entry: Loaded, model: ResolvedModel, options: AcquireOptions): boolean {
    const spec = entry.spec;
    const wanted = this.specFor(model, options);
    const train = entry.runner.info.trainContextSize;
    const effective = (n: number): number => (train > 0 ? Math.min(n, train) : n);
    // Adapters and speculation too: a runner keeps what it was loaded with.
    return effective(wanted.contextSize) === effective(spec.contextSize) && wanted.gpuLayers === spec.gpuLayers && wanted.sequences === spec.sequences &&
      wanted.threads === spec.threads && wanted.batchSize === spec.batchSize && wanted.useMmap === spec.useMmap &&
      wanted.kvCacheType === spec.kvCacheType && wanted.flashAttention === spec.flashAttention &&
      wanted.gpu === spec.gpu && (wanted.gpus ?? "all").toString() === (spec.gpus ?? "all").toString() &&
      (wanted.lora ?? []).join("\n") === (spec.lora ?? []).join("\n") &&
      JSON.stringify(wanted.speculation ?? null) === JSON.stringify(spec.speculation ?? null);
  }

  /** Grants what can be granted, starts at most one load, evicts idle models to make room. */
  private pump(): void {
    for (let i = 0; i < this.waiting.length; ) {
      const w = this.waiting[i]!;
      const lease = this.tryGrant(w.model, w.options, w.queuedAt);
      if (lease) {
        this.waiting.splice(i, 1);
        w.options.signal?.removeEventListener("abort", w.onAbort);
        w.resolve(lease);
      } else i++;
    }
    if (this.loading) return;
    const next = this.waiting.find((w) => {
      const entry = this.loaded.get(w.model.key);
      return !entry || !entry.runner.alive || entry.model.digest !== w.model.digest || !this.specMatches(entry, w.model, w.options);
    });
    if (!next) return;
    const stale = this.loaded.get(next.model.key);
    if (stale) {
      // Loaded with other options (num_ctx, num_gpu) or an older digest: reload once it is idle.
      if (stale.active > 0) return;
      this.loading = { key: next.model.key, promise: this.evict(stale).then(() => this.finishLoad()) };
      return;
    }
    if (this.loaded.size >= this.maxLoaded) {
      const idle = this.evictable()[0];
      if (!idle) return; // every resident model is busy or pinned: wait for a release
      this.loading = { key: next.model.key, promise: this.evict(idle).then(() => this.finishLoad()) };
      return;
    }
    this.startLoad(next);
  }

  private finishLoad(): void {
    this.loading = undefined;
    this.pump();
    this.notifyIdle();
  }

  private startLoad(first: Waiter): void {
    const model = first.model;
    const spec = this.specFor(model, first.options);
    const started = process.hrtime.bigint();
    const abort = new AbortController();
    const hooks = { admit: (estimate: MemoryEstimate) => this.admit(model, estimate), signal: abort.signal };
    const start =
      this.options.startRunner ??
      ((s: LoadSpec, m: ResolvedModel) => Runner.start(s, { name: m.display, log: this.options.log, loadTimeoutMs: this.options.loadTimeoutMs, renderTimeoutMs: this.options.renderTimeoutMs, ...hooks }));
    const refusal = spec.gpu !== false ? this.gpuRefusal : undefined;
    const promise = (refusal ? Promise.reject(new ModelLoadError(model.display, refusal)) : start(spec, model, hooks)).then(
      (runner) => {
        const entry: Loaded = { model, runner, spec, active: 0, keepAliveMs: this.keepAliveFor(model.key), expiresAt: undefined, timer: undefined, lastUsed: ++this.useCounter };
        runner.onCrash = () => this.dropCrashed(entry);
        const onJobStats = this.options.onJobStats;
        if (onJobStats) runner.onStats = (stats) => onJobStats(model, stats);
        if (runner.info.gpu) this.gpuSeen = true;
        this.noteCap(model, spec, runner.info.contextSize);
        this.loaded.set(model.key, entry);
        const loadNs = Number(process.hrtime.bigint() - started);
        // Grant the waiters of this model first so they can report load_duration.
        for (let i = 0; i < this.waiting.length; ) {
          const w = this.waiting[i]!;
          const lease = w.model.key === model.key ? this.tryGrant(w.model, w.options, w.queuedAt, loadNs) : undefined;
          if (lease) {
            this.waiting.splice(i, 1);
            w.options.signal?.removeEventListener("abort", w.onAbort);
            w.resolve(lease);
          } else i++;
        }
        if (entry.active === 0) this.scheduleExpiry(entry);
      },
      (err: unknown) => {
        // The load failed: every request waiting for this model gets the same error.
        for (let i = 0; i < this.waiting.length; ) {
          const w = this.waiting[i]!;
          if (w.model.key === model.key) {
            this.waiting.splice(i, 1);
            w.options.signal?.removeEventListener("abort", w.onAbort);
            w.reject(err);
          } else i++;
        }
      },
    );
    this.loading = { key: model.key, promise: promise.then(() => this.finishLoad()), abort };
  }

  /**
   * The memory check (runs while this load holds the one loading turn): refuses a model that cannot
   * fit even with every idle model gone, else evicts idle models, least recently used first, until
   * node-llama-cpp's estimate fits in what is available.
   */
  private async admit(model: ResolvedModel, estimate: MemoryEstimate): Promise<void> {
    const idle = () => this.evictable(model.key);
    // What evicting frees is counted by the runners' own accounting, not re-measured: a process's
    // memory (page cache of mmapped weights especially) shows up as available only gradually.
    const now: Room = { ram: await availableRam(), vram: vramRoom(estimate, this.options.gpuOverheadBytes ?? 0) };
    const reclaimable = idle().reduce((r, e) => ({ ram: r.ram + e.runner.info.ramBytes, vram: r.vram + e.runner.info.vramBytes }), { ram: 0, vram: 0 });
    const reason = shortfall(estimate, { ram: now.ram + reclaimable.ram, vram: now.vram + reclaimable.vram });
    if (reason) {
      this.options.log.warn({ model: model.display, needRam: estimate.ramBytes, needVram: estimate.vramBytes, room: now, reclaimable }, "model does not fit in memory; load refused");
      throw notEnoughMemory(model.display, reason);
    }
    for (const entry of idle()) {
      if (!shortfall(estimate, now)) break;
      // A request may have taken the model while we measured: never evict a model in use.
      if (entry.active > 0 || this.loaded.get(entry.model.key) !== entry) continue;
      this.options.log.info({ model: entry.model.display, for: model.display }, "evicting an idle model to make room");
      await this.evict(entry);
      now.ram += entry.runner.info.ramBytes;
      now.vram += entry.runner.info.vramBytes;
    }
  }

  private dropCrashed(entry: Loaded): void {
    if (this.loaded.get(entry.model.key) !== entry) return;
    clearTimeout(entry.timer);
    this.loaded.delete(entry.model.key);
    this.options.log.warn({ model: entry.model.display }, "dropped crashed runner; the next request reloads the model");
    this.pump();
  }

  private async evict(entry: Loaded, reason?: Error): Promise<void> {
    clearTimeout(entry.timer);
    if (this.loaded.get(entry.model.key) === entry) this.loaded.delete(entry.model.key);
    await entry.runner.stop(reason);
    this.options.log.info({ model: entry.model.display }, "model unloaded");
    this.notifyIdle();
  }
}

/** True when the runner offloaded every layer (it reports a GPU, and as many layers as the model has). */
export function allLayersOnGpu(info: Pick<RunnerInfo, "gpu" | "gpuLayers" | "totalLayers" | "vramBytes">): boolean {
  return info.gpu !== false && info.vramBytes > 0 && info.totalLayers !== undefined && info.totalLayers > 0 && info.gpuLayers >= info.totalLayers;
}

function numberParam(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}
