/**
 * `npm run bench`: lmd measured side by side with node-llama-cpp called directly (and optionally
 * llama.cpp's own llama-server), same model, same threads, same sampling, interleaved rounds,
 * medians. Models come from scripts/make-model and live in a cache directory, not the repository.
 *
 *   npm run bench -- [--model bench-100m|bench-1b|PATH] [--threads N] [--rounds N] [--tokens N]
 *                    [--serving-rounds N] [--llama-server] [--quick] [--cache DIR] [--json FILE]
 *                    [--only single|aggregate|busy|speculative|memory|tokenize|mixed|demo] [--llama-server-engine auto|native|prebuilt]
 *                    [--gpu cuda|vulkan --llama-server-bin PATH] [--warm-up-tokens N]
 *
 * `--quick` (2 rounds, serving figures 1 round, 32 tokens) runs every section fast: it checks that
 * the command works, its figures mean nothing.
 *
 * `--only <section>` runs one section (`--serving-rounds` rounds) and prints its rows: `single`
 * (single-stream decode, lmd vs direct and llama-server, `--rounds` rounds), `aggregate`
 * (4 and 8 streams, against llama-server with `--llama-server`; no TTFT-under-load probes), `busy`
 * (the busy-host and two-models rows), `speculative` (the speculative-decoding rows), `memory`
 * (KV-cache types and saved prompt prefixes, bench/memory.ts), `tokenize` (long texts through
 * `/api/tokenize`, bench/tokenize.ts), `mixed` (1–16 clients of mixed prompt and output lengths,
 * against llama-server with `--llama-server`: bench/mixed-run.ts) or `demo` (the demo model, one
 * thread, 256-token streams: its single-stream and 4- and 8-stream rows, part of every full CPU run).
 *
 * `--llama-server-engine` picks the llama.cpp libraries llama-server runs on (bench/llama-server.ts):
 * its own native build, or node-llama-cpp's prebuilt ones (lmd's); `auto` (the default) is native
 * unless that does not start on this host.
 *
 * `--warm-up-tokens N` (default 6,144): tokens each side generates in its measured workload before
 * the first measurement (docs/benchmarks.md, "Method").
 *
 * `--gpu cuda` measures on a GPU, every layer offloaded on each side (lmd `SERVICE_GPU=cuda`, the
 * direct process, llama-server `-ngl 999`): the single-stream, prefill, aggregate and TTFT figures
 * (the busy-host, two-models and speculative blocks are CPU measurements). llama-server is then the
 * binary `--llama-server-bin` names, built with the addon from the same source (bench/build-cuda.sh).
 *
 * Everything runs on loopback. lmd's runner and the direct process run in the same environment (one libuv thread, the threadpool library preloaded: runnerEnv).
 */
import { execFileSync, fork, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import type { PresetName } from "../src/gguf/make-model.js";
import { runnerEnv } from "../src/runner/spawn.js";
import type { DecodeResult, DirectRequest } from "./direct.js";
import { httpRps, lmdDecode, lmdGenerate, type Sampling } from "./http.js";
import { benchModel, startLmd as startDaemon, type StoreModels } from "./lmd.js";
import {
  startLlamaServer,
  llamaServerDecode,
  llamaServerEngine,
  llamaServerPrefill,
  logFile,
  useLlamaServerBinary,
  type LlamaServerEngine,
} from "./llama-server.js";
import { settle, stopProcess, track } from "./procs.js";
import { aggregateRate, prose } from "./serving.js";
import { median, servingFigures, type Row } from "./serving-run.js";
import { memoryFigures } from "./memory.js";
import { mixedRows } from "./mixed-run.js";
import { tokenizeRows } from "./tokenize.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");

