/**
 * `/api/blobs` cannot fill the disk: blobs no model references count against
 * `SERVICE_MAX_UNREFERENCED_BLOBS` (507 naming it, refused as the upload streams or at once when
 * its length says so, nothing left behind), blobs a model references do not count, and
 * unreferenced blobs are removed after their grace period while the daemon runs, not only at the
 * next start.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import t, { type Test } from "tap";
import { createApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { silentLogger } from "../../src/logger.js";
import { BLOB_GC } from "../../src/store/unreferenced.js";
import { assertError } from "../helpers/assert-error.js";
import { postJson } from "../helpers/daemon.js";
import { testGguf } from "../helpers/models.js";

const digestOf = (b: Buffer | string): string => `sha256:${createHash("sha256").update(b).digest("hex")}`;

async function start(t: Test, env: Record<string, string>): Promise<{ url: string; models: string }> {
  const models = path.join(t.testdir(), "models");
  const config = loadConfig({ SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: models, SERVICE_GPU: "false", ...env });
  const app = await createApp(config, { log: silentLogger(), demoModel: false });
  const { port } = await app.listen();
  t.teardown(() => app.close());
  return { url: `http://127.0.0.1:${port}`, models };
}

const upload = (url: string, body: Buffer | AsyncIterable<Uint8Array>, digest: string): Promise<Response> =>
  fetch(`${url}/api/blobs/${digest}`, { method: "POST", body: body as BodyInit, duplex: "half" } as RequestInit);

async function* chunks(data: Buffer, size = 100): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
}

const blobFiles = (models: string): string[] => readdirSync(path.join(models, "blobs"));

t.test("the quota: 507 naming SERVICE_MAX_UNREFERENCED_BLOBS; referenced blobs do not count", async (t) => {
  const gguf = readFileSync(await testGguf({ preset: "tiny" }));
  const { url, models } = await start(t, { SERVICE_MAX_UNREFERENCED_BLOBS: String(gguf.length + 1000) });
  const message = `unreferenced blobs would exceed SERVICE_MAX_UNREFERENCED_BLOBS (${gguf.length + 1000} bytes): create a model from the blobs uploaded, or wait for them to be removed`;
  t.equal((await upload(url, gguf, digestOf(gguf))).status, 201, "a model's GGUF fits");
  const small = Buffer.alloc(600, "a");
  const again = Buffer.alloc(600, "b");
  t.equal((await upload(url, small, digestOf(small))).status, 201, "and 600 bytes more");
  await assertError(t, await upload(url, again, digestOf(again)), 507, message);
  await assertError(t, await upload(url, chunks(again), digestOf(again)), 507, message);
  t.same(blobFiles(models).filter((f) => !f.startsWith("sha256-")), [], "no partial file is left");
  t.equal((await upload(url, small, digestOf(small))).status, 200, "a blob already there costs nothing");
  const created = await postJson(`${url}/api/create`, { model: "m", files: { "m.gguf": digestOf(gguf) }, stream: false });
  t.equal(created.status, 200, "a model made from the uploaded GGUF");
  t.equal((await upload(url, again, digestOf(again))).status, 201, "its blob no longer counts: 600 bytes more fit");
});

t.test("unreferenced blobs are removed after the grace period while running; referenced ones stay", async (t) => {
  const saved = { ...BLOB_GC };
  Object.assign(BLOB_GC, { graceMs: 1_500, intervalMs: 200 });
  t.teardown(() => void Object.assign(BLOB_GC, saved));
  const gguf = readFileSync(await testGguf({ preset: "tiny" }));
  const { url } = await start(t, {});
  const orphan = Buffer.from("never used by any model");
  t.equal((await upload(url, orphan, digestOf(orphan))).status, 201);
  t.equal((await upload(url, gguf, digestOf(gguf))).status, 201);
  t.equal((await postJson(`${url}/api/create`, { model: "m", files: { "m.gguf": digestOf(gguf) }, stream: false })).status, 200);
  const head = async (d: string) => (await fetch(`${url}/api/blobs/${d}`, { method: "HEAD" })).status;
  t.equal(await head(digestOf(orphan)), 200, "within its grace it stays");
  const deadline = Date.now() + 15_000;
  while ((await head(digestOf(orphan))) === 200 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  t.equal(await head(digestOf(orphan)), 404, "after it, the unreferenced blob is removed");
  t.equal(await head(digestOf(gguf)), 200, "the model's blob stays");
  const gen = await postJson(`${url}/api/show`, { model: "m" });
  t.equal(gen.status, 200, "and the model is whole");
});
