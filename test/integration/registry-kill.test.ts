/**
 * The daemon (a forked `lmd serve`) is killed with SIGKILL in the middle of a pull; after a
 * restart the store is consistent (every manifest's blobs present and verified, no half-written
 * blob or manifest) and the next pull completes, resuming from the partial download.
 */
import t, { type Test } from "tap";
import { createHash } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { ModelStore } from "../../src/store/store.js";
import { listModels, manifestDigests } from "../../src/store/admin.js";
import { postJson } from "../helpers/daemon.js";
import { installTestModels, testGguf } from "../helpers/models.js";
import { forkDaemon } from "../helpers/process.js";
import { sha256, startTestRegistry } from "../helpers/registry.js";

async function until(check: () => boolean | Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Every manifest's blobs exist and hash to their digests; returns the model names. */
async function assertConsistent(t: Test, store: ModelStore): Promise<string[]> {
  const models = await listModels(store);
  for (const m of models) {
    for (const digest of manifestDigests(m.manifest)) {
      const data = await fs.readFile(store.blobPath(digest));
      t.equal(`sha256:${createHash("sha256").update(data).digest("hex")}`, digest, `${m.display}: ${digest.slice(0, 19)} verified`);
    }
  }
  for (const f of readdirSync(store.blobsDir).filter((f) => f.startsWith("sha256-"))) {
    const data = await fs.readFile(path.join(store.blobsDir, f));
    t.equal(createHash("sha256").update(data).digest("hex"), f.slice(7), `blob ${f.slice(0, 19)} is complete`);
  }
  return models.map((m) => m.display);
}

t.test("SIGKILL during a pull, restart, pull again", async (t) => {
  const dir = t.testdir();
  const store = new ModelStore(dir);
  await store.init();
  await installTestModels(store, [{ name: "tiny" }]); // also keeps the daemon from writing its demo model
  const gguf = await fs.readFile(await testGguf({ preset: "tiny", seed: 7 }));
  const digest = sha256(gguf);
  const reg = await startTestRegistry(t, { redirect: true });
  reg.addModel("library/other", "latest", [{ mediaType: "application/vnd.ollama.image.model", data: gguf }]);
  let reached = false;
  reg.faults.stall = { digest, bytes: 300_000, reached: () => (reached = true) };
  const name = `${reg.host}/library/other:latest`;

  const first = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: dir });
  const pulling = postJson(`${first.url}/api/pull`, { model: name, insecure: true }).then((r) => r.text()).catch(() => "connection lost");
  await until(() => reached, "the registry to stall mid-blob");
  const stateFile = `${store.partialPath(digest)}.json`;
  await until(async () => (await fs.readFile(stateFile, "utf8").catch(() => "")).includes('"done":300000'), "the progress file");
  first.child.kill("SIGKILL");
  t.match(await first.exited, { signal: "SIGKILL" });
  await pulling;

  t.same(await assertConsistent(t, store), ["tiny:latest"], "only the complete model is listed");
  t.notOk(existsSync(store.blobPath(digest)), "the half-downloaded blob is not published");
  t.ok(existsSync(store.partialPath(digest)), "its partial download is kept for resuming");

  const second = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: dir });
  const res = await postJson(`${second.url}/api/pull`, { model: name, insecure: true, stream: false });
  t.same(await res.json(), { status: "success" });
  t.equal(reg.stats.bytesServed.get(digest), gguf.length, "the restarted pull downloaded only the missing bytes");
  t.same((await assertConsistent(t, store)).sort(), [name, "tiny:latest"].sort());
  t.same(readdirSync(store.blobsDir).filter((f) => !f.startsWith("sha256-")), [], "no partial or temporary file remains");
  const gen = await postJson(`${second.url}/api/generate`, { model: name, prompt: "hi", stream: false, options: { num_predict: 2 } });
  t.equal(gen.status, 200);
  second.child.kill("SIGTERM");
  await second.exited;
});