const { values: args } = parseArgs({
  options: {
    gpu: { type: "string" },
    "llama-server-bin": { type: "string" },
    "warm-up-tokens": { type: "string" },
    model: { type: "string", default: "bench-100m" },
    threads: { type: "string", default: String(Math.max(1, os.availableParallelism())) },
    rounds: { type: "string", default: "5" },
    tokens: { type: "string", default: "128" },
    cache: { type: "string", default: path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "lmd-bench") },
    "llama-server": { type: "boolean", default: false },
    "llama-server-engine": { type: "string", default: "auto" },
    "serving-rounds": { type: "string", default: "3" },
    quick: { type: "boolean", default: false },
    json: { type: "string" },
    only: { type: "string" },
  },
});
const sections = ["single", "aggregate", "busy", "speculative", "memory", "tokenize", "mixed", "demo"] as const;
type Section = (typeof sections)[number];
const isSection = (s: string | undefined): s is Section => sections.includes(s as Section);
if (args.only !== undefined && !isSection(args.only)) {
  process.stderr.write(`--only takes one section: ${sections.join(", ")} (got '${args.only}')\n`);
  process.exit(2);
}
if (args.gpu !== undefined && !["cuda", "vulkan"].includes(args.gpu)) {
  process.stderr.write(`--gpu takes cuda or vulkan (got '${args.gpu}')\n`);
  process.exit(2);
}
const gpu = args.gpu as "cuda" | "vulkan" | undefined;
if (gpu && args["llama-server"] && !args["llama-server-bin"]) {
  process.stderr.write("--gpu with --llama-server needs --llama-server-bin: a llama-server built for that GPU (bench/build-cuda.sh)\n");
  process.exit(2);
}
if (gpu && args.only !== undefined && args.only !== "aggregate") {
  process.stderr.write("--gpu runs the single-stream, prefill, aggregate and TTFT figures; --only takes aggregate there\n");
  process.exit(2);
}
const engine = args["llama-server-engine"] as LlamaServerEngine;
if (!["auto", "native", "prebuilt"].includes(engine)) {
  process.stderr.write(`--llama-server-engine takes auto, native or prebuilt (got '${engine}')\n`);
  process.exit(2);
}
const threads = Number(args.threads);
const rounds = args.quick ? 2 : Number(args.rounds);
/** Rounds of the serving figures (each round of those is long; their medians settle sooner). */
const servingRounds = args.quick ? 1 : Number(args["serving-rounds"]);
const started = performance.now();
const loadBefore = os.loadavg().map((l) => l.toFixed(2)).join(" ");
const tokens = args.quick ? 32 : Number(args.tokens);
const cache = args.cache;
/** Tokens each side generates in its measured workload before it is measured (docs/benchmarks.md, "Method"). */
const warmUpTokens = args["warm-up-tokens"] !== undefined ? Number(args["warm-up-tokens"]) : args.quick ? 2 * tokens : 6144;
const sampling: Sampling = { temperature: 0.8, top_k: 40, top_p: 0.9, min_p: 0, seed: 1, repeat_penalty: 1 };

