/**
 * Names, digests and symbolic links: nothing a request names can walk out of the store.
 * Traversal, absolute paths, odd characters and over-long names are 400 `invalid model name`;
 * malformed digests are 400 `invalid digest`; and a symbolic link inside the store that leads out
 * of it (a blob, a layer, a manifest directory) is never followed, whatever route reaches it.
 */
import t from "tap";
import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { printable } from "../../src/store/names.js";
import { MEDIA } from "../../src/store/store.js";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

const BAD_NAMES = [
  "../../etc/passwd",
  "/etc/passwd",
  "..",
  "a/../../b",
  "a\\..\\b",
  "x\u0000y",
  "m".repeat(351),
  "a/b/c/d",
  "a:b:c",
  ".hidden",
  "sp ace",
  "tab\tname",
  "new\nline",
  "ünï",
  "%2e%2e",
  "C:\\x",
  "host:99999999/ns/m",
];
const BAD_DIGESTS = [
  "sha256:../../etc/passwd",
  `sha256:${"A".repeat(64)}`,
  `sha256:${"a".repeat(63)}`,
  `sha512:${"a".repeat(64)}`,
  `sha256-${"a".repeat(64)}`,
  "sha256:",
  `sha256:${"a".repeat(64)}/x`,
];

t.test("invalid names are refused on every route that takes one", async (t) => {
  const { url } = await startDaemon(t);
  for (const name of BAD_NAMES) {
    const msg = `invalid model name '${printable(name)}'`;
    await assertError(t, await postJson(`${url}/api/show`, { model: name }), 400, msg);
    await assertError(t, await postJson(`${url}/api/generate`, { model: name, prompt: "" }), 400, msg);
    await assertError(t, await postJson(`${url}/api/pull`, { model: name }), 400, msg);
    await assertError(t, await postJson(`${url}/api/push`, { model: name }), 400, msg);
    await assertError(t, await postJson(`${url}/api/create`, { model: name, from: "tiny" }), 400, msg);
    await assertError(t, await postJson(`${url}/api/copy`, { source: "tiny", destination: name }), 400, msg);
    await assertError(t, await fetch(`${url}/api/delete`, { method: "DELETE", body: JSON.stringify({ model: name }) }), 400, msg);
  }
});

t.test("invalid digests are refused on uploads and in create", async (t) => {
  const { url, app } = await startDaemon(t);
  for (const digest of BAD_DIGESTS) {
    const res = await fetch(`${url}/api/blobs/${encodeURIComponent(digest)}`, { method: "POST", body: "x" });
    await assertError(t, res, 400, `invalid digest '${digest}'`);
    await assertError(t, await postJson(`${url}/api/create`, { model: "made", files: { "m.gguf": digest } }), 400, `invalid digest '${digest}'`);
  }
  const entries = await fs.readdir(app.services.store.blobsDir);
  t.notOk(entries.some((e) => !e.startsWith("sha256-")), "no temporary file left");
});

t.test("symbolic links that lead out of the store are not followed", async (t) => {
  const { url, app } = await startDaemon(t);
  const { store } = app.services;
  const outside = await fs.mkdtemp(path.join(os.tmpdir(), "lmd-outside-"));
  t.teardown(() => fs.rm(outside, { recursive: true, force: true }));
  const secret = "TOP SECRET, outside the store";
  await fs.writeFile(path.join(outside, "secret.txt"), secret);
  const digest = `sha256:${createHash("sha256").update(secret).digest("hex")}`;

  // 1. A blob that is a link to a file outside: not a blob (HEAD 404), not usable by create (404).
  await fs.symlink(path.join(outside, "secret.txt"), store.blobPath(digest));
  t.equal((await fetch(`${url}/api/blobs/${digest}`, { method: "HEAD" })).status, 404, "a linked blob is not a blob");
  await assertError(t, await postJson(`${url}/api/create`, { model: "leak", files: { "m.gguf": digest } }), 404, `blob '${digest}' not found`);

  // 2. A model whose template layer is that link: show and generate refuse it, the secret never leaves.
  const tiny = (await store.findModel("tiny"))!;
  const layers = [...tiny.manifest.layers.filter((l) => l.mediaType !== MEDIA.template), { mediaType: MEDIA.template, digest, size: secret.length }];
  await store.writeManifest("linked", { ...tiny.manifest, layers });
  for (const [route, body] of [["/api/show", { model: "linked" }], ["/api/generate", { model: "linked", prompt: "hi", stream: false }]] as const) {
    const res = await postJson(`${url}${route}`, body);
    const text = await res.clone().text();
    t.notOk(text.includes("TOP SECRET"), `${route}: the secret is not served`);
    await assertError(t, res, 400, /^path 'sha256-[0-9a-f]{64}' leads outside the model store$/);
  }

  // 3. A manifest directory that is a link to a directory outside.
  const evil = path.join(outside, "evil");
  await fs.mkdir(evil);
  await fs.writeFile(path.join(evil, "latest"), JSON.stringify(tiny.manifest));
  await fs.symlink(evil, path.join(store.manifestsDir, "registry.ollama.ai", "library", "evil"));
  await assertError(t, await postJson(`${url}/api/show`, { model: "evil" }), 400, /leads outside the model store/);
  await assertError(t, await postJson(`${url}/api/generate`, { model: "evil", prompt: "hi" }), 400, /leads outside the model store/);
  await assertError(t, await fetch(`${url}/api/delete`, { method: "DELETE", body: JSON.stringify({ model: "evil" }) }), 400, /leads outside the model store/);
  t.ok(await fs.stat(path.join(evil, "latest")), "the file outside was not deleted");
  const tags = (await (await fetch(`${url}/api/tags`)).json()) as { models: Array<{ name: string }> };
  t.notOk(tags.models.some((m) => m.name.startsWith("evil")), "a linked manifest is not listed");
  t.equal((await fs.readFile(path.join(outside, "secret.txt"), "utf8")), secret, "the outside file is untouched");
});
