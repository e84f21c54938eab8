/**
 * Loading the models that the policy file marks `preload`, at start and after a reload, so that
 * the first request finds them warm (and `/readyz?model=` is ready without a first request).
 */
import type { Logger } from "pino";
import type { ModelStore } from "../store/store.js";
import type { PolicyTable } from "./policy.js";
import type { Scheduler } from "./scheduler.js";

export interface PreloadHooks {
  /** Called before each model's load (the daemon extends systemd's start timeout). */
  beforeEach?: (name: string) => void;
}

/** Loads each `preload` model in turn (a lease taken and released at once); failures are logged at error. */
export async function preloadModels(policy: PolicyTable, store: ModelStore, scheduler: Scheduler, log: Logger, hooks: PreloadHooks = {}): Promise<void> {
  for (const entry of policy.entries().filter((p) => p.preload)) {
    if (!scheduler.readiness().accepting) return; // shutting down: load nothing more
    hooks.beforeEach?.(entry.name);
    try {
      const model = await store.resolve(entry.name);
      const lease = await scheduler.acquire(model, {});
      lease.release();
      log.info({ model: entry.name }, "model preloaded");
    } catch (err) {
      log.error({ model: entry.name, err: (err as Error).message }, "preload failed");
    }
  }
}
