/**
 * `lmd doctor` against real things: a running daemon (healthy → 0), a port another program holds,
 * a store the user cannot write, an invalid variable — each → 1, the cause on the last line.
 */
import { spawn } from "node:child_process";
import { chmod, mkdir } from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import t from "tap";
import { forkDaemon, MAIN } from "../helpers/process.js";

function doctor(env: Record<string, string>, as?: { uid: number; gid: number }): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN, "doctor"], {
      env: { PATH: process.env.PATH, HOME: "/nonexistent", SERVICE_GPU: "false", ...env },
      stdio: ["ignore", "pipe", "pipe"],
      ...as,
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    child.on("close", (code) => resolve({ code, out }));
  });
}

const lastLine = (out: string) => out.trimEnd().split("\n").at(-1) ?? "";

/** A port nobody listens on now (bound and released). */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

t.test("healthy: a running daemon on the address, a writable store → exit 0", async (t) => {
  const dir = t.testdir();
  const models = path.join(dir, "models");
  const port = await freePort();
  const d = await forkDaemon(t, { SERVICE_HOST: `127.0.0.1:${port}`, SERVICE_MODELS: models });
  const r = await doctor({ SERVICE_HOST: `127.0.0.1:${port}`, SERVICE_MODELS: models, GATEWAY_API_KEY: "s3cret", HTTPS_PROXY: "http://user:hunter2@proxy:3128" });
  t.equal(r.code, 0, r.out);
  t.match(r.out, /^configuration: valid \(.*SERVICE_HOST=127\.0\.0\.1:\d+/m);
  t.match(r.out, /HTTPS_PROXY=http:\/\/user:\*\*\*\*@proxy:3128/, "credentials in a proxy URL are masked");
  t.notMatch(r.out, /hunter2|s3cret/, "no secret is printed");
  t.match(r.out, new RegExp(`^store: ${models} writable, 1 model, .* used, .* free$`, "m"));
  t.match(r.out, new RegExp(`^address: http://127\\.0\\.0\\.1:${port} is served by lmd \\d`, "m"));
  t.match(r.out, /^backends: found cpu.*; SERVICE_GPU=false would use cpu$/m);
  t.match(r.out, /^memory: .* total, .* available/m);
  t.match(lastLine(r.out), /^ok: lmd .* is ready to serve$/);
  d.child.kill("SIGTERM");
  await d.exited;
});

t.test("the port is held by another program → exit 1 naming it", async (t) => {
  const holder = net.createServer();
  await new Promise<void>((r) => holder.listen(0, "127.0.0.1", () => r()));
  t.teardown(() => holder.close());
  const port = (holder.address() as net.AddressInfo).port;
  const r = await doctor({ SERVICE_HOST: `127.0.0.1:${port}`, SERVICE_MODELS: path.join(t.testdir(), "m") });
  t.equal(r.code, 1);
  t.equal(lastLine(r.out), `problem: http://127.0.0.1:${port} is in use by another program (pid ${process.pid} node)`);
});

t.test("a store the user cannot write → exit 1 naming it", async (t) => {
  const store = path.join(t.testdir(), "models");
  await mkdir(store);
  const root = process.getuid?.() === 0;
  // As root every directory is writable: the check runs as nobody over a root-owned store.
  if (!root) await chmod(store, 0o555);
  const r = await doctor({ SERVICE_HOST: `127.0.0.1:${await freePort()}`, SERVICE_MODELS: store }, root ? { uid: 65534, gid: 65534 } : undefined);
  t.equal(r.code, 1, r.out);
  t.equal(lastLine(r.out), `problem: model store SERVICE_MODELS=${store} is not writable (EACCES)`);
});

t.test("an invalid variable → exit 1 naming it", async (t) => {
  const r = await doctor({ SERVICE_NUM_PARALLEL: "lots" });
  t.equal(r.code, 1);
  t.match(lastLine(r.out), /^problem: invalid configuration: SERVICE_NUM_PARALLEL: /);
  t.equal(r.out.trimEnd().split("\n").length, 2, "the configuration line and the problem");
});
