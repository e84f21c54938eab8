/**
 * The scheduler: which models are loaded, which request runs where, and when a model goes away.
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
 *
 * It knows runners only as {@link RunnerHandle}s, started by the `startRunner` it is given.
 */
import { ModelLoadError, ServiceBusyError, ShuttingDownError } from "../errors.js";
import type { MemoryEstimate, RunnerGpu } from "../runner/types.js";
import type { ResolvedModel } from "../store/store.js";
import { keepAliveFor, requestKeepAlive, startExpiry, stopExpiry } from "./keep-alive.js";
import type { ModelPolicy } from "./policy.js";
import { WaitQueue, type Waiter } from "./queue.js";
import { evictable, makeRoom } from "./room.js";
import { specFor, specMatches } from "./spec.js";
import type { AcquireOptions, Lease, Loaded, SchedulerOptions } from "./types.js";
import { describe, type LoadedModelInfo } from "./view.js";

export type { AcquireOptions, Lease, LoadHooks, SchedulerOptions, StartRunner } from "./types.js";
export { allLayersOnGpu, type LoadedModelInfo } from "./view.js";

export class Scheduler {
  private readonly loaded = new Map<string, Loaded>();
  private readonly waiting: WaitQueue;
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
    this.waiting = new WaitQueue(options.maxQueue);
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
    if (this.waiting.full) return Promise.reject(new ServiceBusyError());
    const lease = this.waiting.wait(model, options, () => {
      // Cancelled while queued. Nobody else waits for the model being loaded: stop the load too.
      const loading = this.loading;
      if (loading?.key === model.key && !this.waiting.has(model.key)) loading.abort?.abort();
      this.pump();
      this.notifyIdle();
    });
    this.pump();
    return lease;
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
    const recentFirst = [...this.loaded.values()].sort((a, b) => b.lastUsed - a.lastUsed);
    return recentFirst.map((e) => describe(e, this.waiting.countFor(e.model.key), this.policyFor(e.model.key)));
  }

  /**
   * What `/readyz` reports: whether new requests are accepted and, for a model, whether it is
   * loaded with a free slot right now. Reads state only; never loads anything.
   */
  readiness(key?: string): { accepting: boolean; loaded: boolean; freeSlots: number; queued: number } {
    const entry = key === undefined ? undefined : this.loaded.get(key);
    const queued = key === undefined ? this.waiting.length : this.waiting.countFor(key);
    const freeSlots = entry ? Math.max(0, entry.spec.sequences - entry.active) : 0;
    return { accepting: !this.draining, loaded: entry !== undefined, freeSlots, queued };
  }

  /** True while any request holds a slot of the model with this key. */
  inUse(key: string): boolean {
    return (this.loaded.get(key)?.active ?? 0) > 0 || this.waiting.has(key);
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
    this.waiting.rejectWhere(new ShuttingDownError());
    this.loading?.abort?.abort();
    await this.loading?.promise.catch(() => undefined);
    await Promise.all([...this.loaded.values()].map((e) => this.evict(e, new ShuttingDownError())));
  }

  /** The policy of the model with this key (SERVICE_MODELS_CONFIG), if the file names it. */
  policyFor(key: string): ModelPolicy | undefined {
    return this.options.policy?.().for(key);
  }

  /** After the policy changed (SIGHUP): loaded models take their new keep-alive or pin now. */
  applyPolicy(): void {
    for (const entry of this.loaded.values()) {
      entry.keepAliveMs = keepAliveFor(this.policyFor(entry.model.key), this.options.defaultKeepAliveMs);
      if (entry.active > 0) continue;
      stopExpiry(entry);
      startExpiry(entry, this.expire);
    }
    this.pump(); // a changed num_parallel or num_ctx reloads a model once it is idle
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

  /** Whether the loaded runner of `model` serves a request with these options (alive, same digest, same settings). */
  private serves(entry: Loaded | undefined, model: ResolvedModel, options: AcquireOptions): entry is Loaded {
    if (!entry || !entry.runner.alive || entry.model.digest !== model.digest) return false;
    const wanted = specFor(model, options, this.policyFor(model.key), this.options, this.gpu);
    return specMatches(entry.spec, wanted, entry.runner.info.trainContextSize);
  }

  /** A lease on a free slot of an already loaded, matching runner; undefined if there is none. */
  private tryGrant(model: ResolvedModel, options: AcquireOptions, queuedAt: bigint, loadNs = 0): Lease | undefined {
    const entry = this.loaded.get(model.key);
    if (!this.serves(entry, model, options)) return undefined;
    if (entry.active >= entry.spec.sequences) return undefined;
    entry.active++;
    entry.lastUsed = ++this.useCounter;
    stopExpiry(entry);
    entry.expiresAt = undefined;
    requestKeepAlive(entry, options.keepAliveMs, this.policyFor(model.key)?.pinned === true);
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
    if (entry.active === 0 && this.loaded.get(entry.model.key) === entry) startExpiry(entry, this.expire);
    this.pump();
    this.notifyIdle();
  }

  /** The end of a keep-alive: the idle model unloads. */
  private readonly expire = (entry: Loaded): void => void this.evict(entry);

  /** Idle models that may be unloaded to make room, least recently used first (never a pinned one). */
  private evictable(except?: string): Loaded[] {
    return evictable(this.loaded.values(), (key) => this.policyFor(key)?.pinned === true, except);
  }

  /** Says once per model that a requested context was capped to what the model was trained for. */
  private noteCap(model: ResolvedModel, requested: number, contextSize: number): void {
    if (requested <= contextSize || this.capNoted.has(model.key)) return;
    this.capNoted.add(model.key);
    this.options.log.info({ model: model.display, requested, contextLength: contextSize }, "context length capped to the model's trained context");
  }

  /** Grants what can be granted, starts at most one load, evicts idle models to make room. */
  private pump(): void {
    this.waiting.grantEach((w) => this.tryGrant(w.model, w.options, w.queuedAt));
    if (this.loading) return;
    const next = this.waiting.find((w) => !this.serves(this.loaded.get(w.model.key), w.model, w.options));
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
    const spec = specFor(model, first.options, this.policyFor(model.key), this.options, this.gpu);
    const started = process.hrtime.bigint();
    const abort = new AbortController();
    const hooks = { admit: (estimate: MemoryEstimate) => this.admit(model, estimate), signal: abort.signal };
    const refusal = spec.gpu !== false ? this.gpuRefusal : undefined;
    const promise = (refusal ? Promise.reject(new ModelLoadError(model.display, refusal)) : this.options.startRunner(spec, model, hooks)).then(
      (runner) => {
        const keepAliveMs = keepAliveFor(this.policyFor(model.key), this.options.defaultKeepAliveMs);
        const entry: Loaded = { model, runner, spec, active: 0, keepAliveMs, expiresAt: undefined, timer: undefined, lastUsed: ++this.useCounter };
        runner.onCrash = () => this.dropCrashed(entry);
        const onJobStats = this.options.onJobStats;
        if (onJobStats) runner.onStats = (stats) => onJobStats(model, stats);
        if (runner.info.gpu) this.gpuSeen = true;
        this.noteCap(model, spec.contextSize, runner.info.contextSize);
        this.loaded.set(model.key, entry);
        const loadNs = Number(process.hrtime.bigint() - started);
        // Grant the waiters of this model first so they can report load_duration.
        this.waiting.grantEach((w) => (w.model.key === model.key ? this.tryGrant(w.model, w.options, w.queuedAt, loadNs) : undefined));
        if (entry.active === 0) startExpiry(entry, this.expire);
      },
      // The load failed: every request waiting for this model gets the same error.
      (err: unknown) => this.waiting.rejectWhere(err, (w) => w.model.key === model.key),
    );
    this.loading = { key: model.key, promise: promise.then(() => this.finishLoad()), abort };
  }

  /** The memory check of a load (see room.ts), over the idle models other than the one loading. */
  private admit(model: ResolvedModel, estimate: MemoryEstimate): Promise<void> {
    return makeRoom(model, estimate, {
      log: this.options.log,
      gpuOverheadBytes: this.options.gpuOverheadBytes ?? 0,
      idle: () => this.evictable(model.key),
      stillIdle: (entry) => entry.active === 0 && this.loaded.get(entry.model.key) === entry,
      evict: (entry) => this.evict(entry),
    });
  }

  private dropCrashed(entry: Loaded): void {
    if (this.loaded.get(entry.model.key) !== entry) return;
    stopExpiry(entry);
    this.loaded.delete(entry.model.key);
    this.options.log.warn({ model: entry.model.display }, "dropped crashed runner; the next request reloads the model");
    this.pump();
  }

  private async evict(entry: Loaded, reason?: Error): Promise<void> {
    stopExpiry(entry);
    if (this.loaded.get(entry.model.key) === entry) this.loaded.delete(entry.model.key);
    await entry.runner.stop(reason);
    this.options.log.info({ model: entry.model.display }, "model unloaded");
    this.notifyIdle();
  }
}
