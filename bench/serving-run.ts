/**
 * Orchestrates the serving figures (bench/serving.ts) for bench/run.ts: each block starts the
 * daemons it needs, measures in interleaved rounds, stops them, and returns table rows.
 */
import type { ChildProcess } from "node:child_process";
import {
  aggregateRate,
  backgroundStreams,
  cachedModel,
  cores,
  lmdSingle,
  llamaServerStreams,
  probeTtft,
  speculativeRun,
  startHog,
  stopHog,
  type ServerKind,
  type SpeculativeRun,
  type Stream,
} from "./serving.js";
import { lmdDecode, lmdGenerate, type Sampling } from "./http.js";
import { settle, stopProcess } from "./procs.js";

type Daemon = { url: string; child: ChildProcess };
export type Row = [string, string, string, string];

export interface ServingContext {
  /** `onLog` sees each line of the daemon's log (stdout), for the automatic thread choice. */
  startLmd(
    env: Record<string, string>,
    extra?: Record<string, { file: string; params?: Record<string, unknown> }>,
    onLog?: (line: string) => void,
  ): Promise<Daemon>;
  /** llama-server with `-np parallel`; undefined without --llama-server. */
  startServer?: ((parallel: number) => Promise<Daemon>) | undefined;
  rounds: number;
  tokens: number;
  /** New requests timed per round while others stream. */
  probes: number;
  /** Tokens each server generates before an aggregate block measures (at least 2 rounds of its workload). */
  warmUpTokens: number;
  cache: string;
  /** The benchmark's model file (the two-models block serves it under a second name too). */
  modelFile: string;
  sampling: Sampling;
  log(msg: string): void;
  /**
   * `--only <section>`: that section alone (`aggregate`: 4 and 8 streams, without the TTFT-under-load probes; `busy`: the
   * busy-host and two-models rows; `speculative`).
   */
  only?: "aggregate" | "busy" | "speculative" | undefined;
  /** A GPU run (`--gpu`): the aggregate and TTFT rows only; the busy-host, two-models and speculative blocks measure CPU threads and a 1B pair on the CPU. */
  gpu?: boolean | undefined;
}

type Samples = Record<string, number[]>;

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0 ? NaN : s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
/** Aggregate runs a side in each serving round. */
const AGGREGATE_RUNS = 5;
/** A new request with no first token after this long while others stream is counted as starved. */
const STARVED_MS = 10_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const f = (x: number, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : "—");
const ratio = (a: number, b: number) => (Number.isFinite(a / b) ? (a / b).toFixed(3) : "—");

async function stop(d: Daemon | undefined): Promise<void> {
  await stopProcess(d?.child);
}

/** Aggregate decode with n streams, lmd SERVICE_NUM_PARALLEL=n against llama-server -np n; with 4, the TTFT of a new request while 3 others stream. */
async function aggregate(ctx: ServingContext, n: number, add: (k: string, v: number) => void): Promise<void> {
  ctx.log(`aggregate, ${n} streams${n === 4 && ctx.only === undefined ? "; time to first token while 3 others stream" : ""}`);
  // Of two servers started one after the other, the second measures faster in interleaved rounds
  // (docs/benchmarks.md, "Method"): the
  // first half of the rounds runs with lmd started first, the second half with both started again
  // in the other order.
  const halves = ctx.startServer ? [Math.ceil(ctx.rounds / 2), Math.floor(ctx.rounds / 2)] : [ctx.rounds];
  let first = 0;
  for (const [half, rounds] of halves.entries()) {
    if (rounds === 0) continue;
    let lmd: Daemon;
    let server: Daemon | undefined;
    if (half === 0) {
      lmd = await ctx.startLmd({ SERVICE_NUM_PARALLEL: String(n), SERVICE_KEEP_ALIVE: "-1" });
      server = await ctx.startServer?.(n);
    } else {
      server = await ctx.startServer?.(n);
      lmd = await ctx.startLmd({ SERVICE_NUM_PARALLEL: String(n), SERVICE_KEEP_ALIVE: "-1" });
    }
    await measure(ctx, n, add, lmd, server, first, first + rounds);
    first += rounds;
    await stop(lmd);
    await stop(server);
  }
}

