/**
 * Generate jobs in the runner child: a raw or templated prompt (a chat rendered with the model's own
 * template for a text answer) evaluated in the slot with the longest cached prefix, then generated
 * token by token; `chunk` messages while it runs and one `done` (or `failed`) at the end.
 */
import type { LlamaCompletion, LlamaGrammar, LlamaModel, LlamaText, Token } from "node-llama-cpp";
import { samplingOptions, stopSequenceOf } from "../sampling.js";
import { CONTEXT_EXCEEDED } from "../protocol.js";
import type { FromRunner } from "../protocol.js";
import { emptyStats, type GenerateJob, type GenerateStats, type TokenLogprob } from "../types.js";
import { answerPrompt } from "../thinking-form.js";
import { tokenizeAsync, tokenizeLlamaText } from "../tokens.js";
import { LogprobRecorder } from "../logprobs.js";
import { beginSpeculation } from "../speculative.js";
import { generateText, keepFirstSpace, plainTriggers, type GenerationOptions, type GenerationResult } from "../generation.js";
import { clientSafe } from "./io.js";
import { chatWrapperOf, toHistory } from "./chat-history.js";
import { JobFailure, withJob, type Job, type JobHost } from "./job.js";

/** Runs one generate job. */
export function runGenerate(host: JobHost, id: number, job: GenerateJob): Promise<void> {
  return withJob(host, id, { what: "generation", pausable: true, cancelled }, (j) => generate(j, job));
}

/** Cancelled before anything was generated (while the prompt was tokenized): as any cancel, `done`. */
function cancelled(id: number): FromRunner {
  return { type: "done", id, stats: emptyStats("cancelled") };
}

async function generate(j: Job, job: GenerateJob): Promise<void> {
  const { id, model: l, signal } = j;
  const { tokens: all, stopTriggers } = await promptTokens(j, job);
  signal.throwIfAborted();
  let grammar: LlamaGrammar | undefined;
  try {
    grammar = await l.grammarFor(job.grammar);
  } catch (err) {
    throw new JobFailure("invalid", `invalid format schema: ${clientSafe(err)}`);
  }
  const bos = l.model.tokens.bos;
  const hasBos = bos !== null && l.model.tokens.shouldPrependBosToken;
  const contextSize = l.context.contextSize;
  const shift = Math.max(1, Math.floor(contextSize / 10));
  const maxInput = Math.max(1, contextSize - shift - (hasBos ? 1 : 0));
  const truncatedTokens = Math.max(0, all.length - maxInput);
  if (truncatedTokens > 0 && job.truncate === false) throw new JobFailure("invalid", CONTEXT_EXCEEDED);
  const tokens = truncatedTokens > 0 ? all.slice(truncatedTokens) : all;
  const evaluated = hasBos && bos !== null ? [bos, ...tokens] : tokens;
  const { slot, cached: restored } = await j.takeSlot(evaluated);
  // LlamaCompletion re-evaluates at least the last prompt token, so at most length-1 come from cache.
  const cached = Math.min(restored, evaluated.length - 1);
  const generated: Token[] = [];
  const speculation = beginSpeculation(slot.sequence, slot.predictor, job.sampling.speculative);
  const start = process.hrtime.bigint();
  let firstToken: bigint | undefined;
  const recorder = job.logprobs !== undefined ? new LogprobRecorder(slot.sequence, l.model, job.logprobs) : undefined;
  if (recorder) j.defer(() => recorder.restore());
  // onToken and onTextChunk are called in pairs for the same tokens: the chunk carries their logprobs.
  let pending: TokenLogprob[] | undefined;
  const onToken = (t: Token[]) => {
    firstToken ??= process.hrtime.bigint();
    generated.push(...t);
    if (recorder) pending = [...(pending ?? []), ...recorder.take(t)];
  };
  const onTextChunk = (text: string) => {
    if (text || pending?.length) j.send({ type: "chunk", id, text, ...(pending ? { logprobs: pending } : {}) });
    pending = undefined;
  };
  const options = {
    signal,
    maxTokens: job.maxTokens,
    fillContext: job.fillContext,
    sampling: samplingOptions(job.sampling, contextSize),
    stop: job.stop,
    grammar,
    specialTokens: job.specialTokens,
    onToken,
    onTextChunk,
  };
  // lmd's own generation (Ollama's stop rules) where every stop is plain text; a chat template's
  // stop triggers (special tokens among them) go through node-llama-cpp's completion.
  const { stopReason: reason, stop } =
    stopTriggers.length > 0 || plainTriggers(grammar) === undefined
      ? await completeWith(slot.completion, l.model, tokens, options, stopTriggers)
      : await generateText(slot.sequence, tokens, options);
  const end = process.hrtime.bigint();
  const firstAt = firstToken ?? end;
  const stats: GenerateStats = {
    promptTokens: evaluated.length,
    promptEvalCount: evaluated.length - cached,
    promptEvalNs: Number(firstAt - start),
    evalCount: generated.length,
    evalNs: Number(end - firstAt),
    doneReason: reason === "abort" ? "cancelled" : reason === "maxTokens" ? "length" : "stop",
    context: [...tokens, ...generated],
    truncatedTokens: truncatedTokens + (job.droppedTokens ?? 0),
    // The chat wrapper's own triggers are custom ones here too: only the request's count.
    stopSequence: stop !== undefined && job.stop.includes(stop) ? stop : undefined,
    draft: speculation(),
  };
  j.send({ type: "done", id, stats });
}