const log = (msg: string) => process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${msg}\n`);

/**
 * The direct baseline process: one libuv thread and the persistent threadpool library preloaded, as
 * lmd's runners have them (without it, node-llama-cpp starts its decoding threads afresh for every
 * decode, and on a small VM a token can take several times as long: docs/benchmarks/history.md).
 */
function startDirect(): { call: <T>(req: DirectRequest) => Promise<T>; child: ChildProcess } {
  const child = track(fork(path.join(here, "direct.js"), [], { env: runnerEnv(), stdio: ["ignore", "inherit", "inherit", "ipc"] }));
  const call = <T>(req: DirectRequest) =>
    new Promise<T>((resolve, reject) => {
      child.once("message", (msg: { ok: boolean; result?: T; error?: string }) => (msg.ok ? resolve(msg.result as T) : reject(new Error(msg.error))));
      child.send(req);
    });
  return { call, child };
}

/** lmd as a user runs it (bench/lmd.ts): this checkout's build, its store in the cache. */
function startLmd(modelFile: string, env: Record<string, string>, extra: StoreModels = {}, onLog?: (line: string) => void) {
  const models = { bench: { file: modelFile }, ...extra };
  return startDaemon({ main: path.join(root, "dist/src/main.js"), store: path.join(cache, "store"), models, threads, gpu, env, ...(onLog ? { onLog } : {}) });
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

/** What lmd's `/api/ps` says of the bench model's memory on a GPU run; throws when none of it is on the GPU. */
async function gpuResident(url: string): Promise<string> {
  const ps = (await (await fetch(`${url}/api/ps`)).json()) as { models: { name: string; size: number; size_vram: number }[] };
  const m = ps.models.find((x) => x.name.startsWith("bench"));
  if (!m || !(m.size_vram > 0)) throw new Error(`lmd did not load the model on the GPU (/api/ps: ${JSON.stringify(ps.models)})`);
  return `lmd: ${(m.size_vram / 2 ** 20).toFixed(0)} of ${(m.size / 2 ** 20).toFixed(0)} MiB on the GPU`;
}

/** Tokens/s of a decode measurement that generated `tokens` tokens a stream (bench/serving.ts). */
const rate = (r: DecodeResult) => aggregateRate(r.streams, tokens);

async function main(): Promise<void> {
  const modelFile = await benchModel(args.model, cache, log);
  if (args["llama-server-bin"])
    useLlamaServerBinary(path.resolve(args["llama-server-bin"]), gpu ? 999 : undefined, logFile(cache));
  log(`model ${modelFile}, ${threads} threads, ${rounds} rounds, ${tokens} tokens per stream; load: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  if (args.only === "memory" || args.only === "tokenize" || args.only === "mixed" || args.only === "demo") return onlyRows(args.only, modelFile);
  if (args.only === "single") return onlySingle(modelFile);
  if (args.only === "aggregate" || args.only === "busy" || args.only === "speculative") return only(modelFile, args.only);
  const idleLmd = await startLmd(modelFile, {});
  await new Promise((r) => setTimeout(r, 1000));
  const rssIdle = rssMb(idleLmd.child.pid);
  await stopProcess(idleLmd.child);

  // Of two servers started one after the other, the second can measure faster (docs/benchmarks.md,
  // "Method"): the first half of the rounds runs with lmd, the direct process and llama-server
  // started in that order, the second half with the three started again in the reverse order.
  const halves = [Math.ceil(rounds / 2), Math.floor(rounds / 2)];
  const startSides = async (lmdFirst: boolean) => {
    const startLmdSide = () => startLmd(modelFile, { SERVICE_NUM_PARALLEL: "4", SERVICE_KEEP_ALIVE: "-1" });
    const startServer = () => (args["llama-server"] ? startLlamaServer(root, cache, modelFile, threads, 1, engine) : Promise.resolve(undefined));
    const serverFirst = lmdFirst ? undefined : await startServer();
    const lmdFirstStarted = lmdFirst ? await startLmdSide() : undefined;
    const direct = startDirect();
    const loaded = await direct.call<{ gpu: string | false; devices: string[]; gpuLayers: number }>({
      op: "load",
      model: modelFile,
      threads,
      sequences: 4,
      contextSize: 4096,
      gpu,
    });
    if (gpu) {
      if (loaded.gpu !== gpu) throw new Error(`node-llama-cpp loaded without ${gpu} (gpu: ${String(loaded.gpu)})`);
      log(`direct: ${loaded.gpu} on ${loaded.devices.join(", ")}, ${loaded.gpuLayers} layers offloaded`);
    }
    const lmd = lmdFirstStarted ?? (await startLmdSide());
    const server = lmdFirst ? await startServer() : serverFirst;
    await lmdGenerate(lmd.url, { model: "bench", prompt: "", stream: false });
    if (gpu) offload = await gpuResident(lmd.url);
    const rss = { loaded: rssMb(lmd.child.pid), runner: runnerPids(lmd.child.pid).map(rssMb).reduce((a, b) => a + b, 0) };
    if (server) await llamaServerDecode(server.url, "warm up", 4, sampling);
    // Warm up with the measured workload: a fresh daemon's first ~5,000 tokens run slower (V8
    // compiling the per-token JavaScript on background threads), and a daemon in service is long past them.
    for (let i = 0; i < Math.ceil(warmUpTokens / tokens); i++) {
      await lmdDecode(lmd.url, `warm up ${i}`, tokens, 1, sampling);
      await direct.call<DecodeResult>({ op: "decode", prompt: `warm up ${i}`, tokens, streams: 1 });
      if (server) await llamaServerDecode(server.url, `warm up ${i}`, tokens, sampling);
    }
    return { lmd, direct, server, rss };
  };
  const stopSides = async (sides: Awaited<ReturnType<typeof startSides>>) => {
    sides.direct.child.send({ op: "exit" }); // it exits without answering
    await stopProcess(sides.server?.child);
    await stopProcess(sides.lmd.child);
  };

  const r: Record<string, number[]> = {};
  const add = (k: string, v: number) => (r[k] ??= []).push(v);
  const promptTokens = args.quick ? 256 : 512;
  /** Fresh prompts a side each round for the prefill rows (twice round the sides, with llama-server). */
  const PREFILLS = 6;
  let rss = { loaded: NaN, runner: NaN };
  let rps = { lmd: NaN, bare: NaN };
  let offload = "";
  let round = 0;
  for (const [half, count] of halves.entries()) {
    if (count === 0) continue;
    const sides = await startSides(half === 0);
    const { lmd, direct, server } = sides;
    if (half === 0) rss = sides.rss;
    for (const end = round + count; round < end; round++) {
      log(`round ${round + 1}/${rounds}${half === 0 ? "" : " (started again: llama-server, direct, lmd)"}`);
      // Single stream, then prefill (a few fresh prompts a side: one prompt is short enough for the
      // host's drift to swing it widely), the sides in an order that rotates.
      const single: (() => Promise<void>)[] = [
        async () => void add("decode.lmd", rate(await lmdDecode(lmd.url, "Once upon a time", tokens, 1, sampling))),
        async () => void add("decode.direct", rate(await direct.call<DecodeResult>({ op: "decode", prompt: "Once upon a time", tokens, streams: 1 }))),
      ];
      const prefill: ((salt: number) => Promise<void>)[] = [
        async (salt) => {
          const pl = await lmdGenerate(lmd.url, {
            model: "bench",
            prompt: prose(promptTokens, salt),
            raw: true,
            stream: true,
            options: { ...sampling, num_predict: 1 },
          });
          add("prefill.lmd", pl.promptEvalCount / (pl.ttftMs / 1000));
        },
        async (salt) => {
          const pd = await direct.call<{ ms: number; promptTokens: number }>({ op: "ttft", prompt: prose(promptTokens, salt + 1000) });
          add("prefill.direct", pd.promptTokens / (pd.ms / 1000));
        },
      ];
      if (server) {
        single.push(async () => void add("decode.llama-server", await llamaServerDecode(server.url, "Once upon a time", tokens, sampling)));
        prefill.push(async (salt) => void add("prefill.llama-server", await llamaServerPrefill(server.url, prose(promptTokens, salt + 3000), sampling)));
      }
      // Each workload starts on idle CPUs (bench/procs.ts, settle).
      for (let i = 0; i < single.length; i++) await settle().then(single[(round + i) % single.length]!);
      // The side that goes first after the single-stream decodes changes with the round as well as
      // with the prompt: an order from the salt alone puts the same side there every round whenever
      // PREFILLS is a multiple of the sides.
      for (let p = 0; p < PREFILLS; p++) {
        const salt = round * PREFILLS + p;
        for (let i = 0; i < prefill.length; i++) await settle().then(() => prefill[(round + p + i) % prefill.length]!(salt));
      }
      await settle();
      add("agg4.lmd", rate(await lmdDecode(lmd.url, "Once upon a time", tokens, 4, sampling)));
      await settle();
      add("agg4.direct", rate(await direct.call<DecodeResult>({ op: "decode", prompt: "Once upon a time", tokens, streams: 4 })));
      for (let i = 0; i < 5; i++) {
        add(
          "ttft.lmd",
          (await lmdGenerate(lmd.url, { model: "bench", prompt: `${round}-${i} Hi`, raw: true, stream: true, options: { ...sampling, num_predict: 1 } }))
            .ttftMs,
        );
        add("ttft.direct", (await direct.call<{ ms: number }>({ op: "ttft", prompt: `${round}-${i} Hi` })).ms);
      }
      // Second turn of a conversation with ~1,000 tokens of shared history (the prompt cache).
      const history = prose(args.quick ? 500 : 1000, round + 2000);
      const first = await lmdGenerate(lmd.url, { model: "bench", prompt: history, raw: true, stream: true, options: { ...sampling, num_predict: 8 } });
      const second = await lmdGenerate(lmd.url, {
        model: "bench",
        prompt: " and what happened next?",
        context: first.context,
        raw: true,
        stream: true,
        options: { ...sampling, num_predict: 8 },
      });
      add("turn2.ratio", second.ttftMs / first.ttftMs);
      add("turn1.ttft", first.ttftMs);
      add("turn2.ttft", second.ttftMs);
    }
    // Requests per second is the daemon's HTTP on the CPU, measured by the CPU runs.
    if (half === 0 && !gpu) rps = await httpRps(root, lmd.url, args.quick ? 3 : 10);
    await stopSides(sides);
  }
  const serving = await servingFigures({
    startLmd: (env, extra, onLog) => startLmd(modelFile, env, extra, onLog),
    startServer: args["llama-server"] ? (parallel) => startLlamaServer(root, cache, modelFile, threads, parallel, engine) : undefined,
    rounds: servingRounds,
    tokens,
    probes: args.quick ? 2 : 5,
    warmUpTokens,
    cache,
    modelFile,
    sampling,
    log,
    gpu: gpu !== undefined,
  });

  const m = (k: string) => median(r[k] ?? []);
  const f = (x: number, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : "—");
  const server = args["llama-server"];
  const vs = (a: string, b: string) => (server ? (m(a) / m(b)).toFixed(3) : "—");
  const issue: Row[] = [
    [
      "single-stream decode tok/s, lmd vs llama-server (`-np 1`)",
      server ? `${f(m("decode.lmd"))} vs ${f(m("decode.llama-server"))}` : f(m("decode.lmd")),
      vs("decode.lmd", "decode.llama-server"),
      "≥ 1.0",
    ],
    [
      `prefill tok/s, fresh ~${promptTokens}-token prompt, lmd vs llama-server (client-timed)`,
      server ? `${f(m("prefill.lmd"), 0)} vs ${f(m("prefill.llama-server"), 0)}` : f(m("prefill.lmd"), 0),
      vs("prefill.lmd", "prefill.llama-server"),
      "≥ 1.0",
    ],
    ...serving.rows,
    ...(gpu ? [] : await mixedFigures(modelFile)),
    ...(gpu ? [] : await demoRows()),
  ];
  const other: Row[] = [
    [
      "single-stream decode tok/s, lmd HTTP vs node-llama-cpp direct",
      `${f(m("decode.lmd"))} vs ${f(m("decode.direct"))}`,
      (m("decode.lmd") / m("decode.direct")).toFixed(3),
      "≥ 0.97",
    ],
    [
      "prefill tok/s, lmd HTTP vs direct",
      `${f(m("prefill.lmd"), 0)} vs ${f(m("prefill.direct"), 0)}`,
      (m("prefill.lmd") / m("prefill.direct")).toFixed(3),
      "≥ 0.97",
    ],
    [
      "aggregate decode tok/s, 4 streams, lmd vs direct 4 sequences",
      `${f(m("agg4.lmd"))} vs ${f(m("agg4.direct"))} (1 stream: ${f(m("decode.lmd"))})`,
      (m("agg4.lmd") / m("agg4.direct")).toFixed(3),
      "≥ 0.95, > 1 stream",
    ],
    [
      "warm time to first token, lmd − direct (ms)",
      `${f(m("ttft.lmd"), 2)} − ${f(m("ttft.direct"), 2)}`,
      `${m("ttft.lmd") >= m("ttft.direct") ? "+" : "−"}${Math.abs(m("ttft.lmd") - m("ttft.direct")).toFixed(2)} ms`,
      "≤ +5 ms",
    ],
    ["`GET /api/version` req/s vs bare `node:http`", `${f(rps.lmd, 0)} vs ${f(rps.bare, 0)}`, (rps.lmd / rps.bare).toFixed(3), "≥ 0.8"],
    [
      `second-turn TTFT, ~${args.quick ? 500 : 1000}-token shared history, vs first turn (ms)`,
      `${f(m("turn2.ttft"))} vs ${f(m("turn1.ttft"))}`,
      m("turn2.ratio").toFixed(3),
      "≤ 0.25",
    ],
    ["RSS (MB): daemon idle; daemon and runner with the model loaded", `${f(rssIdle, 0)}; ${f(rss.loaded, 0)} + ${f(rss.runner, 0)}`, "—", "idle ≤ 100"],
  ];
  // KV-cache types and saved prompt prefixes are CPU measurements.
  const memory = gpu ? [] : [...(await memoryRows()), ...(await tokenizeFigures(modelFile))];
  const table = (rows: Row[]) => ["| figure | measured | ratio | target |", "|---|---|---|---|", ...rows.map((row) => `| ${row.join(" | ")} |`)].join("\n");
  const minutes = ((performance.now() - started) / 60_000).toFixed(1);
  process.stdout.write(
    `${table(issue)}\n\n${table(other)}\n\n${memory.length ? `${table(memory)}\n\n` : ""}` +
      `${path.basename(modelFile)}, ${threads} threads, ${rounds} rounds (serving figures: ${servingRounds}), ${tokens} tokens per stream; ` +
      `${minutes} min; load average before: ${loadBefore}, after: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}` +
      `${llamaServerEngine() ? `; ${llamaServerEngine()}` : ""}${offload ? `; ${gpu}, ${offload}` : ""}\n`,
  );
  if (args.json) {
    const rssFigures = { rssIdle, rssLoaded: rss.loaded, rssRunner: rss.runner };
    const run = { model: modelFile, gpu, offload, threads, rounds, servingRounds, tokens, llamaServer: llamaServerEngine() };
    writeFileSync(args.json, JSON.stringify({ ...run, samples: r, serving: serving.samples, threadsChosen: serving.chosen, rps, ...rssFigures }, null, 2));
  }

  // Keep-alive sockets and the daemon's shutdown would otherwise hold the process open.
  process.exit(0);
}

