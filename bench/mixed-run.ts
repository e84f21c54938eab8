/**
 * The mixed-load rows of `npm run bench` (`--only mixed`; bench/mixed.ts has the workload): lmd
 * with `SERVICE_NUM_PARALLEL=<slots>` against llama-server with `-np <slots>`, same threads and
 * 4096 tokens a slot, for 1, 4, 8 and 16 concurrent clients (16 clients queue for 8 slots on both).
 * The model is the benchmark model's shape with `textOnly` (make-model): greedy decoding never ends
 * by itself, so both servers generate exactly the lengths asked for (lmd has no `ignore_eos`).
 * Interleaved like the aggregate blocks: half the rounds with lmd started first, half with
 * llama-server first; in each round each client count runs on both, the first side alternating.
 */
import type { ChildProcess } from "node:child_process";
import path from "node:path";
import type { PresetName } from "../src/gguf/make-model.js";
import { passFigures, percentile, runPass, workload, type PassFigures } from "./mixed.js";
import { settle, stopProcess } from "./procs.js";
import { cachedModel, type ServerKind } from "./serving.js";
import { median, type Row } from "./serving-run.js";

type Daemon = { url: string; child: ChildProcess };

export interface MixedContext {
  /** lmd with `env` over the benchmark's own, serving `modelFile` as `mixed`. */
  startLmd(env: Record<string, string>, extra: Record<string, { file: string }>): Promise<Daemon>;
  /** llama-server on `modelFile` with `-np parallel`; undefined without --llama-server. */
  startServer?: ((parallel: number, modelFile: string) => Promise<Daemon>) | undefined;
  /** The benchmark's `--model`: a make-model preset (its text-only twin is written) or a GGUF path (used as it is). */
  model: string;
  cache: string;
  rounds: number;
  /** Tokens each side generates in this workload before it is measured. */
  warmUpTokens: number;
  quick: boolean;
  log(msg: string): void;
}

export const MIXED_CLIENTS = [1, 4, 8, 16] as const;
export const MIXED_SLOTS = 8;

const f = (x: number, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : "—");
const ratio = (a: number, b: number) => (Number.isFinite(a / b) ? (a / b).toFixed(3) : "—");

/** The model both servers load: the preset's text-only twin, or the given file. */
async function mixedModel(ctx: MixedContext): Promise<string> {
  if (ctx.model.endsWith(".gguf")) return path.resolve(ctx.model);
  return cachedModel(ctx.cache, `${ctx.model}-text`, { preset: ctx.model as PresetName, textOnly: true });
}

export async function mixedRows(ctx: MixedContext): Promise<{ rows: Row[]; samples: Record<string, PassFigures[]> }> {
  const file = await mixedModel(ctx);
  // Two requests a client: the sixteen-client pass is 32 requests, four of them long prompts.
  const perClient = ctx.quick ? 1 : 2;
  const samples: Record<string, PassFigures[]> = {};
  const halves = ctx.startServer ? [Math.ceil(ctx.rounds / 2), Math.floor(ctx.rounds / 2)] : [ctx.rounds];
  let round = 0;
  for (const [half, count] of halves.entries()) {
    if (count === 0) continue;
    const startLmd = () => ctx.startLmd({ SERVICE_NUM_PARALLEL: String(MIXED_SLOTS), SERVICE_KEEP_ALIVE: "-1" }, { mixed: { file } });
    const startServer = () => ctx.startServer?.(MIXED_SLOTS, file);
    let lmd: Daemon;
    let server: Daemon | undefined;
    if (half === 0) {
      lmd = await startLmd();
      server = await startServer();
    } else {
      server = await startServer();
      lmd = await startLmd();
    }
    const sides: [ServerKind, string][] = [["lmd", lmd.url], ...(server ? [["llama-server", server.url] as [ServerKind, string]] : [])];
    // Warm up on this workload (16 clients) until each side has generated the warm-up tokens, in 3 passes at most.
    for (const [kind, url] of sides) {
      ctx.log(`mixed load: warming up ${kind}`);
      for (let generated = 0, i = 0; generated < ctx.warmUpTokens && i < 3; i++)
        generated += passFigures(await runPass(url, "mixed", workload(16, perClient, 900 + i))).tokens;
    }
    for (const end = round + count; round < end; round++) {
      for (const clients of MIXED_CLIENTS) {
        ctx.log(`mixed load: round ${round + 1}/${ctx.rounds}, ${clients} clients`);
        const requests = workload(clients, perClient, 1 + round * 100 + clients);
        const generated = new Set<number>();
        for (const [kind, url] of (round + clients) % 2 ? [...sides].reverse() : sides) {
          await settle();
          const figures = passFigures(await runPass(url, "mixed", requests));
          (samples[`${clients}.${kind}`] ??= []).push(figures);
          generated.add(figures.tokens);
        }
        // Each side must have done the same work: a difference means a stream ended early.
        if (generated.size > 1) ctx.log(`mixed load: the sides generated different token counts (${[...generated].join(" vs ")})`);
      }
    }
    await stopProcess(lmd.child);
    await stopProcess(server?.child);
  }
  return { rows: rows(samples, server(ctx)), samples };
}

