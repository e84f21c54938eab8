/**
 * The scheduler against the real daemon (real runner children, tiny generated models): the bounded
 * queue, cancellation, parallel slots, keep-alive expiry, eviction order, and the memory check.
 */
import os from "node:os";
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import type { Scheduler } from "../../src/scheduler/scheduler.js";

/**
 * One decode thread: ggml's threads meet at spinning barriers many times per token, and on a busy
 * 2-core machine (CI, other tests) two threads decode ~100× slower than one.
 */
const FAST = { SERVICE_THREADS: "1" };
const long = { temperature: 0, seed: 1, num_predict: 100_000 };

/** A streaming generate that resolves once its first chunk arrived; `done` settles at the end. */
async function startStream(url: string, body: Record<string, unknown>, signal?: AbortSignal) {
  const res = await postJson(`${url}/api/generate`, { prompt: "Once upon a time", raw: true, ...body }, signal ? { signal } : {});
  if (res.status !== 200 || !res.body) throw new Error(`status ${res.status}: ${await res.text()}`);
  const reader = res.body.getReader();
  const first = await reader.read();
  const firstAt = performance.now();
  const done = (async () => {
    let text = first.done ? "" : new TextDecoder().decode(first.value);
    for (let i = 0; i < 1_000_000; i++) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    const lines = text.split("\n").filter((l) => l.trim());
    return { final: JSON.parse(lines[lines.length - 1] ?? "{}") as Record<string, unknown>, endAt: performance.now() };
  })();
  done.catch(() => undefined); // an aborted stream rejects; callers that care await it
  return { firstAt, done };
}

/** Polls `check` every 10 ms until it is true (at most `ms`). */
async function until(check: () => boolean | Promise<boolean>, ms = 15_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return false;
}

const busySlots = (s: Scheduler) => s.list().reduce((n, m) => n + m.active, 0);

async function ps(url: string): Promise<{ name: string; expires_at: string; size: number; size_vram: number; context_length: number }[]> {
  const res = await fetch(`${url}/api/ps`);
  return ((await res.json()) as { models: [] }).models;
}

t.test("queue full → 503 with Retry-After; cancelled requests free their slot and their queue place", async (t) => {
  const { url, app } = await startDaemon(t, { env: { ...FAST, SERVICE_NUM_PARALLEL: "1", SERVICE_MAX_QUEUE: "1" } });
  const scheduler = app.services.scheduler;
  const runningAbort = new AbortController();
  const running = await startStream(url, { model: "tiny", options: long }, runningAbort.signal);
  t.equal(busySlots(scheduler), 1, "the first request holds the only slot");

  const queuedAbort = new AbortController();
  const queued = postJson(`${url}/api/generate`, { model: "tiny", prompt: "queued", options: { num_predict: 1 } }, { signal: queuedAbort.signal });
  queued.catch(() => undefined);
  t.ok(await until(() => scheduler.queueDepth === 1), "the second request waits in the queue");

  const refused = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "third", options: { num_predict: 1 } });
  t.equal(refused.headers.get("retry-after"), "1", "Retry-After: 1");
  await assertError(t, refused, 503, "server busy, please try again: maximum pending requests exceeded");

  queuedAbort.abort();
  t.ok(await until(() => scheduler.queueDepth === 0), "a request cancelled while queued leaves the queue");
  t.equal(busySlots(scheduler), 1, "…and takes no slot");
  runningAbort.abort();
  await running.done.catch(() => undefined);
  t.ok(await until(() => busySlots(scheduler) === 0), "a request cancelled while generating frees its slot");

  const again = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "after", stream: false, options: { num_predict: 2 } });
  t.equal(again.status, 200, "the freed slot serves the next request");
  await again.text();
});