/** The memory rows (bench/memory.ts): KV-cache types and saved prompt prefixes. */
function memoryRows(): Promise<Row[]> {
  const preset = existsSync(args.model) ? "bench-100m" : (args.model as PresetName);
  return memoryFigures({ startLmd: (file, env) => startLmd(file, env), preset, cache, rounds: args.quick ? 1 : 3, tokens, threads, log });
}

/** The tokenizing rows (bench/tokenize.ts). */
function tokenizeFigures(modelFile: string): Promise<Row[]> {
  return tokenizeRows({ startLmd: (env) => startLmd(modelFile, env), rounds: args.quick ? 1 : 3 });
}

/** The mixed-load rows (bench/mixed-run.ts). */
async function mixedFigures(modelFile: string): Promise<Row[]> {
  return (await mixedRows({
    startLmd: (env, extra) => startLmd(modelFile, env, extra),
    startServer: args["llama-server"] ? (parallel, file) => startLlamaServer(root, cache, file, threads, parallel, engine) : undefined,
    model: args.model, cache, rounds: servingRounds, warmUpTokens, quick: args.quick, log,
  })).rows;
}

/**
 * The demo model's rows, where a step is short: one thread, 256-token streams, single-stream decode
 * (`--rounds` 9) and 4 and 8 streams, each against llama-server at ≥ 0.9. This script runs again
 * for each (`--model demo --only single`, then `--only aggregate`) and its table's rows are taken,
 * labelled with the model.
 */
