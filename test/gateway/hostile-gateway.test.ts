/**
 * The gateway's abuse limits: connection caps (total and per address, logged), the
 * gateway's own 400/431 answers as `{"error"}`, a per-address limit on failed authentications,
 * and absolute-form request targets normalised before forwarding. Real sockets, an in-process
 * gateway in front of a tiny echo upstream (no model is needed to see what reaches the daemon).
 */
import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import pino from "pino";
import t from "tap";
import { loadGatewayConfig } from "../../src/gateway/config.js";
import { createGateway } from "../../src/gateway/server.js";

const KEY = "k".repeat(40);

async function setup(env: Record<string, string> = {}) {
  const seen: string[] = [];
  const upstream = http.createServer((req, res) => {
    if (req.url === "/hold") return; // never answered: keeps a request in progress
    seen.push(req.url ?? "");
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ url: req.url }));
  });
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _e, cb) {
      for (const l of chunk.toString().split("\n")) if (l) logs.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  const config = loadGatewayConfig({
    GATEWAY_HOST: "127.0.0.1:0", GATEWAY_ALLOW_PLAINTEXT: "true", GATEWAY_API_KEYS: KEY,
    GATEWAY_UPSTREAM: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, GATEWAY_RATE_LIMIT: "0", ...env,
  });
  const gw = await createGateway(config, { log: pino({ level: "debug" }, sink) });
  const { port } = await gw.listen();
  t.teardown(async () => { gw.server.closeAllConnections(); await gw.close(); upstream.closeAllConnections(); await new Promise((r) => upstream.close(r)); });
  return { port, seen, logs };
}

/** Sends raw bytes on a fresh socket and reads until the server closes or `ms` pass. */
function raw(port: number, data: string, ms = 3000, localAddress?: string): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: "127.0.0.1", ...(localAddress ? { localAddress } : {}) }, () => s.write(data));
    let out = "";
    s.setEncoding("utf8").on("data", (d: string) => (out += d));
    const timer = setTimeout(() => { s.destroy(); resolve(out); }, ms);
    s.on("close", () => { clearTimeout(timer); resolve(out); });
    s.on("error", () => undefined);
  });
}

function parse(answer: string): { status: number; body: unknown } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0);
  const text = answer.slice(answer.indexOf("\r\n\r\n") + 4);
  let body: unknown;
  try { body = JSON.parse(text); } catch { body = text; }
  return { status, body };
}

const isError = (b: unknown) => typeof b === "object" && b !== null && Object.keys(b).join() === "error" && typeof (b as { error: unknown }).error === "string";

t.test("the gateway's own 400 and 431 carry {\"error\"}", async (t) => {
  const { port } = await setup();
  const bad = parse(await raw(port, "NOT A REQUEST\r\n\r\n"));
  t.equal(bad.status, 400);
  t.ok(isError(bad.body), `400 body is {"error"}: ${JSON.stringify(bad.body)}`);
  const big = parse(await raw(port, `GET /api/tags HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`));
  t.equal(big.status, 431);
  t.ok(isError(big.body), `431 body is {"error"}: ${JSON.stringify(big.body)}`);
});

t.test("absolute-form targets reach the daemon as origin-form", async (t) => {
  const { port, seen } = await setup();
  const a = parse(await raw(port, `GET http://evil.example/api/tags?x=1 HTTP/1.1\r\nHost: evil.example\r\nX-API-Key: ${KEY}\r\nConnection: close\r\n\r\n`));
  t.equal(a.status, 200);
  const b = parse(await raw(port, `GET http://evil.example HTTP/1.1\r\nHost: evil.example\r\nX-API-Key: ${KEY}\r\nConnection: close\r\n\r\n`));
  t.equal(b.status, 200);
  t.same(seen, ["/api/tags?x=1", "/"]);
  const c = parse(await raw(port, `GET ftp://x/y HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\nConnection: close\r\n\r\n`));
  t.equal(c.status, 400, "a target that is neither origin-form nor http(s) absolute-form is refused");
  t.ok(isError(c.body));
  t.same(seen, ["/api/tags?x=1", "/"], "and never forwarded");
});

