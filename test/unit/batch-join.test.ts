/**
 * A new request on a sequence that holds old tokens joins the very next batch of a context whose
 * other sequences are generating (patches/node-llama-cpp+3.22.1.patch, its change for cleared
 * sequences). It clears the old tokens under the context's lock first; without that change, the
 * other sequences' next batch took the lock as soon as the clearing released it, before the new
 * prompt could queue, so every new request waited one extra decode step for its first token. Not
 * a timing test: it checks which batch the prompt went into.
 */
import t from "tap";
import { LlamaCompletion } from "node-llama-cpp";
import { openLlama } from "../../src/runner/engine.js";
import { recordBatches } from "../helpers/batches.js";
import { testGguf } from "../helpers/models.js";

t.test("a new prompt joins the next batch while three sequences generate", async (t) => {
  const llama = await openLlama(false, () => undefined);
  t.teardown(() => llama.dispose());
  const model = await llama.loadModel({ modelPath: await testGguf({ preset: "tiny" }) });
  const context = await model.createContext({ contextSize: 512, sequences: 4, threads: 1 });
  const sequences = Array.from({ length: 4 }, () => context.getSequence());
  // Old tokens on the fourth sequence: the new request must clear them before its prompt.
  await new LlamaCompletion({ contextSequence: sequences[3]! }).generateCompletion("warm up", { maxTokens: 2 });
  const batches = recordBatches(context);

  const stop = new AbortController();
  const streams = sequences.slice(0, 3).map((contextSequence, i) =>
    new LlamaCompletion({ contextSequence }).generateCompletion(`${i} once upon a time`, { maxTokens: 100_000, temperature: 0.8, seed: i, signal: stop.signal, stopOnAbortSignal: true }),
  );
  for (let i = 0; i < 500 && batches.filter((b) => b.items.length === 3).length < 5; i++) await new Promise((r) => setTimeout(r, 10));
  t.ok(batches.filter((b) => b.items.length === 3).length >= 5, "three sequences generate together");

  // Timed from the start of the clearing, not from the call: a batch may start while the request
  // is still tokenizing its prompt, before it asks for the lock at all.
  let cleared: number | undefined;
  const sequence = sequences[3]! as unknown as { _eraseContextTokenRanges: (...args: unknown[]) => Promise<unknown> };
  const erase = sequence._eraseContextTokenRanges.bind(sequence);
  sequence._eraseContextTokenRanges = (...args) => { cleared ??= performance.now(); return erase(...args); };
  await new LlamaCompletion({ contextSequence: sequences[3]! }).generateCompletion("a new question with a prompt of several words", { maxTokens: 1 });
  stop.abort();
  await Promise.all(streams);

  t.ok(cleared !== undefined, "the request cleared the sequence's old tokens first");
  // The batch running when the clearing asked for the lock finishes first; the next one to start must hold the prompt.
  const next = batches.filter((b) => b.at >= cleared!);
  const withPrompt = next.findIndex((b) => b.items.some((i) => i.tokens > 1));
  t.ok(withPrompt >= 0, "the prompt was decoded");
  t.equal(withPrompt, 0, `the first batch after the clearing holds the prompt (batches: ${next.slice(0, 4).map((b) => b.items.map((i) => i.tokens).join("+")).join(", ")})`);
  t.ok(next[withPrompt]!.items.filter((i) => i.tokens === 1).length >= 1, "together with the other sequences' tokens");
});