t.test("a request cancelled while its model loads stops the load and leaves no trace", async (t) => {
  const { url, app } = await startDaemon(t, { env: FAST });
  const scheduler = app.services.scheduler;
  const abort = new AbortController();
  const req = postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", options: { num_predict: 1 } }, { signal: abort.signal });
  req.catch(() => undefined);
  t.ok(await until(() => scheduler.loadingModel !== undefined, 10_000), "the load started");
  abort.abort();
  t.ok(await until(() => scheduler.loadingModel === undefined), "the load ended");
  t.equal(scheduler.queueDepth, 0, "queue empty");
  t.same(await ps(url), [], "nothing loaded: the cancelled load was stopped");
  const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 1 } });
  t.equal(res.status, 200, "the next request loads the model normally");
  await res.text();
  t.equal((await ps(url)).length, 1);
});

t.test("8 concurrent requests to a 4-slot model all succeed, decoded side by side", async (t) => {
  const { url, app } = await startDaemon(t, { env: { ...FAST, SERVICE_NUM_PARALLEL: "4" } });
  const scheduler = app.services.scheduler;
  // Load first so that all eight start together.
  await (await postJson(`${url}/api/generate`, { model: "tiny", prompt: "", stream: false })).text();
  let maxBusy = 0;
  const sampler = setInterval(() => (maxBusy = Math.max(maxBusy, busySlots(scheduler))), 2);
  const t0 = performance.now();
  const streams = await Promise.all(
    Array.from({ length: 8 }, async (_, i) => {
      const s = await startStream(url, { model: "tiny", prompt: `Story number ${i}:`, options: { temperature: 0, seed: i, num_predict: 48 } });
      const { final, endAt } = await s.done;
      return { start: s.firstAt - t0, end: endAt - t0, final };
    }),
  );
  clearInterval(sampler);
  for (const s of streams) {
    t.equal(s.final.done, true, "stream finished");
    t.ok(typeof s.final.eval_count === "number" && s.final.eval_count > 0, "tokens generated");
  }
  t.equal(maxBusy, 4, "four slots busy at once, never more");
  // The most streams running at one instant (between first and last chunk).
  const overlap = Math.max(...streams.map((a) => streams.filter((b) => b.start <= a.start && b.end >= a.start).length));
  t.ok(overlap >= 2, `streams overlap in time (at most ${overlap} at once)`);
  t.comment(`streams (ms): ${streams.map((s) => `${s.start.toFixed(0)}–${s.end.toFixed(0)}`).join(", ")}`);
  t.equal(scheduler.queueDepth, 0);
});

t.test("keep_alive expiry unloads the model, as /api/ps shows", async (t) => {
  const { url } = await startDaemon(t, { env: { ...FAST, SERVICE_KEEP_ALIVE: "1h" } });
  const before = Date.now();
  const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, keep_alive: "1s", options: { num_predict: 1 } });
  t.equal(res.status, 200);
  await res.text();
  const [loaded] = await ps(url);
  t.ok(loaded, "loaded");
  const expires = Date.parse(loaded?.expires_at ?? "");
  t.ok(expires >= before + 900 && expires <= Date.now() + 1100, "expires_at is about 1 s from the end of the request");
  t.ok(await until(async () => (await ps(url)).length === 0, 10_000), "unloaded after its keep-alive");

  // The default (SERVICE_KEEP_ALIVE=1h) applies when the request names none.
  await (await postJson(`${url}/api/generate`, { model: "tiny", prompt: "", stream: false })).text();
  const [again] = await ps(url);
  t.ok(Date.parse(again?.expires_at ?? "") > Date.now() + 3_500_000, "default keep-alive from SERVICE_KEEP_ALIVE");
  // keep_alive 0 with an empty prompt unloads at once.
  await (await postJson(`${url}/api/generate`, { model: "tiny", prompt: "", keep_alive: 0, stream: false })).text();
  t.same(await ps(url), [], "keep_alive 0 unloads");
});

t.test("with SERVICE_MAX_LOADED_MODELS=2 the least recently used idle model is evicted", async (t) => {
  const models = ["a", "b", "c"].map((name) => ({ name }));
  const { url } = await startDaemon(t, { env: { ...FAST, SERVICE_MAX_LOADED_MODELS: "2" }, models });
  const use = async (model: string) => {
    const res = await postJson(`${url}/api/generate`, { model, prompt: "hi", stream: false, options: { num_predict: 1 } });
    t.equal(res.status, 200, `${model} answered`);
    await res.text();
  };
  await use("a");
  await use("b");
  t.same((await ps(url)).map((m) => m.name), ["b:latest", "a:latest"], "two resident, most recent first");
  await use("a"); // a is now the most recently used
  await use("c"); // evicts b, the least recently used idle model
  t.same((await ps(url)).map((m) => m.name), ["c:latest", "a:latest"], "b was evicted, a kept");
  await use("b"); // evicts a
  t.same((await ps(url)).map((m) => m.name), ["b:latest", "c:latest"], "a was evicted next");
});

