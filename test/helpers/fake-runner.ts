/**
 * Runners in memory behind RunnerHandle, for the scheduler's unit tests: no process, no model, no
 * node-llama-cpp. The factory ({@link FakeRunners}) records what happens as events ("load a",
 * "ready a", "stop a", "crash a", "cancel a", "fail a") and lets a test decide how each load goes:
 * held until the test finishes or fails it, the memory it asks the scheduler for, the facts it
 * reports, and how long each job runs.
 */
import { EventEmitter } from "node:events";
import { ModelLoadError, ModelRunError } from "../../src/errors.js";
import type { CompletionRequest, CompletionSink, RunnerHandle } from "../../src/runner/handle.js";
import type { EmbedResult, GenerateStats, LoadSpec, MemoryEstimate, RankResult, RunnerInfo } from "../../src/runner/types.js";
import { silentLogger } from "../../src/logger.js";
import { Scheduler } from "../../src/scheduler/scheduler.js";
import type { JobStats, LoadHooks, SchedulerOptions, StartRunner } from "../../src/scheduler/types.js";
import type { ResolvedModel } from "../../src/store/store.js";

/** A resolved model with only what the scheduler reads (its key, name, digest, path and parameters). */
export function fakeModel(key: string, params: Record<string, unknown> = {}, digest = "0"): ResolvedModel {
  return { key, display: `${key}:latest`, digest: `sha256:${digest.padStart(64, "0")}`, modelPath: `/nowhere/${key}`, params } as unknown as ResolvedModel;
}

/** How the loads of one model go. */
export interface FakeLoad {
  /** The load waits until the test calls {@link FakeRunners.finish} or {@link FakeRunners.fail} (or the load is cancelled). */
  hold?: boolean;
  /** A held load that is cancelled ends only when the test finishes or fails it (as a runner whose child takes a while to exit). */
  slowCancel?: boolean;
  /** The memory the runner asks for before loading: the scheduler's memory check runs on it. */
  estimate?: MemoryEstimate;
  /** The load fails with this. */
  fail?: Error;
  /** What the loaded runner reports (memory held, context, GPU). */
  info?: Partial<RunnerInfo>;
  /** How long each job runs (ms, on the timers, fake ones included); undefined = until {@link FakeRunner.finishJobs}. */
  jobMs?: number;
}

const STATS: GenerateStats = {
  promptTokens: 1,
  promptEvalCount: 1,
  promptEvalNs: 1,
  evalCount: 1,
  evalNs: 1,
  doneReason: "stop",
  context: [],
  truncatedTokens: 0,
};

/** One loaded fake model. Jobs end when their time is up, when the runner ends, or when their signal aborts. */
export class FakeRunner implements RunnerHandle {
  readonly info: RunnerInfo;
  readonly pid = undefined;
  onCrash: ((reason: string) => void) | undefined = undefined;
  onStats: ((stats: JobStats) => void) | undefined = undefined;
  /** The error `stop` was given (the scheduler's reason for unloading), once stopped. */
  stopReason: Error | undefined;
  private ended = false;
  private readonly running = new Set<{ finish: () => void; fail: (err: unknown) => void }>();

  constructor(
    readonly key: string,
    readonly spec: LoadSpec,
    private readonly load: FakeLoad,
    private readonly record: (event: string) => void,
  ) {
    this.info = {
      contextSize: spec.contextSize,
      trainContextSize: 0,
      sequences: spec.sequences,
      ramBytes: 0,
      vramBytes: 0,
      gpu: false,
      gpuLayers: 0,
      threads: spec.threads,
      batchSize: spec.batchSize ?? 512,
      binary: "prebuilt",
      threadpool: "per-decode",
      hasChatTemplate: true,
      embeddingLength: 4,
      ...load.info,
    };
  }

  get alive(): boolean {
    return !this.ended;
  }

  /** Jobs running now. */
  get jobs(): number {
    return this.running.size;
  }

  /**
   * A job as the interface's job methods run it (they all come here): it runs `jobMs` or until
   * {@link finishJobs}, fails when the runner ends or its signal aborts. Tests that only need the
   * runner busy call this rather than one of the job methods.
   */
  work(signal?: AbortSignal): Promise<void> {
    return this.job(signal, () => undefined);
  }

  /** Ends every running job successfully (jobs with no `jobMs`). */
  finishJobs(): void {
    for (const job of [...this.running]) job.finish();
  }

  /** The runner dies on its own: its jobs fail, and `onCrash` is told. */
  crash(reason = "the model runner crashed"): void {
    if (this.ended) return;
    this.end(new ModelRunError(reason));
    this.record(`crash ${this.key}`);
    this.onCrash?.(reason);
  }

  stop(reason: Error = new ModelRunError("the model was unloaded")): Promise<void> {
    if (!this.ended) {
      this.stopReason = reason;
      this.end(reason);
    }
    this.record(`stop ${this.key}`);
    return Promise.resolve();
  }

  kill(): void {
    if (!this.ended) this.end(new ModelRunError("the model runner was killed"));
    this.record(`kill ${this.key}`);
  }

  complete(_request: CompletionRequest, sink: CompletionSink): Promise<GenerateStats> {
    return this.job(sink.signal, () => {
      sink.onText("fake");
      return STATS;
    });
  }

  embed(job: { inputs: string[] }, signal?: AbortSignal): Promise<EmbedResult> {
    return this.job(signal, () => ({ embeddings: job.inputs.map(() => [0, 0, 0, 1]), promptTokens: job.inputs.length }));
  }

  render(_job: unknown, signal?: AbortSignal): Promise<string> {
    return this.job(signal, () => "fake");
  }

