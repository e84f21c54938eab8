/**
 * Pulls honour HTTP_PROXY/HTTPS_PROXY/NO_PROXY, through a real proxy: Debian's tinyproxy, started
 * here on loopback with its own configuration, whose log shows each request it forwarded (plain
 * http registries by absolute URL, https ones through a CONNECT tunnel). The
 * address rules still apply to the target (a registry on a private network may not send lmd to
 * loopback through the proxy either). Without tinyproxy the test is skipped.
 */
import t, { type Test } from "tap";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import http from "node:http";
import https from "node:https";
import net, { type AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { AddressPolicy } from "../../src/registry/address.js";
import { proxyEnv, REGISTRY_DEFAULTS } from "../../src/registry/http.js";
import { assertError } from "../helpers/assert-error.js";
import { makeCa } from "../helpers/docker-registry.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { testGguf } from "../helpers/models.js";
import { privateAddress } from "../helpers/netns.js";
import { sha256, startTestRegistry } from "../helpers/registry.js";

const MODEL = "application/vnd.ollama.image.model";
REGISTRY_DEFAULTS.minTimeoutMs = 50;
REGISTRY_DEFAULTS.maxTimeoutMs = 200;

const tinyproxy = ["/usr/bin/tinyproxy", "/usr/sbin/tinyproxy"].find((p) => existsSync(p));
const noProxy = tinyproxy ? false : "tinyproxy is not installed (apt-get install tinyproxy)";

/** A free loopback port (tinyproxy takes its port from its configuration). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Starts tinyproxy in the foreground on loopback; its URL and a reader of its log. */
async function startProxy(t: Test): Promise<{ url: string; log: () => Promise<string> }> {
  // Not t.testdir(): the daemon's store takes that directory (and empties it).
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "lmd-tinyproxy-"));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const logFile = path.join(dir, "tinyproxy.log");
  const port = await freePort();
  const conf = path.join(dir, "tinyproxy.conf");
  await fs.writeFile(
    conf,
    [`Port ${port}`, "Listen 127.0.0.1", "Timeout 30", "LogLevel Info", `LogFile "${logFile}"`, "MaxClients 50", "Allow 127.0.0.1", ""].join("\n"),
  );
  const child = spawn(tinyproxy!, ["-d", "-c", conf], { stdio: "ignore" });
  t.teardown(() => void child.kill("SIGTERM"));
  const end = Date.now() + 10_000;
  for (;;) {
    const up = await new Promise<boolean>((resolve) => net.connect(port, "127.0.0.1").once("connect", function (this: net.Socket) {
      this.destroy();
      resolve(true);
    }).once("error", () => resolve(false)));
    if (up) break;
    if (Date.now() > end || child.exitCode !== null) throw new Error("tinyproxy did not start");
    await new Promise((r) => setTimeout(r, 50));
  }
  return { url: `http://127.0.0.1:${port}`, log: () => fs.readFile(logFile, "utf8").catch(() => "") };
}

/** Sets proxy variables for this test's pulls (the daemon reads them when a pull starts). */
function setEnv(t: Test, vars: Record<string, string>): void {
  const names = ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"];
  const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
  for (const n of names) delete process.env[n];
  Object.assign(process.env, vars);
  t.teardown(() => {
    for (const n of names) delete process.env[n];
    for (const [n, v] of Object.entries(saved)) if (v !== undefined) process.env[n] = v;
  });
}

t.test("a pull goes through HTTP_PROXY; NO_PROXY hosts go direct", { skip: noProxy }, async (t) => {
  const proxy = await startProxy(t);
  const reg = await startTestRegistry(t, { redirect: true });
  const gguf = await fs.readFile(await testGguf());
  reg.addModel("library/tiny", "latest", [{ mediaType: MODEL, data: gguf }]);
  const blobHost = new URL(reg.blobUrl).host;
  const { url } = await startDaemon(t, { models: [] });

  setEnv(t, { HTTP_PROXY: proxy.url });
  const res = await postJson(`${url}/api/pull`, { model: `${reg.host}/library/tiny`, insecure: true, stream: false });
  t.same(await res.json(), { status: "success" });
  let log = await proxy.log();
  t.match(log, `GET http://${reg.host}/v2/library/tiny/manifests/latest HTTP/1.1`, "the manifest request went through the proxy");
  t.match(log, `GET http://${blobHost}/blobs/${sha256(gguf)}`, "so did the redirected blob request");

  // The blob host in NO_PROXY (host:port, as curl reads it): its requests go direct.
  await fetch(`${url}/api/delete`, { method: "DELETE", body: JSON.stringify({ model: `${reg.host}/library/tiny` }) });
  setEnv(t, { http_proxy: proxy.url, no_proxy: `localhost,${blobHost}` });
  const before = reg.stats.blobRequests.filter((r) => r.server === "blobhost").length;
  const again = await postJson(`${url}/api/pull`, { model: `${reg.host}/library/tiny`, insecure: true, stream: false });
  t.same(await again.json(), { status: "success" });
  t.ok(reg.stats.blobRequests.filter((r) => r.server === "blobhost").length > before, "the blob was downloaded again");
  log = (await proxy.log()).slice(log.length);
  t.match(log, `GET http://${reg.host}/v2/library/tiny/manifests/latest`, "the registry is still reached through the proxy");
  t.notMatch(log, blobHost, "the NO_PROXY host was reached directly");
});

