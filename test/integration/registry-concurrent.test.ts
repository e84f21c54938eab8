/**
 * Simultaneous pulls that need the same blob share one download, whoever asks: the same model
 * pulled 20 times at once, distinct models sharing their config and template, and a pull that
 * takes over when the pull downloading for it goes away. None leaves a partial file behind.
 */
import t from "tap";
import { createHash, randomBytes } from "node:crypto";
import { readdirSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { REGISTRY_DEFAULTS } from "../../src/registry/http.js";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";
import { testGguf } from "../helpers/models.js";
import { sha256, startTestRegistry, type TestRegistry } from "../helpers/registry.js";

const MODEL = "application/vnd.ollama.image.model";
const TEMPLATE = "application/vnd.ollama.image.template";
REGISTRY_DEFAULTS.minTimeoutMs = 50;
REGISTRY_DEFAULTS.maxTimeoutMs = 200;

const blobFiles = (root: string) => readdirSync(path.join(root, "blobs")).sort();

/** GET requests for `digest` that reached the registry (or its blob host). */
const gets = (reg: TestRegistry, digest: string) => reg.stats.blobRequests.filter((r) => r.digest === digest && r.method === "GET").length;

/** Every blob file hashes to its name. */
async function verified(root: string): Promise<boolean> {
  for (const f of blobFiles(root)) {
    const hex = createHash("sha256").update(await fs.readFile(path.join(root, "blobs", f))).digest("hex");
    if (f !== `sha256-${hex}`) return false;
  }
  return true;
}

t.test("20 simultaneous pulls of one model into an empty store: all succeed, each blob downloaded once", async (t) => {
  const reg = await startTestRegistry(t);
  const gguf = await fs.readFile(await testGguf());
  const manifest = reg.addModel("library/tiny", "latest", [
    { mediaType: MODEL, data: gguf },
    { mediaType: TEMPLATE, data: Buffer.from("{{ .Prompt }}") },
  ]) as { config: { digest: string }; layers: Array<{ digest: string }> };
  const { url, config } = await startDaemon(t, { models: [] });
  const answers = await Promise.all(
    Array.from({ length: 20 }, async () => (await postJson(`${url}/api/pull`, { model: `${reg.host}/library/tiny`, insecure: true, stream: false })).json()),
  );
  t.same(answers, Array.from({ length: 20 }, () => ({ status: "success" })));
  for (const d of [...manifest.layers.map((l) => l.digest), manifest.config.digest]) t.equal(gets(reg, d), 1, `${d.slice(7, 19)} was requested once`);
  t.equal(reg.stats.bytesServed.get(sha256(gguf)), gguf.length, "the model's bytes were served once");
  t.same(
    blobFiles(config.models),
    [...manifest.layers.map((l) => l.digest), manifest.config.digest].map((d) => d.replace(":", "-")).sort(),
    "the blobs and nothing else: no partial file",
  );
  t.ok(await verified(config.models));
});

t.test("distinct models sharing their config and template, pulled at once: all succeed, shared layers downloaded once", async (t) => {
  const reg = await startTestRegistry(t);
  const template = Buffer.from("{{ .System }} {{ .Prompt }}");
  const names = Array.from({ length: 10 }, (_, i) => {
    reg.addModel(`library/m${i}`, "latest", [
      { mediaType: MODEL, data: randomBytes(50_000 + i * 1000) },
      { mediaType: TEMPLATE, data: template },
    ]);
    return `${reg.host}/library/m${i}`;
  });
  const configDigest = (JSON.parse(reg.manifests.get("library/m0:latest")!.toString()) as { config: { digest: string } }).config.digest;
  const { url, config } = await startDaemon(t, { models: [] });
  // Four pulls of each of the ten models, all at once.
  const answers = await Promise.all(
    names.flatMap((name) => Array.from({ length: 4 }, async () => (await postJson(`${url}/api/pull`, { model: name, insecure: true, stream: false })).json())),
  );
  t.same(answers, Array.from({ length: 40 }, () => ({ status: "success" })));
  t.equal(gets(reg, configDigest), 1, "the shared config was downloaded once");
  t.equal(gets(reg, sha256(template)), 1, "the shared template was downloaded once");
  t.equal(blobFiles(config.models).filter((f) => !f.startsWith("sha256-")).length, 0, "no partial file is left");
  t.equal(blobFiles(config.models).length, 12, "ten models, one template, one config");
  t.ok(await verified(config.models));
  const tags = (await (await fetch(`${url}/api/tags`)).json()) as { models: unknown[] };
  t.equal(tags.models.length, 10);
});

t.test("when the pull downloading a blob goes away, a pull waiting for it takes over from the bytes received", async (t) => {
  const reg = await startTestRegistry(t);
  const gguf = await fs.readFile(await testGguf());
  reg.addModel("library/tiny", "latest", [{ mediaType: MODEL, data: gguf }]);
  const digest = sha256(gguf);
  let reached!: () => void;
  const stalled = new Promise<void>((resolve) => (reached = resolve));
  reg.faults.stall = { digest, bytes: 300_000, reached: () => reached() };
  const { url, config } = await startDaemon(t, { models: [] });
  const model = `${reg.host}/library/tiny`;
  const ac = new AbortController();
  const first = postJson(`${url}/api/pull`, { model, insecure: true }, { signal: ac.signal }).then((r) => r.text()).catch(() => "aborted");
  await stalled;
  const second = postJson(`${url}/api/pull`, { model, insecure: true }).then(readNdjson);
  // The second pull joins the first one's download: it sees the same progress and asks for nothing.
  const partialState = path.join(config.models, "blobs", `.partial-${digest.replace(":", "-")}.json`);
  for (const end = Date.now() + 10_000; ; ) {
    const state = JSON.parse(await fs.readFile(partialState, "utf8").catch(() => "{}")) as { parts?: Array<{ done: number }> };
    if (state.parts?.[0]?.done === 300_000) break;
    if (Date.now() > end) throw new Error("the first pull's progress was never saved");
    await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 100));
  t.equal(gets(reg, digest), 1, "while the first pull downloads, the second asks the registry for nothing");
  ac.abort();
  await first;
  const lines = await second;
  t.same(lines.at(-1), { status: "success" }, "the second pull finished the download");
  const ranges = reg.stats.blobRequests.filter((r) => r.digest === digest).map((r) => r.range);
  t.same(ranges, [`bytes=0-${gguf.length - 1}`, `bytes=300000-${gguf.length - 1}`], "from the byte where the first pull stopped");
  t.equal(reg.stats.bytesServed.get(digest), gguf.length, "no byte was downloaded twice");
  t.same(blobFiles(config.models).filter((f) => !f.startsWith("sha256-")), [], "no partial file is left");
});