async function demoRows(): Promise<Row[]> {
  const rows: Row[] = [];
  for (const section of ["single", "aggregate"] as const) {
    log(`demo model, 1 thread: ${section}`);
    const argv = ["--model", "demo", "--threads", "1", "--tokens", "256", "--only", section, "--cache", cache];
    argv.push("--rounds", args.quick ? "2" : "9", "--serving-rounds", String(servingRounds), "--warm-up-tokens", String(warmUpTokens));
    if (args["llama-server"]) argv.push("--llama-server", "--llama-server-engine", engine);
    if (args.quick) argv.push("--quick");
    if (args.json) argv.push("--json", args.json.replace(/(\.json)?$/, `.demo-${section}.json`));
    const child = track(spawn(process.execPath, [fileURLToPath(import.meta.url), ...argv], { stdio: ["ignore", "pipe", "inherit"] }));
    let out = "";
    child.stdout!.setEncoding("utf8").on("data", (text: string) => (out += text));
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    if (code !== 0) throw new Error(`the demo model's ${section} rows failed (exit ${code})`);
    const lines = out.trim().split("\n");
    log(`demo model: ${lines.at(-1) ?? ""}`);
    for (const line of lines.filter((l) => l.startsWith("| ") && !l.startsWith("| figure |"))) {
      const [figure, measured, ratio, target] = line.slice(2, -2).split(" | ") as Row;
      const againstServer = figure.includes("vs llama-server") || figure.startsWith("aggregate");
      rows.push([`demo model, 1 thread, ${args.quick ? 32 : 256} tokens: ${figure}`, measured, ratio, againstServer ? "≥ 0.9" : target]);
    }
  }
  return rows;
}

