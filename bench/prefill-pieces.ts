/**
 * What a prompt's piece costs a decode step, by its size and by how deep in the context it goes,
 * alone and in one batch with other sequences' single tokens (the decode loop's chunked prefill,
 * src/runner/prefill-budget.ts): node-llama-cpp's context decoding batches as lmd's decode loop
 * builds them, on per-sequence caches, timed around each decode.
 *
 *   npm run build && node dist/bench/prefill-pieces.js MODEL.gguf [--threads 2] [--beside 4] [--apart]
 *
 * `--beside N` adds N other sequences' single tokens to each step, in the piece's batch, or with
 * `--apart` in a decode of their own right after it (as the decode loop does). Prints one row per
 * context depth: the median of 3 steps of each piece size, ms and ms a token.
 */
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { flashAttentionFor } from "../src/runner/attention.js";
import type { AddonContext as Addon } from "../src/runner/llama-internals.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { threads: { type: "string", default: "2" }, beside: { type: "string", default: "0" }, apart: { type: "boolean", default: false } },
});
const file = positionals[0];
if (!file) throw new Error("usage: node dist/bench/prefill-pieces.js MODEL.gguf [--threads N] [--beside N] [--apart]");
const threads = Number(values.threads);
const beside = Number(values.beside);
const DEPTHS = [0, 1000, 2000, 3000];
const PIECES = [32, 64, 128, 256];

const llama = await getLlama({ gpu: false, build: "never", maxThreads: threads, progressLogs: false, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: file });
const flashAttention = flashAttentionFor({}, model.fileInsights, model.gpuLayers);
const attention = flashAttention === undefined ? {} : { flashAttention };
const context = await model.createContext({ contextSize: 4096, sequences: 1 + beside, threads, batchSize: 512, ...attention });
const addon = (context as unknown as { _ctx: Addon })._ctx;

const tokens = (n: number, salt: number) => Uint32Array.from({ length: n }, (_, i) => 100 + ((i * 7919 + salt) % 5000));
/** One decode of [sequence, position, tokens, logit of the last] entries, in ms. */
async function decode(entries: [number, number, Uint32Array, boolean][]): Promise<number> {
  addon.initBatch(entries.reduce((n, [, , t]) => n + t.length, 0));
  for (const [id, at, t, logit] of entries) addon.addToBatch(id, at, t, logit ? Uint32Array.of(t.length - 1) : new Uint32Array(0));
  const start = performance.now();
  await addon.decodeBatch();
  return performance.now() - start;
}

// The other sequences hold a short chat each and add one token a step beside the piece.
const SHORT = 200;
for (let id = 1; id <= beside; id++) await decode([[id, 0, tokens(SHORT, id), false]]);
let depth = 0;
console.log(`flash attention ${context.flashAttention}, ${threads} threads, ${beside} single tokens ${values.apart ? "after" : "beside"} each piece`);
for (const target of DEPTHS) {
  for (; depth < target; depth += Math.min(512, target - depth)) await decode([[0, depth, tokens(Math.min(512, target - depth), depth), false]]);
  const row: string[] = [];
  for (const size of PIECES) {
    const ms: number[] = [];
    for (let round = 0; round < 3; round++) {
      const piece: [number, number, Uint32Array, boolean] = [0, depth, tokens(size, round), false];
      const singles = Array.from({ length: beside }, (_, i): [number, number, Uint32Array, boolean] => [i + 1, SHORT, tokens(1, round + i), true]);
      ms.push(values.apart && beside > 0 ? (await decode([piece])) + (await decode(singles)) : await decode([piece, ...singles]));
      for (let id = 0; id <= beside; id++) addon.removeTokenCellsFromSequence(id, id === 0 ? depth : SHORT, -1);
    }
    const median = ms.sort((a, b) => a - b)[1]!;
    row.push(`${size}: ${median.toFixed(0)} ms (${(median / size).toFixed(2)}/token)`);
  }
  console.log(`depth ${target}: ${row.join(", ")}`);
}
await context.dispose();
await model.dispose();
