/**
 * Resolving a model name (every generate, chat and embed request does it) reads the store only as
 * much as it must: an unchanged manifest is recognised by its file's stat and the small layers come
 * from the digest cache, so a resolve costs a handful of file-system requests instead of ~15 (2–3.5
 * ms per request on a busy 2-core VM, which spread simultaneous requests over several ms and
 * started the first one's decode alone). What changed is still seen at once: a rewritten manifest,
 * a deleted one, a name in another case.
 */
import { createHook } from "node:async_hooks";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { ModelNotFoundError } from "../../src/errors.js";
import { MEDIA, ModelStore } from "../../src/store/store.js";

async function storeWith(t: Test): Promise<{ store: ModelStore; write: (template: string) => Promise<void> }> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), "lmd-resolve-"));
  t.teardown(() => fs.rm(root, { recursive: true, force: true }));
  const store = new ModelStore(root);
  await store.init();
  const model = await store.addBlob(Buffer.from("GGUF not really"), MEDIA.model);
  const config = await store.addBlob("{}", MEDIA.config);
  const write = async (template: string) => {
    const layers = [model, await store.addBlob(template, MEDIA.template), await store.addBlob(JSON.stringify({ temperature: 0.5 }), MEDIA.params)];
    await store.writeManifest("m:latest", { schemaVersion: 2, mediaType: MEDIA.manifest, config, layers });
  };
  await write("first {{ .Prompt }}");
  return { store, write };
}

/** File-system requests made while `run` works (async_hooks sees each one the fs promises API starts). */
async function fsRequests(run: () => Promise<unknown>): Promise<number> {
  return (await fsTrace(run)).started;
}

/** {@link fsRequests}, and how many of them started after one had ended (waited for another's answer). */
async function fsTrace(run: () => Promise<unknown>): Promise<{ started: number; afterAnAnswer: number }> {
  const ids = new Set<number>();
  let answered = false;
  let afterAnAnswer = 0;
  const hook = createHook({
    init: (id, type) => {
      if (!type.startsWith("FSREQ") && !type.startsWith("FILEHANDLE")) return;
      ids.add(id);
      if (answered) afterAnAnswer++;
    },
    before: (id) => void (ids.has(id) ? (answered = true) : 0),
  });
  hook.enable();
  try {
    await run();
  } finally {
    hook.disable();
  }
  return { started: ids.size, afterAnAnswer };
}

t.test("an unchanged model resolves with a few file-system requests", async (t) => {
  const { store } = await storeWith(t);
  const first = await fsRequests(() => store.resolve("m"));
  const again = await fsRequests(() => store.resolve("m"));
  t.ok(again <= 6, `second resolve: ${again} requests (first: ${first})`);
  t.equal((await store.resolve("m")).template, "first {{ .Prompt }}");
  t.same((await store.resolve("m")).params, { temperature: 0.5 });
});

t.test("what changed in the store is seen by the next resolve", async (t) => {
  const { store, write } = await storeWith(t);
  t.equal((await store.resolve("m")).template, "first {{ .Prompt }}");
  await write("second {{ .Prompt }}");
  t.equal((await store.resolve("m")).template, "second {{ .Prompt }}", "a rewritten manifest");
  t.equal((await store.resolve("M:LATEST")).template, "second {{ .Prompt }}", "a name in another case");
  // Ollama rewrites a manifest in place (same inode): its size or modification time tells.
  const file = await store.findManifest((await store.resolve("m")).name);
  const third = await store.addBlob("third, longer {{ .Prompt }}", MEDIA.template);
  const manifest = JSON.parse(await fs.readFile(file!, "utf8")) as { layers: { mediaType: string }[] };
  manifest.layers = manifest.layers.map((l) => (l.mediaType === MEDIA.template ? third : l));
  await fs.writeFile(file!, JSON.stringify(manifest, null, 1));
  t.equal((await store.resolve("m")).template, "third, longer {{ .Prompt }}", "a manifest rewritten in place");
  await fs.rm(file!);
  await t.rejects(store.resolve("m"), ModelNotFoundError, "a deleted manifest");
});

t.test("a resolve waits for one round of file-system requests, and still sees what it checks", async (t) => {
  const { store } = await storeWith(t);
  await store.resolve("m");
  // The manifest's stat, its real path and the model blob's real path, all started at once (the
  // store root's real path is taken once): three requests, none waiting for another's answer.
  t.same(await fsTrace(() => store.resolve("m")), { started: 3, afterAnAnswer: 0 }, "three file-system requests in one round");

  // The model blob it found last time, replaced since by a link out of the store: refused.
  const outside = await fs.mkdtemp(path.join(os.tmpdir(), "lmd-outside-"));
  t.teardown(() => fs.rm(outside, { recursive: true, force: true }));
  const resolved = await store.resolve("m");
  await fs.writeFile(path.join(outside, "model.gguf"), "GGUF elsewhere");
  await fs.rm(resolved.modelPath);
  await fs.symlink(path.join(outside, "model.gguf"), resolved.modelPath);
  await t.rejects(store.resolve("m"), /leads outside the model store/, "a blob that became a link out of the store");

  // A manifest that names another model blob since: the new one.
  const other = await store.addBlob(Buffer.from("GGUF another"), MEDIA.model);
  const file = (await store.findManifest((await store.findModel("m"))!.name))!;
  const manifest = JSON.parse(await fs.readFile(file, "utf8")) as { layers: { mediaType: string; digest: string }[] };
  manifest.layers = manifest.layers.map((l) => (l.mediaType === MEDIA.model ? other : l));
  await fs.writeFile(file, JSON.stringify(manifest));
  t.equal((await store.resolve("m")).modelPath, store.blobPath(other.digest), "the blob the manifest names now");
});

t.test("a store whose root is a link re-pointed while the daemon runs", async (t) => {
  const { store: first } = await storeWith(t);
  const base = await fs.mkdtemp(path.join(os.tmpdir(), "lmd-root-"));
  t.teardown(() => fs.rm(base, { recursive: true, force: true }));
  const copy = path.join(base, "copy");
  await fs.cp(first.root, copy, { recursive: true });
  const link = path.join(base, "store");
  await fs.symlink(first.root, link);
  const store = new ModelStore(link);
  t.equal((await store.resolve("m")).modelPath.startsWith(await fs.realpath(first.root)), true, "through the link");
  await fs.rm(link);
  await fs.symlink(copy, link);
  const moved = await store.resolve("m");
  t.equal(moved.modelPath.startsWith(await fs.realpath(copy)), true, `the new root's blob (${moved.modelPath})`);
});