/** `--only memory`, `--only tokenize`, `--only mixed` or `--only demo`: those rows alone. */
async function onlyRows(section: "memory" | "tokenize" | "mixed" | "demo", modelFile: string): Promise<void> {
  const rows =
    section === "memory"
      ? await memoryRows()
      : section === "mixed"
        ? await mixedFigures(modelFile)
        : section === "demo"
          ? await demoRows()
          : await tokenizeFigures(modelFile);
  const minutes = ((performance.now() - started) / 60_000).toFixed(1);
  const sectionRounds = section === "mixed" ? servingRounds : args.quick ? 1 : 3;
  process.stdout.write(
    ["| figure | measured | ratio | target |", "|---|---|---|---|", ...rows.map((row) => `| ${row.join(" | ")} |`)].join("\n") +
      `\n\n${section === "demo" ? "the demo model (each row says how)" : `${args.model}, ${threads} threads, ${sectionRounds} rounds`}; ` +
      `${minutes} min; load average before: ${loadBefore}, after: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}` +
      `${section === "mixed" && llamaServerEngine() ? `; ${llamaServerEngine()}` : ""}\n`,
  );
  process.exit(0);
}

/**
 * `--only single`: single-stream decode alone, lmd (4 slots, as in the full run) against
 * node-llama-cpp direct and llama-server `-np 1`, the three in an order that rotates each round,
 * each warmed up with the measured workload first.
 */