/**
 * Tokens to evaluate for a job, without the BOS that LlamaCompletion prepends itself. A chat prompt
 * renders first, between `render-start` and `prompt-ready` (the parent's render budget times that
 * span: runner/render-budget.ts); tokenizing follows, in chunks that a cancel stops.
 */
async function promptTokens(j: Job, job: GenerateJob): Promise<{ tokens: Token[]; stopTriggers: LlamaText[] }> {
  const { model } = j.model;
  const context = (job.prompt.context ?? []) as Token[];
  const size = j.model.vocabularySize;
  // An id past the vocabulary fails llama.cpp's decode (the size is unknown only without a token list).
  const outside = size > 0 ? context.find((t) => t >= size) : undefined;
  if (outside !== undefined) throw new JobFailure("invalid", `context token ${outside} is not in the model's vocabulary (size ${size})`);
  if (job.prompt.kind === "text")
    return { tokens: [...context, ...(await tokenizeAsync(model, job.prompt.text, true, undefined, j.signal))], stopTriggers: [] };
  j.send({ type: "render-start", id: j.id });
  const { text, stopTriggers } = answerPrompt(model, chatWrapperOf(model), toHistory(job.prompt.turns), job.prompt.think);
  j.send({ type: "prompt-ready", id: j.id });
  let tokens = await tokenizeLlamaText(model, text, j.signal);
  if (tokens[0] !== undefined && tokens[0] === model.tokens.bos) tokens = tokens.slice(1);
  return { tokens: [...context, ...tokens], stopTriggers };
}

/** The generation on node-llama-cpp's LlamaCompletion, for stop triggers that are not plain text. */
async function completeWith(
  completion: LlamaCompletion,
  model: LlamaModel,
  tokens: Token[],
  o: GenerationOptions,
  stopTriggers: LlamaText[],
): Promise<GenerationResult> {
  const keep = keepFirstSpace(model);
  let since: Token[] = [];
  const { metadata } = await completion.generateCompletionWithMeta(tokens, {
    signal: o.signal,
    stopOnAbortSignal: true,
    ...(o.fillContext ? { disableContextShift: true } : {}),
    ...(o.maxTokens !== undefined ? { maxTokens: o.maxTokens } : {}),
    ...o.sampling,
    ...(o.grammar ? { grammar: o.grammar } : {}),
    customStopTriggers: [...o.stop, ...stopTriggers],
    onToken: (t) => {
      since.push(...t);
      o.onToken(t);
    },
    onTextChunk: (text) => {
      o.onTextChunk(keep(since, text));
      since = [];
    },
  });
  return { stopReason: metadata.stopReason, stop: stopSequenceOf(metadata) };
}
