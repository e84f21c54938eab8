/**
 * A batch holding tokens of several sequences lists them in ascending sequence order
 * (patches/node-llama-cpp+3.22.1.patch, its change for the order of batch items). With a KV cache
 * per sequence (node-llama-cpp turns llama.cpp's unified cache off), llama.cpp puts only
 * consecutive increasing sequence ids into one micro-batch; items in the order the sequences
 * queued them split one decode step into several graph computations, each reading every weight.
 * Requests that start at different times (any server's) queue in such an order: through the daemon
 * 8 streams decoded each step in 26–33 ms instead of 13–16. Not a timing test: it checks the order.
 * Run for both decoders (test/helpers/batches.ts): lmd's decode loop keeps the same rules.
 */
import t from "tap";
import { LlamaCompletion } from "node-llama-cpp";
import { DECODERS, recordBatches, tinyContext } from "../helpers/batches.js";

for (const [decoder, install] of Object.entries(DECODERS)) {
  t.test(`${decoder}: sequences that started in another order are batched in ascending order`, async (t) => {
    const { context } = await tinyContext(t, 512, 4);
    const sequences = Array.from({ length: 4 }, () => context.getSequence());
    install(context, sequences);
    const recorded = recordBatches(context);

    const stop = new AbortController();
    const streams: Promise<unknown>[] = [];
    // Start order 3, 1, 2, 0, each once the previous one generates: the queue holds them in that order.
    for (const i of [3, 1, 2, 0]) {
      const seen = recorded.length;
      streams.push(
        new LlamaCompletion({ contextSequence: sequences[i]! }).generateCompletion(`${i} once upon a time`, {
          maxTokens: 100_000,
          temperature: 0.8,
          seed: i,
          signal: stop.signal,
          stopOnAbortSignal: true,
        }),
      );
      for (let k = 0; k < 500 && recorded.length < seen + 2; k++) await new Promise((r) => setTimeout(r, 5));
    }
    for (let k = 0; k < 500 && recorded.filter((b) => b.items.length === 4).length < 10; k++) await new Promise((r) => setTimeout(r, 10));
    stop.abort();
    await Promise.all(streams);

    const batches = recorded.map((b) => b.items.map((i) => i.sequence));
    const full = batches.filter((b) => b.length === 4);
    t.ok(full.length >= 10, `the four sequences decode together (${full.length} batches of 4)`);
    const unordered = batches.filter((b) => b.some((id, k) => k > 0 && id < b[k - 1]!));
    t.same(unordered, [], "every batch lists its sequences in ascending order");
    t.ok(batches.some((b) => b.length > 1 && b.includes(3)), "the first sequence started shares batches with the others");
  });
}
