/**
 * Go templates render in worker threads, never on the daemon's event loop. A render is bounded
 * (steps, values, output, 1 s: see budget.ts), but a bounded second of synchronous work per
 * request still adds up: twenty hostile renders at once would hold every other client for
 * twenty seconds. In a worker, a render holds only that worker; `/api/version`, streams and
 * other requests go on. Each worker's heap is capped (a render that somehow outgrows it ends
 * that worker, not the daemon: a 400), and a worker left holding much memory after a render is
 * replaced, which returns that memory at once instead of whenever its collector runs.
 */
import os from "node:os";
import { Worker } from "node:worker_threads";
import { BadRequestError, HttpError } from "../errors.js";
import type { ExecLimits } from "./budget.js";
import type { OllamaValues } from "./ollama.js";
import type { Template } from "./template.js";

export interface RenderJob {
  id: number;
  source: string;
  name: string;
  options: { appendResponse?: boolean };
  values: OllamaValues;
  limits: ExecLimits;
}

export type RenderReply = { id: number; heap: number } & (
  { text: string; error?: undefined } | { text?: undefined; error: { status: number; message: string } }
);

/** Renders at once: the machine's cores less one for the event loop, at least 2, at most 4. */
export const RENDER_WORKERS = Math.max(2, Math.min(4, os.availableParallelism() - 1));
/** A worker's heap: far above any real render (output is capped at 32 Mi characters). */
export const WORKER_HEAP_MB = 512;
/** A worker holding more than this after a render is replaced. */
const RECYCLE_HEAP_BYTES = 96 * 1024 * 1024;

interface Pending {
  job: RenderJob;
  resolve: (text: string) => void;
  reject: (err: Error) => void;
}

/**
 * Under tsx (the tests) this module is TypeScript, and so is its worker; a worker thread does not
 * inherit tsx's loader, so it is started through tsx's own import.
 */
const TS = import.meta.url.endsWith(".ts");
const WORKER_URL = new URL(`./render-worker${TS ? ".ts" : ".js"}`, import.meta.url);

function startWorker(): Worker {
  const resourceLimits = { maxOldGenerationSizeMb: WORKER_HEAP_MB };
  if (!TS) return new Worker(WORKER_URL, { resourceLimits });
  const code = `import("tsx/esm/api").then((m) => m.tsImport(${JSON.stringify(WORKER_URL.href)}, ${JSON.stringify(import.meta.url)}))`;
  return new Worker(code, { eval: true, resourceLimits });
}

class Slot {
  readonly worker: Worker;
  current: Pending | undefined;
  dead = false;

  constructor(private readonly pool: RenderPool) {
    this.worker = startWorker();
    this.worker.unref();
    this.worker.on("message", (reply: RenderReply) => this.settle(reply));
    this.worker.on("error", (err: Error & { code?: string }) => this.died(err));
    this.worker.on("exit", () => this.died(new Error("the template worker exited")));
  }

  run(p: Pending): void {
    this.current = p;
    // Held while it works (a test awaiting a render must not see the process exit), idle otherwise.
    this.worker.ref();
    this.worker.postMessage(p.job);
  }

  private settle(reply: RenderReply): void {
    const p = this.current;
    this.current = undefined;
    this.worker.unref();
    if (p) {
      if (reply.error) p.reject(reply.error.status === 400 ? new BadRequestError(reply.error.message) : new HttpError(reply.error.status, reply.error.message));
      else p.resolve(reply.text);
    }
    if (reply.heap > RECYCLE_HEAP_BYTES) this.retire();
    else this.pool.idle(this);
  }

  private retire(): void {
    this.dead = true;
    this.pool.replace(this);
    void this.worker.terminate();
  }

  private died(err: Error & { code?: string }): void {
    if (this.dead) return;
    this.dead = true;
    const p = this.current;
    this.current = undefined;
    if (p)
      p.reject(
        err.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? new BadRequestError(`template: ${p.job.name}: template execution exceeded ${WORKER_HEAP_MB} MiB of memory`)
          : err,
      );
    this.pool.replace(this);
  }
}

class RenderPool {
  private readonly slots: Slot[] = [];
  private readonly free: Slot[] = [];
  private readonly queue: Pending[] = [];
  private nextId = 1;

  render(t: Template, values: OllamaValues, limits: ExecLimits): Promise<string> {
    return new Promise((resolve, reject) => {
      const job: RenderJob = { id: this.nextId++, source: t.source, name: t.name, options: t.options, values, limits };
      this.queue.push({ job, resolve, reject });
      this.dispatch();
    });
  }

  idle(slot: Slot): void {
    this.free.push(slot);
    this.dispatch();
  }

  replace(slot: Slot): void {
    const i = this.slots.indexOf(slot);
    if (i >= 0) this.slots.splice(i, 1);
    const j = this.free.indexOf(slot);
    if (j >= 0) this.free.splice(j, 1);
    this.dispatch();
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      let slot = this.free.pop();
      if (!slot && this.slots.length < RENDER_WORKERS) {
        slot = new Slot(this);
        this.slots.push(slot);
      }
      if (!slot) return;
      slot.run(this.queue.shift()!);
    }
  }
}

const pool = new RenderPool();

/** Renders `t` for `v` as renderOllama does, in a worker thread. */
export function renderInWorker(t: Template, v: OllamaValues, limits: ExecLimits = {}): Promise<string> {
  return pool.render(t, v, limits);
}
