/**
 * Memory and recomputation (`npm run bench -- --only memory`, and the end of a full run):
 *
 * - A q8_0 KV cache against f16 on a model of 4 slots × 8k context: `/api/ps` size and the runner's
 *   RSS, single-stream decode speed (interleaved rounds on both daemons at once), and whether the
 *   greedy tokens of a fixed prompt are the same.
 * - Saved prompt prefixes: time to first token of a request with a ~4k-token shared prefix on a
 *   fresh load — after a restart and after an eviction — with the saved prefix against without.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { makeModel, type PresetName } from "../src/gguf/make-model.js";
import { lmdDecode, lmdGenerate, type Sampling } from "./http.js";
import { settle, stopProcess } from "./procs.js";
import { prose } from "./serving.js";
import { median, type Row } from "./serving-run.js";

export interface MemoryOptions {
  /** Starts lmd serving `modelFile` as "bench" with `env` over the benchmark's own. */
  startLmd(modelFile: string, env: Record<string, string>): Promise<{ url: string; child: ChildProcess }>;
  preset: PresetName;
  cache: string;
  rounds: number;
  tokens: number;
  threads: number;
  log(msg: string): void;
}

const greedy: Sampling = { temperature: 0, top_k: 40, top_p: 0.9, min_p: 0, seed: 1, repeat_penalty: 1 };
/** Decode speed is measured sampling, as the other figures are (a greedy answer of random weights may end early). */
const sampled: Sampling = { ...greedy, temperature: 0.8 };

interface PsModel {
  size: number;
  kv_cache_type: string;
}

export async function memoryFigures(o: MemoryOptions): Promise<Row[]> {
  return [...(await kvCacheRows(o)), ...(await prefixRows(o))];
}

async function kvCacheRows(o: MemoryOptions): Promise<Row[]> {
  const file = path.join(o.cache, `${o.preset}-ctx8k.gguf`);
  if (!existsSync(file)) {
    mkdirSync(o.cache, { recursive: true });
    o.log(`writing ${file}`);
    await makeModel(file, { preset: o.preset, contextLength: 8192 });
  }
  const env = { SERVICE_NUM_PARALLEL: "4", SERVICE_CONTEXT_LENGTH: "8192", SERVICE_THREADS: String(o.threads) };
  // The same model on a 256-token context, one slot: what is not the KV cache (weights, buffers).
  const small = await o.startLmd(file, { ...env, SERVICE_NUM_PARALLEL: "1", SERVICE_CONTEXT_LENGTH: "256" });
  await lmdGenerate(small.url, { model: "bench", prompt: "", stream: false });
  const base = ((await (await fetch(`${small.url}/api/ps`)).json()) as { models: PsModel[] }).models[0]!.size;
  await stopProcess(small.child);
  const f16 = await o.startLmd(file, { ...env, SERVICE_KV_CACHE_TYPE: "f16" });
  const q8 = await o.startLmd(file, { ...env, SERVICE_KV_CACHE_TYPE: "q8_0" });
  try {
    const sides = { f16, q8 } as const;
    const ps: Record<string, PsModel> = {};
    const rss: Record<string, number> = {};
    const greedyRuns: Record<string, { token: string; logprob: number }[]> = {};
    for (const [name, side] of Object.entries(sides)) {
      const res = await fetch(`${side.url}/api/generate`, {
        method: "POST",
        body: JSON.stringify({ model: "bench", prompt: "Once upon a time", raw: true, stream: false, logprobs: true, options: { ...greedy, num_predict: 32 } }),
      });
      greedyRuns[name] = ((await res.json()) as { logprobs: { token: string; logprob: number }[] }).logprobs;
      ps[name] = ((await (await fetch(`${side.url}/api/ps`)).json()) as { models: PsModel[] }).models[0]!;
      rss[name] = runnerRss(side.child.pid);
    }
    const rates: Record<string, number[]> = { f16: [], q8: [] };
    for (let round = 0; round < o.rounds; round++) {
      for (const name of round % 2 === 0 ? (["f16", "q8"] as const) : (["q8", "f16"] as const)) {
        await settle();
        const [s] = (await lmdDecode(sides[name].url, "Once upon a time", o.tokens, 1, sampled)).streams;
        // Tokens after the first, over the time they took.
        if (s && s.tokens > 1) rates[name]!.push((s.tokens - 1) / ((s.lastMs - s.firstMs) / 1000));
      }
    }
    // Greedy tokens while both sides agree, and how far apart their log probabilities are there.
    const a = greedyRuns.f16 ?? [];
    const b = greedyRuns.q8 ?? [];
    let same = 0;
    let delta = 0;
    for (; same < a.length && same < b.length && a[same]!.token === b[same]!.token; same++) delta += Math.abs(a[same]!.logprob - b[same]!.logprob);
    const mib = (n: number) => (n / 2 ** 20).toFixed(0);
    return [
      [
        "KV cache q8_0 vs f16, 4 slots × 8k: `/api/ps` size (MiB)",
        `${mib(ps.q8!.size)} vs ${mib(ps.f16!.size)}`,
        (ps.q8!.size / ps.f16!.size).toFixed(3),
        "≤ 0.55",
      ],
      [
        "KV cache q8_0 vs f16, 4 slots × 8k: the cache alone (size − the same model at 256 tokens, MiB)",
        `${mib(ps.q8!.size - base)} vs ${mib(ps.f16!.size - base)}`,
        ((ps.q8!.size - base) / (ps.f16!.size - base)).toFixed(3),
        "≤ 0.55",
      ],
      ["KV cache q8_0 vs f16, 4 slots × 8k: runner RSS (MiB)", `${mib(rss.q8!)} vs ${mib(rss.f16!)}`, (rss.q8! / rss.f16!).toFixed(3), "≤ 0.55"],
      [
        "KV cache q8_0 vs f16: single-stream decode tok/s",
        `${median(rates.q8!).toFixed(1)} vs ${median(rates.f16!).toFixed(1)}`,
        (median(rates.q8!) / median(rates.f16!)).toFixed(3),
        "≥ 0.9",
      ],
      [
        "KV cache q8_0 vs f16: greedy tokens identical; mean abs. Δ logprob over them",
        `${same} of the first 32; ${same ? (delta / same).toFixed(4) : "—"}`,
        "—",
        "32, or Δ reported",
      ],
    ];
  } finally {
    await stopProcess(f16.child);
    await stopProcess(q8.child);
  }
}