async function onlySingle(modelFile: string): Promise<void> {
  const lmd = await startLmd(modelFile, { SERVICE_NUM_PARALLEL: "4", SERVICE_KEEP_ALIVE: "-1" });
  const direct = startDirect();
  await direct.call({ op: "load", model: modelFile, threads, sequences: 4, contextSize: 4096 });
  const server = args["llama-server"] ? await startLlamaServer(root, cache, modelFile, threads, 1, engine) : undefined;
  const sides: [string, () => Promise<number>][] = [
    ["lmd", async () => rate(await lmdDecode(lmd.url, "Once upon a time", tokens, 1, sampling))],
    ["direct", async () => rate(await direct.call<DecodeResult>({ op: "decode", prompt: "Once upon a time", tokens, streams: 1 }))],
    ...(server ? [["llama-server", () => llamaServerDecode(server.url, "Once upon a time", tokens, sampling)] as [string, () => Promise<number>]] : []),
  ];
  for (let i = 0; i < Math.ceil(warmUpTokens / tokens); i++) for (const [, decode] of sides) await decode();
  const r: Record<string, number[]> = {};
  for (let round = 0; round < rounds; round++) {
    log(`single stream, round ${round + 1}/${rounds}`);
    for (let i = 0; i < sides.length; i++) {
      const [name, decode] = sides[(round + i) % sides.length]!;
      await settle();
      (r[name] ??= []).push(await decode());
    }
  }
  direct.child.send({ op: "exit" });
  await stopProcess(server?.child);
  await stopProcess(lmd.child);
  const m = (k: string) => median(r[k] ?? []);
  const f = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "—");
  const each = (k: string) => (r[k] ?? []).map((x) => x.toFixed(0)).join(", ");
  const rows: Row[] = [
    [
      "single-stream decode tok/s, lmd vs llama-server (`-np 1`)",
      server ? `${f(m("lmd"))} vs ${f(m("llama-server"))} (rounds: lmd ${each("lmd")}; llama-server ${each("llama-server")})` : f(m("lmd")),
      server ? (m("lmd") / m("llama-server")).toFixed(3) : "—",
      "≥ 0.9",
    ],
    ["single-stream decode tok/s, lmd HTTP vs node-llama-cpp direct", `${f(m("lmd"))} vs ${f(m("direct"))}`, (m("lmd") / m("direct")).toFixed(3), "≥ 0.97"],
  ];
  const minutes = ((performance.now() - started) / 60_000).toFixed(1);
  process.stdout.write(
    ["| figure | measured | ratio | target |", "|---|---|---|---|", ...rows.map((row) => `| ${row.join(" | ")} |`)].join("\n") +
      `\n\n${path.basename(modelFile)}, ${threads} threads, ${rounds} rounds, ${tokens} tokens per stream; ${minutes} min; ` +
      `load average before: ${loadBefore}, after: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}${llamaServerEngine() ? `; ${llamaServerEngine()}` : ""}\n`,
  );
  if (args.json)
    writeFileSync(
      args.json,
      JSON.stringify({ model: modelFile, threads, rounds, tokens, only: "single", samples: r, llamaServer: llamaServerEngine() }, null, 2),
    );
  process.exit(0);
}