t.test("an https registry is reached through HTTPS_PROXY's CONNECT tunnel, its certificate verified with SERVICE_REGISTRY_CA", { skip: noProxy }, async (t) => {
  const proxy = await startProxy(t);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "lmd-proxy-ca-"));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const ca = makeCa(dir);
  // A registry without the model: its 404 is proof that TLS through the tunnel was set up and verified.
  const server = https.createServer({ cert: await fs.readFile(ca.cert), key: await fs.readFile(ca.key) }, (_req, res) => {
    res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ errors: [{ code: "MANIFEST_UNKNOWN", message: "manifest unknown" }] }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  setEnv(t, { HTTPS_PROXY: proxy.url });
  const trusting = await startDaemon(t, { models: [], env: { SERVICE_REGISTRY_CA: ca.ca, SERVICE_MODELS: path.join(dir, "a") } });
  await assertError(
    t,
    await postJson(`${trusting.url}/api/pull`, { model: `${host}/team/m:v1`, stream: false }),
    404,
    `model '${host}/team/m:v1' not found in the registry`,
  );
  t.match(await proxy.log(), `CONNECT ${host}`, "the proxy opened the tunnel");
  const untrusting = await startDaemon(t, { models: [], env: { SERVICE_MODELS: path.join(dir, "b") } });
  await assertError(
    t,
    await postJson(`${untrusting.url}/api/pull`, { model: `${host}/team/m:v1`, stream: false }),
    500,
    new RegExp(`the TLS certificate of registry ${host.replace(/\./g, "\\.")} is not trusted`),
  );
});

t.test("without a proxy variable nothing goes to the proxy", { skip: noProxy }, async (t) => {
  const proxy = await startProxy(t);
  const reg = await startTestRegistry(t);
  reg.addModel("library/tiny", "latest", [{ mediaType: MODEL, data: Buffer.from("not a model, never loaded") }]);
  const { url } = await startDaemon(t, { models: [] });
  setEnv(t, {});
  const res = await postJson(`${url}/api/pull`, { model: `${reg.host}/library/tiny`, insecure: true, stream: false });
  t.same(await res.json(), { status: "success" });
  t.notMatch(await proxy.log(), "Request (file descriptor");
});

t.test("the proxy variables: lower-case names win, NO_PROXY defaults to nothing", async (t) => {
  t.equal(proxyEnv({}), undefined, "none set: no proxy");
  t.equal(proxyEnv({ NO_PROXY: "*" }), undefined, "NO_PROXY alone: no proxy");
  t.same(proxyEnv({ HTTP_PROXY: "http://a:1", http_proxy: "http://b:2" }), { httpProxy: "http://b:2", httpsProxy: undefined, noProxy: "" });
  t.same(proxyEnv({ HTTPS_PROXY: "http://a:1", NO_PROXY: "x", no_proxy: "y" }), { httpProxy: undefined, httpsProxy: "http://a:1", noProxy: "y" });
  t.same(proxyEnv({ HTTPS_PROXY: "", https_proxy: "" }), undefined, "empty values are unset");
});

t.test("through a proxy, a target's name is checked against the address rules", async (t) => {
  const policy = new AddressPolicy("203.0.113.7"); // a public registry
  policy.proxied = true;
  await t.rejects(policy.checkName("localhost"), { code: "LMD_ADDRESS_REFUSED", message: /^localhost resolves to (127\.0\.0\.1|::1), a loopback address/ });
  await t.rejects(policy.checkName("169.254.169.254"), { code: "LMD_ADDRESS_REFUSED" });
  await t.rejects(policy.checkName("[::1]"), { code: "LMD_ADDRESS_REFUSED" });
  await t.resolves(policy.checkName("registry.invalid"), "a name that does not resolve here is the proxy's to reach");
  await t.resolves(policy.checkName("198.51.100.20"), "a public target is allowed");

  const unresolved = new AddressPolicy("registry.invalid");
  await t.rejects(unresolved.init(), { code: "ENOTFOUND" }, "without a proxy, an unknown registry host fails");
  const viaProxy = new AddressPolicy("registry.invalid");
  viaProxy.proxied = true;
  await viaProxy.init();
  await t.rejects(viaProxy.checkName("localhost"), { code: "LMD_ADDRESS_REFUSED" }, "through a proxy it is treated as public");
});

const made = privateAddress(t);

t.test("a registry on a private network may not redirect lmd to loopback through the proxy", { skip: noProxy || made.reason || false }, async (t) => {
  let hits = 0;
  const secret = http.createServer((_req, res) => {
    hits++;
    res.end("internal secret");
  });
  await new Promise<void>((resolve) => secret.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise((resolve) => secret.close(resolve)));
  const port = (secret.address() as AddressInfo).port;
  const proxy = await startProxy(t);
  // tinyproxy allows only loopback clients; the daemon reaches it on loopback.
  const reg = await startTestRegistry(t, { address: made.address });
  const gguf = Buffer.from("a private model");
  reg.addModel("library/tiny", "latest", [{ mediaType: MODEL, data: gguf }]);
  const { url } = await startDaemon(t, { models: [] });
  setEnv(t, { HTTP_PROXY: proxy.url });
  const pull = () => postJson(`${url}/api/pull`, { model: `${reg.host}/library/tiny`, insecure: true, stream: false });
  reg.faults.redirectTo = `http://localhost:${port}/internal/secret`;
  await assertError(
    t,
    await pull(),
    500,
    new RegExp(`^pull ${sha256(gguf).slice(7, 19)}: registry redirect refused: localhost resolves to (127\\.0\\.0\\.1|::1), a loopback address`),
  );
  t.equal(hits, 0, "the internal server was never reached");
  t.notMatch(await proxy.log(), `localhost:${port}`, "the proxy was never asked for it");
  t.match(await proxy.log(), `GET http://${reg.host}/v2/library/tiny/manifests/latest`, "the registry itself was asked through the proxy");
  reg.faults.redirectTo = undefined;
  t.same(await (await pull()).json(), { status: "success" });
});
