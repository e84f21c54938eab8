/**
 * One job's start and end in the runner child, the same for every kind (`withJob`): the job is
 * registered under its id, so that a `cancel` aborts it and `pause`/`resume` reach a generating one;
 * an error it throws is answered with one `failed` message; and whatever it holds (its slot, a
 * logprob recorder, a chat session) is given back when it ends, however it ends. `unload` aborts the
 * running jobs and waits for them before it disposes what they use.
 */
import type { Token } from "node-llama-cpp";
import { PauseSwitch } from "../flow.js";
import type { FromRunner, RunnerFailureKind } from "../protocol.js";
import { clientSafe, type ChildIo } from "./io.js";
import type { LoadedModel, Slot } from "./model.js";

/** A job the request itself makes impossible, or a refusal with a known answer: `failed` with its kind and message. */
export class JobFailure extends Error {
  constructor(
    readonly kind: RunnerFailureKind,
    message: string,
  ) {
    super(message);
  }
}

/** The jobs running in this child, by id. */
export class JobTable {
  private readonly aborts = new Map<number, AbortController>();
  private readonly pauses = new Map<number, PauseSwitch>();
  private readonly running = new Set<Promise<void>>();

  /** Aborts a job; an abort also resumes a paused job, so that it ends. */
  cancel(id: number): void {
    this.aborts.get(id)?.abort();
  }

  pause(id: number): void {
    this.pauses.get(id)?.pause();
  }

  resume(id: number): void {
    this.pauses.get(id)?.resume();
  }

  /** Aborts every job and resolves when all of them have ended (each ends within a token or so). */
  async abortAll(): Promise<void> {
    for (const abort of this.aborts.values()) abort.abort();
    await Promise.allSettled(this.running);
  }

  add(id: number, abort: AbortController, pause: PauseSwitch | undefined): void {
    this.aborts.set(id, abort);
    if (pause) this.pauses.set(id, pause);
  }

  delete(id: number): void {
    this.aborts.delete(id);
    this.pauses.delete(id);
  }

  /** Remembers a job until it settles. */
  track(job: Promise<void>): void {
    this.running.add(job);
    void job.finally(() => this.running.delete(job));
  }
}

/** What `withJob` needs of the child. */
export interface JobHost {
  io: ChildIo;
  jobs: JobTable;
  /** The model, unless none is loaded (yet, or any more). */
  loaded(): LoadedModel | undefined;
  /** Whether an error is the engine running out of memory (model.ts's `outOfMemory`). */
  outOfMemory(err: unknown): boolean;
}

/** One kind of job, as `withJob` treats it. */
export interface JobKind {
  /** Names an unexpected failure in the log ("<what> failed"). */
  what: string;
  /** A generating job: it gets a pause switch, which the slot it takes obeys (runner/flow.ts). */
  pausable?: boolean;
  /** The answer to a job that throws after it was cancelled; without it, the error is answered. */
  cancelled?: (id: number) => FromRunner;
}

/** A running job, as its module sees it. */
export interface Job {
  readonly id: number;
  readonly model: LoadedModel;
  /** Aborted by `cancel` (and by `unload`). */
  readonly signal: AbortSignal;
  send(msg: FromRunner): void;
  log: ChildIo["log"];
  /**
   * Takes the free slot with the longest cached prefix of `tokens` (model.ts), given back when the
   * job ends; the job's pause switch holds it. No free slot is a failure.
   */
  takeSlot(tokens: readonly Token[]): Promise<{ slot: Slot; cached: number }>;
  /** Runs `cleanup` when the job ends, before what was deferred earlier (the slot last). */
  defer(cleanup: () => void): void;
}

/**
 * Runs one job of `kind` under `id`: answers `failed` at once when no model is loaded, and when
 * `body` throws (a JobFailure as it says; a cancelled job as `kind.cancelled` says; anything else
 * logged, and out of memory told apart). Resolves when the job has ended and everything it held is
 * given back; never rejects.
 */
export function withJob(host: JobHost, id: number, kind: JobKind, body: (job: Job) => Promise<void> | void): Promise<void> {
  const { io, jobs } = host;
  const model = host.loaded();
  if (!model) {
    io.send({ type: "failed", id, kind: "other", message: "model is not loaded" });
    return Promise.resolve();
  }
  const abort = new AbortController();
  const pause = kind.pausable ? new PauseSwitch(abort.signal) : undefined;
  jobs.add(id, abort, pause);
  const cleanups: Array<() => void> = [];
  const job: Job = {
    id,
    model,
    signal: abort.signal,
    send: (msg) => io.send(msg),
    log: (level, msg, data) => io.log(level, msg, data),
    defer: (cleanup) => void cleanups.push(cleanup),
    takeSlot: async (tokens) => {
      const picked = await model.takeSlot(tokens, abort.signal);
      if (!picked) throw new JobFailure("other", "no free slot in the runner");
      const { slot } = picked;
      slot.pause = pause;
      cleanups.push(() => {
        slot.busy = false;
        slot.pause = undefined;
      });
      return picked;
    },
  };
  const run = async (): Promise<void> => {
    try {
      await body(job);
    } catch (err) {
      if (err instanceof JobFailure) return io.send({ type: "failed", id, kind: err.kind, message: err.message });
      if (abort.signal.aborted && kind.cancelled) return io.send(kind.cancelled(id));
      const oom = host.outOfMemory(err);
      io.log("error", `${kind.what} failed`, { err: err instanceof Error ? { message: err.message, stack: err.stack } : String(err) });
      io.send({ type: "failed", id, kind: oom ? "memory" : "other", message: oom ? "out of memory" : clientSafe(err, model.modelFile) });
    } finally {
      for (const cleanup of cleanups.reverse()) cleanup();
      jobs.delete(id);
    }
  };
  const running = run();
  jobs.track(running);
  return running;
}
