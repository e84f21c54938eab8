/**
 * A context for the decode loop's unit tests (src/runner/decode-loop.ts) whose addon records what the
 * loop asks of it, with no native code: each decode's batch, each removal of KV-cache cells, and the
 * order of decodes among the test's own events.
 */
import type { LlamaContext } from "node-llama-cpp";

/** A decode: [sequence id, token count, whether a logit is asked for] per entry. */
export type Decode = [number, number, boolean][];

/** The loop's `next`, on the fake sequences. */
export type Next = (s: unknown, tokens: number[], sample: (logit: number) => Promise<number>, ahead?: (token: number) => boolean) => Promise<number>;

/** Samples token 7 whatever the logits. */
export const sample = () => Promise.resolve(7);

/** A context whose addon records each decode (it ends a turn of the event loop later). */
export function fakeContext(batchSize: number) {
  const decodes: Decode[] = [];
  /** [sequence id, from, to] of each removal. */
  const removals: [number, number, number][] = [];
  /** "decode" for each decode queued, beside what the test logs. */
  const events: string[] = [];
  let batch: Decode = [];
  const addon = {
    initBatch: () => void (batch = []),
    addToBatch: (id: number, _first: number, tokens: Uint32Array, logits: Uint32Array) => {
      batch.push([id, tokens.length, logits.length > 0]);
      return Uint32Array.from(logits, (_, i) => i);
    },
    decodeBatch: () => {
      decodes.push(batch);
      events.push("decode");
      return new Promise<void>((resolve) => setImmediate(resolve));
    },
    sampleToken: () => Promise.resolve(7),
    removeTokenCellsFromSequence: (id: number, from: number, to: number) => (removals.push([id, from, to]), true),
  };
  const context = { _ctx: addon, batchSize, contextSize: 100_000 } as unknown as LlamaContext;
  const sequence = (id: number) => ({
    _sequenceId: id,
    _nextTokenIndex: 0,
    _contextTokens: [] as number[],
    tokenMeter: { useTokens: () => undefined },
    disposed: false,
  });
  return { context, decodes, removals, events, sequence };
}