  tokenize(text: string, signal?: AbortSignal): Promise<Uint32Array> {
    return this.job(signal, () => Uint32Array.from(text, (c) => c.charCodeAt(0)));
  }

  detokenize(tokens: number[], signal?: AbortSignal): Promise<string> {
    return this.job(signal, () => String.fromCharCode(...tokens));
  }

  rank(job: { documents: string[] }, signal?: AbortSignal): Promise<RankResult> {
    return this.job(signal, () => ({ scores: job.documents.map(() => 0.5), promptTokens: job.documents.length }));
  }

  /** One job: runs `jobMs` (or until finishJobs), then yields `result` and reports its stats. */
  private job<T>(signal: AbortSignal | undefined, result: () => T): Promise<T> {
    if (this.ended) return Promise.reject(new ModelRunError("the model runner is not running"));
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<T>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        this.running.delete(job);
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const job = {
        finish: () => {
          done();
          const value = result();
          const { promptEvalCount, promptEvalNs, evalCount, evalNs, truncatedTokens } = STATS;
          this.onStats?.({ promptEvalCount, promptEvalNs, evalCount, evalNs, truncatedTokens });
          resolve(value);
        },
        fail: (err: unknown) => {
          done();
          reject(err);
        },
      };
      const onAbort = () => job.fail(signal?.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.running.add(job);
      if (this.load.jobMs !== undefined) timer = setTimeout(job.finish, this.load.jobMs);
    });
  }

  private end(err: Error): void {
    this.ended = true;
    for (const job of [...this.running]) job.fail(err);
  }
}

interface HeldLoad {
  finish: () => void;
  fail: (err: Error) => void;
}

/** The factory the scheduler is given: starts fake runners and records what happens. */
export class FakeRunners {
  /** What happened, in order: "load a", "ready a", "fail a", "cancel a", "stop a", "crash a", "kill a". */
  readonly events: string[] = [];
  /** Every runner started, in order. */
  readonly runners: FakeRunner[] = [];
  /** The spec of every load started, in order. */
  readonly specs: LoadSpec[] = [];
  private readonly emitter = new EventEmitter();
  private readonly held = new Map<string, HeldLoad>();

  /** `loads` says how the loads of each model go (by its key). */
  constructor(private readonly loads: (key: string) => FakeLoad = () => ({})) {}

  /** What the scheduler calls to load a model. */
  readonly start: StartRunner = async (spec: LoadSpec, model: ResolvedModel, hooks: LoadHooks) => {
    const key = model.key;
    const load = this.loads(key);
    this.specs.push(spec);
    this.record(`load ${key}`);
    if (load.estimate) await hooks.admit?.(load.estimate);
    if (load.hold) await this.hold(key, model, hooks.signal, load.slowCancel === true);
    if (load.fail) {
      this.record(`fail ${key}`);
      throw load.fail;
    }
    const runner = new FakeRunner(key, spec, load, (event) => this.record(event));
    this.runners.push(runner);
    this.record(`ready ${key}`);
    return runner;
  };

  /** The runner started last for the model with this key. */
  runner(key: string): FakeRunner | undefined {
    return this.runners.findLast((r) => r.key === key);
  }

  /** Whether a held load of this model is waiting for the test. */
  holding(key: string): boolean {
    return this.held.has(key);
  }

  /** Lets the held load of this model finish. */
  finish(key: string): void {
    this.heldLoad(key).finish();
  }

  /** Makes the held load of this model fail with `err`. */
  fail(key: string, err: Error): void {
    this.heldLoad(key).fail(err);
  }

  /** Resolves once `event` has been recorded `times` times (at once if it already has). */
  seen(event: string, times = 1): Promise<void> {
    const count = () => this.events.filter((e) => e === event).length;
    if (count() >= times) return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => {
        if (count() < times) return;
        this.emitter.off("event", check);
        resolve();
      };
      this.emitter.on("event", check);
    });
  }

  private record(event: string): void {
    this.events.push(event);
    this.emitter.emit("event", event);
  }

  private heldLoad(key: string): HeldLoad {
    const load = this.held.get(key);
    if (!load) throw new Error(`no load of ${key} is held`);
    return load;
  }

  /** Waits for the test's word on this load, or its cancellation (rejects as a real runner does: `load cancelled`). */
  private hold(key: string, model: ResolvedModel, signal: AbortSignal | undefined, slowCancel: boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const settle = () => {
        this.held.delete(key);
        signal?.removeEventListener("abort", onAbort);
      };
      const cancelled = () => {
        settle();
        reject(new ModelLoadError(model.display, "load cancelled"));
      };
      const onAbort = () => {
        this.record(`cancel ${key}`);
        if (slowCancel) this.held.set(key, { finish: cancelled, fail: cancelled });
        else cancelled();
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.held.set(key, {
        finish: () => {
          settle();
          resolve();
        },
        fail: (err) => {
          settle();
          reject(err);
        },
      });
      this.record(`hold ${key}`);
    });
  }
}

/**
 * A scheduler on fake runners: one slot per model, one model resident, a queue of 10, models kept
 * forever, unless `options` says otherwise.
 */
export function fakeScheduler(options: Partial<SchedulerOptions> = {}, loads?: (key: string) => FakeLoad): { scheduler: Scheduler; runners: FakeRunners } {
  const runners = new FakeRunners(loads);
  const scheduler = new Scheduler({
    log: silentLogger(),
    startRunner: runners.start,
    numParallel: 1,
    maxLoaded: 1,
    maxQueue: 10,
    defaultKeepAliveMs: -1,
    defaultContextLength: 1024,
    threads: 1,
    gpu: false,
    ...options,
  });
  return { scheduler, runners };
}
