/**
 * lmd's decode loop (src/runner/decode-loop.ts) generates exactly what node-llama-cpp's own
 * `evaluate` generates: the same tokens for greedy, seeded, penalized and grammar-constrained
 * sampling, across prompts longer than a batch and context shifts, and leaves the sequence in the
 * same state (its tokens, its token meter, the prompt cache of the next request). What it does not do itself
 * (speculative decoding) goes to node-llama-cpp. Each case generates on two sequences of one
 * context, one with the loop and one without, one after the other (the same batch shapes).
 */
import t, { type Test } from "tap";
import { InputLookupTokenPredictor, LlamaCompletion, type LlamaContextSequence, type LlamaGrammar, type Token } from "node-llama-cpp";
import { DecodeLoop } from "../../src/runner/decode-loop.js";
import { fastEvaluate } from "../../src/runner/fast-evaluate.js";
import { PauseSwitch } from "../../src/runner/flow.js";
import { LogprobRecorder } from "../../src/runner/logprobs.js";
import { recordBatches, tinyContext } from "../helpers/batches.js";

type Options = Parameters<LlamaCompletion["generateCompletionWithMeta"]>[1];

async function run(sequence: LlamaContextSequence, prompt: string, options: Options) {
  const tokens: Token[] = [];
  const before = sequence.tokenMeter.getState();
  const result = await new LlamaCompletion({ contextSequence: sequence }).generateCompletionWithMeta(prompt, { ...options, onToken: (t) => tokens.push(...t) });
  const after = sequence.tokenMeter.getState();
  const meter = { input: after.usedInputTokens - before.usedInputTokens, output: after.usedOutputTokens - before.usedOutputTokens };
  return { tokens, text: result.response, stop: result.metadata.stopReason, state: sequence.contextTokens, meter };
}

/** A context of two sequences: `fast` decodes on lmd's loop, `plain` on node-llama-cpp's evaluate. */
async function pair(t: Test, contextSize = 512, batchSize?: number) {
  const { context, model } = await tinyContext(t, contextSize, 2, batchSize);
  const plain = context.getSequence();
  const fast = context.getSequence();
  const loop = new DecodeLoop(context);
  let steps = 0;
  const next = loop.next.bind(loop);
  loop.next = (...args) => (steps++, next(...args));
  fastEvaluate(fast, loop, () => undefined);
  return { context, model, plain, fast, loop, steps: () => steps };
}

t.test("the same tokens as node-llama-cpp's evaluate, for each kind of sampling", async (t) => {
  const { plain, fast, model, steps } = await pair(t);
  const json = (await model.llama.getGrammarFor("json")) as LlamaGrammar;
  const cases: [string, Options][] = [
    ["greedy", { maxTokens: 48, temperature: 0 }],
    ["seeded top-k/top-p/min-p", { maxTokens: 48, temperature: 0.8, seed: 7, topK: 40, topP: 0.9, minP: 0.05 }],
    [
      "repeat, presence and frequency penalties",
      { maxTokens: 48, temperature: 0.8, seed: 9, repeatPenalty: { lastTokens: 64, penalty: 1.3, presencePenalty: 0.2, frequencyPenalty: 0.1 } },
    ],
    ["a JSON grammar", { maxTokens: 32, temperature: 0.8, seed: 3, grammar: json }],
  ];
  for (const [name, options] of cases) {
    const before = steps();
    const a = await run(plain, "once upon a time", options);
    const b = await run(fast, "once upon a time", options);
    t.ok(steps() - before >= Math.min(8, b.tokens.length), `${name}: the loop decoded (${steps() - before} steps)`);
    t.ok(a.tokens.length >= 8, `${name}: ${a.tokens.length} tokens`);
    t.same(b.tokens, a.tokens, `${name}: the same tokens`);
    t.equal(b.text, a.text, `${name}: the same text`);
    t.equal(b.stop, a.stop, `${name}: the same stop reason (${a.stop})`);
    t.same(b.state, a.state, `${name}: the sequence holds the same tokens`);
    t.same(b.meter, a.meter, `${name}: the token meter counts the same (${JSON.stringify(a.meter)})`);
  }
});

