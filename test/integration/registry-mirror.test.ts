/**
 * SERVICE_REGISTRY_MIRRORS against two loopback registries (test/helpers/registry.ts), one the
 * origin and one its mirror: a pull asks only the mirror while it serves; a mirror without the
 * model, one that is down, and one that serves wrong bytes each leave the pull to the origin, and
 * every blob is checked against its digest whichever source sent it.
 */
import t, { type Test } from "tap";
import { readdirSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { testGguf } from "../helpers/models.js";
import { sha256, startTestRegistry, type TestRegistry } from "../helpers/registry.js";

const MODEL = "application/vnd.ollama.image.model";

async function addTiny(reg: TestRegistry): Promise<string> {
  const gguf = await fs.readFile(await testGguf());
  reg.addModel("library/tiny", "latest", [
    { mediaType: MODEL, data: gguf },
    { mediaType: "application/vnd.ollama.image.params", data: Buffer.from(JSON.stringify({ num_predict: 2 })) },
  ]);
  return sha256(gguf);
}

const requests = (reg: TestRegistry) => reg.stats.manifestRequests + reg.stats.blobRequests.length;

async function pull(t: Test, mirrors: string, origin: TestRegistry): Promise<{ body: Record<string, unknown>; store: string }> {
  const d = await startDaemon(t, { models: [], env: { SERVICE_REGISTRY_MIRRORS: mirrors } });
  const res = await postJson(`${d.url}/api/pull`, { model: `${origin.host}/library/tiny:latest`, insecure: true, stream: false });
  return { body: (await res.json()) as Record<string, unknown>, store: d.config.models };
}

t.test("a serving mirror answers the whole pull; the origin is not asked", async (t) => {
  const [origin, mirror] = [await startTestRegistry(t), await startTestRegistry(t)];
  const digest = await addTiny(origin);
  await addTiny(mirror);
  const { body, store } = await pull(t, `${origin.host}=${mirror.url}`, origin);
  t.same(body, { status: "success" });
  t.equal(requests(origin), 0, "no request reached the origin");
  t.ok(mirror.stats.manifestRequests >= 1 && mirror.stats.blobRequests.some((r) => r.digest === digest), "the mirror served manifest and blobs");
  t.ok(readdirSync(path.join(store, "blobs")).includes(digest.replace(":", "-")));
});

t.test("a mirror without the model: the origin answers", async (t) => {
  const [origin, mirror] = [await startTestRegistry(t), await startTestRegistry(t)];
  await addTiny(origin);
  const { body } = await pull(t, `${origin.host}=${mirror.url}`, origin);
  t.same(body, { status: "success" });
  t.equal(mirror.stats.manifestRequests, 1, "the mirror was asked first");
  t.ok(origin.stats.manifestRequests >= 1, "then the origin");
});

t.test("a mirror that is down, then one that serves: the second mirror answers", async (t) => {
  const [origin, down, mirror] = [await startTestRegistry(t), await startTestRegistry(t), await startTestRegistry(t)];
  await addTiny(origin);
  await addTiny(mirror);
  const downUrl = down.url;
  await down.close();
  const { body } = await pull(t, `${origin.host}=${downUrl},${origin.host}=${mirror.url}`, origin);
  t.same(body, { status: "success" });
  t.equal(requests(origin), 0, "the origin was not needed");
  t.ok(mirror.stats.manifestRequests >= 1, "the second mirror served");
});

t.test("a mirror serving wrong bytes: the blob is fetched again from the origin, and verified", async (t) => {
  const [origin, mirror] = [await startTestRegistry(t), await startTestRegistry(t)];
  const digest = await addTiny(origin);
  await addTiny(mirror);
  mirror.faults.corrupt = digest;
  const { body, store } = await pull(t, `${origin.host}=${mirror.url}`, origin);
  t.same(body, { status: "success" });
  t.ok(mirror.stats.blobRequests.some((r) => r.digest === digest), "the mirror sent the wrong bytes");
  t.ok(origin.stats.blobRequests.some((r) => r.digest === digest), "the origin sent them again");
  const stored = await fs.readFile(path.join(store, "blobs", digest.replace(":", "-")));
  t.equal(sha256(stored), digest, "the stored blob matches its digest");
});

t.test("the origin's own wrong bytes are still refused", async (t) => {
  const [origin, mirror] = [await startTestRegistry(t), await startTestRegistry(t)];
  const digest = await addTiny(origin);
  origin.faults.corrupt = digest;
  const { body, store } = await pull(t, `${origin.host}=${mirror.url}`, origin);
  t.match(String(body.error), /^digest mismatch/);
  t.notOk(readdirSync(path.join(store, "blobs")).includes(digest.replace(":", "-")), "nothing stored under the digest");
});