const server = (ctx: MixedContext) => ctx.startServer !== undefined;

/** Rows of the report: one per figure, each client count's value in turn. */
function rows(samples: Record<string, PassFigures[]>, ls: boolean): Row[] {
  const passes = (n: number, kind: ServerKind) => samples[`${n}.${kind}`] ?? [];
  // Throughput and the longest stall: the median of the rounds; latencies: percentiles of every round's samples.
  const rate = (n: number, kind: ServerKind) => median(passes(n, kind).map((p) => p.rate));
  const stall = (n: number, kind: ServerKind) =>
    median(
      passes(n, kind)
        .map((p) => p.stall)
        .filter((x) => !Number.isNaN(x)),
    );
  const longTtft = (n: number, kind: ServerKind) => median(passes(n, kind).flatMap((p) => p.longTtft));
  const pct = (key: "ttft" | "itl", p: number) => (n: number, kind: ServerKind) =>
    percentile(
      passes(n, kind).flatMap((x) => x[key]),
      p,
    );
  const clients = MIXED_CLIENTS;
  const longTokens = Object.values(samples)
    .flat()
    .flatMap((p) => p.longTokens);
  const longRange = longTokens.length ? `${Math.min(...longTokens)}–${Math.max(...longTokens)}` : "2k–3.8k";
  const label = (what: string) => `mixed load, ${clients.join("/")} clients (\`SERVICE_NUM_PARALLEL=${MIXED_SLOTS}\` vs \`-np ${MIXED_SLOTS}\`): ${what}`;
  const each = (g: (n: number, kind: ServerKind) => number, digits: number, kind: ServerKind) => clients.map((n) => f(g(n, kind), digits)).join(" / ");
  const measured = (g: (n: number, kind: ServerKind) => number, digits = 1) =>
    ls ? `${each(g, digits, "lmd")} vs ${each(g, digits, "llama-server")}` : each(g, digits, "lmd");
  const ratios = (g: (n: number, kind: ServerKind) => number) => (ls ? clients.map((n) => ratio(g(n, "lmd"), g(n, "llama-server"))).join(" / ") : "—");
  const both = (a: (n: number, k: ServerKind) => number, b: (n: number, k: ServerKind) => number, digits: number, kind: ServerKind) =>
    clients.map((n) => `${f(a(n, kind), digits)}, ${f(b(n, kind), digits)}`).join(" / ");
  const pair = (a: (n: number, k: ServerKind) => number, b: (n: number, k: ServerKind) => number, digits = 1) =>
    ls ? `${both(a, b, digits, "lmd")} vs ${both(a, b, digits, "llama-server")}` : both(a, b, digits, "lmd");
  return [
    [label("generated tok/s"), measured(rate), ratios(rate), "≥ 0.95"],
    [label("time to first token p50, p99 (ms); ratio of p99"), pair(pct("ttft", 50), pct("ttft", 99), 0), ratios(pct("ttft", 99)), "—"],
    [label("inter-token latency of running streams p50, p99 (ms); ratio of p99"), pair(pct("itl", 50), pct("itl", 99)), ratios(pct("itl", 99)), "≤ 1.0"],
    [
      label(`longest stall of a running stream while a long prompt (${longRange} tokens) waits for its first token (ms; the long prompts' median TTFT)`),
      pair(stall, longTtft, 0),
      ratios(stall),
      "—",
    ],
  ];
}
