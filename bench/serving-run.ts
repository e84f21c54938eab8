/**
 * Orchestrates the serving figures (bench/serving.ts) for bench/run.ts: each block starts the
 * daemons it needs, measures in interleaved rounds, stops them, and returns table rows.
 */
import type { ChildProcess } from "node:child_process";
import { aggregateRate, cachedModel, cores, lmdSingle, llamaServerStreams, speculativeRun, startHog } from "./serving.js";
import { lmdDecode, type Sampling } from "./http.js";

type Daemon = { url: string; child: ChildProcess };
type Row = [string, string, string, string];

export interface ServingContext {
  startLmd(env: Record<string, string>, extra?: Record<string, { file: string; params?: Record<string, unknown> }>): Promise<Daemon>;
  /** llama-server with `-np parallel`; undefined without --llama-server. */
  startServer?: ((parallel: number) => Promise<Daemon>) | undefined;
  rounds: number;
  tokens: number;
  cache: string;
  sampling: Sampling;
  log(msg: string): void;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0 ? NaN : s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function stop(d: Daemon | undefined): Promise<void> {
  if (!d || d.child.exitCode !== null) return;
  const exited = new Promise((r) => d.child.once("exit", r));
  d.child.kill("SIGTERM");
  await exited;
}

export async function servingFigures(ctx: ServingContext): Promise<{ rows: Row[]; samples: Record<string, number[]> }> {
  const samples: Record<string, number[]> = {};
  const add = (k: string, v: number) => (samples[k] ??= []).push(v);
  const m = (k: string) => median(samples[k] ?? []);
  const rows: Row[] = [];

  // Aggregate decode, 4 and 8 concurrent streams, against llama-server -np 4 / -np 8.
  for (const n of [4, 8]) {
    ctx.log(`aggregate, ${n} streams`);
    const lmd = await ctx.startLmd({ SERVICE_NUM_PARALLEL: String(n), SERVICE_KEEP_ALIVE: "-1" });
    const server = await ctx.startServer?.(n);
    for (let round = 0; round < ctx.rounds; round++) {
      add(`agg${n}.lmd`, aggregateRate((await lmdDecode(lmd.url, `Once upon a time ${round}`, ctx.tokens, n, ctx.sampling)).streams));
      if (server) add(`agg${n}.llama-server`, aggregateRate(await llamaServerStreams(server.url, `Once upon a time ${round}`, ctx.tokens, n, ctx.sampling)));
    }
    await stop(lmd);
    await stop(server);
    rows.push([`aggregate decode tokens/s, ${n} streams (NUM_PARALLEL ${n} vs -np ${n})`, server ? `${m(`agg${n}.lmd`).toFixed(1)} vs ${m(`agg${n}.llama-server`).toFixed(1)}` : m(`agg${n}.lmd`).toFixed(1), server ? (m(`agg${n}.lmd`) / m(`agg${n}.llama-server`)).toFixed(3) : "—", "≥ 1.0"]);
  }

  // A busy host: a CPU hog pinned to core 0. Each thread count, and lmd's own choice (SERVICE_THREADS unset).
  ctx.log("busy host");
  const counts = Array.from({ length: cores() }, (_, i) => String(i + 1));
  for (const threads of [...counts, "auto"]) {
    for (const busy of [false, true]) {
      const hog = busy ? startHog(600) : undefined;
      if (hog) await new Promise((r) => setTimeout(r, 300));
      // A load chooses its threads when it starts: the daemon starts after the hog.
      const lmd = await ctx.startLmd(threads === "auto" ? { SERVICE_THREADS: "" } : { SERVICE_THREADS: threads });
      for (let round = 0; round < ctx.rounds; round++) add(`busy.${threads}.${busy ? "hog" : "quiet"}`, await lmdSingle(lmd.url, "bench", Math.min(ctx.tokens, 64), ctx.sampling, round));
      await stop(lmd);
      hog?.kill("SIGKILL");
    }
    const q = m(`busy.${threads}.quiet`);
    const h = m(`busy.${threads}.hog`);
    rows.push([`decode tokens/s, ${threads === "auto" ? "automatic threads" : `${threads} thread(s)`}: quiet → one core taken`, `${q.toFixed(1)} → ${h.toFixed(1)}`, (h / q).toFixed(3), threads === "auto" ? "≥ 0.45" : "—"]);
  }
  const quietBest = Math.max(...counts.map((c) => m(`busy.${c}.quiet`)));
  rows.push(["busy-host decode (automatic) vs the best quiet figure", `${m("busy.auto.hog").toFixed(1)} vs ${quietBest.toFixed(1)}`, (m("busy.auto.hog") / quietBest).toFixed(3), "≥ 0.45"]);

  // Speculative decoding: a 1B target whose extra layers are identity over a 1-layer draft of the
  // same weights (every draft token is the target's own choice), and an unrelated 1-layer draft.
  ctx.log("speculative decoding");
  const shape = { preset: "bench-1b", layers: 1, seed: 11 } as const;
  const draft = await cachedModel(ctx.cache, "spec-draft", shape);
  const target = await cachedModel(ctx.cache, "spec-target", { ...shape, identityLayers: 19 });
  const unrelated = await cachedModel(ctx.cache, "spec-unrelated", { ...shape, seed: 12 });
  // draft_p_min 0: random weights are never confident, so the default 0.6 would draft nothing.
  const lmd = await ctx.startLmd({ SERVICE_MAX_LOADED_MODELS: "1" }, {
    "spec-target": { file: target },
    "spec-draft": { file: draft },
    "spec-unrelated": { file: unrelated },
    "spec-with-draft": { file: target, params: { draft: "spec-draft", draft_p_min: 0 } },
    "spec-with-unrelated": { file: target, params: { draft: "spec-unrelated", draft_p_min: 0 } },
    "spec-with-unrelated-default": { file: target, params: { draft: "spec-unrelated" } },
  });
  const n = Math.min(ctx.tokens, 64);
  let identical = true;
  for (let round = 0; round < ctx.rounds; round++) {
    const plain = await speculativeRun(lmd.url, "spec-target", n, round);
    add("spec.plain", plain.rate);
    for (const variant of ["spec-with-draft", "spec-with-unrelated", "spec-with-unrelated-default"]) {
      const r = await speculativeRun(lmd.url, variant, n, round);
      add(`${variant}.rate`, r.rate);
      add(`${variant}.acceptance`, r.drafted ? r.accepted / r.drafted : 0);
      identical &&= JSON.stringify(r.context) === JSON.stringify(plain.context);
    }
  }
  await stop(lmd);
  const plain = m("spec.plain");
  const label: Record<string, string> = {
    "spec-with-draft": "identity-layer pair (draft_p_min 0)",
    "spec-with-unrelated": "unrelated draft, draft_p_min 0 (worst case)",
    "spec-with-unrelated-default": "unrelated draft, default draft_p_min 0.6",
  };
  for (const [variant, text] of Object.entries(label)) {
    rows.push([`speculative decode tokens/s, 1B target: ${text}`, `${m(`${variant}.rate`).toFixed(2)} vs ${plain.toFixed(2)} plain, ${(100 * m(`${variant}.acceptance`)).toFixed(0)}% accepted`, (m(`${variant}.rate`) / plain).toFixed(3), variant === "spec-with-draft" ? "≥ 1.5" : "≥ 0.9"]);
  }
  rows.push(["speculative output equals plain greedy output", identical ? "identical in every round" : "DIFFERENT", "—", "identical"]);
  return { rows, samples };
}
