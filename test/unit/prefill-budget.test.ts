/**
 * Chunked prefill with a time budget (src/runner/prefill-budget.ts): the estimate of a prompt
 * token's cost, the budget it gives, and the decode loop's use of it, on a fake addon that records
 * each step's batch (no native code).
 */
import type { LlamaContext } from "node-llama-cpp";
import t from "tap";
import { DecodeLoop } from "../../src/runner/decode-loop.js";
import { MIN_TOKENS, PrefillBudget, promptPiece, SLICE_MS } from "../../src/runner/prefill-budget.js";

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

t.test("a prompt's pieces beside generations: none smaller than MIN_TOKENS unless the whole rest", async (t) => {
  const m = MIN_TOKENS;
  t.equal(promptPiece(10 * m, 2 * m, 512, 512), 2 * m, "a budgeted piece that leaves enough: as it is");
  t.equal(promptPiece(m / 2, m / 2, 512, 512), m / 2, "a short rest goes whole");
  t.equal(promptPiece(10 * m, m / 2, 512, 512), 0, "a piece smaller than MIN_TOKENS of a longer prompt: none this step");
  t.equal(promptPiece(3 * m, 2 * m + 8, 512, 512), 2 * m, "a piece that would leave too little leaves MIN_TOKENS");
  t.equal(promptPiece(m + 8, m, 512, 512), m + 8, "a rest too short to split goes at once");
  t.equal(promptPiece(m + 8, m, m + 4, 512), m + 4, "never more than the batch holds");
  t.equal(promptPiece(10 * m, 16, 16, 16), 16, "a batch smaller than MIN_TOKENS: pieces of the batch");
});

/** A decode: [sequence id, token count, whether a logit is asked for] per entry. */
type Decode = [number, number, boolean][];

/** A context whose addon records each decode. */
function fakeContext(batchSize: number) {
  const decodes: Decode[] = [];
  let batch: Decode = [];
  const addon = {
    initBatch: () => void (batch = []),
    addToBatch: (id: number, _first: number, tokens: Uint32Array, logits: Uint32Array) => {
      batch.push([id, tokens.length, logits.length > 0]);
      return Uint32Array.from(logits, (_, i) => i);
    },
    decodeBatch: () => {
      decodes.push(batch);
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
  return { context, decodes, sequence };
}

type Next = (s: unknown, tokens: number[], sample: (logit: number) => Promise<number>) => Promise<number>;
const sample = () => Promise.resolve(7);

/** A decode loop on a fake context with sequence 0 generating 12 tokens, a step each, already started. */
async function withStream(batchSize: number, budget: ConstructorParameters<typeof DecodeLoop>[2]) {
  const fake = fakeContext(batchSize);
  const loop = new DecodeLoop(fake.context, undefined, budget);
  const next = loop.next.bind(loop) as unknown as Next;
  const stream = fake.sequence(0);
  let generated = 0;
  const running = (async () => {
    while (generated < 12) {
      await next(stream, [1], sample);
      generated++;
    }
  })();
  await new Promise((r) => setImmediate(r));
  return { ...fake, next, running, generated: () => generated };
}

t.test("the decode loop gives a prompt only its budget while a generation runs, in decodes of its own", async (t) => {
  const budget = { observe: () => undefined, tokens: (size: number, generating: boolean) => (generating ? MIN_TOKENS : size) };
  // The stream generates token after token; the prompt arrives while it runs.
  const { decodes, sequence, next, running } = await withStream(512, budget);
  const prompt = sequence(1);
  const length = 3 * MIN_TOKENS + 8;
  await next(prompt, Array.from({ length }, (_, i) => i + 10), sample);
  await running;

  const pieces = decodes.flatMap((d, i) => d.filter(([id]) => id === 1).map(([, tokens, logit]) => ({ at: i, tokens, logit })));
  t.same(
    pieces.map((p) => p.tokens),
    [MIN_TOKENS, MIN_TOKENS, MIN_TOKENS + 8],
    "budgeted pieces, the last one leaving no rest smaller than MIN_TOKENS",
  );
  for (const { at } of pieces.filter((p) => !p.logit)) {
    t.same(
      decodes[at]!.map(([id]) => id),
      [1],
      `a piece that needs no logit decodes alone (decode ${at})`,
    );
    t.same(decodes[at + 1], [[0, 1, true]], "and the stream's token right after it, in the same step");
  }
  for (let i = 1; i < pieces.length; i++)
    t.ok(
      decodes.slice(pieces[i - 1]!.at + 1, pieces[i]!.at).some((d) => d.some(([id]) => id === 0)),
      `the stream has a token between the prompt's pieces ${i} and ${i + 1}`,
    );
  const end = pieces.at(-1)!.at;
  t.same(decodes[end + 1], [[0, 1, true]], "after the prompt's last piece went alone, the stream's token goes with no prompt beside it");

  // Two prompts arrive together while the stream runs: the first, short, goes alone as its own
  // last piece (the stream's token waits one step); that next step holds the stream's token and
  // no piece of the second prompt, so the stream's gap spans one prompt share, not two.
  const two = await withStream(512, budget);
  await Promise.all([
    two.next(two.sequence(1), Array.from({ length: 40 }, (_, i) => i + 10), sample),
    two.next(two.sequence(2), Array.from({ length: 4 * MIN_TOKENS }, (_, i) => i + 10), sample),
  ]);
  await two.running;
  const shortEnd = two.decodes.findIndex((d) => d.some(([id]) => id === 1));
  t.same(two.decodes[shortEnd], [[1, 40, true]], "the short prompt goes alone as its last piece");
  t.same(two.decodes[shortEnd + 1], [[0, 1, true]], "the deferred stream token goes next, with no prompt beside it");

  // A batch smaller than MIN_TOKENS still moves a prompt beside a running stream.
  const small = await withStream(16, budget);
  await small.next(small.sequence(1), Array.from({ length: 40 }, (_, i) => i + 10), sample);
  const before = small.generated();
  t.ok(before < 12, `with num_batch 16 the prompt was decoded while the stream ran (${before} of its 12 tokens before)`);
  await small.running;

  // Alone, a prompt takes the whole batch.
  decodes.length = 0;
  await next(sequence(2), Array.from({ length: 600 }, (_, i) => i + 10), sample);
  t.same(
    decodes.map((d) => d[0]![1]),
    [512, 88],
    "a prompt with no generation beside it: batch-sized steps",
  );
});
