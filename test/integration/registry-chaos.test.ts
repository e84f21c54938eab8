/**
 * Registries that misbehave at the HTTP level cannot stop the daemon (test/helpers/chaos-registry.ts).
 *
 * A registry that closes the connection after each response (HTTP/1.0, `Connection: close`) once
 * tripped an assertion inside undici's HTTP/1 parser from a socket event, which no caller can
 * catch: the daemon shut down. Here an HTTP/1.0 registry serves 20 pull-and-delete rounds, and a
 * registry drawing a fault for every response from a seed serves 200 pulls: each pull succeeds or
 * fails with its reason, the daemon answers throughout, and the store holds only verified blobs.
 */
import t from "tap";
import { createHash, randomBytes } from "node:crypto";
import { readdirSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { REGISTRY_DEFAULTS } from "../../src/registry/http.js";
import { assertError } from "../helpers/assert-error.js";
import { startChaosRegistry, seeded, type Behaviour } from "../helpers/chaos-registry.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { testGguf } from "../helpers/models.js";
import { sha256, startTestRegistry } from "../helpers/registry.js";

const MODEL = "application/vnd.ollama.image.model";
// Quick retries and short stall limits: a stalled answer costs a fraction of a second, not 30 s.
REGISTRY_DEFAULTS.minTimeoutMs = 20;
REGISTRY_DEFAULTS.maxTimeoutMs = 100;
REGISTRY_DEFAULTS.headersTimeoutMs = 400;
REGISTRY_DEFAULTS.bodyTimeoutMs = 400;
REGISTRY_DEFAULTS.manifestTimeoutMs = 2_000;

/** Every `sha256-*` file in the store hashes to its name; the names of the files that do not. */
async function unverifiedBlobs(root: string): Promise<string[]> {
  const bad: string[] = [];
  for (const f of readdirSync(path.join(root, "blobs")).filter((f) => f.startsWith("sha256-"))) {
    const hex = createHash("sha256").update(await fs.readFile(path.join(root, "blobs", f))).digest("hex");
    if (`sha256-${hex}` !== f) bad.push(f);
  }
  return bad;
}

/** Polls `/api/version` until stopped; the number of answers and of failures. */
function watchDaemon(url: string): { stop: () => Promise<{ answers: number; failures: string[] }> } {
  let running = true;
  let answers = 0;
  const failures: string[] = [];
  const loop = (async () => {
    while (running) {
      try {
        const res = await fetch(`${url}/api/version`, { signal: AbortSignal.timeout(10_000) });
        if (res.status === 200) answers++;
        else failures.push(`status ${res.status}`);
        await res.arrayBuffer();
      } catch (err) {
        failures.push(String(err));
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { answers, failures };
    },
  };
}

const remove = (url: string, model: string) => fetch(`${url}/api/delete`, { method: "DELETE", body: JSON.stringify({ model }) });

t.test("a registry that answers HTTP/1.0 and closes: 20 pull-and-delete rounds, the daemon answering throughout", async (t) => {
  const source = await startTestRegistry(t);
  const gguf = await fs.readFile(await testGguf());
  source.addModel("library/tiny", "latest", [
    { mediaType: MODEL, data: gguf },
    { mediaType: "application/vnd.ollama.image.template", data: Buffer.from("{{ .Prompt }}") },
  ]);
  const chaos = await startChaosRegistry(t, source, { seed: 1, weights: { http10: 1 } });
  const { url, config } = await startDaemon(t, { models: [] });
  const name = `${chaos.host}/library/tiny:latest`;
  const watch = watchDaemon(url);
  const results: unknown[] = [];
  for (let round = 0; round < 20; round++) {
    const res = await postJson(`${url}/api/pull`, { model: name, insecure: true, stream: false });
    results.push(await res.json());
    t.equal((await remove(url, name)).status, 200, `round ${round}: deleted`);
  }
  const { answers, failures } = await watch.stop();
  t.same(results, Array.from({ length: 20 }, () => ({ status: "success" })), "every pull succeeded");
  t.same(failures, [], "the daemon answered every probe");
  t.ok(answers > 0, "the daemon was probed during the pulls");
  t.equal(chaos.stats.drawn.get("http10"), chaos.stats.requests, "every answer was HTTP/1.0");
  t.same(readdirSync(path.join(config.models, "blobs")), [], "nothing is left after the last delete");
});

t.test("malformed answers fail the pull with their reason: a bad chunk size, a cut-off head", async (t) => {
  const source = await startTestRegistry(t);
  const data = randomBytes(100_000);
  source.addModel("library/m", "latest", [{ mediaType: MODEL, data }]);
  const { url } = await startDaemon(t, { models: [] });
  const bad = await startChaosRegistry(t, source, { seed: 3, weights: { badChunk: 1 } });
  // The manifest fits in one chunk; the model blob's second chunk size is not hexadecimal.
  await assertError(
    t,
    await postJson(`${url}/api/pull`, { model: `${bad.host}/library/m`, insecure: true, stream: false }),
    500,
    `pull ${sha256(data).slice(7, 19)}: registry ${bad.host} sent a malformed HTTP answer (Invalid character in chunk size)`,
  );
  const cut = await startChaosRegistry(t, source, { seed: 3, weights: { cutHead: 1 } });
  await assertError(
    t,
    await postJson(`${url}/api/pull`, { model: `${cut.host}/library/m`, insecure: true, stream: false }),
    500,
    `pull model manifest: cannot reach registry ${cut.host}: connection reset`,
  );
  t.ok(cut.stats.requests > 1, "a connection closed before the answer is retried");
  t.equal((await fetch(`${url}/api/version`)).status, 200);
});

t.test("a chaos registry: 200 pulls each succeed or fail with their reason, the daemon never stops", async (t) => {
  const seed = Number(process.env.CHAOS_SEED ?? 20_240_601);
  t.comment(`seed ${seed} (CHAOS_SEED replays a run)`);
  const random = seeded(seed ^ 0x5eed);
  const source = await startTestRegistry(t);
  // Four small models sharing their config and template layers (as library models share licences).
  const models = Array.from({ length: 4 }, (_, i) => {
    const data = randomBytes(80_000 + Math.floor(random() * 120_000));
    source.addModel(`library/m${i}`, "latest", [
      { mediaType: MODEL, data },
      { mediaType: "application/vnd.ollama.image.template", data: Buffer.from("{{ .Prompt }}") },
    ]);
    return `library/m${i}`;
  });
  const weights: Partial<Record<Behaviour, number>> = {
    keepalive: 8,
    http10: 3,
    close: 3,
    chunked: 2,
    cutHead: 1,
    cutBody: 1,
    reset: 1,
    badChunk: 0.5,
    stallHead: 0.5,
    stallBody: 0.5,
  };
  const chaos = await startChaosRegistry(t, source, { seed, weights });
  const { url, config } = await startDaemon(t, { models: [] });
  const watch = watchDaemon(url);

  const outcomes = new Map<string, number>();
  const unexplained: unknown[] = [];
  // Four workers, each pulling (and, on success, deleting) its own model 50 times.
  await Promise.all(models.map(async (repo) => {
    const name = `${chaos.host}/${repo}:latest`;
    for (let i = 0; i < 50; i++) {
      const res = await postJson(`${url}/api/pull`, { model: name, insecure: true, stream: false });
      const body = (await res.json()) as Record<string, unknown>;
      if (res.status === 200 && body.status === "success") {
        outcomes.set("success", (outcomes.get("success") ?? 0) + 1);
        await remove(url, name);
        continue;
      }
      // A failure names what went wrong with the registry: never the bare internal error.
      const error = typeof body.error === "string" ? body.error : "";
      const reasoned =
        Object.keys(body).length === 1 && res.status >= 400 && /registry|pull|digest|stalled|download|manifest/.test(error) && !/internal error/.test(error);
      if (!reasoned) unexplained.push({ status: res.status, body });
      const kind = error.replace(/[0-9a-f]{12,}|127\.0\.0\.1:\d+|\d+(\.\d+)? s\b/g, "…");
      outcomes.set(kind, (outcomes.get(kind) ?? 0) + 1);
    }
  }));
  const { answers, failures } = await watch.stop();
  t.comment([...outcomes].map(([k, n]) => `${n} × ${k}`).join("\n"));
  t.comment([...chaos.stats.drawn].map(([k, n]) => `${k}: ${n}`).join(", "));
  t.same(unexplained, [], "every failed pull says why");
  t.equal([...outcomes.values()].reduce((a, b) => a + b, 0), 200, "all 200 pulls answered");
  t.ok((outcomes.get("success") ?? 0) >= 100, "most pulls succeed (the client retries what can be retried)");
  t.ok(answers > 0, "the daemon was probed during the pulls");
  t.same(failures, [], "the daemon answered every probe");
  t.same(await unverifiedBlobs(config.models), [], "every blob in the store hashes to its name");
  t.ok([...chaos.stats.drawn.values()].filter((n) => n > 0).length >= 8, "most behaviours were drawn");
  const version = await fetch(`${url}/api/version`);
  t.equal(version.status, 200, "the daemon still answers after the run");
});

t.test("writes that fall behind the network: the response is dropped once what arrived is written, and the rest asked for with Range", async (t) => {
  const saved = REGISTRY_DEFAULTS.maxBufferedBytes;
  REGISTRY_DEFAULTS.maxBufferedBytes = 1; // any chunk waiting for the disk is "behind"
  t.teardown(() => void (REGISTRY_DEFAULTS.maxBufferedBytes = saved));
  const reg = await startTestRegistry(t);
  const gguf = await fs.readFile(await testGguf());
  reg.addModel("library/tiny", "latest", [{ mediaType: MODEL, data: gguf }]);
  const { url, config } = await startDaemon(t, { models: [] });
  const res = await postJson(`${url}/api/pull`, { model: `${reg.host}/library/tiny`, insecure: true, stream: false });
  t.same(await res.json(), { status: "success" });
  const starts = reg.stats.blobRequests.filter((r) => r.digest === sha256(gguf)).map((r) => Number(/^bytes=(\d+)-/.exec(r.range ?? "")?.[1]));
  t.ok(starts.length > 1, `the blob was asked for in ${starts.length} pieces`);
  t.ok(starts.every((s, i) => i === 0 ? s === 0 : s > starts[i - 1]!), "each from where the bytes written so far end");
  t.same(await unverifiedBlobs(config.models), []);
  t.ok(readdirSync(path.join(config.models, "blobs")).includes(sha256(gguf).replace(":", "-")));
});
