/**
 * Chunked prefill with a time budget (src/runner/prefill-budget.ts): the estimate of a prompt
 * token's cost, the budget it gives, and the decode loop's use of it, on a fake addon that records
 * each step's batch (no native code).
 */
import type { LlamaContext } from "node-llama-cpp";
import t from "tap";
import { DecodeLoop } from "../../src/runner/decode-loop.js";
import { MIN_TOKENS, PrefillBudget, SLICE_MS } from "../../src/runner/prefill-budget.js";

t.test("the budget: the whole batch alone or before any estimate, the time slice beside generations", async (t) => {
  const budget = new PrefillBudget();
  t.equal(budget.tokens(512, true), 512, "no prompt step timed yet: the whole batch");
  budget.observe(8, 0, 100);
  t.equal(budget.tokens(512, true), 512, "a step of fewer than MIN_TOKENS tokens is not an estimate");
  budget.observe(500, 0, 50); // 0.1 ms a token
  t.equal(budget.tokens(4096, false), 4096, "no generation running: the whole batch");
  t.equal(budget.tokens(4096, true), Math.floor(SLICE_MS / 0.1), "beside generations: what fits in the slice");
  budget.observe(500, 0, 25); // 0.05 ms a token: the estimate moves towards it
  const next = budget.tokens(4096, true);
  t.ok(next > SLICE_MS / 0.1 && next < SLICE_MS / 0.05, `a faster step raises the budget gradually (${next})`);
  const slow = new PrefillBudget();
  slow.observe(200, 0, 100_000);
  t.equal(slow.tokens(512, true), MIN_TOKENS, "a slow model still takes MIN_TOKENS a step");
  const fast = new PrefillBudget();
  fast.observe(512, 0, 1);
  t.equal(fast.tokens(512, true), 512, "never more than the batch");

  // Generations' own tokens are not charged to the prompt: 4 of them alone take 40 ms a step.
  const mixed = new PrefillBudget();
  mixed.observe(0, 4, 40);
  mixed.observe(500, 4, 90); // 50 ms for the prompt's 500 tokens: 0.1 ms a token
  t.equal(mixed.tokens(4096, true), Math.floor(SLICE_MS / 0.1), "a mixed step's prompt cost is its time less its generations'");
});

/** A context whose addon records each step's batch: [sequence id, token count] per entry. */
function fakeContext(batchSize: number) {
  const steps: [number, number][][] = [];
  let batch: [number, number][] = [];
  const addon = {
    initBatch: () => void (batch = []),
    addToBatch: (id: number, _first: number, tokens: Uint32Array, logits: Uint32Array) => {
      batch.push([id, tokens.length]);
      return Uint32Array.from(logits, (_, i) => i);
    },
    decodeBatch: () => {
      steps.push(batch);
      return new Promise<void>((resolve) => setImmediate(resolve));
    },
    sampleToken: () => Promise.resolve(7),
    removeTokenCellsFromSequence: () => true,
  };
  const context = { _ctx: addon, batchSize, contextSize: 100_000 } as unknown as LlamaContext;
  const sequence = (id: number) => ({
    _sequenceId: id,
    _nextTokenIndex: 0,
    _contextTokens: [] as number[],
    tokenMeter: { useTokens: () => undefined },
    disposed: false,
  });
  return { context, steps, sequence };
}

t.test("the decode loop gives a prompt only its budget while a generation runs", async (t) => {
  const { context, steps, sequence } = fakeContext(512);
  const budget = { observe: () => undefined, tokens: (size: number, generating: boolean) => (generating ? 40 : size) };
  const loop = new DecodeLoop(context, undefined, budget);
  type Next = (s: unknown, tokens: number[], sample: (logit: number) => Promise<number>) => Promise<number>;
  const next = loop.next.bind(loop) as unknown as Next;
  const sample = () => Promise.resolve(7);
  const stream = sequence(0);
  const prompt = sequence(1);

  // The stream generates token after token; the 200-token prompt arrives while it runs.
  let generated = 0;
  const running = (async () => {
    while (generated < 12) {
      await next(stream, [1], sample);
      generated++;
    }
  })();
  await new Promise((r) => setImmediate(r));
  await next(prompt, Array.from({ length: 200 }, (_, i) => i + 10), sample);
  await running;

  const promptSteps = steps.filter((s) => s.some(([id]) => id === 1));
  t.ok(promptSteps.length >= 5, `the prompt took ${promptSteps.length} steps of at most 40 tokens`);
  for (const s of promptSteps) {
    const tokens = s.find(([id]) => id === 1)![1];
    t.ok(tokens <= 40, `a step took ${tokens} of the prompt's tokens`);
  }
  const shared = promptSteps.filter((s) => s.some(([id]) => id === 0)).length;
  t.ok(shared >= promptSteps.length - 1, `the stream's token rode along in ${shared} of the prompt's ${promptSteps.length} steps`);

  // Alone, a prompt takes the whole batch.
  steps.length = 0;
  await next(sequence(2), Array.from({ length: 600 }, (_, i) => i + 10), sample);
  t.same(steps.map((s) => s[0]![1]), [512, 88], "a prompt with no generation beside it: batch-sized steps");
});
