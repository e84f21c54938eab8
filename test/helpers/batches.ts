/**
 * Records what a node-llama-cpp context decodes: each batch's start time and its items (sequence
 * id, token count) in the order they were added. An internal hook (a Proxy on the native context),
 * for the tests of patches/node-llama-cpp+3.22.1.patch.
 */
import type { LlamaContext } from "node-llama-cpp";

export interface RecordedBatch {
  at: number;
  items: { sequence: number; tokens: number }[];
}

export function recordBatches(context: LlamaContext): RecordedBatch[] {
  const batches: RecordedBatch[] = [];
  const holder = context as unknown as { _ctx: Record<string, (...args: unknown[]) => unknown> };
  const native = holder._ctx;
  let items: RecordedBatch["items"] = [];
  holder._ctx = new Proxy(native, {
    get(target, key) {
      const value = target[key as string];
      if (key === "addToBatch") return (...args: unknown[]) => { items.push({ sequence: args[0] as number, tokens: (args[2] as Uint32Array).length }); return value!.apply(target, args); };
      if (key === "decodeBatch") return (...args: unknown[]) => { batches.push({ at: performance.now(), items }); items = []; return value!.apply(target, args); };
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return batches;
}
