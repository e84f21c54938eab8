/**
 * How long a fresh prompt takes to decode by the context's batch size (`num_batch`, which is also
 * llama.cpp's micro-batch here: node-llama-cpp sets both), on the CPU: one context per size, the
 * same prompt length, rounds alternating between the sizes. This is what chose the default batch
 * of a model wholly on the CPU (src/runner/batch.ts).
 *
 *   npm run build && node dist/bench/prefill-batch.js MODEL.gguf [--threads 2] [--tokens 591] [--batches 256,512] [--rounds 15]
 *
 * Prints, per batch size, the median prefill in ms and tokens/s over the rounds (the first two
 * rounds warm up and are left out).
 */
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { flashAttentionFor } from "../src/runner/attention.js";
import type { AddonContext as Addon } from "../src/runner/llama-internals.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    threads: { type: "string", default: "2" },
    tokens: { type: "string", default: "591" },
    batches: { type: "string", default: "256,512" },
    rounds: { type: "string", default: "15" },
  },
});
const file = positionals[0];
if (!file) throw new Error("usage: node dist/bench/prefill-batch.js MODEL.gguf [--threads N] [--tokens N] [--batches A,B] [--rounds N]");
const threads = Number(values.threads);
const length = Number(values.tokens);
const sizes = values.batches.split(",").map(Number);
const rounds = Number(values.rounds);

const llama = await getLlama({ gpu: false, build: "never", maxThreads: threads, progressLogs: false, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: file });
const flashAttention = flashAttentionFor({}, model.fileInsights, model.gpuLayers);
const attention = flashAttention === undefined ? {} : { flashAttention };
const contexts = [];
for (const batchSize of sizes) {
  const context = await model.createContext({ contextSize: 4096, sequences: 4, threads, batchSize, ...attention });
  contexts.push({ batchSize, context, addon: (context as unknown as { _ctx: Addon })._ctx, ms: [] as number[] });
}

const tokens = (salt: number) => Uint32Array.from({ length }, (_, i) => 100 + ((i * 7919 + salt) % 5000));
/** A fresh prompt in sequence 0, a batch at a time, the last token's logits asked for; in ms. */
async function prefill(addon: Addon, batchSize: number, salt: number): Promise<number> {
  addon.removeTokenCellsFromSequence(0, 0, -1);
  const prompt = tokens(salt);
  const start = performance.now();
  for (let at = 0; at < length; at += batchSize) {
    const n = Math.min(batchSize, length - at);
    addon.initBatch(n);
    addon.addToBatch(0, at, prompt.slice(at, at + n), at + n === length ? Uint32Array.of(n - 1) : new Uint32Array(0));
    await addon.decodeBatch();
  }
  return performance.now() - start;
}

for (let round = 0; round < rounds + 2; round++) {
  for (let i = 0; i < contexts.length; i++) {
    const c = contexts[(round + i) % contexts.length]!;
    const ms = await prefill(c.addon, c.batchSize, round * contexts.length + i);
    if (round >= 2) c.ms.push(ms);
  }
}
console.log(`${length}-token prompt, ${threads} threads, flash attention ${contexts[0]?.context.flashAttention}, ${rounds} rounds`);
for (const c of contexts) {
  const median = [...c.ms].sort((a, b) => a - b)[Math.floor(c.ms.length / 2)]!;
  console.log(`batch ${c.batchSize}: ${median.toFixed(1)} ms, ${((length / median) * 1000).toFixed(0)} tok/s`);
}
for (const c of contexts) await c.context.dispose();
await model.dispose();
