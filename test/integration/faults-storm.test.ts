/**
 * A client-disconnect storm: hundreds of requests of every kind (streams, non-streams,
 * chat, /v1, embeddings, half-sent bodies) aborted at random points: while queued, while the model
 * loads, mid-stream, mid-body. Afterwards no slot is busy, nothing is queued, no temporary file is
 * left, and the daemon serves the next request at once.
 */
import t from "tap";
import { readdirSync } from "node:fs";
import net from "node:net";
import { postJson, startDaemon } from "../helpers/daemon.js";

const TOTAL = 400;
const WAVE = 40;

/** A small deterministic generator (the storm is the same on every run). */
function lcg(seed: number): () => number {
  let x = seed;
  return () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
}

t.test("hundreds of aborted requests leave no busy slot behind", async (t) => {
  const { url, app } = await startDaemon(t, { env: { SERVICE_NUM_PARALLEL: "2", SERVICE_MAX_QUEUE: "64" } });
  const { scheduler, store } = app.services;
  const rand = lcg(42);
  const port = Number(new URL(url).port);
  const gen = { model: "tiny", prompt: "Tell me a long story", options: { num_predict: 200 } };
  const kinds: Array<[string, (signal: AbortSignal) => Promise<unknown>]> = [
    ["generate stream", (signal) => postJson(`${url}/api/generate`, gen, { signal }).then((r) => r.text())],
    ["generate", (signal) => postJson(`${url}/api/generate`, { ...gen, stream: false, options: { num_predict: 30 } }, { signal }).then((r) => r.text())],
    [
      "chat stream",
      (signal) =>
        postJson(`${url}/api/chat`, { model: "tiny", messages: [{ role: "user", content: "hi" }], options: { num_predict: 200 } }, { signal }).then((r) =>
          r.text(),
        ),
    ],
    [
      "v1 stream",
      (signal) =>
        postJson(`${url}/v1/chat/completions`, { model: "tiny", stream: true, max_tokens: 200, messages: [{ role: "user", content: "hi" }] }, { signal }).then(
          (r) => r.text(),
        ),
    ],
    ["embed", (signal) => postJson(`${url}/api/embed`, { model: "tiny", input: ["a", "b"] }, { signal }).then((r) => r.text())],
    ["half a body", (signal) => halfBody(port, signal)],
  ];
  // Warm: most aborts then land mid-stream or in the queue (a few waves also cancel a reload, below).
  t.equal((await postJson(`${url}/api/generate`, { model: "tiny", prompt: "", stream: false })).status, 200);
  const outcomes = new Map<string, number>();
  const note = (k: string) => outcomes.set(k, (outcomes.get(k) ?? 0) + 1);
  for (let sent = 0; sent < TOTAL; sent += WAVE) {
    if (sent === TOTAL / 2) await scheduler.unload("registry.ollama.ai/library/tiny:latest"); // the next wave aborts during a load
    await Promise.all(
      Array.from({ length: WAVE }, async () => {
        const [kind, run] = kinds[Math.floor(rand() * kinds.length)]!;
        const ac = new AbortController();
        const timer = setTimeout(() => ac.abort(), Math.floor(rand() * 1200));
        try {
          await run(ac.signal);
          note(`${kind}: finished`);
        } catch {
          note(`${kind}: aborted`);
        } finally {
          clearTimeout(timer);
        }
      }),
    );
  }
  t.ok(
    [...outcomes.entries()].filter(([k]) => k.endsWith("aborted")).reduce((n, [, v]) => n + v, 0) > TOTAL / 3,
    `outcomes: ${JSON.stringify(Object.fromEntries(outcomes))}`,
  );
  const deadline = Date.now() + 20_000;
  while ((scheduler.list().some((m) => m.active > 0) || scheduler.queueDepth > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.same(scheduler.list().map((m) => m.active), scheduler.list().map(() => 0), "no busy slot");
  t.equal(scheduler.queueDepth, 0, "nothing queued");
  t.same(readdirSync(store.blobsDir).filter((f) => !f.startsWith("sha256-")), [], "no temporary file");
  const started = Date.now();
  const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 2 } });
  t.equal(res.status, 200, "the next request is served");
  t.ok(Date.now() - started < 10_000, `promptly (${Date.now() - started} ms)`);
});

/** Sends the head and part of a JSON body, then nothing; the socket is closed on abort. */
function halfBody(port: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, "127.0.0.1", () =>
      s.write('POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"model":"tiny","pro'),
    );
    s.on("error", () => undefined);
    s.on("close", () => resolve());
    signal.addEventListener("abort", () => { s.destroy(); reject(new Error("aborted")); }, { once: true });
  });
}