t.test("a prompt longer than the batch is decoded in batch-sized parts, its output unchanged", async (t) => {
  const { plain, fast, context } = await pair(t, 512, 16);
  const prompt = Array.from({ length: 30 }, (_, i) => `word${i}`).join(" ");
  const a = await run(plain, prompt, { maxTokens: 16, temperature: 0.8, seed: 5 });
  const batches = recordBatches(context);
  const b = await run(fast, prompt, { maxTokens: 16, temperature: 0.8, seed: 5 });
  t.ok(b.state.length - b.tokens.length > 40, `a long prompt (${b.state.length - b.tokens.length} tokens)`);
  t.ok(
    batches.length > 3 && batches.every((batch) => batch.items.reduce((n, i) => n + i.tokens, 0) <= 16),
    `batches of at most 16 tokens (${batches.map((x) => x.items[0]?.tokens).join(",")})`,
  );
  t.same(b.tokens, a.tokens, "the same tokens");
});

t.test("past the end of the context: node-llama-cpp's context shift, the same tokens", async (t) => {
  const { plain, fast } = await pair(t, 128);
  const a = await run(plain, "once upon a time", { maxTokens: 300, temperature: 0.8, seed: 11 });
  const b = await run(fast, "once upon a time", { maxTokens: 300, temperature: 0.8, seed: 11 });
  t.equal(a.tokens.length, 300, "300 tokens in a context of 128");
  t.same(b.tokens, a.tokens, "the same tokens");
  t.same(b.state, a.state, "the sequence holds the same tokens");
});

t.test("the next request reuses the prompt cache the loop left", async (t) => {
  const { plain, fast } = await pair(t);
  await run(plain, "the cat sat on the mat", { maxTokens: 12, temperature: 0 });
  await run(fast, "the cat sat on the mat", { maxTokens: 12, temperature: 0 });
  const kept = fast.nextTokenIndex;
  const a = await run(plain, "the cat sat on the mat and then", { maxTokens: 12, temperature: 0 });
  const evaluated: number[] = [];
  const inner = fast as unknown as { _nextTokenIndex: number };
  const evaluate = fast.evaluate.bind(fast);
  fast.evaluate = (tokens, options) => {
    evaluated.push(inner._nextTokenIndex);
    return evaluate(tokens, options);
  };
  const b = await run(fast, "the cat sat on the mat and then", { maxTokens: 12, temperature: 0 });
  t.ok(kept > 12, `the first request left ${kept} tokens`);
  t.ok(evaluated[0]! >= 7, `the second started after its cached prefix (${evaluated[0]} tokens kept)`);
  t.same(b.tokens, a.tokens, "the same tokens");
  t.same(b.state, a.state, "the sequence holds the same tokens");
});

t.test("two sequences on the loop and one on node-llama-cpp share a context", async (t) => {
  const { context } = await tinyContext(t, 512, 3);
  const [a, b, c] = [context.getSequence(), context.getSequence(), context.getSequence()];
  const loop = new DecodeLoop(context);
  fastEvaluate(a, loop, () => undefined);
  fastEvaluate(b, loop, () => undefined);
  const alone = await run(a, "0 once upon a time", { maxTokens: 40, temperature: 0.8, seed: 1 });
  await a.clearHistory();
  const json = await context.model.llama.getGrammarFor("json");
  const results = await Promise.all([
    run(a, "0 once upon a time", { maxTokens: 40, temperature: 0.8, seed: 1 }),
    run(b, "1 once upon a time", { maxTokens: 40, temperature: 0.8, seed: 2 }),
    run(c, "2 once upon a time", { maxTokens: 24, temperature: 0.8, seed: 3, grammar: json }),
  ]);
  t.same(results.map((r) => r.tokens.length), [40, 40, results[2]!.tokens.length], "all three complete");
  t.ok(results[2]!.tokens.length > 4, "the grammar-constrained one too");
  t.same(results[0]!.tokens, alone.tokens, "a sequence's tokens do not depend on the others in its batches");
});

