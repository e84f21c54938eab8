/**
 * Chat jobs in the runner child: the turns are rendered with the model's own chat template
 * (chat-history.ts) and generated with `LlamaChat`, which brings function calling (the wrapper's
 * call syntax, with the name and the arguments constrained by grammars) and thought segments.
 *
 * The prompt cache is the loaded model's: the rendered prompt takes the free slot that shares the
 * longest token prefix with it, and LlamaChat evaluates only what follows that prefix.
 */
import { LlamaChat, type ChatHistoryItem, type ChatModelFunctions, type ChatWrapper, type LlamaModel, type LlamaText, type Token } from "node-llama-cpp";
import { samplingOptions, stopSequenceOf } from "../sampling.js";
import { LogprobRecorder } from "../logprobs.js";
import { beginSpeculation } from "../speculative.js";
import { keepFirstSpace } from "../generation.js";
import { CONTEXT_EXCEEDED } from "../protocol.js";
import { withThinkingForm } from "../thinking-form.js";
import { tokenizeLlamaText } from "../tokens.js";
import type { FromRunner } from "../protocol.js";
import { emptyStats, type ChatJob, type ToolCallSpec } from "../types.js";
import { clientSafe } from "./io.js";
import { chatWrapperOf, forcingToolCall, functionsOf, toHistory } from "./chat-history.js";
import { JobFailure, withJob, type Job, type JobHost } from "./job.js";

/** Runs one chat job: `chunk`/`thinking` messages and one `chat-done` or `failed`. */
export function runChat(host: JobHost, id: number, job: ChatJob): Promise<void> {
  return withJob(host, id, { what: "chat", pausable: true, cancelled }, (j) => chat(j, job));
}

/** Cancelled before anything was generated (while the prompt was tokenized): as any cancel, a result. */
function cancelled(id: number): FromRunner {
  return { type: "chat-done", id, result: { toolCalls: [], stats: emptyStats("cancelled") } };
}

async function chat(j: Job, job: ChatJob): Promise<void> {
  const { id, model: l, signal } = j;
  // The template renders first: the parent's render budget times from `render-start` until
  // `prompt-ready` (runner/render-budget.ts). Tokenizing the prompt is outside it: it goes in
  // chunks that a cancel stops (runner/tokens.ts).
  const functions = functionsOf(job);
  if (typeof job.toolChoice === "object" && functions && Object.keys(functions).length === 0)
    throw new JobFailure("invalid", `tool '${job.toolChoice.name}' is not among the tools`);
  const forced = functions !== undefined && (job.toolChoice === "required" || typeof job.toolChoice === "object");
  // The answer opens as the template opens it for `think`; a forced tool call opens with the call.
  const thinking = forced ? undefined : withThinkingForm(l.model, chatWrapperOf(l.model), toHistory(job.turns), job.think);
  const base = thinking?.wrapper ?? chatWrapperOf(l.model);
  const wrapper = forced ? forcingToolCall(base) : base;
  const full = thinking?.history ?? toHistory(job.turns);
  // Every render of the job (the truncation's too) is timed by the parent's render budget.
  const render = (history: ChatHistoryItem[]): LlamaText => {
    j.send({ type: "render-start", id });
    try {
      return renderText(base, history, functions);
    } finally {
      j.send({ type: "prompt-ready", id });
    }
  };
  const fullText = render(full);
  const fullTokens = await tokenizeLlamaText(l.model, fullText, signal);
  if (job.countOnly)
    return j.send({
      type: "chat-done",
      id,
      result: {
        toolCalls: [],
        stats: {
          promptTokens: fullTokens.length,
          promptEvalCount: 0,
          promptEvalNs: 0,
          evalCount: 0,
          evalNs: 0,
          doneReason: "stop",
          context: [],
          truncatedTokens: 0,
        },
      },
    });
  const contextSize = l.context.contextSize;
  const limit = inputLimit(contextSize);
  if (fullTokens.length > limit && job.truncate === false) throw new JobFailure("invalid", CONTEXT_EXCEEDED);
  const { history, tokens } = await fitHistory(render, l.model, full, fullTokens, limit, signal);
  if (tokens.length > limit && functions) await toolsFit(render, l.model, history, Object.keys(functions).length, limit, signal);
  // What still does not fit (one turn longer than the context) LlamaChat cuts from its front.
  const truncatedTokens = fullTokens.length - tokens.length + Math.max(0, tokens.length - limit);
  signal.throwIfAborted();
  const grammar = await l.grammarFor(job.grammar).catch((err: unknown) => {
    throw new JobFailure("invalid", `invalid format schema: ${clientSafe(err)}`);
  });
  const { slot, cached: restored } = await j.takeSlot(tokens);
  // LlamaChat re-evaluates at least the last prompt token, so at most length-1 come from cache.
  const cached = Math.min(restored, tokens.length - 1);
  const recorder = job.logprobs !== undefined ? new LogprobRecorder(slot.sequence, l.model, job.logprobs) : undefined;
  if (recorder) j.defer(() => recorder.restore());
  const session = new LlamaChat({ contextSequence: slot.sequence, chatWrapper: wrapper });
  j.defer(() => session.dispose({ disposeSequence: false }));
  const meter = slot.sequence.tokenMeter;
  const outputBefore = meter.usedOutputTokens;
  const speculation = beginSpeculation(slot.sequence, slot.predictor, job.sampling.speculative);
  const start = process.hrtime.bigint();
  let firstToken: bigint | undefined;
  const first = () => void (firstToken ??= process.hrtime.bigint());
  const keep = keepFirstSpace(l.model);
  const maxTokens = job.fillContext ? Math.max(1, contextSize - tokens.length) : job.maxTokens;
  const result = await session.generateResponse(history, {
    signal: signal,
    stopOnAbortSignal: true,
    ...(maxTokens !== undefined ? { maxTokens } : {}),
    ...samplingOptions(job.sampling, contextSize),
    customStopTriggers: job.stop,
    ...(job.think === false ? { budgets: { thoughtTokens: 0 } } : {}),
    ...(grammar
      ? { grammar }
      : functions
        ? { functions, documentFunctionParams: true, ...(forced ? { maxParallelFunctionCalls: 1 } : {}), onFunctionCallParamsChunk: first }
        : {}),
    onResponseChunk: (chunk) => {
      first();
      if (!chunk.text) return;
      const text = keep(chunk.tokens, chunk.text);
      if (chunk.type === undefined) j.send({ type: "chunk", id, text, ...(recorder ? { logprobs: recorder.take(chunk.tokens) } : {}) });
      else if (chunk.segmentType === "thought") j.send({ type: "thinking", id, text });
    },
  });
  const end = process.hrtime.bigint();
  const firstAt = firstToken ?? end;
  const reason = result.metadata.stopReason;
  const toolCalls: ToolCallSpec[] = (result.functionCalls ?? []).map((c) => ({ name: c.functionName, arguments: isObject(c.params) ? c.params : {} }));
  j.log("debug", "chat prompt evaluated", { promptTokens: tokens.length, cached, evaluated: tokens.length - cached, toolCalls: toolCalls.length });
  j.send({
    type: "chat-done",
    id,
    result: {
      toolCalls,
      stats: {
        promptTokens: tokens.length,
        promptEvalCount: tokens.length - cached,
        promptEvalNs: Number(firstAt - start),
        evalCount: meter.usedOutputTokens - outputBefore,
        evalNs: Number(end - firstAt),
        doneReason: reason === "abort" ? "cancelled" : reason === "maxTokens" ? "length" : "stop",
        context: [],
        truncatedTokens,
        stopSequence: stopSequenceOf(result.metadata),
        draft: speculation(),
      },
    },
  });
}