/** Rounds [from, to) of an aggregate block on servers already started. */
async function measure(
  ctx: ServingContext,
  n: number,
  add: (k: string, v: number) => void,
  lmd: Daemon,
  server: Daemon | undefined,
  from: number,
  to: number,
): Promise<void> {
  const targets: [ServerKind, string][] = [["lmd", lmd.url], ...(server ? [["llama-server", server.url] as [ServerKind, string]] : [])];
  const decode = (kind: ServerKind, url: string, round: number) =>
    kind === "lmd"
      ? lmdDecode(url, `Once upon a time ${round}`, ctx.tokens, n, ctx.sampling).then((r) => r.streams)
      : llamaServerStreams(url, `Once upon a time ${round}`, ctx.tokens, n, ctx.sampling);
  // Load, then warm up with the measured workload: a fresh daemon's first few thousand tokens run
  // slower while V8 compiles its per-token JavaScript on background threads, which take CPU time from
  // the decoding threads (docs/benchmarks.md, "Method"); llama-server has no such ramp.
  const warmUps = Math.max(2, Math.ceil(ctx.warmUpTokens / (n * ctx.tokens)));
  for (let warmup = -warmUps; warmup < 0; warmup++) for (const [kind, url] of targets) await decode(kind, url, warmup).then(() => undefined);
  // A few runs a side each round (one run is short enough for the host's drift to swing it), in
  // turns, alternating which server goes first so a drift falls on both.
  for (let run = from * AGGREGATE_RUNS; run < to * AGGREGATE_RUNS; run++) {
    for (const [kind, url] of run % 2 ? [...targets].reverse() : targets) {
      await settle();
      const streams: Stream[] = await decode(kind, url, run);
      add(`agg${n}.${kind}`, aggregateRate(streams, ctx.tokens));
      // How long the last stream waited for its first token after the first stream got one: all n
      // should decode together, so this should be about one prompt evaluation, not a stream's length.
      add(`agg${n}.spread.${kind}`, Math.max(...streams.map((x) => x.firstMs)) - Math.min(...streams.map((x) => x.firstMs)));
    }
  }
  if (n === 4 && ctx.only === undefined) {
    for (let round = from; round < to; round++) {
      for (const [kind, url] of round % 2 ? [...targets].reverse() : targets) {
        await settle();
        add(`ttft.idle.${kind}`, await probeTtft(kind, url, ctx.sampling, round * 100));
        await settle();
        let bg = backgroundStreams(kind, url, n - 1, ctx.sampling, round);
        await bg.ready;
        for (let i = 0; i < ctx.probes; i++) {
          await sleep(50 + ((i * 37) % 100)); // arrive at different points of the decode loop
          // A request that gets no first token while the others stream is starved: stop the others
          // (it then completes, and its time counts), note it, and start them again for the next one.
          const probe = probeTtft(kind, url, ctx.sampling, round * 100 + i + 1);
          const timer = setTimeout(() => {
            ctx.log(`${kind}: a new request got no first token in ${STARVED_MS / 1000} s while ${n - 1} others streamed; stopping them`);
            add(`ttft.starved.${kind}`, 1);
            void bg.stop();
          }, STARVED_MS);
          add(`ttft.load.${kind}`, await probe);
          clearTimeout(timer);
          if (bg.stopped()) {
            await bg.stop();
            bg = backgroundStreams(kind, url, n - 1, ctx.sampling, round * 10 + i);
            await bg.ready;
          }
        }
        await bg.stop();
      }
    }
  }
}

