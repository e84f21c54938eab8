/**
 * `POST /api/pull` against the loopback registry (test/helpers/registry.ts): token challenge,
 * redirects to a separate blob host, multi-layer pulls, Range resume (within a pull by undici's
 * retry, and across pulls from the partial file), parallel ranges, digest checks.
 */
import t from "tap";
import { createHash } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { REGISTRY_DEFAULTS } from "../../src/registry/client.js";
import { assertError } from "../helpers/assert-error.js";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";
import { testGguf } from "../helpers/models.js";
import { sha256, startTestRegistry, type TestRegistry } from "../helpers/registry.js";

const MODEL = "application/vnd.ollama.image.model";
REGISTRY_DEFAULTS.minTimeoutMs = 50; // keep retries quick
REGISTRY_DEFAULTS.maxTimeoutMs = 200;

const storeFiles = (root: string) => readdirSync(path.join(root, "blobs")).sort();
const hashOf = (file: string) => fs.readFile(file).then((b) => `sha256:${createHash("sha256").update(b).digest("hex")}`);

async function addTiny(reg: TestRegistry, repo = "library/tiny", tag = "latest"): Promise<{ gguf: Buffer; digest: string; order: string[] }> {
  const gguf = await fs.readFile(await testGguf());
  const manifest = reg.addModel(repo, tag, [
    { mediaType: MODEL, data: gguf },
    { mediaType: "application/vnd.ollama.image.template", data: Buffer.from("{{ .Prompt }}") },
    { mediaType: "application/vnd.ollama.image.params", data: Buffer.from(JSON.stringify({ num_predict: 3 })) },
  ]);
  const m = manifest as { config: { digest: string }; layers: Array<{ digest: string }> };
  return { gguf, digest: sha256(gguf), order: [...m.layers, m.config].map((l) => l.digest) };
}

