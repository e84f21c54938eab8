/**
 * Eight concurrent streams on one model with eight slots (one context, eight sequences batched
 * together): every stream completes with its full length and its own final object, and the slots
 * are free afterwards. Speed is measured by bench/, not here.
 */
import t from "tap";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";

t.test("8 concurrent streams on 8 slots all complete", async (t) => {
  const { url, app } = await startDaemon(t, { env: { SERVICE_NUM_PARALLEL: "8" } });
  const results = await Promise.all(Array.from({ length: 8 }, async (_, i) => {
    const res = await postJson(`${url}/api/generate`, {
      model: "tiny",
      prompt: `${i} once upon a time`,
      raw: true,
      options: { num_predict: 32, seed: i, temperature: 0.8 },
    });
    t.equal(res.status, 200, `stream ${i} started`);
    return readNdjson(res);
  }));
  for (const [i, lines] of results.entries()) {
    const final = lines[lines.length - 1] ?? {};
    t.equal(final.done, true, `stream ${i} ended with its final object`);
    t.equal(final.eval_count, 32, `stream ${i} generated all 32 tokens`);
    t.equal(lines.filter((l) => l.done === false).map((l) => l.response).join("").length > 0, true, `stream ${i} streamed text`);
  }
  t.equal(app.services.scheduler.list()[0]?.active, 0, "every slot is free again");
});

/**
 * A new request on a free slot must not wait for the streams already running: before it evaluates
 * its prompt it clears its sequence's old tokens, which takes the context's lock, and node-llama-cpp's
 * batch loop held that lock for as long as any sequence kept queueing tokens (it waited until the
 * others finished). Not a timing test: the three streams are unbounded, so they are still running
 * when the new request ends, or the request was starved.
 */
t.test("a new request is served while three others stream on the same model", async (t) => {
  const { url, app } = await startDaemon(t, { env: { SERVICE_NUM_PARALLEL: "4", SERVICE_MAX_PREDICT: "1000000" } });
  const active = () => app.services.scheduler.list()[0]?.active ?? 0;
  // A first request on each slot, so that every sequence holds old tokens the next one must clear.
  await Promise.all(
    Array.from({ length: 4 }, (_, i) =>
      postJson(`${url}/api/generate`, { model: "tiny", prompt: `warm ${i}`, stream: false, options: { num_predict: 2 } }).then((r) => r.json()),
    ),
  );
  const stop = new AbortController();
  const streams = Array.from({ length: 3 }, async (_, i) => {
    const res = await postJson(
      `${url}/api/generate`,
      { model: "tiny", prompt: `${i} once upon a time`, raw: true, options: { num_predict: -1, seed: i, temperature: 0.8 } },
      { signal: stop.signal },
    );
    const reader = res.body!.getReader();
    for (;;) if ((await reader.read().catch(() => ({ done: true }))).done) return;
  });
  const until = async (cond: () => boolean) => {
    for (let i = 0; i < 600 && !cond(); i++) await new Promise((r) => setTimeout(r, 100));
    return cond();
  };
  t.ok(await until(() => active() === 3), "three streams running");
  const next = postJson(`${url}/api/generate`, { model: "tiny", prompt: "a new question", stream: false, options: { num_predict: 4 } }).then(async (r) => ({
    status: r.status,
    body: (await r.json()) as { done: boolean; eval_count: number },
  }));
  // Bounded only so that a starved request fails the test instead of hanging it (the streams run for minutes).
  let timer: NodeJS.Timeout | undefined;
  const result = await Promise.race([next, new Promise<undefined>((r) => (timer = setTimeout(r, 120_000)))]);
  clearTimeout(timer);
  t.ok(result, "the new request was answered");
  t.equal(result?.status, 200);
  t.equal(result?.body.eval_count, 4, "with its four tokens");
  t.equal(active(), 3, `while the three streams were still running (${active()} slots busy)`);
  stop.abort();
  await Promise.all(streams);
  t.ok(await until(() => active() === 0), "every slot is free again");
});
