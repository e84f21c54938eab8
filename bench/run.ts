/**
 * `npm run bench`: lmd measured side by side with node-llama-cpp called directly (and optionally
 * llama.cpp's own llama-server), same model, same threads, same sampling, interleaved rounds,
 * medians. Models come from scripts/make-model and live in a cache directory, not the repository.
 *
 *   npm run bench -- [--model bench-100m|bench-1b|PATH] [--threads N] [--rounds N] [--tokens N]
 *                    [--llama-server] [--quick] [--cache DIR] [--json FILE]
 *
 * Everything runs on loopback. Both lmd's runner and the direct process run with UV_THREADPOOL_SIZE=1.
 */
import { execFileSync, fork, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { makeModel, type PresetName } from "../src/gguf/make-model.js";
import { installGguf } from "../src/store/install.js";
import { ModelStore } from "../src/store/store.js";
import type { DecodeResult, DirectRequest } from "./direct.js";
import { httpRps, lmdDecode, lmdGenerate, type Sampling } from "./http.js";
import { freePort, startLlamaServer, llamaServerDecode, llamaServerPrefill } from "./llama-server.js";
import { servingFigures } from "./serving-run.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");

const { values: args } = parseArgs({
  options: {
    model: { type: "string", default: "bench-100m" },
    threads: { type: "string", default: String(Math.max(1, os.availableParallelism())) },
    rounds: { type: "string", default: "5" },
    tokens: { type: "string", default: "128" },
    cache: { type: "string", default: path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "lmd-bench") },
    "llama-server": { type: "boolean", default: false },
    quick: { type: "boolean", default: false },
    json: { type: "string" },
  },
});
const threads = Number(args.threads);
const rounds = args.quick ? 2 : Number(args.rounds);
const tokens = args.quick ? 32 : Number(args.tokens);
const cache = args.cache;
const sampling: Sampling = { temperature: 0.8, top_k: 40, top_p: 0.9, min_p: 0, seed: 1, repeat_penalty: 1 };

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0 ? NaN : s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const log = (msg: string) => process.stderr.write(`${msg}\n`);

async function ensureModel(): Promise<string> {
  if (existsSync(args.model) && args.model.endsWith(".gguf")) return path.resolve(args.model);
  mkdirSync(cache, { recursive: true });
  const file = path.join(cache, `${args.model}.gguf`);
  if (!existsSync(file)) {
    log(`writing ${file} (scripts/make-model --preset ${args.model})`);
    await makeModel(file, { preset: args.model as PresetName });
  }
  return file;
}

