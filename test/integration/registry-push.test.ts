/**
 * `POST /api/push` to the loopback registry (POST/PATCH/PUT uploads behind a token challenge),
 * then a pull into a fresh store gives identical blobs.
 */
import t from "tap";
import { readdirSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { assertError } from "../helpers/assert-error.js";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";
import { startTestRegistry } from "../helpers/registry.js";

const blobs = async (root: string) => {
  const dir = path.join(root, "blobs");
  const files = readdirSync(dir).filter((f) => f.startsWith("sha256-")).sort();
  return Promise.all(files.map(async (f) => [f, (await fs.readFile(path.join(dir, f))).toString("base64")]));
};

t.test("push, then pull into a fresh store: identical blobs", async (t) => {
  const reg = await startTestRegistry(t, { auth: true });
  const a = await startDaemon(t, { models: [{ name: "tiny", install: { template: "{{ .Prompt }}", params: { num_predict: 2 } } }] });
  const name = `${reg.host}/team/tiny:v1`;
  t.equal((await postJson(`${a.url}/api/copy`, { source: "tiny", destination: name })).status, 200);

  const res = await postJson(`${a.url}/api/push`, { model: name, insecure: true });
  t.equal(res.status, 200);
  const lines = await readNdjson(res);
  t.same(lines[0], { status: "retrieving manifest" });
  t.same(lines.at(-2), { status: "pushing manifest" });
  t.same(lines.at(-1), { status: "success" });
  t.ok(lines.some((l) => typeof l.status === "string" && l.status.startsWith("pushing ") && l.completed === l.total));
  t.ok(reg.manifests.has("team/tiny:v1"), "the manifest reached the registry");
  t.ok(reg.stats.tokenRequests >= 1);

  const again = await postJson(`${a.url}/api/push`, { name, insecure: true, stream: false });
  t.same(await again.json(), { status: "success" }, "a second push skips blobs the registry has");

  const b = await startDaemon(t, { models: [] });
  const pulled = await postJson(`${b.url}/api/pull`, { model: name, insecure: true, stream: false });
  t.same(await pulled.json(), { status: "success" });
  t.same(await blobs(b.config.models), await blobs(a.config.models), "same blob files, same bytes");
  const gen = (await (await postJson(`${b.url}/api/generate`, { model: name, prompt: "hi", stream: false, options: { temperature: 0 } })).json()) as Record<
    string,
    unknown
  >;
  t.equal(gen.eval_count, 2);
});

t.test("push errors", async (t) => {
  const { url } = await startDaemon(t);
  await assertError(t, await postJson(`${url}/api/push`, { model: "nope", insecure: true }), 404, "model 'nope' not found, try pulling it first");
  await assertError(t, await postJson(`${url}/api/push`, {}), 400, "model is required");
});
