/**
 * A new request on a sequence that holds old tokens gets the very next batch of a context whose
 * other sequences are generating, for its prompt alone (patches/node-llama-cpp+3.22.1.patch, its
 * changes for cleared sequences and for prompts first). It clears the old tokens under the
 * context's lock first; without the first change, the other sequences' next batch took the lock as
 * soon as the clearing released it, before the new prompt could queue, so every new request waited
 * one extra decode step for its first token. Without the second, the prompt shared its batch with
 * the others' single tokens, which llama.cpp (a KV cache per sequence) computes as two micro-batches
 * anyway, one token of each sequence and then the rest of the prompt, so its first token came one
 * step later than alone. Not a timing test: it checks which batches the prompt and the others' tokens
 * went into.
 * Run for both decoders (test/helpers/batches.ts): lmd's decode loop keeps the same rules.
 */
import t from "tap";
import { LlamaCompletion } from "node-llama-cpp";
import { DECODERS, recordBatches, tinyContext } from "../helpers/batches.js";

for (const [decoder, install] of Object.entries(DECODERS)) {
  t.test(`${decoder}: a new prompt gets the next batch while three sequences generate`, async (t) => {
    const { context } = await tinyContext(t, 512, 4);
    const sequences = Array.from({ length: 4 }, () => context.getSequence());
    install(context, sequences);
    // Old tokens on the fourth sequence: the new request must clear them before its prompt.
    await new LlamaCompletion({ contextSequence: sequences[3]! }).generateCompletion("warm up", { maxTokens: 2 });
    const batches = recordBatches(context);

    const stop = new AbortController();
    const streams = sequences
      .slice(0, 3)
      .map((contextSequence, i) =>
        new LlamaCompletion({ contextSequence }).generateCompletion(`${i} once upon a time`, {
          maxTokens: 100_000,
          temperature: 0.8,
          seed: i,
          signal: stop.signal,
          stopOnAbortSignal: true,
        }),
      );
    for (let i = 0; i < 500 && batches.filter((b) => b.items.length === 3).length < 5; i++) await new Promise((r) => setTimeout(r, 10));
    t.ok(batches.filter((b) => b.items.length === 3).length >= 5, "three sequences generate together");

    // Timed from the clearing itself (the native removal, under the context lock), not from the call:
    // a batch may start while the request is still tokenizing its prompt, or take the lock just before
    // the clearing asks for it.
    let cleared: number | undefined;
    const holder = context as unknown as { _ctx: Record<string, (...args: unknown[]) => unknown> };
    const native = holder._ctx;
    holder._ctx = new Proxy(native, {
      get(target, key) {
        const value = target[key as string];
        if (key === "removeTokenCellsFromSequence")
          return (...args: unknown[]) => {
            if (args[0] === 3) cleared ??= performance.now();
            return value!.apply(target, args);
          };
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    await new LlamaCompletion({ contextSequence: sequences[3]! }).generateCompletion("a new question with a prompt of several words", { maxTokens: 1 });
    stop.abort();
    await Promise.all(streams);

    t.ok(cleared !== undefined, "the request cleared the sequence's old tokens first");
    // The batch holding the lock during the clearing finishes first; the next one to start must hold the prompt.
    const next = batches.filter((b) => b.at >= cleared!);
    const withPrompt = next.findIndex((b) => b.items.some((i) => i.tokens > 1));
    t.ok(withPrompt >= 0, "the prompt was decoded");
    t.equal(
      withPrompt,
      0,
      `the first batch after the clearing holds the prompt (batches: ${next
        .slice(0, 4)
        .map((b) => b.items.map((i) => i.tokens).join("+"))
        .join(", ")})`,
    );
    t.same(next[withPrompt]!.items.map((i) => i.sequence), [3], "alone");
    t.same(next[withPrompt + 1]?.items.map((i) => i.sequence), [0, 1, 2], "the other sequences' tokens are the batch after it");
  });
}