/** The direct baseline process. */
function startDirect(): { call: <T>(req: DirectRequest) => Promise<T>; child: ChildProcess } {
  const child = fork(path.join(here, "direct.js"), [], { env: { ...process.env, UV_THREADPOOL_SIZE: "1" }, stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const call = <T>(req: DirectRequest) =>
    new Promise<T>((resolve, reject) => {
      child.once("message", (msg: { ok: boolean; result?: T; error?: string }) => (msg.ok ? resolve(msg.result as T) : reject(new Error(msg.error))));
      child.send(req);
    });
  return { call, child };
}

/** More models for a run: name → GGUF file and its parameters (e.g. `draft`). */
type ExtraModels = Record<string, { file: string; params?: Record<string, unknown> }>;

/** lmd as a user runs it: `node dist/src/main.js serve`, its store in the cache. */
async function startLmd(modelFile: string, env: Record<string, string>, extra: ExtraModels = {}): Promise<{ url: string; child: ChildProcess }> {
  const store = new ModelStore(path.join(cache, "store"));
  await store.init();
  await installGguf(store, "bench", modelFile, { params: { repeat_penalty: 1 } });
  for (const [name, m] of Object.entries(extra)) await installGguf(store, name, m.file, { params: { repeat_penalty: 1, ...m.params } });
  const port = await freePort();
  // stdout (the access log) goes nowhere: reading it here would compete with autocannon for this process.
  const child = spawn(process.execPath, [path.join(root, "dist/src/main.js"), "serve"], {
    env: { PATH: process.env.PATH ?? "", HOME: os.homedir(), SERVICE_MODELS: path.join(cache, "store"), SERVICE_HOST: `127.0.0.1:${port}`, SERVICE_THREADS: String(threads), SERVICE_GPU: "false", SERVICE_CONTEXT_LENGTH: "4096", ...env },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300 && !(await fetch(`${url}/api/version`).then((r) => r.ok, () => false)); i++) await new Promise((r) => setTimeout(r, 100));
  return { url, child };
}

function rssMb(pid: number | undefined): number {
  if (!pid) return NaN;
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

function runnerPids(parent: number | undefined): number[] {
  if (!parent) return [];
  try {
    return execFileSync("pgrep", ["-P", String(parent)], { encoding: "utf8" }).trim().split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

const rate = (r: DecodeResult) => {
  const total = r.streams.reduce((n, s) => n + s.tokens, 0);
  const start = Math.min(...r.streams.map((s) => s.firstMs));
  const end = Math.max(...r.streams.map((s) => s.lastMs));
  // Tokens after each stream's first, over the span in which they were decoded.
  return (total - r.streams.length) / ((end - start) / 1000);
};

/** A prompt of about `n` tokens, different in each round so nothing is served from the prompt cache. */
const prose = (n: number, salt: number) => {
  const words = "the river ran past the old mill where a miller and his daughter kept bread and stories for travellers".split(" ");
  return `${salt} ` + Array.from({ length: Math.round(n * 0.95) }, (_, i) => words[(i * 7 + salt) % words.length]).join(" ");
};

async function main(): Promise<void> {
  const modelFile = await ensureModel();
  log(`model ${modelFile}, ${threads} threads, ${rounds} rounds, ${tokens} tokens per stream; load: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  const idleLmd = await startLmd(modelFile, {});
  await new Promise((r) => setTimeout(r, 1000));
  const rssIdle = rssMb(idleLmd.child.pid);
  idleLmd.child.kill("SIGTERM");

  const lmd = await startLmd(modelFile, { SERVICE_NUM_PARALLEL: "4", SERVICE_KEEP_ALIVE: "-1" });
  const direct = startDirect();
  await direct.call({ op: "load", model: modelFile, threads, sequences: 4, contextSize: 4096 });
  await lmdGenerate(lmd.url, { model: "bench", prompt: "", stream: false });
  const rssLoaded = rssMb(lmd.child.pid);
  const rssRunner = runnerPids(lmd.child.pid).map(rssMb).reduce((a, b) => a + b, 0);
  const server = args["llama-server"] ? await startLlamaServer(root, cache, modelFile, threads) : undefined;

  const r: Record<string, number[]> = {};
  const add = (k: string, v: number) => (r[k] ??= []).push(v);
  for (let round = 0; round < rounds; round++) {
    log(`round ${round + 1}/${rounds}`);
    add("decode.lmd", rate(await lmdDecode(lmd.url, "Once upon a time", tokens, 1, sampling)));
    add("decode.direct", rate(await direct.call<DecodeResult>({ op: "decode", prompt: "Once upon a time", tokens, streams: 1 })));
    if (server) add("decode.llama-server", await llamaServerDecode(server.url, "Once upon a time", tokens, sampling));
    add("agg4.lmd", rate(await lmdDecode(lmd.url, "Once upon a time", tokens, 4, sampling)));
    add("agg4.direct", rate(await direct.call<DecodeResult>({ op: "decode", prompt: "Once upon a time", tokens, streams: 4 })));
    const long = prose(args.quick ? 256 : 512, round);
    const pl = await lmdGenerate(lmd.url, { model: "bench", prompt: long, raw: true, stream: true, options: { ...sampling, num_predict: 1 } });
    add("prefill.lmd", pl.promptEvalCount / (pl.ttftMs / 1000));
    const pd = await direct.call<{ ms: number; promptTokens: number }>({ op: "ttft", prompt: prose(args.quick ? 256 : 512, round + 1000) });
    add("prefill.direct", pd.promptTokens / (pd.ms / 1000));
    if (server) add("prefill.llama-server", await llamaServerPrefill(server.url, prose(args.quick ? 256 : 512, round + 3000)));
    for (let i = 0; i < 5; i++) {
      add("ttft.lmd", (await lmdGenerate(lmd.url, { model: "bench", prompt: `${round}-${i} Hi`, raw: true, stream: true, options: { ...sampling, num_predict: 1 } })).ttftMs);
      add("ttft.direct", (await direct.call<{ ms: number }>({ op: "ttft", prompt: `${round}-${i} Hi` })).ms);
    }
    // Second turn of a conversation with ~1,000 tokens of shared history (the prompt cache).
    const history = prose(args.quick ? 500 : 1000, round + 2000);
    const first = await lmdGenerate(lmd.url, { model: "bench", prompt: history, raw: true, stream: true, options: { ...sampling, num_predict: 8 } });
    const second = await lmdGenerate(lmd.url, { model: "bench", prompt: " and what happened next?", context: first.context, raw: true, stream: true, options: { ...sampling, num_predict: 8 } });
    add("turn2.ratio", second.ttftMs / first.ttftMs);
    add("turn1.ttft", first.ttftMs);
    add("turn2.ttft", second.ttftMs);
  }
  const rps = await httpRps(root, lmd.url, args.quick ? 3 : 10);
  server?.child.kill("SIGTERM");
  lmd.child.kill("SIGTERM");
  direct.child.send({ op: "exit" }); // it exits without answering
  const serving = await servingFigures({
    startLmd: (env, extra) => startLmd(modelFile, env, extra),
    startServer: args["llama-server"] ? (parallel) => startLlamaServer(root, cache, modelFile, threads, parallel) : undefined,
    rounds: args.quick ? 1 : Math.min(rounds, 3),
    tokens,
    cache,
    sampling,
    log,
  });

  const m = (k: string) => median(r[k] ?? []);
  const rows: [string, string, string, string][] = [
    ["single-stream decode tokens/s (HTTP)", `${m("decode.lmd").toFixed(1)} vs ${m("decode.direct").toFixed(1)} direct`, (m("decode.lmd") / m("decode.direct")).toFixed(3), "≥ 0.97"],
    ["prefill tokens/s (HTTP)", `${m("prefill.lmd").toFixed(0)} vs ${m("prefill.direct").toFixed(0)} direct`, (m("prefill.lmd") / m("prefill.direct")).toFixed(3), "≥ 0.97"],
    ["aggregate decode tokens/s, 4 streams", `${m("agg4.lmd").toFixed(1)} vs ${m("agg4.direct").toFixed(1)} direct (1 stream: ${m("decode.lmd").toFixed(1)})`, (m("agg4.lmd") / m("agg4.direct")).toFixed(3), "≥ 0.95, > 1-stream"],
    ["warm time to first token (ms)", `${m("ttft.lmd").toFixed(2)} vs ${m("ttft.direct").toFixed(2)} direct`, `+${(m("ttft.lmd") - m("ttft.direct")).toFixed(2)} ms`, "≤ +5 ms"],
    ["GET /api/version requests/s", `${rps.lmd.toFixed(0)} vs ${rps.bare.toFixed(0)} bare node:http`, (rps.lmd / rps.bare).toFixed(3), "≥ 0.8"],
    ["second-turn TTFT, ~1,000-token history (ms)", `${m("turn2.ttft").toFixed(1)} vs ${m("turn1.ttft").toFixed(1)} first turn`, m("turn2.ratio").toFixed(3), "≤ 0.25"],
    ["daemon RSS (MB)", `idle ${rssIdle.toFixed(0)}; one model loaded: parent ${rssLoaded.toFixed(0)}, runner ${rssRunner.toFixed(0)}`, "—", "idle ≤ 100"],
  ];
  if (server) rows.push(["decode tokens/s vs llama-server", `${m("decode.lmd").toFixed(1)} vs ${m("decode.llama-server").toFixed(1)}`, (m("decode.lmd") / m("decode.llama-server")).toFixed(3), "≥ 1.0"]);
  if (server) rows.push(["prefill tokens/s vs llama-server", `${m("prefill.lmd").toFixed(0)} vs ${m("prefill.llama-server").toFixed(0)}`, (m("prefill.lmd") / m("prefill.llama-server")).toFixed(3), "≥ 1.0"]);
  rows.push(...serving.rows);
  const table = ["| figure | measured | ratio | target |", "|---|---|---|---|", ...rows.map((row) => `| ${row.join(" | ")} |`)].join("\n");
  process.stdout.write(`${table}\n\nload average after: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}\n`);
  if (args.json) writeFileSync(args.json, JSON.stringify({ model: modelFile, threads, rounds, tokens, samples: r, serving: serving.samples, rps, rssIdle, rssLoaded, rssRunner }, null, 2));

  // Keep-alive sockets and the daemon's shutdown would otherwise hold the process open.
  process.exit(0);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
