/**
 * The gateway over HTTPS with certificates made by the test: SIGHUP rotates keys and certificates
 * while a stream stays open, and a client that disconnects frees the daemon's slot.
 *
 * Generation lengths are derived from the tiny model's measured speed on this machine, so the long
 * stream really is still running when the reload happens, on a slow or a fast machine alike.
 */
import { createHash, X509Certificate } from "node:crypto";
import { copyFile, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import tls from "node:tls";
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { startDaemon } from "../helpers/daemon.js";
import { fetchTrusting, forkGateway, makeCert, ndjsonLines, tempDir, tokensPerSecond } from "./helpers.js";

const OLD_KEY = "old-key-0123456789abcdef-rotate-me";
const NEW_KEY = "new-key-fedcba9876543210-fresh";
const CONTEXT = 16384;
const STREAM_CAP = 2048;

/** SHA-256 fingerprint of the certificate a fresh TLS connection to `port` is given. */
function servedFingerprint(port: number, ca: Buffer[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: "127.0.0.1", port, ca, servername: "localhost" }, () => {
      resolve(socket.getPeerX509Certificate()?.fingerprint256 ?? "");
      socket.end();
    });
    socket.on("error", reject);
  });
}

const clamp = (n: number, lo: number, hi: number) => Math.max(lo, Math.min(hi, Math.round(n)));