/** The most prompt tokens evaluated: a tenth of the context stays free for the answer (as generate does). */
function inputLimit(contextSize: number): number {
  return Math.max(1, contextSize - Math.max(1, Math.floor(contextSize / 10)));
}

/**
 * Ollama's chat truncation: the oldest turns go first, system messages (and the tools, which the
 * template renders apart) stay, and so does the last turn. The history starts again at a user turn,
 * so that templates which demand alternating roles still render it. Done here rather than by
 * LlamaChat's context shift so that what is dropped is known, and can be reported. How many of
 * the droppable spans go is found by a binary search over their number (a shorter history renders
 * to fewer tokens): a few renders and tokenizations, not one per message.
 */
async function fitHistory(
  render: (history: ChatHistoryItem[]) => LlamaText,
  model: LlamaModel,
  history: ChatHistoryItem[],
  tokens: Token[],
  limit: number,
  signal: AbortSignal,
): Promise<{ history: ChatHistoryItem[]; tokens: Token[] }> {
  if (tokens.length <= limit) return { history, tokens };
  // The turns before the first non-system one stay; the k-th drop removes everything from there
  // up to the k-th user turn after it, the last user turn never.
  const first = history.findIndex((item) => item.type !== "system");
  const ends: number[] = [];
  for (let end = first; first >= 0; ) {
    end++;
    while (end < history.length && history[end]?.type !== "user") end++;
    if (end >= history.length - 1) break;
    ends.push(end);
  }
  const without = (n: number) => [...history.slice(0, first), ...history.slice(ends[n - 1])];
  let best = { history, tokens };
  let low = 1;
  let high = ends.length;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const kept = without(mid);
    const keptTokens = await tokenizeLlamaText(model, render(kept), signal);
    if (keptTokens.length <= limit) {
      best = { history: kept, tokens: keptTokens };
      high = mid - 1;
    } else {
      // Dropping everything that may go and still too long: that is the best there is.
      if (mid === ends.length) best = { history: kept, tokens: keptTokens };
      low = mid + 1;
    }
  }
  return best;
}

/**
 * A prompt still over the context after truncation is cut from its front by LlamaChat, which
 * cannot cut the tools' documentation: when the tools and system messages alone do not fit, the
 * request is refused (a 400: the client's tools are too many for this context).
 */
async function toolsFit(
  render: (history: ChatHistoryItem[]) => LlamaText,
  model: LlamaModel,
  history: ChatHistoryItem[],
  tools: number,
  limit: number,
  signal: AbortSignal,
): Promise<void> {
  const fixed: ChatHistoryItem[] = [...history.filter((item) => item.type === "system"), { type: "user", text: "" }, { type: "model", response: [] }];
  const tokens = (await tokenizeLlamaText(model, render(fixed), signal)).length;
  if (tokens > limit)
    throw new JobFailure("invalid", `the tools (${tools}) and system messages take ${tokens} tokens, more than the context allows for a prompt (${limit})`);
}

/** The prompt exactly as LlamaChat renders it (BOS included once tokenized): for the slot pick and the counts. */
function renderText(wrapper: ChatWrapper, history: ChatHistoryItem[], functions: ChatModelFunctions | undefined): LlamaText {
  try {
    const state = wrapper.generateContextState({ chatHistory: history, ...(functions ? { availableFunctions: functions, documentFunctionParams: true } : {}) });
    return state.contextText;
  } catch (err) {
    // Jinja templates reject some histories (roles out of order, a tool schema they cannot show).
    throw new JobFailure("invalid", `the model's chat template cannot render these messages: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