/** Decode on a quiet host and with a CPU hog pinned to core 0, for each thread count and lmd's automatic choice. */
async function busyHost(ctx: ServingContext, add: (k: string, v: number) => void): Promise<Record<string, string>> {
  ctx.log("busy host");
  const tokens = Math.min(ctx.tokens, 64);
  const hogSeconds = 120; // a bound even if the benchmark dies before it kills the hog
  const chosen: Record<string, string> = {};
  // Each daemon warms up like the other blocks' (~6,144 tokens, Method): with the hog, V8 compiling a
  // cold daemon's JavaScript competes with the one decoding thread for the one free core.
  const warm = async (d: Daemon) => {
    for (let i = 0; i < Math.ceil(ctx.warmUpTokens / 512); i++) await lmdSingle(d.url, "bench", Math.min(512, ctx.warmUpTokens), ctx.sampling, -1 - i);
  };
  for (const threads of Array.from({ length: cores() }, (_, i) => String(i + 1))) {
    const lmd = await ctx.startLmd({ SERVICE_THREADS: threads, SERVICE_KEEP_ALIVE: "-1" });
    await warm(lmd);
    for (let round = 0; round < ctx.rounds; round++) {
      add(`busy.${threads}.quiet`, await lmdSingle(lmd.url, "bench", tokens, ctx.sampling, round));
      const hog = startHog(hogSeconds);
      await sleep(300);
      add(`busy.${threads}.hog`, await lmdSingle(lmd.url, "bench", tokens, ctx.sampling, round));
      await stopHog(hog);
    }
    await stop(lmd);
  }
  // The automatic rule chooses at load time, so one daemon loads on the quiet host and one with the hog running.
  const choice = (tag: string) => (line: string) => {
    if (line.includes("threads chosen from the free cores")) {
      const j = JSON.parse(line) as { threads?: number; busy?: number };
      chosen[tag] = `${j.threads} (busy ${j.busy})`;
    }
    if (line.includes('"threads changed"')) threadsNow[tag] = (JSON.parse(line) as { to: number }).to;
  };
  // What the daemon decodes with after its governor's changes (src/runner/threads.ts), and each round's.
  const threadsNow: Record<string, number> = {};
  const seen: Record<string, number[]> = { quiet: [], hog: [], later: [] };
  // The governor looks once a second while a generation runs: 3 s of decoding let it settle.
  const settleThreads = async (d: Daemon, salt: number) => {
    const end = performance.now() + 3000;
    for (let i = 0; performance.now() < end; i++) await lmdSingle(d.url, "bench", tokens, ctx.sampling, salt * 100 + i);
  };
  const quiet = await ctx.startLmd({ SERVICE_THREADS: "", SERVICE_KEEP_ALIVE: "-1" }, {}, choice("quiet"));
  await warm(quiet);
  let hog = startHog(hogSeconds);
  await sleep(300);
  const busy = await ctx.startLmd({ SERVICE_THREADS: "", SERVICE_KEEP_ALIVE: "-1" }, {}, choice("hog"));
  await warm(busy);
  await stopHog(hog);
  for (let round = 0; round < ctx.rounds; round++) {
    await settleThreads(quiet, -1 - round);
    seen.quiet!.push(threadsNow.quiet ?? Number.parseInt(chosen.quiet ?? "0"));
    add("busy.auto.quiet", await lmdSingle(quiet.url, "bench", tokens, ctx.sampling, round));
    hog = startHog(hogSeconds);
    await sleep(300);
    // Prepared as the quiet figure is, by 3 s of decoding (here beside the hog): straight after the
    // seconds it idled while the other daemon ran, its first tokens decode slower (Method).
    await settleThreads(busy, -200 - round);
    seen.hog!.push(threadsNow.hog ?? Number.parseInt(chosen.hog ?? "0"));
    add("busy.auto.hog", await lmdSingle(busy.url, "bench", tokens, ctx.sampling, round));
    // The daemon loaded on the quiet host, with the hog arriving after its load.
    await settleThreads(quiet, -100 - round);
    seen.later!.push(threadsNow.quiet ?? Number.parseInt(chosen.quiet ?? "0"));
    add("busy.auto.later", await lmdSingle(quiet.url, "bench", tokens, ctx.sampling, round));
    await stopHog(hog);
  }
  chosen.quietRounds = seen.quiet!.join(", ");
  chosen.hogRounds = seen.hog!.join(", ");
  chosen.laterRounds = seen.later!.join(", ");
  await stop(quiet);
  await stop(busy);
  return chosen;
}

