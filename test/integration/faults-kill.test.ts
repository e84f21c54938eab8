/**
 * Faults: the daemon SIGKILLed in the middle of a blob upload leaves a store that is
 * consistent after a restart (no temporary file, no partial blob, the upload can be redone); a
 * runner SIGKILLed mid-stream ends only its own stream, the other loaded model carries on in its
 * own runner, and the next request reloads the killed one.
 */
import t from "tap";
import { createHash, randomBytes } from "node:crypto";
import { readdirSync, statSync } from "node:fs";
import fs from "node:fs/promises";
import http from "node:http";
import { ModelStore } from "../../src/store/store.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { installTestModels } from "../helpers/models.js";
import { forkDaemon } from "../helpers/process.js";

async function until(check: () => boolean, what: string, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

t.test("SIGKILL during a blob upload: consistent store after restart", async (t) => {
  const dir = t.testdir();
  const store = new ModelStore(dir);
  await store.init();
  await installTestModels(store, [{ name: "tiny" }]); // keeps the daemon from writing its demo model
  const blobsBefore = readdirSync(store.blobsDir).sort();
  const data = randomBytes(8 << 20);
  const digest = `sha256:${createHash("sha256").update(data).digest("hex")}`;

  const first = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: dir });
  const { port } = new URL(first.url);
  const req = http.request({ host: "127.0.0.1", port, method: "POST", path: `/api/blobs/${digest}`, headers: { "content-length": data.length } });
  req.on("error", () => undefined);
  req.write(data.subarray(0, 3 << 20)); // three of eight MiB, then nothing
  const temps = () => readdirSync(store.blobsDir).filter((f) => f.startsWith(".tmp-"));
  await until(() => temps().length === 1, "the upload's temporary file");
  await until(() => temps().some((f) => sizeOf(`${store.blobsDir}/${f}`) >= 1 << 20), "part of the upload on disk");
  first.child.kill("SIGKILL");
  t.match(await first.exited, { signal: "SIGKILL" });
  req.destroy();
  t.equal(temps().length, 1, "the killed daemon left its temporary file behind");
  t.notOk(await store.hasBlob(digest), "no partial blob under the digest");

  const second = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: dir });
  t.same(temps(), [], "the restarted daemon removed the temporary file");
  t.same(readdirSync(store.blobsDir).sort(), blobsBefore, "the store holds exactly what it held before");
  t.equal((await fetch(`${second.url}/api/blobs/${digest}`, { method: "HEAD" })).status, 404, "the blob is not there");
  const again = await fetch(`${second.url}/api/blobs/${digest}`, { method: "POST", body: data });
  t.equal(again.status, 201, "the upload can be redone");
  const stored = await fs.readFile(store.blobPath(digest));
  t.equal(`sha256:${createHash("sha256").update(stored).digest("hex")}`, digest, "and the blob is complete");
  const gen = await postJson(`${second.url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 1 } });
  t.equal(gen.status, 200, "the models still work");
  second.child.kill("SIGTERM");
  await second.exited;
});

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

t.test("a runner SIGKILLed mid-stream: the other model is unaffected, the next request reloads", async (t) => {
  const { url, app } = await startDaemon(t, {
    env: { SERVICE_MAX_LOADED_MODELS: "2" },
    models: [{ name: "one" }, { name: "two", make: { preset: "tiny", seed: 2 } }],
  });
  const { scheduler } = app.services;
  const stream = async (model: string, numPredict: number) => {
    const res = await postJson(`${url}/api/generate`, { model, prompt: "Keep going", options: { temperature: 0, num_predict: numPredict } });
    const reader = res.body!.getReader();
    // Generating. What this first read brings is kept: on a busy machine it may be the whole answer.
    const first = await reader.read();
    return { reader, text: first.value ? Buffer.from(first.value).toString() : "" };
  };
  const readAll = async ({ reader, text: start }: { reader: ReadableStreamDefaultReader<Uint8Array>; text: string }) => {
    let text = start;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return text.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
      text += Buffer.from(value).toString();
    }
  };
  // The stream to be killed is unbounded and the kill follows its first token at once (a random
  // model can still end on its own end-of-generation token, which batching with the other stream
  // on a busy machine makes likelier the longer it runs); the other one is long enough to still be
  // running too.
  const b = await stream("two", 120);
  const a = await stream("one", 100_000);
  const pids = Object.fromEntries(scheduler.list().map((m) => [m.model.display, m.pid]));
  t.ok(pids["one:latest"] && pids["two:latest"] && pids["one:latest"] !== pids["two:latest"], "two runners");
  process.kill(pids["one:latest"]!, "SIGKILL");
  const [linesA, linesB] = await Promise.all([readAll(a), readAll(b)]);
  const lastA = linesA.at(-1)!;
  t.same(Object.keys(lastA), ["error"], "the killed model's stream ends with exactly {error}");
  t.match(lastA.error, /^an error occurred while running the model: the model runner stopped unexpectedly \(signal SIGKILL\)/);
  const lastB = linesB.at(-1)!;
  t.equal(lastB.done, true, "the other model's stream finished normally");
  t.equal(lastB.eval_count, 120, "all its tokens");
  t.notOk(linesB.some((l) => "error" in l), "with no error line");
  const after = Object.fromEntries(scheduler.list().map((m) => [m.model.display, m.pid]));
  t.equal(after["two:latest"], pids["two:latest"], "the other runner kept running");
  t.notOk("one:latest" in after, "the killed runner was dropped");
  const next = await postJson(`${url}/api/generate`, { model: "one", prompt: "hi", stream: false, options: { num_predict: 2 } });
  t.equal(next.status, 200, "the killed model reloads on the next request");
  const reloaded = scheduler.list().find((m) => m.model.display === "one:latest");
  t.ok(reloaded && reloaded.pid !== pids["one:latest"], "in a new runner");
});
