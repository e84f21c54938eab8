/**
 * Single-stream decode of two or more lmd builds, and llama-server, side by side: one daemon per
 * build, rounds that rotate the order, medians and paired ratios. For a change too small for the
 * spread between two full `npm run bench` runs (a daemon started afresh lands on other cores and
 * can decode a few per cent faster or slower): every side here runs in the same minutes.
 *
 *   node dist/bench/ab-single.js --dist DIR --dist DIR [--llama-server BIN] [--model bench-1b|PATH]
 *                                [--gpu cuda|vulkan] [--threads N] [--rounds N] [--tokens N] [--cache DIR]
 *
 * Each --dist is a built lmd (a copy of dist/, say with one rule changed) inside this checkout or
 * another directory beside a node_modules. With --llama-server (a binary: bench/build-llama-server.sh,
 * bench/build-cuda.sh) each build's ratio is to it, else to the second build.
 */
import type { ChildProcess } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { lmdDecode, type Sampling } from "./http.js";
import { llamaServerDecode, startLlamaServer, useLlamaServerBinary } from "./llama-server.js";
import { benchModel, startLmd } from "./lmd.js";
import { settle, stopProcess } from "./procs.js";
import { prose } from "./serving.js";

const { values: args } = parseArgs({
  options: {
    dist: { type: "string", multiple: true, default: [] },
    "llama-server": { type: "string" },
    model: { type: "string", default: "bench-1b" },
    gpu: { type: "string" },
    threads: { type: "string", default: String(os.availableParallelism()) },
    rounds: { type: "string", default: "24" },
    tokens: { type: "string", default: "128" },
    cache: { type: "string", default: path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "lmd-bench") },
  },
});
if (args.dist.length < (args["llama-server"] ? 1 : 2)) {
  process.stderr.write("ab-single: give two --dist builds, or one and --llama-server\n");
  process.exit(2);
}
const sampling: Sampling = { temperature: 0.8, top_k: 40, top_p: 0.9, min_p: 0, seed: 1, repeat_penalty: 1 };
const threads = Number(args.threads);
const gpu = args.gpu;

const file = await benchModel(args.model, args.cache);
const storeDir = path.join(args.cache, "ab-store");

/** Each side: its name and one measured stream (tokens/s after the first token). */
const sides: { name: string; decode: (prompt: string, tokens: number) => Promise<number> }[] = [];
const children: ChildProcess[] = [];
for (const dist of args.dist) {
  // The settings npm run bench gives lmd, and the model kept loaded between rounds.
  const models = { bench: { file } };
  const { url, child } = await startLmd({ main: path.resolve(dist, "src/main.js"), store: storeDir, models, threads, gpu, env: { SERVICE_KEEP_ALIVE: "-1" } });
  children.push(child);
  sides.push({
    name: dist,
    decode: async (prompt, tokens) => {
      const [stream] = (await lmdDecode(url, prompt, tokens, 1, sampling)).streams;
      return (stream!.tokens - 1) / ((stream!.lastMs - stream!.firstMs) / 1000);
    },
  });
}
if (args["llama-server"]) {
  useLlamaServerBinary(path.resolve(args["llama-server"]), gpu ? 999 : undefined);
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
  const { url, child } = await startLlamaServer(root, args.cache, file, threads, 1);
  children.push(child);
  sides.push({ name: "llama-server", decode: (prompt, tokens) => llamaServerDecode(url, prompt, tokens, sampling) });
}

// Each side warms up on four long streams, then the rounds rotate which side goes first.
for (const side of sides) for (let i = 0; i < 4; i++) await side.decode(prose(64, 1), 512);
const rates = sides.map(() => [] as number[]);
for (let round = 0; round < Number(args.rounds); round++) {
  for (let i = 0; i < sides.length; i++) {
    const k = (round + i) % sides.length;
    if (!gpu) await settle();
    rates[k]!.push(await sides[k]!.decode(prose(64, round + 2), Number(args.tokens)));
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const base = args["llama-server"] ? sides.length - 1 : 1;
for (const [k, side] of sides.entries()) {
  const [own, other] = [rates[k]!, rates[base]!];
  const paired = median(own.map((x, i) => x / other[i]!));
  const ratio = k === base ? "" : `  ${(median(own) / median(other)).toFixed(3)} of ${sides[base]!.name}, paired ${paired.toFixed(3)}`;
  console.log(`${side.name}: ${median(rates[k]!).toFixed(1)} tok/s${ratio}  (${rates[k]!.map((x) => x.toFixed(0)).join(" ")})`);
}
for (const child of children) await stopProcess(child);