/** `--only <section>`: one section of the serving figures, its rows and the load. */
async function only(modelFile: string, section: Exclude<Section, "single" | "memory" | "tokenize" | "mixed" | "demo">): Promise<void> {
  const serving = await servingFigures({
    startLmd: (env, extra, onLog) => startLmd(modelFile, env, extra, onLog),
    startServer: args["llama-server"] ? (parallel) => startLlamaServer(root, cache, modelFile, threads, parallel, engine) : undefined,
    rounds: servingRounds,
    tokens,
    probes: 0,
    warmUpTokens,
    cache,
    modelFile,
    sampling,
    log,
    only: section,
    gpu: gpu !== undefined,
  });
  const minutes = ((performance.now() - started) / 60_000).toFixed(1);
  process.stdout.write(
    ["| figure | measured | ratio | target |", "|---|---|---|---|", ...serving.rows.map((row) => `| ${row.join(" | ")} |`)].join("\n") +
      `\n\n${path.basename(modelFile)}, ${threads} threads, ${servingRounds} rounds, ${tokens} tokens per stream; ${minutes} min; ` +
      `load average before: ${loadBefore}, after: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}` +
      `${llamaServerEngine() ? `; ${llamaServerEngine()}` : ""}\n`,
  );
  if (args.json)
    writeFileSync(
      args.json,
      JSON.stringify({ model: modelFile, threads, servingRounds, tokens, only: section, serving: serving.samples, llamaServer: llamaServerEngine() }, null, 2),
    );
  process.exit(0);
}

main().catch((err: unknown) => {
  // fetch's own error says only "fetch failed": its cause says what the connection met.
  const inner = err instanceof Error ? err.cause : undefined;
  const cause = inner === undefined ? "" : `\ncaused by: ${inner instanceof Error ? (inner.stack ?? inner.message) : String(inner)}`;
  const log = args["llama-server"] ? `\nllama-server's log: ${path.join(cache, "llama-server.log")}` : "";
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}${cause}${log}\n`);
  process.exit(1);
});
