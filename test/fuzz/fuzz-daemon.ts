/** Shared set-up of the HTTP fuzz files: a small body limit (giant bodies stay cheap) and the after-checks. */
import type { Test } from "tap";
import type { StartedDaemon } from "../helpers/daemon.js";

/** A 64 KiB body limit: "giant string near the limit" cases are cheap to generate and send. */
export const FUZZ_ENV = { SERVICE_MAX_BODY: "64KiB" };

/** Structured cases per endpoint (the other kinds are fractions of it); LMD_FUZZ_RUNS raises it for a long local run. */
export const runsPerEndpoint = Number(process.env.LMD_FUZZ_RUNS ?? 1600);

/** No model was loaded by any fuzz case, nothing is busy or queued, and the daemon answers. */
export async function checkAfterFuzz(t: Test, daemon: StartedDaemon): Promise<void> {
  const { scheduler } = daemon.app.services;
  t.same(scheduler.list().map((m) => m.model.display), [], "no fuzz case loaded a model");
  t.equal(scheduler.queueDepth, 0, "nothing queued");
  t.equal((await fetch(`${daemon.url}/api/tags`)).status, 200, "the daemon answers");
}
