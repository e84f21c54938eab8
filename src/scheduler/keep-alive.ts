/**
 * Keep-alive: how long a model stays loaded after its last request (the request's, the policy's or
 * the default; 0 unloads at once, negative never), and the timer that unloads it.
 */
import { keepAliveOrForever, MAX_TIMER_MS } from "../units.js";
import type { ModelPolicy } from "./policy.js";
import type { Loaded } from "./types.js";

/** The keep-alive a newly loaded model starts with: forever when pinned, else the policy's or the default. */
export function keepAliveFor(policy: ModelPolicy | undefined, defaultMs: number): number {
  return policy?.pinned ? -1 : keepAliveOrForever(policy?.keepAliveMs ?? defaultMs);
}

/** A request's own keep-alive, which applies after its lease (a pinned model keeps its forever). */
export function requestKeepAlive(entry: Loaded, requestedMs: number | undefined, pinned: boolean): void {
  if (requestedMs !== undefined && !pinned) entry.keepAliveMs = keepAliveOrForever(requestedMs);
}

/**
 * Starts the keep-alive of a model that just went idle: `unload` runs now (0), when the timer ends
 * and the model is still idle, or never (negative, or too long for a timer).
 */
export function startExpiry(entry: Loaded, unload: (entry: Loaded) => void): void {
  const ms = entry.keepAliveMs;
  if (ms < 0) {
    entry.expiresAt = undefined;
    return;
  }
  if (ms === 0) {
    unload(entry);
    return;
  }
  entry.expiresAt = new Date(Date.now() + ms);
  // Timers over ~24.8 days overflow; such keep-alives are effectively forever.
  if (ms < MAX_TIMER_MS) {
    entry.timer = setTimeout(() => {
      if (entry.active === 0) unload(entry);
    }, ms);
    entry.timer.unref();
  }
}

/** Stops the keep-alive timer (the model is in use again, its keep-alive changed, or it is gone). */
export function stopExpiry(entry: Loaded): void {
  clearTimeout(entry.timer);
  entry.timer = undefined;
}
