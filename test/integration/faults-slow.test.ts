/**
 * Slow and greedy clients: a client that sends half a request head, or stops in the
 * middle of a body (JSON or a blob upload), is answered 408 and disconnected within the limits;
 * a connection beyond the cap replaces an idle one, or is closed at once when all are busy; the
 * daemon keeps serving meanwhile. The limits are shortened here through createApp's `httpLimits`
 * (the defaults are 10 s / 60 s / 1024).
 */
import t, { type Test } from "tap";
import net from "node:net";
import { readdirSync } from "node:fs";
import { createApp, type App } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import type { ServerLimits } from "../../src/http/server.js";
import { silentLogger } from "../../src/logger.js";
import { SERVER_LIMITS } from "../../src/http/server.js";

async function start(t: Test, limits: Partial<ServerLimits>): Promise<{ app: App; port: number }> {
  const config = loadConfig({ SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: t.testdir(), SERVICE_THREADS: "2", SERVICE_GPU: "false" });
  const app = await createApp(config, { log: silentLogger(), demoModel: false, httpLimits: limits });
  const { port } = await app.listen();
  t.teardown(() => app.close());
  return { app, port };
}

/** Opens a socket, writes `data`, and collects what comes back until the server closes it. */
function rawExchange(port: number, data: string, limitMs = 10_000): Promise<{ text: string; ms: number; closed: boolean }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = net.connect(port, "127.0.0.1", () => socket.write(data));
    let text = "";
    const timer = setTimeout(() => { socket.destroy(); resolve({ text, ms: Date.now() - started, closed: false }); }, limitMs);
    socket.setEncoding("utf8").on("data", (d: string) => (text += d));
    socket.on("error", () => undefined);
    socket.on("close", () => { clearTimeout(timer); resolve({ text, ms: Date.now() - started, closed: true }); });
  });
}

function errorOf(text: string): { status: number; body: unknown } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
  return { status, body: JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)) };
}

t.test("the defaults", async (t) => {
  t.same(SERVER_LIMITS, { headersTimeoutMs: 10_000, bodyIdleTimeoutMs: 60_000, keepAliveTimeoutMs: 5_000, maxConnections: 1024 });
});

t.test("half a request head: 408 and the socket closed", async (t) => {
  const { port } = await start(t, { headersTimeoutMs: 400 });
  const r = await rawExchange(port, "POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl");
  t.ok(r.closed, `closed after ${r.ms} ms`);
  t.ok(r.ms < 3000, "well before the client would give up");
  t.same(errorOf(r.text), { status: 408, body: { error: "request timeout" } });
});

t.test("a JSON body that stops: 408 request body timeout", async (t) => {
  const { port } = await start(t, { bodyIdleTimeoutMs: 400 });
  const r = await rawExchange(port, "POST /api/show HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":");
  t.ok(r.closed && r.ms < 3000, `closed after ${r.ms} ms`);
  t.same(errorOf(r.text), { status: 408, body: { error: "request body timeout" } });
});

t.test("a blob upload that stops: 408, the socket closed and no temporary file left", async (t) => {
  const { app, port } = await start(t, { bodyIdleTimeoutMs: 400 });
  const head = `POST /api/blobs/sha256:${"c".repeat(64)} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10000000\r\n\r\n`;
  const r = await rawExchange(port, head + "x".repeat(100_000));
  t.ok(r.closed && r.ms < 3000, `closed after ${r.ms} ms`);
  t.same(errorOf(r.text), { status: 408, body: { error: "request body timeout" } });
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.same(readdirSync(app.services.store.blobsDir), [], "no partial blob or temporary file");
});

t.test("a slow but steady upload is not cut off", async (t) => {
  const { port } = await start(t, { bodyIdleTimeoutMs: 400 });
  const data = Buffer.alloc(6, "y");
  const digest = (await import("node:crypto")).createHash("sha256").update(data).digest("hex");
  const socket = net.connect(port, "127.0.0.1");
  let text = "";
  socket.setEncoding("utf8").on("data", (d: string) => (text += d));
  socket.write(`POST /api/blobs/sha256:${digest} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 6\r\nConnection: close\r\n\r\n`);
  for (let i = 0; i < 6; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200)); // 1.2 s in all, never 400 ms idle
    socket.write("y");
  }
  await new Promise((resolve) => socket.on("close", resolve));
  t.match(text, /^HTTP\/1\.1 201 /, "created");
});

t.test("connections over the cap, all busy, are closed at once; the daemon still serves", async (t) => {
  const { port } = await start(t, { maxConnections: 8 });
  const held: net.Socket[] = [];
  for (let i = 0; i < 8; i++) {
    const s = net.connect(port, "127.0.0.1");
    s.on("error", () => undefined);
    await new Promise((resolve) => s.once("connect", resolve));
    // A request in progress: its head sent, its body still to come.
    s.write("POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{");
    held.push(s);
  }
  await new Promise((resolve) => setTimeout(resolve, 200));
  const extra = await rawExchange(port, "GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 3000);
  t.ok(extra.closed, "the ninth connection is closed by the server");
  t.equal(extra.text, "", "without being served");
  for (const s of held) s.destroy();
  await new Promise((resolve) => setTimeout(resolve, 100));
  const ok = await rawExchange(port, "GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  t.match(ok.text, /^HTTP\/1\.1 200 /, "served again once connections are free");
});

t.test("idle connections over the cap make way: silent, half a head, keep-alive between requests", async (t) => {
  const { port } = await start(t, { maxConnections: 8 });
  const held: { socket: net.Socket; closed: boolean }[] = [];
  const open = async (data: string) => {
    const entry = { socket: net.connect(port, "127.0.0.1"), closed: false };
    entry.socket.on("error", () => undefined).on("close", () => (entry.closed = true)).resume();
    await new Promise((resolve) => entry.socket.once("connect", resolve));
    if (data) entry.socket.write(data);
    held.push(entry);
  };
  t.teardown(() => held.forEach((h) => h.socket.destroy()));
  for (let i = 0; i < 3; i++) await open("");
  for (let i = 0; i < 3; i++) await open("GET /api/version HTTP/1.1\r\nHo");
  for (let i = 0; i < 2; i++) await open("GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); // answered, then kept alive
  await new Promise((resolve) => setTimeout(resolve, 200));
  // Eight new clients that stay connected: each needs a place, taken from the oldest idle one.
  const fresh: net.Socket[] = [];
  t.teardown(() => fresh.forEach((s) => s.destroy()));
  for (let i = 0; i < 8; i++) {
    const s = net.connect(port, "127.0.0.1", () => s.write("GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    s.on("error", () => undefined);
    fresh.push(s);
    const text = await new Promise<string>((resolve) => {
      let got = "";
      s.setEncoding("utf8").on("data", (d: string) => {
        got += d;
        if (got.includes("\r\n\r\n")) resolve(got);
      });
      s.on("close", () => resolve(got));
    });
    t.match(text, /^HTTP\/1\.1 200 /, `new client ${i + 1} is served`);
    await new Promise((resolve) => setTimeout(resolve, 50)); // the closed socket's FIN, on its way
    t.equal(held.filter((h) => h.closed).length, i + 1, `and ${i + 1} idle connection(s) closed, oldest first`);
    t.notOk(held.slice(i + 1).some((h) => h.closed), "only the oldest");
  }
});
