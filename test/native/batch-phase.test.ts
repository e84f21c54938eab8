/**
 * Two sequences that start at different times are decoded together once both generate
 * (patches/node-llama-cpp+3.22.1.patch, its change for batches of one sequence). node-llama-cpp's
 * batch loop checked its queue right after a batch of one sequence: the other sequence, which
 * queued its token during that decode, went into the next batch alone while the first was still a
 * few microtasks from queueing its own, and so on for good: two streams each decoded in one-token
 * batches, a whole decode per token. Not a timing test: it checks what each batch holds.
 * Run for both decoders (test/helpers/batches.ts): lmd's decode loop keeps the same rules.
 */
import t from "tap";
import { LlamaCompletion } from "node-llama-cpp";
import { DECODERS, recordBatches, tinyContext } from "../helpers/batches.js";

for (const [decoder, install] of Object.entries(DECODERS)) {
  t.test(`${decoder}: a second sequence started later is decoded in the same batches as the first`, async (t) => {
    const { context } = await tinyContext(t, 512, 2);
    const [first, second] = [context.getSequence(), context.getSequence()];
    install(context, [first, second]);
    const batches = recordBatches(context);
    const generate = (contextSequence: typeof first, i: number) =>
      new LlamaCompletion({ contextSequence }).generateCompletion(`${i} once upon a time`, { maxTokens: 60, temperature: 0.8, seed: i });

    const a = generate(first, 0);
    for (let k = 0; k < 500 && batches.length < 4; k++) await new Promise((r) => setTimeout(r, 2));
    const started = batches.length;
    const b = generate(second, 1);
    await Promise.all([a, b]);

    // From the second prompt on, while both generate: every batch but a few should hold both.
    const after = batches.slice(started);
    const both = after.filter((batch) => batch.items.length === 2).length;
    const shown = after.slice(0, 8).map((batch) => batch.items.map((i) => `${i.sequence}:${i.tokens}`).join(",")).join(" | ");
    t.ok(started >= 4, `the first sequence generated alone first (${started} batches)`);
    t.ok(both >= 30, `batches holding both sequences: ${both} of ${after.length} (${shown} …)`);
  });
}
