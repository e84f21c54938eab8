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
  let n = 0;
  const hook = createHook({ init: (_id, type) => void (type.startsWith("FSREQ") || type.startsWith("FILEHANDLE") ? n++ : 0) });
  hook.enable();
  try {
    await run();
  } finally {
    hook.disable();
  }
  return n;
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