t.test("a cached prefix lowers prompt_eval_count", async (t) => {
  // Two slots: a request takes the free slot that shares the longest prefix with its prompt.
  const { url } = await startDaemon(t, { env: { ...FAST, SERVICE_NUM_PARALLEL: "2" } });
  const gen = async (body: Record<string, unknown>) => {
    const res = await postJson(`${url}/api/generate`, {
      model: "tiny",
      raw: true,
      stream: false,
      options: { temperature: 0, seed: 3, num_predict: 4 },
      ...body,
    });
    t.equal(res.status, 200);
    return (await res.json()) as { prompt_eval_count: number; context: number[] };
  };
  const prompt = "the quick brown fox jumps over the lazy dog and then runs far away into the green forest";
  const first = await gen({ prompt });
  t.ok(first.prompt_eval_count > 10, `first turn evaluates the whole prompt (${first.prompt_eval_count})`);
  const repeated = await gen({ prompt });
  t.ok(repeated.prompt_eval_count <= 2, `the same prompt again evaluates at most 2 tokens (${repeated.prompt_eval_count})`);
  const next = await gen({ prompt: " and then it slept", context: first.context });
  const fresh = await gen({ prompt: "something entirely different with quite a few words in it to evaluate" });
  t.ok(fresh.prompt_eval_count > 8, "an unrelated prompt is evaluated in full");
  const cont = await gen({ prompt: " and then it slept", context: first.context });
  t.ok(
    next.prompt_eval_count < first.context.length,
    `a continuation with context evaluates only the new tokens (${next.prompt_eval_count} < ${first.context.length})`,
  );
  t.ok(cont.prompt_eval_count <= next.prompt_eval_count, `…also after an unrelated prompt ran in the other slot (${cont.prompt_eval_count})`);
});

t.test("a model too large for the available memory is refused without loading it", async (t) => {
  // 256 layers of a tiny model: an 11 MB file whose KV cache grows 64 KiB per token of context.
  const huge = { name: "huge", make: { preset: "tiny" as const, layers: 256, contextLength: 1 << 24 } };
  const { url, app } = await startDaemon(t, { env: { ...FAST, SERVICE_MAX_LOADED_MODELS: "3" }, models: [{ name: "tiny" }, huge] });
  await (await postJson(`${url}/api/generate`, { model: "tiny", prompt: "", stream: false })).text();
  // A context several times the machine's RAM: node-llama-cpp's estimate exceeds it whatever is free.
  let numCtx = 1 << 16;
  while (numCtx * 65_536 < 2 * os.totalmem() && numCtx < 1 << 24) numCtx *= 2;
  const started = Date.now();
  const res = await postJson(`${url}/api/generate`, { model: "huge", prompt: "hi", stream: false, options: { num_ctx: numCtx, num_predict: 1 } });
  const message = await assertError(
    t,
    res,
    500,
    /^failed to load model 'huge:latest': not enough memory to load the model \(needs [\d.]+ [KMGT]iB, [\d.]+ [KMGT]?i?B available\)$/,
  );
  t.comment(`${message} (after ${Date.now() - started} ms, num_ctx ${numCtx})`);
  t.same((await ps(url)).map((m) => m.name), ["tiny:latest"], "nothing was loaded, and the idle model was not evicted for nothing");
  t.equal(app.services.scheduler.queueDepth, 0);
  const ok = await postJson(`${url}/api/generate`, { model: "huge", prompt: "hi", stream: false, options: { num_ctx: 256, num_predict: 1 } });
  t.equal(ok.status, 200, "the same model with a small context fits and loads");
  await ok.text();
});
