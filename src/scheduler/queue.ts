/**
 * The one bounded FIFO queue of requests waiting for a slot or a load; a request whose client
 * gives up leaves no trace in it.
 */
import type { ResolvedModel } from "../store/store.js";
import type { AcquireOptions, Lease } from "./types.js";

/** A request waiting in the queue. */
export interface Waiter {
  readonly model: ResolvedModel;
  readonly options: AcquireOptions;
  /** When it was queued (process.hrtime), for the load time it reports. */
  readonly queuedAt: bigint;
}

interface Entry extends Waiter {
  resolve: (lease: Lease) => void;
  reject: (err: unknown) => void;
  onAbort: () => void;
}

export class WaitQueue {
  private readonly waiters: Entry[] = [];

  constructor(private readonly max: number) {}

  /** Requests waiting. */
  get length(): number {
    return this.waiters.length;
  }

  /** Requests waiting for the model with this key. */
  countFor(key: string): number {
    return this.waiters.filter((w) => w.model.key === key).length;
  }

  /** No room for another request: admission answers 503 instead of queueing without bound. */
  get full(): boolean {
    return this.waiters.length >= this.max;
  }

  /** Whether any request waits for the model with this key. */
  has(key: string): boolean {
    return this.waiters.some((w) => w.model.key === key);
  }

  /** The first waiter, in arrival order, that `test` accepts. */
  find(test: (w: Waiter) => boolean): Waiter | undefined {
    return this.waiters.find(test);
  }

  /**
   * Queues a request (the caller checked {@link full}): resolves with the lease a later
   * {@link grantEach} gives it. When its signal aborts it leaves the queue, rejects with the
   * signal's reason, and `onCancel` runs (the scheduler may stop a load nobody waits for any more).
   */
  wait(model: ResolvedModel, options: AcquireOptions, onCancel: () => void): Promise<Lease> {
    return new Promise<Lease>((resolve, reject) => {
      const entry: Entry = {
        model,
        options,
        queuedAt: process.hrtime.bigint(),
        resolve,
        reject,
        onAbort: () => {
          const i = this.waiters.indexOf(entry);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(options.signal?.reason);
          onCancel();
        },
      };
      options.signal?.addEventListener("abort", entry.onAbort, { once: true });
      this.waiters.push(entry);
    });
  }

  /** In arrival order, resolves and removes each waiter that `grant` gives a lease; the others stay. */
  grantEach(grant: (w: Waiter) => Lease | undefined): void {
    for (let i = 0; i < this.waiters.length; ) {
      const w = this.waiters[i]!;
      const lease = grant(w);
      if (lease) {
        this.waiters.splice(i, 1);
        w.options.signal?.removeEventListener("abort", w.onAbort);
        w.resolve(lease);
      } else i++;
    }
  }

  /** Rejects and removes every waiter that `test` accepts (all of them when absent). */
  rejectWhere(err: unknown, test: (w: Waiter) => boolean = () => true): void {
    for (let i = 0; i < this.waiters.length; ) {
      const w = this.waiters[i]!;
      if (test(w)) {
        this.waiters.splice(i, 1);
        w.options.signal?.removeEventListener("abort", w.onAbort);
        w.reject(err);
      } else i++;
    }
  }
}
