/**
 * The store's failures are store errors that know no HTTP: each carries a kind, and the door
 * (toErrorResponse, what http/server.ts answers with) gives it the contract's status and body.
 */
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import t, { type Test } from "tap";
import { HttpError, StoreError, toErrorResponse } from "../../src/errors.js";
import { SMALL_LAYER_MAX } from "../../src/store/layers.js";
import { MEDIA, ModelStore, type Layer } from "../../src/store/store.js";

async function emptyStore(t: Test): Promise<ModelStore> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), "lmd-store-errors-"));
  t.teardown(() => fs.rm(root, { recursive: true, force: true }));
  const store = new ModelStore(root);
  await store.init();
  return store;
}

/** A model `m` whose manifest has a model layer and `extra`. */
async function modelWith(store: ModelStore, extra: Layer[]): Promise<void> {
  const model = await store.addBlob(Buffer.from("GGUF not really"), MEDIA.model);
  const config = await store.addBlob("{}", MEDIA.config);
  await store.writeManifest("m", { schemaVersion: 2, mediaType: MEDIA.manifest, config, layers: [model, ...extra] });
}

/** What the client receives for `promise`'s rejection, checking that it is a store error and no HTTP error. */
async function answer(t: Test, promise: Promise<unknown>, kind: string): Promise<{ status: number; body: unknown }> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof StoreError, `a store error (${String(err)})`);
  t.notOk(err instanceof HttpError, "with no HTTP status of its own");
  t.equal((err as StoreError).kind, kind);
  const { status, body } = toErrorResponse(err);
  return { status, body };
}

t.test("a name the store cannot take, and a model it does not have", async (t) => {
  const store = await emptyStore(t);
  t.same(await answer(t, store.resolve("../etc/passwd"), "invalid"), { status: 400, body: { error: "invalid model name '../etc/passwd'" } });
  t.same(await answer(t, store.resolve("nope"), "not-found"), { status: 404, body: { error: "model 'nope' not found, try pulling it first" } });
  t.same(
    await answer(
      t,
      Promise.resolve().then(() => store.blobPath("sha256:xyz")),
      "invalid",
    ),
    { status: 400, body: { error: "invalid digest 'sha256:xyz'" } },
  );
});

t.test("a blob whose content is not the digest it was sent as", async (t) => {
  const store = await emptyStore(t);
  const expected = `sha256:${"0".repeat(64)}`;
  const got = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"; // sha256("hello")
  t.same(await answer(t, store.addBlobFromStream(Readable.from([Buffer.from("hello")]), expected), "invalid"), {
    status: 400,
    body: { error: `digest mismatch, expected '${expected}', got '${got}'` },
  });
  t.same(await fs.readdir(store.blobsDir), [], "nothing kept");
});

t.test("a stored model whose layers cannot be used", async (t) => {
  const store = await emptyStore(t);
  await modelWith(store, [await store.addBlob("not a list of messages", MEDIA.messages)]);
  t.same(await answer(t, store.resolve("m"), "broken"), { status: 500, body: { error: "failed to load model 'm': invalid messages layer" } });

  const size = SMALL_LAYER_MAX + 1;
  await modelWith(store, [await store.addBlob(Buffer.alloc(size, "x"), MEDIA.template)]);
  t.same(await answer(t, store.resolve("m"), "broken"), {
    status: 500,
    body: { error: `failed to load model 'm': template layer of ${size} bytes is over the limit of ${SMALL_LAYER_MAX}` },
  });
});

t.test("a blob that leads out of the store", async (t) => {
  const store = await emptyStore(t);
  await modelWith(store, []);
  const outside = await fs.mkdtemp(path.join(os.tmpdir(), "lmd-outside-"));
  t.teardown(() => fs.rm(outside, { recursive: true, force: true }));
  const { modelPath } = await store.resolve("m");
  await fs.writeFile(path.join(outside, "model.gguf"), "GGUF elsewhere");
  await fs.rm(modelPath);
  await fs.symlink(path.join(outside, "model.gguf"), modelPath);
  t.same(await answer(t, store.resolve("m"), "invalid"), { status: 400, body: { error: `path '${path.basename(modelPath)}' leads outside the model store` } });
});
