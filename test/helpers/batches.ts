/**
 * For the tests of how a context's batches are formed, by lmd's decode loop (src/runner/decode-loop.ts)
 * and by node-llama-cpp's patched dispatcher (patches/node-llama-cpp+3.22.1.patch): a context of the
 * tiny test model, loaded as a runner loads it, and a record of what that context decodes.
 */
import type { LlamaContext, LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import type { Test } from "tap";
import { openLlama } from "../../src/runner/engine.js";
import { DecodeLoop } from "../../src/runner/decode-loop.js";
import { fastEvaluate } from "../../src/runner/fast-evaluate.js";
import { testGguf } from "./models.js";

/** The tiny test model with one context of `sequences` sequences on 1 thread; disposed after the test. */
export async function tinyContext(t: Test, contextSize: number, sequences: number, batchSize?: number): Promise<{ model: LlamaModel; context: LlamaContext }> {
  const llama = await openLlama(false, () => undefined);
  t.teardown(() => llama.dispose());
  const model = await llama.loadModel({ modelPath: await testGguf({ preset: "tiny" }) });
  return { model, context: await model.createContext({ contextSize, sequences, threads: 1, ...(batchSize ? { batchSize } : {}) }) };
}

/**
 * The two ways a runner's sequences are decoded: lmd's decode loop (every generation of a runner
 * without speculative decoding) and node-llama-cpp's own dispatcher, patched (speculative decoding,
 * models that need context checkpoints). Each installs itself on a context's sequences.
 */
export const DECODERS = {
  "lmd's decode loop": (context: LlamaContext, sequences: readonly LlamaContextSequence[]) => {
    const loop = new DecodeLoop(context);
    for (const sequence of sequences) fastEvaluate(sequence, loop, () => undefined);
  },
  "node-llama-cpp's dispatcher": () => undefined,
} as const;

export interface RecordedBatch {
  at: number;
  items: { sequence: number; tokens: number }[];
}

/**
 * Each batch's start time and its items (sequence id, token count) in the order they were added.
 * An internal hook (a Proxy on the native context).
 */
export function recordBatches(context: LlamaContext): RecordedBatch[] {
  const batches: RecordedBatch[] = [];
  const holder = context as unknown as { _ctx: Record<string, (...args: unknown[]) => unknown> };
  const native = holder._ctx;
  let items: RecordedBatch["items"] = [];
  holder._ctx = new Proxy(native, {
    get(target, key) {
      const value = target[key as string];
      if (key === "addToBatch")
        return (...args: unknown[]) => {
          items.push({ sequence: args[0] as number, tokens: (args[2] as Uint32Array).length });
          return value!.apply(target, args);
        };
      if (key === "decodeBatch")
        return (...args: unknown[]) => {
          batches.push({ at: performance.now(), items });
          items = [];
          return value!.apply(target, args);
        };
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return batches;
}