/**
 * Two models decoding at once, each in its runner: the bench model under a second name. Each other's
 * runner is then a busy neighbour. Once with `SERVICE_THREADS` set to every core (each runner keeps
 * them), once with the default rule (each runner's governor changes its threads while it serves).
 * Each figure follows 3 s of the same decoding (alone, or both at once), so the governor has
 * settled; "alone" is one model decoding while the other idles.
 */
async function twoModels(ctx: ServingContext, add: (k: string, v: number) => void): Promise<void> {
  ctx.log("two models at once");
  const tokens = Math.min(ctx.tokens, 64);
  const names = ["bench", "bench-b"] as const;
  // Both at once with every core each, decoding collapses to ~1 tok/s: a generation here stops
  // after 5 s, its rate then counted from the tokens that came.
  const single = async (url: string, model: string, salt: number) => {
    const g = await lmdGenerate(
      url,
      { model, prompt: `Once upon a time ${salt}`, raw: true, stream: true, options: { ...ctx.sampling, num_predict: tokens } },
      performance.now(),
      AbortSignal.timeout(5000),
    );
    return g.evalCount > 1 && g.lastMs > g.firstMs ? (g.evalCount - 1) / ((g.lastMs - g.firstMs) / 1000) : 0;
  };
  const decodeFor = async (url: string, models: readonly string[], ms: number, salt: number) => {
    const end = performance.now() + ms;
    for (let i = 0; performance.now() < end; i++) await Promise.all(models.map((m) => single(url, m, salt * 100 + i)));
  };
  for (const [tag, threads] of [["fixed", String(cores())], ["auto", ""]] as const) {
    const lmd = await ctx.startLmd(
      { SERVICE_THREADS: threads, SERVICE_KEEP_ALIVE: "-1", SERVICE_MAX_LOADED_MODELS: "2" },
      { "bench-b": { file: ctx.modelFile } },
    );
    // The daemon warms up with the usual ~6,144 tokens, half through each model's runner.
    for (const m of names) for (let i = 0; i < Math.ceil(ctx.warmUpTokens / 1024); i++) await lmdSingle(lmd.url, m, 512, ctx.sampling, -1 - i);
    for (let round = 0; round < ctx.rounds; round++) {
      for (const m of names) {
        await decodeFor(lmd.url, [m], 3000, -1 - round);
        add(`two.${tag}.alone`, await single(lmd.url, m, round));
      }
      await decodeFor(lmd.url, names, 3000, -100 - round);
      const both = await Promise.all(names.map((m) => single(lmd.url, m, round)));
      for (const rate of both) add(`two.${tag}.together`, rate);
    }
    await stop(lmd);
  }
}

/**
 * Speculative decoding: a 1B target whose extra layers are identity over a 1-layer draft of the
 * same weights (every draft token is the target's own choice), and an unrelated 1-layer draft.
 * Greedy; the output with a draft must equal the plain output token for token.
 */
