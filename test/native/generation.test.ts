/**
 * lmd's text generation (src/runner/generation.ts) generates what node-llama-cpp's LlamaCompletion
 * generates from the same tokens, seed and options (the tokens, the text and its chunks, the stop
 * reason, what the sequence holds after, the prompt cache of the next request, a context shift), and
 * applies stop sequences as Ollama does. Both run on lmd's decode loop, as in a runner. Its text is
 * what Ollama makes of the tokens: the first token keeps its leading space, which node-llama-cpp's
 * text drops on SentencePiece vocabularies (the tiny model's).
 */
import t, { type Test } from "tap";
import { LlamaCompletion, type LlamaContextSequence, type LlamaGrammar, type Token } from "node-llama-cpp";
import { DecodeLoop } from "../../src/runner/decode-loop.js";
import { fastEvaluate } from "../../src/runner/fast-evaluate.js";
import { generateText, type GenerationOptions } from "../../src/runner/generation.js";
import { samplingOptions } from "../../src/runner/sampling.js";
import type { SamplingSpec } from "../../src/runner/types.js";
import { tinyContext } from "../helpers/batches.js";
import { testGguf } from "../helpers/models.js";
import { ollamaDecoder } from "../helpers/pieces.js";

const spec = (s: Partial<SamplingSpec>): SamplingSpec => ({
  temperature: 0,
  topK: 40,
  topP: 0.9,
  minP: 0,
  repeatLastN: 64,
  repeatPenalty: 1,
  presencePenalty: 0,
  frequencyPenalty: 0,
  penalizeNewline: true,
  seed: 1,
  ...s,
});

interface Run {
  tokens: Token[];
  chunks: string[];
  text: string;
  stop: string;
  stopSequence?: string | undefined;
  state: Token[];
}

type Common = { maxTokens?: number; fillContext?: boolean; sampling: SamplingSpec; stop?: string[]; grammar?: LlamaGrammar };

async function viaLlamaCompletion(sequence: LlamaContextSequence, prompt: Token[], o: Common): Promise<Run> {
  const tokens: Token[] = [];
  const chunks: string[] = [];
  const { metadata } = await new LlamaCompletion({ contextSequence: sequence }).generateCompletionWithMeta(prompt, {
    ...(o.maxTokens !== undefined ? { maxTokens: o.maxTokens } : {}),
    ...(o.fillContext ? { disableContextShift: true } : {}),
    ...samplingOptions(o.sampling, sequence.context.contextSize),
    customStopTriggers: o.stop ?? [],
    ...(o.grammar ? { grammar: o.grammar } : {}),
    onToken: (x) => tokens.push(...x),
    onTextChunk: (x) => chunks.push(x),
  });
  return { tokens, chunks, text: chunks.join(""), stop: metadata.stopReason, state: [...sequence.contextTokens] };
}

async function viaLmd(sequence: LlamaContextSequence, prompt: Token[], o: Common): Promise<Run> {
  const tokens: Token[] = [];
  const chunks: string[] = [];
  const options: GenerationOptions = {
    signal: new AbortController().signal,
    maxTokens: o.maxTokens,
    fillContext: o.fillContext,
    sampling: samplingOptions(o.sampling, sequence.context.contextSize),
    stop: o.stop ?? [],
    grammar: o.grammar,
    onToken: (x) => tokens.push(...x),
    onTextChunk: (x) => chunks.push(x),
  };
  const result = await generateText(sequence, prompt, options);
  return { tokens, chunks, text: chunks.join(""), stop: result.stopReason, stopSequence: result.stop, state: [...sequence.contextTokens] };
}

/** node-llama-cpp's text of a generation with its first token's leading space, as Ollama reads it. */
const withFirstSpace = (run: Run, first: string[]) => (first[0]?.startsWith(" ") ? ` ${run.text}` : run.text);

/** Two sequences of one context on lmd's decode loop: `a` for LlamaCompletion, `b` for lmd's generation. */
async function pair(t: Test, contextSize = 512) {
  const { context, model } = await tinyContext(t, contextSize, 2);
  const loop = new DecodeLoop(context);
  const a = context.getSequence();
  const b = context.getSequence();
  fastEvaluate(a, loop, () => undefined);
  fastEvaluate(b, loop, () => undefined);
  return { model, a, b };
}

