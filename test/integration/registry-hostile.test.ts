/**
 * Registries that lie, hang or fail: every phase of
 * a pull is bounded, the first progress line is sent at once, failures say what failed, response
 * bodies of early exits are discarded (no hang), small layers are capped, and a manifest cannot
 * lie about the size of a blob already in the store.
 */
import t from "tap";
import { once } from "node:events";
import fs from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { readdirSync } from "node:fs";
import { REGISTRY_DEFAULTS } from "../../src/registry/client.js";
import { assertError } from "../helpers/assert-error.js";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";
import { testGguf } from "../helpers/models.js";
import { forkLmd } from "../helpers/process.js";
import { sha256, startTestRegistry } from "../helpers/registry.js";

const MODEL = "application/vnd.ollama.image.model";
const TEMPLATE = "application/vnd.ollama.image.template";
const CONFIG = "application/vnd.docker.container.image.v1+json";

/** Fails instead of hanging: these tests are about requests that used to never end. */
function bounded<T>(p: Promise<T>, what: string, ms = 20_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)));
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

/** The first NDJSON line of a streaming response, read as soon as it arrives. */
async function firstLine(res: Response): Promise<{ first: Record<string, unknown>; rest: Promise<Record<string, unknown>[]> }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const nl = text.indexOf("\n");
  const first = JSON.parse(text.slice(0, nl)) as Record<string, unknown>;
  const rest = (async () => {
    let more = text.slice(nl + 1);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      more += decoder.decode(value, { stream: true });
    }
    return more.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l) as Record<string, unknown>);
  })();
  return { first, rest };
}

t.test("a manifest declaring a huge Content-Length is refused at once, its body discarded", async (t) => {
  const reg = await startTestRegistry(t);
  reg.faults.manifestHang = { length: 100 * 1024 * 1024, bytes: 10 };
  const { url } = await startDaemon(t, { models: [] });
  const res = await bounded(postJson(`${url}/api/pull`, { model: `${reg.host}/library/big`, insecure: true, stream: false }), "pull");
  await assertError(t, res, 500, "pull model manifest: manifest too large (104857600 bytes, limit 4194304)");
});

t.test("a registry that never answers the manifest: first line at once, then a bounded, named failure", async (t) => {
  const saved = { ...REGISTRY_DEFAULTS };
  t.teardown(() => Object.assign(REGISTRY_DEFAULTS, saved));
  Object.assign(REGISTRY_DEFAULTS, { headersTimeoutMs: 800, manifestTimeoutMs: 800 });
  const reg = await startTestRegistry(t);
  reg.faults.manifestHang = {};
  const { url } = await startDaemon(t, { models: [] });
  const res = await bounded(postJson(`${url}/api/pull`, { model: `${reg.host}/library/slow`, insecure: true }), "response head");
  t.equal(res.status, 200);
  const { first, rest } = await bounded(firstLine(res), "first progress line");
  t.same(first, { status: "pulling manifest" }, "the first line comes before the registry answers");
  const lines = await bounded(rest, "end of the stream");
  t.same(lines, [{ error: `pull model manifest: registry ${reg.host} sent no answer within 0.8 s` }]);
  t.equal(reg.stats.manifestRequests, 1, "a hanging registry is not asked again");

  reg.faults.manifestHang = { length: 1000, bytes: 10 }; // headers, then a body that never ends
  const body = await bounded(postJson(`${url}/api/pull`, { model: `${reg.host}/library/slow`, insecure: true, stream: false }), "pull");
  await assertError(t, body, 500, `pull model manifest: registry ${reg.host} did not send the manifest within 0.8 s`);
});

t.test("a blob that stalls for good ends with a message naming the stall", async (t) => {
  const saved = { ...REGISTRY_DEFAULTS };
  t.teardown(() => Object.assign(REGISTRY_DEFAULTS, saved));
  Object.assign(REGISTRY_DEFAULTS, { bodyTimeoutMs: 500, minTimeoutMs: 20, maxTimeoutMs: 50, maxRetries: 1 });
  const reg = await startTestRegistry(t);
  const gguf = await fs.readFile(await testGguf());
  reg.addModel("library/stall", "latest", [{ mediaType: MODEL, data: gguf }]);
  const digest = sha256(gguf);
  reg.faults.stall = { digest, bytes: 1000, persist: true };
  const { url } = await startDaemon(t, { models: [] });
  const lines = await bounded(readNdjson(await postJson(`${url}/api/pull`, { model: `${reg.host}/library/stall`, insecure: true })), "pull");
  t.same(lines.at(-1), { error: `pull ${digest.slice(7, 19)}: the registry stopped sending data for 0.5 s (stalled); pull again to resume` });
});