t.test("HTTPS gateway: key and certificate rotation on SIGHUP, client disconnects", async (t) => {
  const dir = tempDir(t);
  const { url: daemon, app } = await startDaemon(t, {
    env: { SERVICE_CONTEXT_LENGTH: String(CONTEXT), SERVICE_NUM_PARALLEL: "2", SERVICE_MODELS: path.join(dir, "store") },
    models: [{ name: "tiny", make: { preset: "tiny", contextLength: CONTEXT, textOnly: true } }],
  });
  const rate = await tokensPerSecond(daemon);
  t.comment(`tiny model: ${rate.toFixed(0)} tokens/s here`);
  const one = makeCert(dir, "one");
  const two = makeCert(dir, "two");
  const certs = [await readFile(one.cert), await readFile(two.cert)];
  const fingerprint = (pem: Buffer) => new X509Certificate(pem).fingerprint256;
  const certFile = path.join(dir, "gateway.crt");
  const keyFile = path.join(dir, "gateway.key");
  await copyFile(one.cert, certFile);
  await copyFile(one.key, keyFile);
  const keysFile = path.join(dir, "keys");
  await writeFile(keysFile, `${OLD_KEY}\n`);
  const gw = await forkGateway(t, {
    GATEWAY_UPSTREAM: daemon,
    GATEWAY_KEYS_FILE: keysFile,
    GATEWAY_TLS_CERT: certFile,
    GATEWAY_TLS_KEY: keyFile,
    GATEWAY_RATE_LIMIT: "0",
  });
  t.match(gw.url, /^https:/, "TLS is on");
  const port = Number(new URL(gw.url).port);
  const { fetch: httpsFetch, agent } = fetchTrusting(Buffer.concat(certs));
  t.teardown(() => agent.close());
  const generate = (key: string, numPredict: number, signal?: AbortSignal) =>
    httpsFetch(`${gw.url}/api/generate`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": key },
      body: JSON.stringify({ model: "tiny", prompt: "Once upon a time", options: { num_predict: numPredict, temperature: 0, seed: 5 } }),
      ...(signal ? { signal } : {}),
    });

  t.test("HTTPS with a self-signed certificate made by the test", async (t) => {
    const res = await httpsFetch(`${gw.url}/api/version`, { headers: { "x-api-key": OLD_KEY } });
    t.equal(res.status, 200);
    t.match(await res.json(), { version: String });
    t.equal(await servedFingerprint(port, certs), fingerprint(certs[0]!), "serves the configured certificate");
    await t.rejects(fetch(`http://127.0.0.1:${port}/api/version`, { headers: { "x-api-key": OLD_KEY } }), "plain HTTP is not served");
    await assertError(t, await httpsFetch(`${gw.url}/api/version`), 401);
  });

  t.test("SIGHUP: old key refused, new key accepted, new certificate served, open stream completes", async (t) => {
    // About four seconds at the short-context rate; a cap, since decoding slows as the context
    // grows (at 13k tokens the tiny model runs ~20 times slower than over its first 16).
    const numPredict = clamp(rate * 4, 24, STREAM_CAP);
    const opened = performance.now();
    const res = await generate(OLD_KEY, numPredict);
    t.equal(res.status, 200);
    const lines = ndjsonLines(res.body!);
    const first = await lines.next();
    t.equal(first.value?.done, false, "the stream is open");

    await writeFile(keysFile, `# rotated\n${NEW_KEY}\n`);
    await copyFile(two.cert, certFile);
    await copyFile(two.key, keyFile);
    const from = gw.lines.length;
    gw.child.kill("SIGHUP");
    t.match(await gw.waitForLog((l) => l.msg === "gateway reloaded", { from }), { keys: 1, ok: true });
    const reloaded = performance.now();

    await assertError(t, await httpsFetch(`${gw.url}/api/version`, { headers: { "x-api-key": OLD_KEY } }), 401, "invalid API key");
    t.equal((await httpsFetch(`${gw.url}/api/version`, { headers: { "x-api-key": NEW_KEY } })).status, 200, "the new key is accepted");
    t.equal(await servedFingerprint(port, certs), fingerprint(certs[1]!), "new connections get the new certificate");

    let count = 1;
    let last: Record<string, unknown> | undefined;
    let afterReload = 0;
    for await (const line of lines) {
      count++;
      afterReload++;
      last = line;
    }
    t.ok(afterReload > 0, `${afterReload} lines arrived after the reload`);
    t.comment(`reloaded ${(reloaded - opened).toFixed(0)} ms after the request, the stream ended after ${(performance.now() - opened).toFixed(0)} ms`);
    t.match(last, { done: true, done_reason: "length", eval_count: numPredict }, "the stream opened before the reload ran to its end");
    // A chunk carries one token's text or more (text held back at a possible stop sequence or a
    // split UTF-8 character is sent together), so lines are at most one per token, plus the final one.
    t.ok(count > 2 && count <= numPredict + 1, `${count} lines for ${numPredict} tokens`);
  });

  t.test("a keys file that fails to load keeps the previous keys", async (t) => {
    await writeFile(keysFile, "short\n");
    const from = gw.lines.length;
    gw.child.kill("SIGHUP");
    t.match(await gw.waitForLog((l) => l.msg === "reload failed; keeping the previous value", { from }), { part: "keys", err: /at least 16 characters/ });
    t.equal((await httpsFetch(`${gw.url}/api/version`, { headers: { "x-api-key": NEW_KEY } })).status, 200, "the new key still works");
    await writeFile(keysFile, `${NEW_KEY}\n`);
  });

  t.test("a client that disconnects frees the daemon's slot", async (t) => {
    const numPredict = clamp(rate * 30, 64, CONTEXT - 64); // far longer than the test waits
    const expectedMs = (numPredict / rate) * 1000;
    const active = () => app.services.scheduler.list().reduce((n, m) => n + m.active, 0);
    const ac = new AbortController();
    const res = await generate(NEW_KEY, numPredict, ac.signal);
    const lines = ndjsonLines(res.body!);
    t.equal((await lines.next()).value?.done, false, "streaming");
    t.equal(active(), 1, "the daemon is generating");
    const from = gw.lines.length;
    const started = performance.now();
    ac.abort();
    const deadline = Math.min(3000, expectedMs / 4);
    while (active() > 0 && performance.now() - started < deadline) await new Promise((r) => setTimeout(r, 20));
    const took = performance.now() - started;
    t.equal(active(), 0, `slot freed ${took.toFixed(0)} ms after the disconnect (the full generation would take ~${expectedMs.toFixed(0)} ms)`);
    t.match(await gw.waitForLog((l) => l.msg === "request" && l.request === "POST /api/generate HTTP/1.1", { from }), { status: 200, aborted: true });
    const again = await generate(NEW_KEY, 4);
    t.equal(again.status, 200, "the daemon serves the next request");
    await again.text();
  });

  t.test("SIGTERM exits cleanly; no key in the log", async (t) => {
    gw.child.kill("SIGTERM");
    t.same(await gw.exited, { code: 0, signal: null });
    for (const key of [OLD_KEY, NEW_KEY]) t.notOk(gw.output().includes(key), "key not in the output");
    t.notOk(gw.output().includes(createHash("sha256").update(NEW_KEY).digest("hex")), "nor its full hash");
  });
});