t.test("the same output as node-llama-cpp's LlamaCompletion", async (t) => {
  const { model, a, b } = await pair(t);
  const decode = await ollamaDecoder(await testGguf({ preset: "tiny" }));
  const prompt = model.tokenize("once upon a time", false);
  const cases: [string, Common][] = [
    ["greedy", { maxTokens: 48, sampling: spec({}) }],
    ["seeded top-k/top-p/min-p", { maxTokens: 48, sampling: spec({ temperature: 0.8, seed: 7, minP: 0.05 }) }],
    [
      "repeat, presence and frequency penalties",
      { maxTokens: 48, sampling: spec({ temperature: 0.8, seed: 9, repeatPenalty: 1.3, presencePenalty: 0.2, frequencyPenalty: 0.1, penalizeNewline: false }) },
    ],
    ["one token", { maxTokens: 1, sampling: spec({}) }],
    ["a JSON grammar", { maxTokens: 200, sampling: spec({ temperature: 0.8, seed: 3 }), grammar: (await model.llama.getGrammarFor("json")) as LlamaGrammar }],
    [
      "a JSON schema",
      {
        maxTokens: 200,
        sampling: spec({ temperature: 0.8, seed: 5 }),
        grammar: await model.llama.createGrammarForJsonSchema({
          type: "object",
          properties: { ok: { type: "boolean" }, n: { type: "integer" } },
          required: ["ok", "n"],
        }),
      },
    ],
  ];
  for (const [name, options] of cases) {
    const x = await viaLlamaCompletion(a, prompt, options);
    const y = await viaLmd(b, prompt, options);
    t.ok(x.tokens.length >= Math.min(8, options.maxTokens ?? 8), `${name}: ${x.tokens.length} tokens`);
    t.same(y.tokens, x.tokens, `${name}: the same tokens`);
    t.equal(y.text, decode(y.tokens), `${name}: the tokens' text as Ollama reads it`);
    t.equal(y.text, withFirstSpace(x, y.chunks), `${name}: node-llama-cpp's text, the first token's space kept`);
    // With a grammar node-llama-cpp holds some chunks back for its final response's whitespace trim
    // (lmd sends chunks, never that response): the text is the same, its grouping into chunks not.
    if (!options.grammar) t.same(y.chunks.slice(1), x.chunks.slice(1), `${name}: the same text chunks after the first`);
    t.equal(y.stop, x.stop, `${name}: the same stop reason (${x.stop})`);
    t.same(y.state, x.state, `${name}: the sequence holds the same tokens`);
  }
  // The prompt cache: a request that shares a prefix with what the sequence holds.
  const longer = [...prompt, ...model.tokenize(" and then", false)];
  const x = await viaLlamaCompletion(a, longer, { maxTokens: 16, sampling: spec({}) });
  const y = await viaLmd(b, longer, { maxTokens: 16, sampling: spec({}) });
  t.same(y.tokens, x.tokens, "a request after another: the same tokens");
  t.same(y.state, x.state, "a request after another: the sequence holds the same tokens");
});

t.test("the first token keeps its leading space, as in Ollama", async (t) => {
  const { model, b } = await pair(t);
  const decode = await ollamaDecoder(await testGguf({ preset: "tiny" }));
  for (const text of ["once upon a time", "the weather today"]) {
    const y = await viaLmd(b, model.tokenize(text, false), { maxTokens: 8, sampling: spec({}) });
    t.ok(
      decode(y.tokens.slice(0, 1)).startsWith(" "),
      `after '${text}', the first token's piece starts with a space: ${JSON.stringify(decode(y.tokens.slice(0, 1)))}`,
    );
    t.equal(y.chunks[0], decode(y.tokens.slice(0, 1)), "the first chunk is that piece, its space included");
    t.equal(y.text, decode(y.tokens), "the text is the tokens' pieces");
  }
});

t.test("past the end of the context: the same context shift, the same tokens", async (t) => {
  const { model, a, b } = await pair(t, 128);
  const prompt = model.tokenize("once upon a time", false);
  const x = await viaLlamaCompletion(a, prompt, { maxTokens: 300, sampling: spec({ temperature: 0.8, seed: 11 }) });
  const y = await viaLmd(b, prompt, { maxTokens: 300, sampling: spec({ temperature: 0.8, seed: 11 }) });
  t.equal(x.tokens.length, 300, "300 tokens in a context of 128");
  t.same(y.tokens, x.tokens, "the same tokens");
  t.same(y.state, x.state, "the sequence holds the same tokens");
  // num_predict -2: until the context is full, no shift.
  const fx = await viaLlamaCompletion(a, prompt, { fillContext: true, sampling: spec({}) });
  const fy = await viaLmd(b, prompt, { fillContext: true, sampling: spec({}) });
  t.equal(fy.stop, "maxTokens", "filling the context ends at its length");
  t.same(fy.tokens, fx.tokens, "filling the context: the same tokens");
});

