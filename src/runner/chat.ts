/**
 * Chat jobs in the runner child (imported only by child.ts): the turns are rendered with the
 * model's own chat template (node-llama-cpp's chat wrapper for the GGUF's `tokenizer.chat_template`,
 * Jinja templates included) and generated with `LlamaChat`, which brings function calling (the
 * wrapper's call syntax, with the name and the arguments constrained by grammars) and thought segments.
 *
 * The prompt cache is the child's: the rendered prompt picks the free slot that shares the
 * longest token prefix with it, and LlamaChat evaluates only what follows that prefix.
 */
import {
  LlamaChat,
  LlamaText,
  resolveChatWrapper,
  type ChatHistoryItem,
  type ChatModelFunctionCall,
  type ChatModelFunctions,
  type ChatModelResponse,
  type ChatWrapper,
  type ChatWrapperGeneratedContextState,
  type GbnfJsonSchema,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import type { JobRuntime, Slot } from "./runtime.js";
import { samplingOptions, stopSequenceOf } from "./sampling.js";
import { LogprobRecorder } from "./logprobs.js";
import { beginSpeculation } from "./speculative.js";
import { keepFirstSpace } from "./generation.js";
import { CONTEXT_EXCEEDED } from "./protocol.js";
import { PauseSwitch } from "./flow.js";
import { withThinkingForm } from "./thinking-form.js";
import { tokenizeLlamaText } from "./tokens.js";
import type { ChatJob, ChatTurn, RunnerFailureKind, ToolCallSpec } from "./protocol.js";

/** What chat and embed jobs use of the child process: the loaded model, its slots, IPC. */
const wrappers = new WeakMap<LlamaModel, ChatWrapper>();

/** The model's chat wrapper (resolved once per model). */
export function chatWrapperOf(model: LlamaModel): ChatWrapper {
  let wrapper = wrappers.get(model);
  if (!wrapper) {
    wrapper = resolveChatWrapper(model);
    wrappers.set(model, wrapper);
  }
  return wrapper;
}

/** True when the model's chat template knows thought segments (`think` is supported). */
export function supportsThinking(model: LlamaModel): boolean {
  return chatWrapperOf(model).settings.segments?.thought != null;
}

/**
 * The same wrapper, but the model's answer starts inside a function call: LlamaChat then injects
 * the wrapper's call prefix and generates the name and the arguments under grammars. This is how
 * `tool_choice: "required"` (or a named function) is enforced, even for a model with random weights.
 */
function forcingToolCall(wrapper: ChatWrapper): ChatWrapper {
  const forced = Object.create(wrapper) as ChatWrapper;
  forced.generateContextState = (options): ChatWrapperGeneratedContextState => {
    const state = wrapper.generateContextState.call(forced, options);
    // Wrappers whose answers may open in function mode (Functionary): open in it, with no way out.
    if (state.functionCall) return { ...state, functionCall: { initiallyEngaged: true, disengageInitiallyEngaged: [] } };
    const { ignoreStartText: _ignore, functionCall: _call, prefixTriggers: _triggers, ...rest } = state;
    // Without prefix triggers, LlamaChat performs `noPrefixTrigger` at once. The inject is empty:
    // the function-name mode evaluates the call prefix itself (a non-empty one would repeat it).
    return { ...rest, noPrefixTrigger: { type: "functionCall", inject: LlamaText("") } };
  };
  return forced;
}

/** Ollama/OpenAI turns → node-llama-cpp's history. Tool results join the call they answer. */
export function toHistory(turns: readonly ChatTurn[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  let open: ChatModelResponse | undefined; // the model turn that tool results and a continuation join
  for (const turn of turns) {
    if (turn.role === "system") history.push({ type: "system", text: turn.content });
    else if (turn.role === "user") history.push({ type: "user", text: turn.content });
    else if (turn.role === "assistant") {
      const item: ChatModelResponse = open ?? { type: "model", response: [] };
      if (!open) history.push(item);
      if (turn.content) item.response.push(turn.content);
      for (const call of turn.toolCalls ?? []) item.response.push({ type: "functionCall", name: call.name, params: call.arguments, result: undefined });
      open = turn.toolCalls?.length ? item : undefined;
      continue;
    } else {
      const call = open && unanswered(open, turn.toolName);
      if (call) call.result = parseResult(turn.content);
      else history.push({ type: "user", text: turn.content }); // a result without its call: plain context
      continue;
    }
    open = undefined;
  }
  const last = history[history.length - 1];
  // A trailing assistant turn is continued (prefill); a trailing tool result is answered in the same turn.
  if (last?.type !== "model") history.push({ type: "model", response: [] });
  // A call the messages give no result for is shown with an empty one.
  for (const item of history) if (item.type === "model") for (const r of item.response) if (typeof r !== "string" && r.type === "functionCall") r.result ??= "";
  return history;
}

function unanswered(item: ChatModelResponse, name: string | undefined): ChatModelFunctionCall | undefined {
  const calls = item.response.filter((r): r is ChatModelFunctionCall => typeof r !== "string" && r.type === "functionCall" && r.result === undefined);
  return (name ? calls.find((c) => c.name === name) : undefined) ?? calls[0];
}

/** A tool result that is JSON is shown to the model as JSON, anything else as text. */
function parseResult(content: string): unknown {
  try {
    return JSON.parse(content) as unknown;
  } catch {
    return content;
  }
}

function functionsOf(job: ChatJob): ChatModelFunctions | undefined {
  if (!job.tools?.length || job.grammar || job.toolChoice === "none") return undefined;
  const named = typeof job.toolChoice === "object" ? job.toolChoice.name : undefined;
  const functions: Record<string, { description?: string; params?: GbnfJsonSchema }> = {};
  for (const tool of job.tools) {
    if (named !== undefined && tool.name !== named) continue;
    functions[tool.name] = {
      ...(tool.description ? { description: tool.description } : {}),
      ...(tool.parameters ? { params: tool.parameters as GbnfJsonSchema } : {}),
    };
  }
  return functions;
}

class JobFailure extends Error {
  constructor(readonly kind: RunnerFailureKind, message: string) {
    super(message);
  }
}

/** Runs one chat job and answers with `chunk`/`thinking` messages and one `chat-done` or `failed`. */
export async function runChat(rt: JobRuntime, id: number, job: ChatJob): Promise<void> {
  const l = rt.loaded();
  if (!l) return rt.send({ type: "failed", id, kind: "other", message: "model is not loaded" });
  const abort = new AbortController();
  rt.jobs.set(id, abort);
  const pause = new PauseSwitch(abort.signal);
  rt.pauses.set(id, pause);
  let slot: Slot | undefined;
  let chat: LlamaChat | undefined;
  let recorder: LogprobRecorder | undefined;
  try {
    // The template renders first: the parent's render budget times from `render-start` until
    // `prompt-ready` (runner/render-budget.ts). Tokenizing the prompt is outside it: it goes in
    // chunks that a cancel stops (runner/tokens.ts).
    const functions = functionsOf(job);
    if (typeof job.toolChoice === "object" && functions && Object.keys(functions).length === 0) throw new JobFailure("invalid", `tool '${job.toolChoice.name}' is not among the tools`);
    const forced = functions !== undefined && (job.toolChoice === "required" || typeof job.toolChoice === "object");
    // The answer opens as the template opens it for `think`; a forced tool call opens with the call.
    const thinking = forced ? undefined : withThinkingForm(l.model, chatWrapperOf(l.model), toHistory(job.turns), job.think);
    const base = thinking?.wrapper ?? chatWrapperOf(l.model);
    const wrapper = forced ? forcingToolCall(base) : base;
    const full = thinking?.history ?? toHistory(job.turns);
    // Every render of the job (the truncation's too) is timed by the parent's render budget.
    const render = (history: ChatHistoryItem[]): LlamaText => {
      rt.send({ type: "render-start", id });
      try {
        return renderText(base, history, functions);
      } finally {
        rt.send({ type: "prompt-ready", id });
      }
    };
    const fullText = render(full);
    const fullTokens = await tokenizeLlamaText(l.model, fullText, abort.signal);
    if (job.countOnly) return rt.send({ type: "chat-done", id, result: { toolCalls: [], stats: { promptTokens: fullTokens.length, promptEvalCount: 0, promptEvalNs: 0, evalCount: 0, evalNs: 0, doneReason: "stop", context: [], truncatedTokens: 0 } } });
    const contextSize = l.context.contextSize;
    const limit = inputLimit(contextSize);
    if (fullTokens.length > limit && job.truncate === false) throw new JobFailure("invalid", CONTEXT_EXCEEDED);
    const { history, tokens } = await fitHistory(render, l.model, full, fullTokens, limit, abort.signal);
    if (tokens.length > limit && functions) await toolsFit(render, l.model, history, Object.keys(functions).length, limit, abort.signal);
    // What still does not fit (one turn longer than the context) LlamaChat cuts from its front.
    const truncatedTokens = fullTokens.length - tokens.length + Math.max(0, tokens.length - limit);
    abort.signal.throwIfAborted();
    const grammar = await rt.grammarFor(l, job.grammar).catch((err: unknown) => {
      throw new JobFailure("invalid", `invalid format schema: ${rt.clientSafe(err)}`);
    });
    const picked = await rt.takeSlot(l, tokens, abort.signal);
    if (!picked) throw new JobFailure("other", "no free slot in the runner");
    slot = picked.slot;
    slot.pause = pause;
    // LlamaChat re-evaluates at least the last prompt token, so at most length-1 come from cache.
    const cached = Math.min(picked.cached, tokens.length - 1);
    if (job.logprobs !== undefined) recorder = new LogprobRecorder(slot.sequence, l.model, job.logprobs);
    chat = new LlamaChat({ contextSequence: slot.sequence, chatWrapper: wrapper });
    const meter = slot.sequence.tokenMeter;
    const outputBefore = meter.usedOutputTokens;
    const speculation = beginSpeculation(slot.sequence, slot.predictor, job.sampling.speculative);
    const start = process.hrtime.bigint();
    let firstToken: bigint | undefined;
    const first = () => void (firstToken ??= process.hrtime.bigint());
    const keep = keepFirstSpace(l.model);
    const maxTokens = job.fillContext ? Math.max(1, contextSize - tokens.length) : job.maxTokens;
    const result = await chat.generateResponse(history, {
      signal: abort.signal,
      stopOnAbortSignal: true,
      ...(maxTokens !== undefined ? { maxTokens } : {}),
      ...samplingOptions(job.sampling, contextSize),
      customStopTriggers: job.stop,
      ...(job.think === false ? { budgets: { thoughtTokens: 0 } } : {}),
      ...(grammar ? { grammar } : functions ? { functions, documentFunctionParams: true, ...(forced ? { maxParallelFunctionCalls: 1 } : {}), onFunctionCallParamsChunk: first } : {}),
      onResponseChunk: (chunk) => {
        first();
        if (!chunk.text) return;
        const text = keep(chunk.tokens, chunk.text);
        if (chunk.type === undefined) rt.send({ type: "chunk", id, text, ...(recorder ? { logprobs: recorder.take(chunk.tokens) } : {}) });
        else if (chunk.segmentType === "thought") rt.send({ type: "thinking", id, text });
      },
    });
    const end = process.hrtime.bigint();
    const firstAt = firstToken ?? end;
    const reason = result.metadata.stopReason;
    const toolCalls: ToolCallSpec[] = (result.functionCalls ?? []).map((c) => ({ name: c.functionName, arguments: isObject(c.params) ? c.params : {} }));
    rt.log("debug", "chat prompt evaluated", { promptTokens: tokens.length, cached, evaluated: tokens.length - cached, toolCalls: toolCalls.length });
    rt.send({
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
  } catch (err) {
    if (err instanceof JobFailure) return rt.send({ type: "failed", id, kind: err.kind, message: err.message });
    // Cancelled before anything was generated (while the prompt was tokenized): as any cancel, a result.
    if (abort.signal.aborted) return rt.send({ type: "chat-done", id, result: { toolCalls: [], stats: { promptTokens: 0, promptEvalCount: 0, promptEvalNs: 0, evalCount: 0, evalNs: 0, doneReason: "cancelled", context: [], truncatedTokens: 0 } } });
    const oom = /out of memory/i.test(String(err));
    rt.log("error", "chat failed", { err: err instanceof Error ? { message: err.message, stack: err.stack } : String(err) });
    rt.send({ type: "failed", id, kind: oom ? "memory" : "other", message: oom ? "out of memory" : rt.clientSafe(err, l.modelFile) });
  } finally {
    chat?.dispose({ disposeSequence: false });
    recorder?.restore();
    if (slot) {
      slot.busy = false;
      slot.pause = undefined;
    }
    rt.jobs.delete(id);
    rt.pauses.delete(id);
  }
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
async function fitHistory(render: (history: ChatHistoryItem[]) => LlamaText, model: LlamaModel, history: ChatHistoryItem[], tokens: Token[], limit: number, signal: AbortSignal): Promise<{ history: ChatHistoryItem[]; tokens: Token[] }> {
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
async function toolsFit(render: (history: ChatHistoryItem[]) => LlamaText, model: LlamaModel, history: ChatHistoryItem[], tools: number, limit: number, signal: AbortSignal): Promise<void> {
  const fixed: ChatHistoryItem[] = [...history.filter((item) => item.type === "system"), { type: "user", text: "" }, { type: "model", response: [] }];
  const tokens = (await tokenizeLlamaText(model, render(fixed), signal)).length;
  if (tokens > limit) throw new JobFailure("invalid", `the tools (${tools}) and system messages take ${tokens} tokens, more than the context allows for a prompt (${limit})`);
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