t.test("a refused connection or an unknown host fails at once, and the CLI does not retry it", async (t) => {
  const closed = net.createServer().listen(0, "127.0.0.1");
  await once(closed, "listening");
  const port = (closed.address() as net.AddressInfo).port;
  closed.close();
  const { url, app } = await startDaemon(t, { models: [] });
  let pulls = 0;
  app.server.on("request", (req) => void (req.url === "/api/pull" && pulls++));

  // Retrying costs at least 0.5 + 1 + 2 + 4 s of back-off in the daemon: this bound only shows that none happens.
  const started = Date.now();
  const lines = await readNdjson(await postJson(`${url}/api/pull`, { model: `127.0.0.1:${port}/library/x`, insecure: true }));
  t.same(lines, [{ status: "pulling manifest" }, { error: `pull model manifest: cannot reach registry 127.0.0.1:${port}: connection refused` }]);
  t.ok(Date.now() - started < 5000, "no retries with back-off");
  const dns = await readNdjson(await postJson(`${url}/api/pull`, { model: "lmd-test.invalid/library/x" })); // RFC 6761: never resolves
  t.match(dns.at(-1), { error: /^pull model manifest: cannot reach registry lmd-test\.invalid: (host not found|DNS lookup failed)/ });
  await assertError(
    t,
    await postJson(`${url}/api/pull`, { model: `127.0.0.1:${port}/library/x`, insecure: true, stream: false }),
    500,
    `pull model manifest: cannot reach registry 127.0.0.1:${port}: connection refused`,
  );

  pulls = 0;
  const cli = forkLmd(t, ["pull", "--insecure", `127.0.0.1:${port}/library/x`], { SERVICE_HOST: url.replace("http://", "") });
  const exit = await bounded(cli.exited, "lmd pull");
  t.not(exit.code, 0);
  t.match(cli.stderr(), `pull model manifest: cannot reach registry 127.0.0.1:${port}: connection refused`);
  t.equal(pulls, 1, "the CLI sent one request: nothing to retry");
});

t.test("a manifest lying about the size of a blob already stored is refused", async (t) => {
  const reg = await startTestRegistry(t);
  const gguf = await fs.readFile(await testGguf());
  const digest = reg.addBlob(gguf);
  const cfg = Buffer.from("{}");
  reg.setManifest("library/liar", "latest", {
    schemaVersion: 2,
    config: { mediaType: CONFIG, digest: reg.addBlob(cfg), size: cfg.length },
    layers: [{ mediaType: MODEL, digest, size: 1 }],
  });
  const { url, config } = await startDaemon(t, { models: [{ name: "tiny" }] }); // the same GGUF: its blob is in the store
  const res = await postJson(`${url}/api/pull`, { model: `${reg.host}/library/liar`, insecure: true, stream: false });
  await assertError(t, res, 500, `pull ${digest.slice(7, 19)}: the manifest says ${digest} has 1 bytes, the stored blob has ${gguf.length}`);
  const tags = (await (await fetch(`${url}/api/tags`)).json()) as { models: Array<{ name: string; size: number }> };
  t.same(tags.models.map((m) => m.name), ["tiny:latest"], "nothing was written under the lying name");
  t.notOk(readdirSync(path.join(config.models, "manifests")).includes(reg.host));
});

t.test("small layers over their cap are refused before any download", async (t) => {
  const reg = await startTestRegistry(t);
  const gguf = await fs.readFile(await testGguf());
  reg.setManifest("library/fat", "latest", {
    schemaVersion: 2,
    config: { mediaType: CONFIG, digest: sha256("x"), size: 300 * 1024 * 1024 },
    layers: [{ mediaType: MODEL, digest: reg.addBlob(gguf), size: gguf.length }],
  });
  reg.addModel("library/fat-template", "latest", [{ mediaType: MODEL, data: gguf }, { mediaType: TEMPLATE, data: Buffer.alloc(2 * 1024 * 1024, 0x61) }]);
  const { url } = await startDaemon(t, { models: [] });
  await assertError(
    t,
    await postJson(`${url}/api/pull`, { model: `${reg.host}/library/fat`, insecure: true, stream: false }),
    500,
    "pull model manifest: config layer of 314572800 bytes is over the limit of 1048576",
  );
  await assertError(
    t,
    await postJson(`${url}/api/pull`, { model: `${reg.host}/library/fat-template`, insecure: true, stream: false }),
    500,
    "pull model manifest: template layer of 2097152 bytes is over the limit of 1048576",
  );
  t.same(reg.stats.blobRequests, [], "nothing was downloaded");
});

t.test("a failed pull publishes no blob; complete downloads stay resumable", async (t) => {
  const reg = await startTestRegistry(t);
  const gguf = await fs.readFile(await testGguf());
  const template = Buffer.from("{{ .Prompt }}");
  const manifest = reg.addModel("library/half", "latest", [
    { mediaType: MODEL, data: gguf },
    { mediaType: TEMPLATE, data: template },
  ]) as { config: { digest: string } };
  reg.faults.corrupt = sha256(template); // the model blob verifies, the template does not
  const { url, config } = await startDaemon(t, { models: [] });
  const name = `${reg.host}/library/half`;
  await assertError(t, await postJson(`${url}/api/pull`, { model: name, insecure: true, stream: false }), 500, /^digest mismatch/);
  const files = readdirSync(path.join(config.models, "blobs"));
  t.same(files.filter((f) => f.startsWith("sha256-")), [], "no blob that nothing references was published");
  // The pull stops at the layer that failed (the config after it was never asked for).
  const kept = [sha256(gguf)].flatMap((d) => [`.partial-${d.replace(":", "-")}`, `.partial-${d.replace(":", "-")}.json`]);
  t.same(files.sort(), kept.sort(), "only the complete download (the model) is kept, to resume");
  t.notOk(reg.stats.blobRequests.some((r) => r.digest === manifest.config.digest), "nothing after the failed layer was downloaded");
  reg.faults.corrupt = undefined;
  t.same(await (await postJson(`${url}/api/pull`, { model: name, insecure: true, stream: false })).json(), { status: "success" });
  t.equal(reg.stats.bytesServed.get(sha256(gguf)), gguf.length, "the model was not downloaded twice");
});
