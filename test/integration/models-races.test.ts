/**
 * Concurrent writers of one name and crashes mid-write: create, copy and
 * delete of the same names at once answer 200 or 404 (409 when in use, and a create whose base was
 * just deleted fails to pull it), never another 500, and leave a
 * store where every manifest's blobs exist and every blob is referenced; after a SIGKILL during
 * creates, a restart removes the orphans and the partial downloads that cannot be resumed or are
 * too old, and keeps a recent resumable one.
 */
import t, { type Test } from "tap";
import { readdirSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { PARTIAL_MAX_AGE_MS } from "../../src/store/gc.js";
import { listModels, manifestDigests } from "../../src/store/admin.js";
import { ModelStore } from "../../src/store/store.js";
import { freePort } from "../gateway/helpers.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { installTestModels } from "../helpers/models.js";
import { forkDaemon } from "../helpers/process.js";

/** Every manifest's blobs exist, every blob is referenced, no temporary file; returns the model names. */
async function assertStoreClean(t: Test, store: ModelStore): Promise<string[]> {
  const models = await listModels(store);
  const referenced = new Set(models.flatMap((m) => manifestDigests(m.manifest)));
  const blobs = readdirSync(store.blobsDir).filter((f) => f.startsWith("sha256-")).map((f) => f.replace("-", ":"));
  t.same(blobs.filter((d) => !referenced.has(d)), [], "no orphan blob");
  t.same([...referenced].filter((d) => !blobs.includes(d)), [], "no manifest names a missing blob");
  t.same(readdirSync(store.blobsDir).filter((f) => f.startsWith(".tmp-")), [], "no temporary file");
  return models.map((m) => m.display).sort();
}

t.test("a storm of create, copy and delete on the same names: 200 or 404, never 500; a clean store", async (t) => {
  // The names are under a registry host that refuses connections: a create whose base a delete
  // has just removed pulls it, as Ollama does, and that pull fails at once.
  const host = `127.0.0.1:${await freePort()}`;
  const base = `${host}/team/base`;
  const { url, config } = await startDaemon(t, { models: [{ name: base }] });
  const names = ["a", "a:2", "b"].map((n) => `${host}/team/${n}`);
  const sources = [base, ...names];
  let seed = 7;
  const pick = <T>(xs: readonly T[]): T => xs[(seed = (seed * 1103515245 + 12345) % 2 ** 31) % xs.length]!;
  const op = async (i: number): Promise<string> => {
    const kind = pick(["create", "copy", "delete"] as const);
    const name = pick(names);
    let res: Response;
    if (kind === "create") res = await postJson(`${url}/api/create`, { model: name, from: pick(sources), system: `system ${i}`, stream: false });
    else if (kind === "copy") res = await postJson(`${url}/api/copy`, { source: pick(sources), destination: name });
    else res = await fetch(`${url}/api/delete`, { method: "DELETE", body: JSON.stringify({ model: name }) });
    const text = await res.text();
    const unreachable = kind === "create" && res.status === 500 && text.includes(`pull model manifest: cannot reach registry ${host}`);
    return `${kind} ${unreachable ? "pull failed" : res.status}${res.status >= 500 && !unreachable ? ` ${text}` : ""}`;
  };
  const results: string[] = [];
  for (let batch = 0; batch < 8; batch++) results.push(...(await Promise.all(Array.from({ length: 30 }, (_, j) => op(batch * 30 + j)))));
  const statuses = new Set(results.map((r) => r.split(" ")[1]));
  t.same(
    [...statuses].filter((s) => !["200", "404", "409", "pull failed"].includes(s!)),
    [],
    `only 200, 404 or 409 (${results
      .filter((r) => / 5\d\d/.test(r))
      .slice(0, 3)
      .join("; ")})`,
  );
  t.ok(results.filter((r) => r.endsWith(" 200")).length > 50, "most operations did their work");
  const store = new ModelStore(config.models);
  t.ok((await assertStoreClean(t, store)).includes(`${base}:latest`));
});

t.test("SIGKILL during creates, then a restart: orphans and stale partial downloads are collected", async (t) => {
  const dir = t.testdir();
  const store = new ModelStore(dir);
  await store.init();
  await installTestModels(store, [{ name: "tiny" }]);
  // Partial downloads as earlier pulls left them.
  const partial = (hex: string) => path.join(store.blobsDir, `.partial-sha256-${hex.repeat(64)}`);
  const progress = (done: number) => JSON.stringify({ digest: "x", size: 10, parts: [{ start: 0, end: 9, done }] });
  await fs.writeFile(partial("1"), "12345");
  await fs.writeFile(`${partial("1")}.json`, progress(5)); // recent and resumable: kept
  await fs.writeFile(partial("2"), "12345");
  await fs.writeFile(`${partial("2")}.json`, progress(5));
  const old = new Date(Date.now() - PARTIAL_MAX_AGE_MS - 60_000);
  await fs.utimes(partial("2"), old, old);
  await fs.utimes(`${partial("2")}.json`, old, old); // untouched for too long: removed
  await fs.writeFile(partial("3"), ""); // a refused redirect's empty file, no progress: removed
  await fs.writeFile(`${partial("4")}.json`, progress(0)); // progress without data: removed
  await fs.writeFile(path.join(store.blobsDir, `sha256-${"5".repeat(64)}`), "an upload whose create never came");

  const first = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: dir });
  const creates = Array.from({ length: 40 }, (_, i) =>
    postJson(`${first.url}/api/create`, { model: `m${i % 4}`, from: "tiny", system: `killed ${i}`, stream: false }).then(
      (r) => r.status,
      () => 0,
    ),
  );
  await Promise.race(creates); // at least one is done; the others are in flight
  first.child.kill("SIGKILL");
  t.match(await first.exited, { signal: "SIGKILL" });
  await Promise.all(creates);

  const second = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: dir });
  const names = await assertStoreClean(t, store);
  t.ok(names.includes("tiny:latest"));
  const left = readdirSync(store.blobsDir).filter((f) => f.startsWith(".partial-")).sort();
  t.same(left, [path.basename(partial("1")), `${path.basename(partial("1"))}.json`], "only the recent resumable partial download is kept");
  const res = await postJson(`${second.url}/api/create`, { model: "after", from: "tiny", stream: false });
  t.equal(res.status, 200, "the store is usable");
  second.child.kill("SIGTERM");
  await second.exited;
});