/** Runner RSS: the resident memory of the daemon's child processes. */
function runnerRss(daemonPid: number | undefined): number {
  if (daemonPid === undefined) return NaN;
  const children = readFileSync(`/proc/${daemonPid}/task/${daemonPid}/children`, "utf8").trim().split(/\s+/).filter(Boolean);
  let kb = 0;
  for (const pid of children) kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
  return kb * 1024;
}

async function prefixRows(o: MemoryOptions): Promise<Row[]> {
  const file = path.join(o.cache, `${o.preset}.gguf`);
  if (!existsSync(file)) await makeModel(file, { preset: o.preset });
  const dir = mkdtempSync(path.join(o.cache, "prefixes-"));
  const env = (cached: boolean) => ({
    SERVICE_CACHE_DIR: dir,
    SERVICE_CACHE_MAX: cached ? "8GiB" : "0",
    SERVICE_THREADS: String(o.threads),
    SERVICE_KEEP_ALIVE: "-1",
  });
  // ~3,800 tokens of shared prefix, then a question that changes each time.
  const prefix = prose(3800, 42);
  const ask = (url: string, n: number) =>
    lmdGenerate(url, {
      model: "bench",
      prompt: `${prefix}\nQuestion ${n}: what happened next?`,
      raw: true,
      stream: true,
      options: { ...greedy, num_predict: 1 },
    });
  const ttft: Record<string, number[]> = { restartCold: [], restartWarm: [], evictCold: [], evictWarm: [] };
  let promptTokens = 0;
  try {
    for (let round = 0; round < o.rounds; round++) {
      for (const cached of round % 2 === 0 ? [false, true] : [true, false]) {
        // A daemon that evaluated the prefix (and, with the cache, saved it as it stopped), then a fresh one.
        const first = await o.startLmd(file, env(cached));
        const warmUp = await ask(first.url, round * 10);
        promptTokens = warmUp.context.length - 1;
        await stopProcess(first.child);
        const second = await o.startLmd(file, env(cached));
        await lmdGenerate(second.url, { model: "bench", prompt: "", stream: false });
        await settle();
        ttft[cached ? "restartWarm" : "restartCold"]!.push((await ask(second.url, round * 10 + 1)).ttftMs);
        // An eviction: unloaded, then loaded again by the next request.
        await lmdGenerate(second.url, { model: "bench", prompt: "", keep_alive: 0, stream: false });
        await lmdGenerate(second.url, { model: "bench", prompt: "", stream: false });
        await settle();
        ttft[cached ? "evictWarm" : "evictCold"]!.push((await ask(second.url, round * 10 + 2)).ttftMs);
        await stopProcess(second.child);
        if (!cached) rmSync(dir, { recursive: true, force: true });
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const m = (k: string) => median(ttft[k] ?? []);
  return [
    [
      `TTFT after a restart, ~${promptTokens}-token shared prefix: saved prefix vs none (ms)`,
      `${m("restartWarm").toFixed(0)} vs ${m("restartCold").toFixed(0)}`,
      `${(m("restartCold") / m("restartWarm")).toFixed(1)} ×`,
      "≥ 10 ×",
    ],
    [
      `TTFT after an eviction, same prefix: saved prefix vs none (ms)`,
      `${m("evictWarm").toFixed(0)} vs ${m("evictCold").toFixed(0)}`,
      `${(m("evictCold") / m("evictWarm")).toFixed(1)} ×`,
      "≥ 10 ×",
    ],
  ];
}