t.test("stop sequences as in Ollama", async (t) => {
  const { model, a, b } = await pair(t);
  const prompt = model.tokenize("the weather today", false);
  const full = await viaLmd(a, prompt, { maxTokens: 40, sampling: spec({}) });
  t.ok(full.chunks.length >= 20, `enough chunks to pick stops from (${full.chunks.length})`);
  // A chunk that starts with a space after the first few: on this SentencePiece vocabulary its token
  // reads without the space alone, and a stop detection that reads tokens alone never matches it.
  const i = full.chunks.findIndex((c, k) => k >= 4 && c.startsWith(" ") && c.length > 2);
  t.ok(i > 0, `a chunk with a leading space: ${JSON.stringify(full.chunks[i])}`);
  const spaced = full.chunks[i]!;
  const before = (stop: string) => full.text.slice(0, full.text.indexOf(stop));

  const x = await viaLmd(b, prompt, { maxTokens: 40, sampling: spec({}), stop: [spaced] });
  t.equal(x.stop, "customStopTrigger", `'${spaced}' stopped the generation`);
  t.equal(x.stopSequence, spaced, "the stop sequence is reported");
  t.equal(x.text, before(spaced), "the text before the stop, all of it");
  // node-llama-cpp's LlamaCompletion (chat prompts whose stop triggers include special tokens) read
  // each token alone for its stop detection; patched, it reads it after the tokens handed out before.
  const patched = await viaLlamaCompletion(a, prompt, { maxTokens: 40, sampling: spec({}), stop: [spaced] });
  t.equal(patched.stop, "customStopTrigger", `node-llama-cpp's LlamaCompletion stops at '${spaced}' too`);
  t.equal(withFirstSpace(patched, x.chunks), x.text, "with the same text (but for the first token's space)");

  // A stop spanning two tokens, starting inside the first: the text up to it, no more.
  const span = `${full.chunks[i + 1]!.slice(-2)}${full.chunks[i + 2]!.slice(0, 2)}`;
  const y = await viaLmd(b, prompt, { maxTokens: 40, sampling: spec({}), stop: [span] });
  t.equal(y.stop, "customStopTrigger", `'${span}' (across tokens) stopped the generation`);
  t.equal(y.text, before(span), "the text before it");
  t.notOk(y.chunks.some((c) => c.includes(span)), "no chunk carries the stop");
  t.same(y.tokens, b.contextTokens.slice(prompt.length + 1, prompt.length + 1 + y.tokens.length), "the tokens handed out are those generated first");

  // Two stops found in the same text: the first in the request's order wins (Ollama's findStop).
  const sub = spaced.slice(1);
  const z1 = await viaLmd(b, prompt, { maxTokens: 40, sampling: spec({}), stop: [sub, spaced] });
  t.equal(z1.stopSequence, sub, `[${JSON.stringify(sub)}, ${JSON.stringify(spaced)}]: the first`);
  t.equal(z1.text, before(sub));
  const together = full.text.indexOf(sub) === full.text.indexOf(spaced) + 1;
  const z2 = await viaLmd(b, prompt, { maxTokens: 40, sampling: spec({}), stop: [spaced, sub] });
  t.equal(z2.stopSequence, together ? spaced : sub, `[${JSON.stringify(spaced)}, ${JSON.stringify(sub)}]: the first of those found`);
  t.equal(z2.text, before(together ? spaced : sub));

  // A stop that never completes: the text held back for it goes out at the length limit (Ollama flushes it).
  const last = full.chunks.at(-1)!;
  const never = `${last}\u0001never`;
  const w = await viaLmd(b, prompt, { maxTokens: 40, sampling: spec({}), stop: [never] });
  t.equal(w.stop, "maxTokens");
  t.equal(w.text, full.text, "all of the text, the part held back for the stop included");
  t.same(w.tokens, full.tokens, "all of the tokens");
});