t.test("failed authentications are limited per address", async (t) => {
  const { port, logs } = await setup({ GATEWAY_AUTH_FAILURE_LIMIT: "5" });
  const get = (key: string) => fetch(`http://127.0.0.1:${port}/api/tags`, { headers: { "x-api-key": key } });
  for (let i = 0; i < 5; i++) t.equal((await get(`bad-${i}`)).status, 401);
  const blocked = await get("bad-again");
  t.equal(blocked.status, 429);
  t.ok(Number(blocked.headers.get("retry-after")) >= 1, "Retry-After says when");
  t.ok(isError(await blocked.json()));
  t.equal((await get(KEY)).status, 429, "the address is blocked for the window, whatever key it sends next");
  t.ok(logs.some((l) => l.msg === "too many failed authentications; address blocked"), "logged");
});

t.test("connections are capped in total and per client address, and logged", async (t) => {
  const { port, logs } = await setup({ GATEWAY_MAX_CONNECTIONS: "8", GATEWAY_MAX_CONNECTIONS_PER_ADDRESS: "5" });
  // Each held connection is busy: a request in progress that the upstream never answers.
  const open = (localAddress: string) => new Promise<net.Socket>((resolve, reject) => {
    const s = net.connect({ port, host: "127.0.0.1", localAddress }, () => {
      s.write(`GET /hold HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\n\r\n`);
      resolve(s);
    });
    s.on("error", reject);
  });
  const held: net.Socket[] = [];
  t.teardown(() => held.forEach((s) => s.destroy()));
  for (let i = 0; i < 5; i++) held.push(await open("127.0.0.1"));
  await new Promise((r) => setTimeout(r, 200));
  const perAddress = parse(await raw(port, `GET /api/tags HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\n\r\n`, 3000, "127.0.0.1"));
  t.equal(perAddress.status, 503, "a sixth connection from one address is refused while its five are busy");
  t.ok(isError(perAddress.body));
  for (let i = 0; i < 3; i++) held.push(await open("127.0.0.2"));
  await new Promise((r) => setTimeout(r, 200));
  const total = parse(await raw(port, `GET /api/tags HTTP/1.1\r\nHost: x\r\nX-API-Key: ${KEY}\r\n\r\n`, 3000, "127.0.0.3"));
  t.equal(total.status, 503, "a ninth connection is refused whatever its address while all are busy");
  t.ok(logs.filter((l) => l.level === 40 && /connection cap .*reached/.test(String(l.msg))).length >= 1, "reaching a cap is logged");
  held.splice(0).forEach((s) => s.destroy());
  await new Promise((r) => setTimeout(r, 200));
  const ok = await fetch(`http://127.0.0.1:${port}/api/tags`, { headers: { "x-api-key": KEY } });
  t.equal(ok.status, 200, "once they close, a valid request is served");
});

t.test("1,040 silent sockets from 40 addresses: a valid key is served at once, the cap logged once", async (t) => {
  // The defaults: 1024 in all, 64 per address. Silent sockets must not hold the cap until their timeout.
  const { port, logs } = await setup();
  const sockets: net.Socket[] = [];
  t.teardown(() => sockets.forEach((s) => s.destroy()));
  for (let i = 0; i < 1040; i++) {
    const s = net.connect({ port, host: "127.0.0.1", localAddress: `127.0.1.${1 + (i % 40)}` });
    s.on("error", () => undefined);
    sockets.push(s);
    await new Promise((resolve) => s.once("connect", resolve).once("close", resolve));
  }
  await new Promise((r) => setTimeout(r, 300));
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`http://127.0.0.1:${port}/api/tags`, { headers: { "x-api-key": KEY }, signal: AbortSignal.timeout(5_000) });
    t.equal(res.status, 200, `a valid key is served (${i + 1})`);
  }
  const lines = logs.filter((l) => l.level === 40 && /connection cap reached/.test(String(l.msg)));
  t.equal(lines.length, 1, "the cap is logged, once");
  t.equal(lines[0]?.maxConnections, 1024);
});

t.test("per-client limits count a client's network (GATEWAY_IPV4_PREFIX)", async (t) => {
  const { port } = await setup({ GATEWAY_AUTH_FAILURE_LIMIT: "3", GATEWAY_IPV4_PREFIX: "24" });
  const get = (localAddress: string, key: string) => new Promise<number>((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/api/tags", localAddress, headers: { "x-api-key": key }, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", () => resolve(0));
  });
  for (const a of ["127.0.2.1", "127.0.2.2", "127.0.2.3"]) t.equal(await get(a, "bad"), 401);
  t.equal(await get("127.0.2.4", KEY), 429, "three addresses of one /24 used up its tries: a fourth is blocked");
  t.equal(await get("127.0.3.1", KEY), 200, "another /24 is not");
});