for (const decoder of ["lmd's decode loop", "node-llama-cpp's dispatcher (patches/)"] as const) {
  t.test(`${decoder}: a failed decode fails its request alone; the sequence's next request decodes as before`, async (t) => {
    const { plain, fast, context } = await pair(t);
    const [reference, tested] = decoder === "lmd's decode loop" ? [plain, fast] : [fast, plain];
    const a = await run(reference, "once upon a time", { maxTokens: 24, temperature: 0.8, seed: 4 });
    const holder = context as unknown as { _ctx: Record<string, (...args: unknown[]) => unknown> };
    const native = holder._ctx;
    let failures = 0;
    holder._ctx = new Proxy(native, {
      get(target, key) {
        const value = target[key as string];
        // The decode runs (it fills the cache), and then reports a failure: the worst case for the cache.
        if (key === "decodeBatch" && failures === 0)
          return () => (value!.apply(target, []) as Promise<void>).then(() => {
            failures++;
            throw new Error("decode failed (injected)");
          });
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    await t.rejects(run(tested, "once upon a time", { maxTokens: 24, temperature: 0.8, seed: 4 }), /decode failed \(injected\)/, "the request fails");
    t.equal(failures, 1, "one decode failed");
    const b = await run(tested, "once upon a time", { maxTokens: 24, temperature: 0.8, seed: 4 });
    t.same(b.tokens, a.tokens, "the next request generates the same tokens");
    t.same(b.state, a.state, "the sequence holds the same tokens");
  });
}

t.test("a sequence with a token predictor is decoded by node-llama-cpp", async (t) => {
  const { context } = await tinyContext(t, 512, 1);
  const sequence = context.getSequence({ tokenPredictor: new InputLookupTokenPredictor() });
  const loop = new DecodeLoop(context);
  let steps = 0;
  const next = loop.next.bind(loop);
  loop.next = (...args) => (steps++, next(...args));
  fastEvaluate(sequence, loop, () => undefined);
  const r = await run(sequence, "once upon a time", { maxTokens: 24, temperature: 0 });
  t.equal(r.tokens.length, 24, "it generates");
  t.equal(steps, 0, "not on the loop");
});

t.test("a paused job gets no token until it resumes", async (t) => {
  const { context } = await tinyContext(t, 512, 1);
  const sequence = context.getSequence();
  const abort = new AbortController();
  const pause = new PauseSwitch(abort.signal);
  fastEvaluate(sequence, new DecodeLoop(context), () => pause);
  let count = 0;
  let atPause: number | undefined;
  const done = new LlamaCompletion({ contextSequence: sequence }).generateCompletionWithMeta("once upon a time", {
    maxTokens: 40,
    temperature: 0,
    onToken: (tokens) => {
      count += tokens.length;
      if (atPause === undefined && count >= 5) {
        atPause = count;
        pause.pause();
      }
    },
  });
  for (let i = 0; i < 200 && atPause === undefined; i++) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 200));
  t.equal(count, atPause, `no token while paused (${atPause} before)`);
  pause.resume();
  const result = await done;
  t.equal(result.metadata.stopReason, "maxTokens", "the rest after the resume");
  t.ok(count > atPause! + 20, `${count - atPause!} tokens after the resume`);
});

t.test("a logprob recorder puts the loop's evaluate back when its job ends", async (t) => {
  const { context, model } = await tinyContext(t, 512, 1);
  const sequence = context.getSequence();
  fastEvaluate(sequence, new DecodeLoop(context), () => undefined);
  const own = sequence.evaluate;
  const recorder = new LogprobRecorder(sequence, model, 2);
  t.not(sequence.evaluate, own, "the recorder's evaluate during the job");
  recorder.restore();
  t.equal(sequence.evaluate, own, "the loop's after it");
});

t.test("each generation's sampler is made before it, after the one before ends (on both paths)", async (t) => {
  const { plain, fast, model } = await pair(t);
  const inner = model as unknown as { _readySampler?: object; _takeSampler(): object; _prepareSampler(): void };
  // Making a sampler zero-fills a candidates array of the vocabulary's size (~0.8 ms for 128k tokens):
  // the patched node-llama-cpp makes the next one after a generation, off the next first token.
  const taken: { ready: boolean }[] = [];
  const take = inner._takeSampler.bind(inner);
  inner._takeSampler = () => {
    taken.push({ ready: inner._readySampler !== undefined });
    return take();
  };
  const idle = () => new Promise((resolve) => setImmediate(resolve));
  const options: Options = { maxTokens: 8, temperature: 0.8, seed: 5 };
  let seeded: Token[] = [];
  for (const [name, sequence] of [["lmd's loop", fast], ["node-llama-cpp's evaluate", plain]] as const) {
    const first = await run(sequence, "a sampler made ahead", options);
    seeded = first.tokens;
    await idle();
    t.ok(inner._readySampler, `${name}: a sampler is ready after a generation`);
    const second = await run(sequence, "a sampler made ahead", options);
    t.equal(taken.at(-1)?.ready, true, `${name}: the next generation took it`);
    t.same(second.tokens, first.tokens, `${name}: a sampler made ahead samples as a new one (the same seeded tokens)`);
  }
  t.ok(taken.length >= 4, `every generation took its sampler from the model (${taken.length})`);
  // An install without the patch (its scripts skipped): lmd's loop makes its own sampler.
  Object.assign(inner, { _takeSampler: undefined, _prepareSampler: undefined });
  t.same((await run(fast, "a sampler made ahead", options)).tokens, seeded, "without the patch's methods the loop makes its own sampler: the same tokens");
});