async function speculative(ctx: ServingContext, add: (k: string, v: number) => void): Promise<boolean> {
  ctx.log("speculative decoding");
  const shape = { preset: "bench-1b", layers: 1, seed: 11 } as const;
  const draft = await cachedModel(ctx.cache, "spec-draft", shape);
  const target = await cachedModel(ctx.cache, "spec-target", { ...shape, identityLayers: 19 });
  const unrelated = await cachedModel(ctx.cache, "spec-unrelated", { ...shape, seed: 12 });
  // draft_p_min 0: random weights are never confident, so the default 0.6 would draft nothing.
  // Every variant is its own resident runner (the weights are one mmapped file in the page cache),
  // warmed up before the rounds, so no measurement follows a load.
  const variants = ["spec-target", "spec-with-draft", "spec-with-unrelated", "spec-with-unrelated-default"];
  const lmd = await ctx.startLmd({ SERVICE_MAX_LOADED_MODELS: String(variants.length), SERVICE_NUM_PARALLEL: "1", SERVICE_KEEP_ALIVE: "-1" }, {
    "spec-target": { file: target },
    "spec-draft": { file: draft },
    "spec-unrelated": { file: unrelated },
    "spec-with-draft": { file: target, params: { draft: "spec-draft", draft_p_min: 0 } },
    "spec-with-unrelated": { file: target, params: { draft: "spec-unrelated", draft_p_min: 0 } },
    "spec-with-unrelated-default": { file: target, params: { draft: "spec-unrelated" } },
  });
  const n = Math.min(ctx.tokens, 64);
  for (const variant of variants) await speculativeRun(lmd.url, variant, 4, -1);
  let identical = true;
  for (let round = 0; round < ctx.rounds; round++) {
    const runs: Record<string, SpeculativeRun> = {};
    // The order rotates by round, so a drift in the machine's speed falls on every variant.
    for (let i = 0; i < variants.length; i++) {
      const variant = variants[(round + i) % variants.length]!;
      const r = await speculativeRun(lmd.url, variant, n, round);
      runs[variant] = r;
      add(variant === "spec-target" ? "spec.plain" : `${variant}.rate`, r.rate);
      if (variant !== "spec-target") {
        add(`${variant}.acceptance`, r.drafted ? r.accepted / r.drafted : 0);
        add(`${variant}.drafted`, r.drafted);
      }
    }
    const plain = runs["spec-target"]!;
    for (const variant of variants.slice(1)) {
      const same = plain.context.length > 0 && JSON.stringify(runs[variant]!.context) === JSON.stringify(plain.context);
      if (!same) ctx.log(`speculative: ${variant} output differs from plain greedy output in round ${round + 1}`);
      identical &&= same;
    }
  }
  await stop(lmd);
  return identical;
}

/** Runs every serving block (or the one `only` names); returns the issue-15 rows after the single-stream ones. */
export async function servingFigures(ctx: ServingContext): Promise<{ rows: Row[]; samples: Samples; chosen: Record<string, string> }> {
  const samples: Samples = {};
  const add = (k: string, v: number) => (samples[k] ??= []).push(v);
  const m = (k: string) => median(samples[k] ?? []);
  const rows: Row[] = [];
  let chosen: Record<string, string> = {};
  if (ctx.only !== "speculative") chosen = await throughputRows(ctx, samples, rows);
  if (ctx.only === "aggregate" || ctx.only === "busy" || ctx.gpu) return { rows, samples, chosen };
  const identical = await speculative(ctx, add);
  const plain = m("spec.plain");
  const label: Record<string, [string, string]> = {
    "spec-with-draft": ["identity-layer pair (`draft_p_min` 0)", "≥ 1.5"],
    "spec-with-unrelated": ["unrelated draft, `draft_p_min` 0 (drafts always, worst case)", "≥ 0.9"],
    "spec-with-unrelated-default": ["unrelated draft, default `draft_p_min` 0.6", "≥ 0.9"],
  };
  for (const [variant, [text, target]] of Object.entries(label)) {
    rows.push([
      `speculative decode tok/s, 1B target, greedy: ${text}`,
      `${f(m(`${variant}.rate`), 2)} vs ${f(plain, 2)} plain, ` +
        `${f(m(`${variant}.drafted`), 0)} tokens drafted per ${Math.min(ctx.tokens, 64)}, ${f(100 * m(`${variant}.acceptance`), 0)}% accepted`,
      ratio(m(`${variant}.rate`), plain),
      target,
    ]);
  }
  rows.push(["speculative output equals plain greedy output (every variant, every round)", identical ? "identical" : "**DIFFERENT**", "—", "identical"]);
  return { rows, samples, chosen };
}