/** Waits (bounded) until `check` holds. */
async function until(check: () => boolean | Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

t.test("multi-layer pull with a token challenge and a redirect to a blob host", async (t) => {
  const reg = await startTestRegistry(t, { auth: true, redirect: true });
  const { gguf, digest, order } = await addTiny(reg);
  const { url, config } = await startDaemon(t, { models: [] });
  const name = `${reg.host}/library/tiny:latest`;

  const res = await postJson(`${url}/api/pull`, { model: name, insecure: true });
  t.equal(res.status, 200);
  t.match(res.headers.get("content-type"), /application\/x-ndjson/);
  const lines = await readNdjson(res);
  const statuses = [...new Set(lines.map((l) => l.status))];
  t.same(
    statuses,
    ["pulling manifest", ...order.map((d) => `pulling ${d.slice(7, 19)}`), "verifying sha256 digest", "writing manifest", "success"],
    "one pulling status per layer and the config",
  );
  const modelLine = lines.filter((l) => l.digest === digest).at(-1);
  t.same(modelLine, { status: `pulling ${digest.slice(7, 19)}`, digest, total: gguf.length, completed: gguf.length });

  t.equal(await hashOf(path.join(config.models, "blobs", digest.replace(":", "-"))), digest);
  t.ok(existsSync(path.join(config.models, "manifests", reg.host, "library", "tiny", "latest")));
  t.ok(reg.stats.tokenRequests >= 1, "a token was fetched from the realm");
  const blobHost = reg.stats.blobRequests.filter((r) => r.server === "blobhost");
  t.ok(blobHost.length >= 4, "blobs came from the blob host");
  t.ok(blobHost.every((r) => r.authorization === undefined), "no Authorization header goes to another host");
  t.same(storeFiles(config.models).filter((f) => !f.startsWith("sha256-")), [], "no partial or temporary file remains");

  const tags = (await (await fetch(`${url}/api/tags`)).json()) as { models: Array<{ name: string }> };
  t.same(tags.models.map((m) => m.name), [name]);
  const gen = (await (await postJson(`${url}/api/generate`, { model: name, prompt: "hi", stream: false, options: { temperature: 0 } })).json()) as Record<
    string,
    unknown
  >;
  t.equal(gen.eval_count, 3, "the pulled model is served with its params layer");

  const again = await postJson(`${url}/api/pull`, { name, insecure: true, stream: false });
  t.same(await again.json(), { status: "success" });
  t.equal(reg.stats.bytesServed.get(digest), gguf.length, "a second pull downloads nothing");
});

t.test("a blob cut off mid-way is resumed with Range, no byte fetched twice", async (t) => {
  const reg = await startTestRegistry(t, { redirect: true });
  const { gguf, digest } = await addTiny(reg);
  reg.faults.cut = { digest, bytes: 300_000, times: 2 };
  const { url } = await startDaemon(t, { models: [] });
  const res = await postJson(`${url}/api/pull`, { model: `${reg.host}/library/tiny`, insecure: true, stream: false });
  t.same(await res.json(), { status: "success" });
  t.equal(reg.stats.bytesServed.get(digest), gguf.length, "bytes served equal the blob size");
  const ranges = reg.stats.blobRequests.filter((r) => r.digest === digest && r.server === "blobhost").map((r) => r.range);
  t.same(ranges, [`bytes=0-${gguf.length - 1}`, `bytes=300000-${gguf.length - 1}`, `bytes=600000-${gguf.length - 1}`]);
});

t.test("a pull stopped mid-blob is resumed by the next pull from the partial file", async (t) => {
  const reg = await startTestRegistry(t);
  const { gguf, digest } = await addTiny(reg);
  let reached = false;
  reg.faults.stall = { digest, bytes: 400_000, reached: () => (reached = true) };
  const { url, config } = await startDaemon(t, { models: [] });
  const partial = path.join(config.models, "blobs", `.partial-${digest.replace(":", "-")}`);
  const ac = new AbortController();
  const first = postJson(`${url}/api/pull`, { model: `${reg.host}/library/tiny`, insecure: true }, { signal: ac.signal })
    .then((r) => r.text())
    .catch(() => "aborted");
  await until(() => reached, "the stall");
  const progress = async () => {
    const state = JSON.parse(await fs.readFile(`${partial}.json`, "utf8").catch(() => "{}")) as { parts?: Array<{ done: number }> };
    return state.parts?.[0]?.done === 400_000;
  };
  await until(progress, "the progress file to count the received bytes");
  ac.abort();
  await first;
  await until(async () => !(await fs.readFile(`${partial}.json`, "utf8").catch(() => "")).includes('"done":0'), "partial state");
  t.ok(existsSync(partial), "the partial download is kept");

  const res = await postJson(`${url}/api/pull`, { model: `${reg.host}/library/tiny`, insecure: true, stream: false });
  t.same(await res.json(), { status: "success" });
  const last = reg.stats.blobRequests.filter((r) => r.digest === digest).at(-1);
  t.equal(last?.range, `bytes=400000-${gguf.length - 1}`, "the second pull asks only for the missing bytes");
  t.equal(reg.stats.bytesServed.get(digest), gguf.length, "no byte was downloaded twice");
  t.notOk(existsSync(partial));
  t.equal(await hashOf(path.join(config.models, "blobs", digest.replace(":", "-"))), digest);
});

t.test("large blobs are fetched as parallel ranges", async (t) => {
  const saved = REGISTRY_DEFAULTS.partSize;
  REGISTRY_DEFAULTS.partSize = 100_000;
  t.teardown(() => void (REGISTRY_DEFAULTS.partSize = saved));
  const reg = await startTestRegistry(t, { redirect: true });
  const { gguf, digest } = await addTiny(reg);
  const { url, config } = await startDaemon(t, { models: [] });
  const res = await postJson(`${url}/api/pull`, { model: `${reg.host}/library/tiny`, insecure: true, stream: false });
  t.same(await res.json(), { status: "success" });
  const ranges = reg.stats.blobRequests.filter((r) => r.digest === digest && r.server === "blobhost").map((r) => r.range);
  t.equal(ranges.length, Math.ceil(gguf.length / 100_000), "one request per range");
  t.equal(reg.stats.bytesServed.get(digest), gguf.length);
  t.equal(await hashOf(path.join(config.models, "blobs", digest.replace(":", "-"))), digest);
});

t.test("a blob whose digest does not match is refused and deleted", async (t) => {
  const reg = await startTestRegistry(t);
  const { digest } = await addTiny(reg);
  reg.faults.corrupt = digest;
  const { url, config } = await startDaemon(t, { models: [] });
  const res = await postJson(`${url}/api/pull`, { model: `${reg.host}/library/tiny`, insecure: true, stream: false });
  await assertError(t, res, 500, new RegExp(`^digest mismatch, file must be downloaded again: want ${digest}, got sha256:[a-f0-9]{64}$`));
  t.notOk(existsSync(path.join(config.models, "blobs", digest.replace(":", "-"))));
  t.same(storeFiles(config.models).filter((f) => f.includes(digest.slice(7))), [], "no partial file remains");
  t.notOk(existsSync(path.join(config.models, "manifests", reg.host)), "no manifest is written");

  const streamed = await readNdjson(await postJson(`${url}/api/pull`, { model: `${reg.host}/library/tiny`, insecure: true }));
  t.match(streamed.at(-1), { error: /^digest mismatch/ });
  t.same(Object.keys(streamed.at(-1)!), ["error"]);
});

t.test("a manifest naming a digest like sha256:../../x is refused, nothing written", async (t) => {
  const reg = await startTestRegistry(t);
  const parent = t.testdir({ store: {} });
  const root = path.join(parent, "store");
  reg.setManifest("library/evil", "latest", {
    schemaVersion: 2,
    config: { mediaType: "application/vnd.docker.container.image.v1+json", digest: sha256("{}"), size: 2 },
    layers: [{ mediaType: MODEL, digest: "sha256:../../x", size: 5 }],
  });
  const { url } = await startDaemon(t, { env: { SERVICE_MODELS: root }, models: [] });
  const res = await postJson(`${url}/api/pull`, { model: `${reg.host}/library/evil`, insecure: true, stream: false });
  await assertError(t, res, 500, "pull model manifest: invalid manifest: invalid digest 'sha256:../../x'");
  t.same(readdirSync(parent), ["store"], "nothing outside the store");
  t.same(storeFiles(root), [], "no blob written");
  t.same(reg.stats.blobRequests, [], "no blob requested");
});

t.test("registry errors: their status without streaming, the stream's last line after `pulling manifest` with it", async (t) => {
  const reg = await startTestRegistry(t, { auth: true, realm: "http://127.0.0.2:9/token" });
  await addTiny(reg);
  const { url } = await startDaemon(t, { models: [] });
  const pull = (body: Record<string, unknown>) => postJson(`${url}/api/pull`, { stream: false, ...body });
  await assertError(t, await pull({ model: `${reg.host}/library/tiny`, insecure: true }), 500, `pull model manifest: registry authentication realm 'http://127.0.0.2:9' is not on host '${reg.host}'`);
  t.equal(reg.stats.tokenRequests, 0);

  const open = await startTestRegistry(t);
  await assertError(
    t,
    await pull({ model: `${open.host}/library/none`, insecure: true }),
    404,
    `model '${open.host}/library/none:latest' not found in the registry`,
  );
  t.same(await readNdjson(await postJson(`${url}/api/pull`, { model: `${open.host}/library/none`, insecure: true })), [
    { status: "pulling manifest" },
    { error: `model '${open.host}/library/none:latest' not found in the registry` },
  ]);
  await assertError(t, await postJson(`${url}/api/pull`, {}), 400, "model is required");
  await assertError(t, await postJson(`${url}/api/pull`, { model: "a/../b" }), 400, "invalid model name 'a/../b'");
  open.faults.failStatus = { path: /manifests/, status: 503 };
  await assertError(
    t,
    await pull({ model: `${open.host}/library/none`, insecure: true }),
    500,
    `pull model manifest: registry ${open.host} answered status 503`,
  );
});
