/**
 * Soak test: a built `lmd serve` on loopback with a tiny model, driven by many concurrent
 * clients for several minutes with a mix of streams, non-streams, chat, /v1, embeddings, model
 * listing, malformed bodies and requests aborted halfway. It reports requests and errors by status,
 * and the daemon's RSS, open file descriptors and child processes over time; it fails (exit 1) on
 * any answer other than the expected ones (the contract's 503 when the queue is full included), or
 * when a child process outlives the daemon.
 *
 *   npm run build && node dist/bench/soak.js [--duration 180] [--clients 32] [--json FILE]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { installGguf } from "../src/store/install.js";
import { makeModel } from "../src/gguf/make-model.js";
import { ModelStore } from "../src/store/store.js";

const { values: args } = parseArgs({
  options: { duration: { type: "string", default: "180" }, clients: { type: "string", default: "32" }, json: { type: "string" } },
});
const DURATION_MS = Number(args.duration) * 1000;
const CLIENTS = Number(args.clients);
const MAIN = fileURLToPath(new URL("../src/main.js", import.meta.url));

interface Sample { t: number; rssKiB: number; fds: number; threads: number; children: number[]; childRssKiB: number }

function procSample(pid: number, t0: number): Sample {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? 0);
  const children = childrenOf(pid);
  const childRssKiB = children.reduce((n, c) => n + (Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${c}/status`, "utf8"))?.[1]) || 0), 0);
  return {
    t: Math.round((Date.now() - t0) / 1000),
    rssKiB: field("VmRSS"),
    fds: readdirSync(`/proc/${pid}/fd`).length,
    threads: field("Threads"),
    children,
    childRssKiB,
  };
}

function childrenOf(pid: number): number[] {
  const text = readdirSync(`/proc/${pid}/task`).map((tid) => readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8")).join(" ");
  return text.trim() === "" ? [] : text.trim().split(/\s+/).map(Number);
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** One request of the mix: what it sends and which statuses are right for it. */
type Op = { name: string; weight: number; run: (base: string, signal: AbortSignal) => Promise<Response>; ok: number[] };
const post = (base: string, p: string, body: unknown, signal: AbortSignal) =>
  fetch(`${base}${p}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal });
const MIX: Op[] = [
  {
    name: "generate stream",
    weight: 4,
    run: (b, s) => post(b, "/api/generate", { model: "tiny", prompt: "Tell me about the sea", options: { num_predict: 16 } }, s),
    ok: [200, 503],
  },
  {
    name: "generate",
    weight: 3,
    run: (b, s) => post(b, "/api/generate", { model: "tiny", prompt: "Hello", stream: false, options: { num_predict: 8 } }, s),
    ok: [200, 503],
  },
  {
    name: "chat stream",
    weight: 3,
    run: (b, s) => post(b, "/api/chat", { model: "tiny", messages: [{ role: "user", content: "hi" }], options: { num_predict: 16 } }, s),
    ok: [200, 503],
  },
  {
    name: "v1 chat stream",
    weight: 2,
    run: (b, s) => post(b, "/v1/chat/completions", { model: "tiny", stream: true, max_tokens: 16, messages: [{ role: "user", content: "hi" }] }, s),
    ok: [200, 503],
  },
  { name: "embed", weight: 2, run: (b, s) => post(b, "/api/embed", { model: "tiny", input: ["one", "two"] }, s), ok: [200, 503] },
  { name: "tags", weight: 2, run: (b, s) => fetch(`${b}/api/tags`, { signal: s }), ok: [200] },
  { name: "ps", weight: 1, run: (b, s) => fetch(`${b}/api/ps`, { signal: s }), ok: [200] },
  { name: "show", weight: 1, run: (b, s) => post(b, "/api/show", { model: "tiny" }, s), ok: [200] },
  { name: "malformed", weight: 2, run: (b, s) => fetch(`${b}/api/generate`, { method: "POST", body: '{"model": "tiny", "prompt": ', signal: s }), ok: [400] },
  { name: "unknown model", weight: 1, run: (b, s) => post(b, "/api/generate", { model: "nope", prompt: "x" }, s), ok: [404] },
];
const WEIGHTS = MIX.flatMap((op) => Array.from({ length: op.weight }, () => op));

async function client(base: string, until: number, stats: Map<string, number>, failures: string[]): Promise<void> {
  let i = 0;
  while (Date.now() < until) {
    const op = WEIGHTS[Math.floor(Math.random() * WEIGHTS.length)]!;
    const abortHalfway = ++i % 10 === 0; // every tenth request is abandoned by its client
    const ac = new AbortController();
    const timer = abortHalfway ? setTimeout(() => ac.abort(), Math.random() * 300) : setTimeout(() => ac.abort(), 60_000);
    try {
      const res = await op.run(base, ac.signal);
      const text = await res.text();
      const key = `${res.status}`;
      stats.set(key, (stats.get(key) ?? 0) + 1);
      if (!op.ok.includes(res.status)) failures.push(`${op.name}: ${res.status} ${text.slice(0, 200)}`);
      else if (res.status === 200 && /"error"/.test(text) && op.name !== "show") failures.push(`${op.name}: error in stream ${text.slice(-200)}`);
      if (res.status === 503 && res.headers.get("retry-after") === null) failures.push(`${op.name}: 503 without Retry-After`);
      // A client backs off on 503 (the contract's client rules honour Retry-After; a quarter of it keeps the pressure on).
      if (res.status === 503) await new Promise((r) => setTimeout(r, 250));
    } catch (err) {
      if (abortHalfway && ac.signal.aborted) stats.set("aborted by client", (stats.get("aborted by client") ?? 0) + 1);
      else failures.push(`${op.name}: ${(err as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lmd-soak-"));
  const store = new ModelStore(dir);
  await store.init();
  const gguf = path.join(dir, "tiny.gguf");
  await makeModel(gguf, { preset: "tiny" });
  await installGguf(store, "tiny", gguf);
  rmSync(gguf);
  const port = await freePort();
  const env = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: dir,
    SERVICE_HOST: `127.0.0.1:${port}`,
    SERVICE_MODELS: dir,
    SERVICE_THREADS: "2",
    SERVICE_GPU: "false",
    SERVICE_NUM_PARALLEL: "4",
    SERVICE_MAX_QUEUE: "16",
    SERVICE_CONTEXT_LENGTH: "1024",
    SERVICE_LOG_LEVEL: "warn",
  };
  const daemon = spawn(process.execPath, [MAIN, "serve"], { env, stdio: ["ignore", "ignore", "inherit"] });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (await fetch(`${base}/api/version`).then((r) => r.ok, () => false)) break;
    if (i > 200) throw new Error("the daemon did not start");
    await new Promise((r) => setTimeout(r, 100));
  }
  const t0 = Date.now();
  const samples: Sample[] = [procSample(daemon.pid!, t0)];
  const sampler = setInterval(() => samples.push(procSample(daemon.pid!, t0)), 10_000);
  const stats = new Map<string, number>();
  const failures: string[] = [];
  const loadavg = os.loadavg().map((l) => l.toFixed(2)).join(" ");
  await Promise.all(Array.from({ length: CLIENTS }, () => client(base, t0 + DURATION_MS, stats, failures)));
  clearInterval(sampler);
  await new Promise((r) => setTimeout(r, 6000)); // aborted requests settle; idle keep-alive sockets (5 s) close
  samples.push(procSample(daemon.pid!, t0));
  const runners = new Set(samples.flatMap((s) => s.children));
  daemon.kill("SIGTERM");
  const exit = await new Promise<{ code: number | null; signal: string | null }>((resolve) => daemon.on("exit", (code, signal) => resolve({ code, signal })));
  await new Promise((r) => setTimeout(r, 500));
  const leftover = [...runners].filter((pid) => { try { process.kill(pid, 0); return true; } catch { return false; } });
  rmSync(dir, { recursive: true, force: true });
  const requests = [...stats.values()].reduce((a, b) => a + b, 0);
  const warm = samples.find((s) => s.t >= 20) ?? samples[0]!;
  const last = samples.at(-1)!;
  const summary = {
    durationS: DURATION_MS / 1000,
    clients: CLIENTS,
    cpus: os.availableParallelism(),
    loadavgAtStart: loadavg,
    loadavgAtEnd: os.loadavg().map((l) => l.toFixed(2)).join(" "),
    requests, byStatus: Object.fromEntries([...stats.entries()].sort()), failures: failures.length, failureSamples: failures.slice(0, 10),
    rssKiB: { start: samples[0]!.rssKiB, warm: warm.rssKiB, end: last.rssKiB, max: Math.max(...samples.map((s) => s.rssKiB)) },
    fds: { start: samples[0]!.fds, warm: warm.fds, end: last.fds, max: Math.max(...samples.map((s) => s.fds)) },
    runnerRssKiB: { warm: warm.childRssKiB, end: last.childRssKiB }, runnersSeen: runners.size, daemonExit: exit, leftoverChildren: leftover,
    samples: samples.map(({ t, rssKiB, fds, threads, children }) => ({ t, rssKiB, fds, threads, children: children.length })),
  };
  console.log(JSON.stringify(summary, null, 2));
  if (args.json) writeFileSync(args.json, JSON.stringify(summary, null, 2));
  if (failures.length > 0 || leftover.length > 0 || exit.code !== 0) process.exitCode = 1;
}

await main();