/** The aggregate, TTFT-under-load, busy-host and two-models rows (every serving figure but the speculative ones). */
async function throughputRows(ctx: ServingContext, samples: Samples, rows: Row[]): Promise<Record<string, string>> {
  const add = (k: string, v: number) => (samples[k] ??= []).push(v);
  const m = (k: string) => median(samples[k] ?? []);
  const ls = ctx.startServer !== undefined;
  if (ctx.only !== "busy") {
    for (const n of [4, 8]) {
      await aggregate(ctx, n, add);
      const spread = ls
        ? ` (first tokens spread over ${f(m(`agg${n}.spread.lmd`), 0)} vs ${f(m(`agg${n}.spread.llama-server`), 0)} ms)`
        : ` (first tokens spread over ${f(m(`agg${n}.spread.lmd`), 0)} ms)`;
      rows.push([
        `aggregate decode tok/s, ${n} streams (\`SERVICE_NUM_PARALLEL=${n}\` vs \`-np ${n}\`)`,
        (ls ? `${f(m(`agg${n}.lmd`))} vs ${f(m(`agg${n}.llama-server`))}` : f(m(`agg${n}.lmd`))) + spread,
        ls ? ratio(m(`agg${n}.lmd`), m(`agg${n}.llama-server`)) : "—",
        "≥ 1.0",
      ]);
    }
    if (ctx.only === "aggregate") return {};
    const starved = (kind: ServerKind) => {
      const k = (samples[`ttft.starved.${kind}`] ?? []).length;
      return k ? `, **${k} of ${(samples[`ttft.load.${kind}`] ?? []).length} got no token until the others were stopped (> ${STARVED_MS / 1000} s)**` : "";
    };
    rows.push([
      "TTFT of a new ~64-token request while 3 others stream, ms (idle server in brackets)",
      (ls
        ? `${f(m("ttft.load.lmd"))} vs ${f(m("ttft.load.llama-server"))} (${f(m("ttft.idle.lmd"))} vs ${f(m("ttft.idle.llama-server"))})`
        : `${f(m("ttft.load.lmd"))} (${f(m("ttft.idle.lmd"))})`) +
        starved("lmd") +
        (ls ? starved("llama-server").replace(", **", ", **llama-server: ") : ""),
      ls ? ratio(m("ttft.load.lmd"), m("ttft.load.llama-server")) : "—",
      "≤ 1.0",
    ]);
  }

  if (ctx.gpu) return {};
  const chosen = await busyHost(ctx, add);
  await twoModels(ctx, add);
  for (let t = 1; t <= cores(); t++) {
    rows.push([
      `busy host: decode tok/s, \`SERVICE_THREADS=${t}\`, quiet → CPU hog on core 0`,
      `${f(m(`busy.${t}.quiet`))} → ${f(m(`busy.${t}.hog`))}`,
      ratio(m(`busy.${t}.hog`), m(`busy.${t}.quiet`)),
      "—",
    ]);
  }
  rows.push([
    `busy host: decode tok/s, default rule (threads chosen at load: ${chosen.quiet ?? "?"} quiet, ${chosen.hog ?? "?"} with the hog; after 3 s of decoding: ${chosen.quietRounds ?? "?"} quiet, ${chosen.hogRounds ?? "?"} with the hog), quiet → hog`,
    `${f(m("busy.auto.quiet"))} → ${f(m("busy.auto.hog"))}`,
    ratio(m("busy.auto.hog"), m("busy.auto.quiet")),
    "≥ 0.45",
  ]);
  rows.push([
    `busy host: decode tok/s, default rule, loaded on the quiet host and the hog arriving after (threads after 3 s of decoding: ${chosen.quietRounds ?? "?"} quiet, ${chosen.laterRounds ?? "?"} with the hog), quiet → hog`,
    `${f(m("busy.auto.quiet"))} → ${f(m("busy.auto.later"))}`,
    ratio(m("busy.auto.later"), m("busy.auto.quiet")),
    "≥ 0.45",
  ]);
  const quietBest = Math.max(...Array.from({ length: cores() }, (_, i) => m(`busy.${i + 1}.quiet`)));
  rows.push([
    "busy host: default rule with the hog vs the best quiet figure of any thread count",
    `${f(m("busy.auto.hog"))} vs ${f(quietBest)}`,
    ratio(m("busy.auto.hog"), quietBest),
    "≥ 0.45",
  ]);
  for (const [tag, text] of [["fixed", `\`SERVICE_THREADS=${cores()}\``], ["auto", "default rule"]] as const) {
    rows.push([
      `two models decoding at once (the bench model under two names), ${text}: each model's decode tok/s, alone → both at once`,
      `${f(m(`two.${tag}.alone`))} → ${f(m(`two.${tag}.together`))}`,
      ratio(m(`two.${tag}.together`), m(`two.${tag}.alone`)),
      "—",
    ]);
  }

  return chosen;
}
