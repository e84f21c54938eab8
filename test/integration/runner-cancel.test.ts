/**
 * A load cancelled before its runner starts (src/runner/client.ts, Runner.start). The scheduler
 * cancels a load when every request waiting for it goes away; Runner.start checks the model file
 * before it forks the runner, and an abort during that check came before the abort listener was
 * added: an aborted signal fires no more events, so the runner forked and loaded the model for
 * nobody (test/integration/scheduler.test.ts's cancelled-load test failed 1–2 times in 6 on the
 * development machine: the request was cancelled ~55 ms after it arrived, the model loaded 2.9 s
 * later and stayed).
 */
import { pino } from "pino";
import t from "tap";
import { Runner } from "../../src/runner/client.js";
import type { LoadSpec } from "../../src/runner/types.js";
import { testGguf } from "../helpers/models.js";

t.test("a load cancelled before the runner starts forks nothing and rejects", async (t) => {
  const lines: { msg: string }[] = [];
  const log = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const spec: LoadSpec = { path: await testGguf({ preset: "tiny" }), contextSize: 512, sequences: 1, threads: 1, gpu: false };
  const abort = new AbortController();
  abort.abort();
  const started = Runner.start(spec, { name: "tiny", log, loadTimeoutMs: 60_000, signal: abort.signal });
  // Stop whatever did start, so that a failing run leaves no runner behind.
  started.then((runner) => runner.stop(), () => undefined);
  await t.rejects(started, { message: "failed to load model 'tiny': load cancelled" });
  t.same(lines.filter((l) => l.msg === "model loaded"), [], "no model was loaded");
});
