/**
 * lmd's decode loop starts a step as soon as every generation it handed a token has asked for its
 * next one, without waiting for a turn of the event loop in between (each turn is main-thread work
 * between two decodes, on the path of every token); when one does not ask (it ended or paused), the
 * others go on after the turn. Counted: the turns the loop waits for (`setImmediate` calls) while
 * one and then two sequences generate. Each step is told as it starts, and the outbox is told how long
 * it is expected to take.
 */
import t from "tap";
import { LlamaCompletion } from "node-llama-cpp";
import { DecodeLoop } from "../../src/runner/decode-loop.js";
import { fastEvaluate } from "../../src/runner/fast-evaluate.js";
import { tinyContext } from "../helpers/batches.js";

t.test("no event-loop turn between the steps of running generations", async (t) => {
  const { context } = await tinyContext(t, 512, 2);
  let starts = 0;
  const expected: number[] = [];
  const loop = new DecodeLoop(context, (ms) => expected.push(ms), undefined, () => starts++);
  const sequences = [context.getSequence(), context.getSequence()];
  for (const sequence of sequences) fastEvaluate(sequence, loop, () => undefined);
  const completions = sequences.map((contextSequence) => new LlamaCompletion({ contextSequence }));
  let steps = 0;
  const next = loop.next.bind(loop);
  loop.next = (...args) => (steps++, next(...args));
  const original = globalThis.setImmediate;
  let turns = 0;
  t.teardown(() => void (globalThis.setImmediate = original));
  // Only the loop's own waits are counted: its module calls the global setImmediate.
  globalThis.setImmediate = ((fn: (...args: unknown[]) => void, ...args: unknown[]) => {
    if (new Error().stack?.includes("decode-loop")) turns++;
    return original(fn, ...args);
  }) as typeof setImmediate;

  const generated: number[] = [];
  const options = { maxTokens: 64, temperature: 0, onToken: (tokens: readonly number[]) => generated.push(...tokens) };
  await completions[0]!.generateCompletion("once upon a time", options);
  t.equal(generated.length, 64, "one generation: 64 tokens");
  t.ok(steps >= 64, `one generation: ${steps} steps`);
  t.equal(starts, steps, "the loop told of each step as it started (runner/awake.ts keeps the thread awake from there)");
  t.equal(expected[0], Infinity, "the prompt's step is told as long (runner/outbox.ts writes what waits before it)");
  t.ok(expected.length === steps && expected.slice(1).every(Number.isFinite), "each single-token step as the time since the one before");
  t.ok(turns <= 4, `one generation: ${turns} waits for a turn of the event loop (at most one per generation's start and end)`);

  const [before, stepsBefore] = [turns, steps];
  await Promise.all(completions.map((c, i) => c.generateCompletion(`${i} the quick brown fox`, { ...options, maxTokens: 48 + 16 * i })));
  t.ok(steps - stepsBefore >= 112, `two generations: ${steps - stepsBefore} requests`);
  t.ok(turns - before <= 8, `two generations of different lengths: ${turns - before} waits (the longer one goes on after the shorter ends)`);
});
