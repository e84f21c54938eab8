/**
 * Chat through a Go template, as Ollama's ChatHandler does it for template models: the
 * conversation rendered by chatPrompt (history truncated to the context), evaluated by the runner as text with special tokens, and the output split into
 * thinking, content and tool calls.
 */
import { BadRequestError } from "../errors.js";
import type { OnChunk, OutputFlow } from "../runner/client.js";
import type { ChatResult, ChatTurn, GenerateStats, GrammarSpec, TokenLogprob, ToolCallSpec, ToolChoice, ToolSpec } from "../runner/protocol.js";
import type { Lease } from "../scheduler/scheduler.js";
import type { Template } from "../template/index.js";
import { HarmonyOutput } from "../template/harmony.js";
import { chatPrompt, type ThinkValue } from "../template/prompt.js";
import { toolCallTag } from "../template/tools.js";
import type { ResolvedOptions } from "./options.js";
import { type OutputParser, OutputSplitter, templateThinks, toApiTools, toMessages } from "./prompt.js";

export interface TemplateChat {
  /** The name as the client wrote it (for the thinking error). */
  name: string;
  opts: ResolvedOptions;
  /** The whole conversation (the model's SYSTEM and MESSAGE lines included: `conversation`). */
  turns: ChatTurn[];
  tools?: ToolSpec[] | undefined;
  toolChoice?: ToolChoice | undefined;
  grammar?: GrammarSpec | undefined;
  think?: ThinkValue;
  logprobs?: number | undefined;
  /** false: never drop messages (a prompt over the context is then the runner's 400). */
  truncate?: boolean | undefined;
  /** The model's output is harmony (gpt-oss; template/harmony.ts `usesHarmony`). */
  harmony?: boolean | undefined;
}

/** What rendering needs of a loaded model: its context size and its tokenizer. */
export interface PromptRuntime {
  contextSize: number;
  tokenize(text: string): Promise<ArrayLike<number>>;
}

/** The lease's runner as a PromptRuntime; aborting `signal` (the client left) stops its tokenizing. */
export function runtimeOf(lease: Lease, signal?: AbortSignal): PromptRuntime {
  return { contextSize: lease.runner.info.contextSize, tokenize: (text) => lease.runner.tokenize(text, signal) };
}

/** Thrown by `noRunner`'s tokenize: this prompt needs the model's tokenizer to be cut to fit. */
export class NeedsRunner extends Error {}

/**
 * Rendering without loading the model (`_debug_render_only`): enough whenever the prompt's bytes
 * fit `contextSize`, since a token never covers less than a byte; otherwise NeedsRunner.
 */
export function noRunner(contextSize: number): PromptRuntime {
  return { contextSize, tokenize: () => Promise.reject(new NeedsRunner()) };
}

/**
 * Ollama's think rule: a template that shows thoughts, or a harmony model, thinks unless told not
 * to; `think` set on one that cannot is a 400. (A harmony model told not to think still writes its
 * analysis, reported as thinking: its template only leaves out the reasoning level.)
 */
export function effectiveThink(t: Template, name: string, think: ThinkValue, harmony = false): ThinkValue {
  // Harmony's reasoning levels end at high (as Ollama maps "max").
  if (harmony) return think === "max" ? "high" : (think ?? true);
  if (templateThinks(t)) return think ?? true;
  if (think !== undefined && think !== false) throw new BadRequestError(`"${name}" does not support thinking`);
  return think;
}

/** The prompt the model would evaluate for this chat (also `_debug_render_only`'s answer). */
export async function renderTemplateChat(
  rt: PromptRuntime,
  t: Template,
  call: TemplateChat,
): Promise<{ prompt: string; think: ThinkValue; tools: ToolSpec[] | undefined; droppedTokens: number; harmony: HarmonyOutput | undefined }> {
  const think = effectiveThink(t, call.name, call.think, call.harmony);
  const tools = call.toolChoice === "none" ? undefined : call.tools;
  // Ollama's tools capability: the template must show `.Tools` to the model.
  if (tools?.length && !t.vars().has("tools")) throw new BadRequestError(`model '${call.name}' does not support tools`);
  // Harmony's parser starts inside the message the last turn leaves open, and names tools as identifiers.
  const harmony = call.harmony ? new HarmonyOutput(call.turns.at(-1)) : undefined;
  const shown = harmony && tools ? tools.map((x) => ({ ...x, name: harmony.names.add(x.name) })) : tools;
  const input = { messages: toMessages(call.turns), tools: toApiTools(shown), think, numCtx: rt.contextSize, tokenize: (text: string) => rt.tokenize(text), truncate: call.truncate };
  const { prompt, dropped } = await chatPrompt(t, input);
  // The tokens the dropped messages took: the whole history's prompt less the one kept (reported as truncated_tokens).
  const droppedTokens = dropped > 0 ? Math.max(0, (await rt.tokenize((await chatPrompt(t, { ...input, truncate: false })).prompt)).length - (await rt.tokenize(prompt)).length) : 0;
  return { prompt, think, tools, droppedTokens, harmony };
}

/** Callbacks of a chat: content (with its logprobs), thoughts, and tool calls as soon as each is parsed. */
export interface ChatCallbacks {
  onChunk: OnChunk;
  onThinking?: ((text: string) => void) | undefined;
  /** When given, calls are handed over as they are parsed (and not repeated in the result). */
  onToolCalls?: ((calls: ToolCallSpec[]) => void) | undefined;
}

/**
 * Runs the chat; content, thoughts and calls stream through `on`; calls not streamed come back in the
 * result. A `format` on a model that thinks (its thinking parser on, or harmony's unless `think:
 * false`) takes Ollama's two passes: the model thinks unconstrained, and once its answer begins that
 * pass stops (the answer's first piece unsent), the thought is put in the conversation as an
 * assistant turn, and a second pass renders it and answers under the grammar; the parser goes on
 * from where the first left it, and the stats are the second pass's, as Ollama's. A model that
 * answers without thinking first is never constrained (as Ollama).
 */
export async function runTemplateChat(lease: Lease, t: Template, call: TemplateChat, on: ChatCallbacks, signal: AbortSignal, flow?: OutputFlow): Promise<ChatResult> {
  const rt = runtimeOf(lease, signal);
  const { prompt, think, tools, droppedTokens, harmony } = await renderTemplateChat(rt, t, call);
  const thinks = think !== undefined && think !== false;
  const splitter: OutputParser = harmony ?? new OutputSplitter(t, { think: thinks, tools, prompt });
  const toolCalls: ToolCallSpec[] = [];
  const emit = (p: { thinking: string; content: string; calls: ToolCallSpec[] }, lps?: TokenLogprob[]) => {
    if (p.thinking) on.onThinking?.(p.thinking);
    // Logprobs go out even while the parser holds the text back (as Ollama sends them).
    if (p.content || lps?.length) on.onChunk(p.content, lps);
    if (p.calls.length === 0) return;
    if (on.onToolCalls) on.onToolCalls(p.calls);
    else toolCalls.push(...p.calls);
  };
  const { opts } = call;
  // Harmony's calls are messages to a recipient, not JSON objects: tool_choice is not forced (as Ollama).
  const grammar = call.grammar ?? (harmony ? undefined : forcedCall(t, tools, call.toolChoice));
  // Harmony's tags are special tokens: the runner writes them out as text for its parser.
  const run = (text: string, grammar: GrammarSpec | undefined, dropped: number, onText: OnChunk, runSignal: AbortSignal) => {
    const job = { prompt: { kind: "text" as const, text }, sampling: opts.sampling, maxTokens: opts.maxTokens, fillContext: opts.fillContext, stop: opts.stop, grammar, logprobs: call.logprobs, truncate: call.truncate, droppedTokens: dropped, specialTokens: harmony !== undefined };
    return lease.runner.generate(job, onText, runSignal, flow);
  };
  const finish = (stats: GenerateStats): ChatResult => {
    if (stats.doneReason !== "cancelled") emit(splitter.end());
    return { stats: { ...stats, context: [] }, toolCalls };
  };
  const parse: OnChunk = (text, lps) => emit(splitter.add(text), lps);

  if (!(call.grammar && thinks && (harmony || templateThinks(t)))) {
    // No thought comes first: the grammar applies at once (harmony: to the final channel, opened
    // here; lmd's choice, where Ollama's constrained text would be taken for a header and dropped).
    return finish(await run(harmony && grammar ? prompt + harmony.openFinal() : prompt, grammar, droppedTokens, parse, signal));
  }
  let thought = "";
  let answering = false;
  const stop = new AbortController();
  const first = await run(prompt, undefined, droppedTokens, (text, lps) => {
    if (answering) return;
    const p = splitter.add(text);
    thought += p.thinking;
    if (thought === "" || p.content === "") return emit(p, lps);
    answering = true;
    emit({ ...p, content: "" }, lps);
    stop.abort();
  }, AbortSignal.any([signal, stop.signal]));
  if (!answering || signal.aborted) return finish(first);
  const again = await renderTemplateChat(rt, t, { ...call, turns: [...call.turns, { role: "assistant", content: "", thinking: thought }] });
  return finish(await run(again.prompt + (again.harmony?.openFinal() ?? ""), call.grammar, again.droppedTokens, parse, signal));
}

/**
 * `tool_choice: "required"` or a named function on a template whose calls are bare JSON: the answer
 * is constrained to a call object (`{"name": ..., "arguments": {...}}`) by grammar, which the tool
 * parser then reads. Templates with other call tags are not constrained (Ollama ignores tool_choice).
 */
function forcedCall(t: Template, tools: ToolSpec[] | undefined, choice: ToolChoice | undefined): GrammarSpec | undefined {
  if (!tools?.length || choice === undefined || choice === "auto" || choice === "none" || toolCallTag(t.root) !== "{") return undefined;
  const allowed = typeof choice === "object" ? tools.filter((x) => x.name === choice.name) : tools;
  const calls = allowed.map((x) => ({
    type: "object",
    properties: { name: { const: x.name }, arguments: x.parameters ?? { type: "object", properties: {} } },
    required: ["name", "arguments"],
    additionalProperties: false,
  }));
  return { kind: "schema", schema: calls.length === 1 ? (calls[0] as object) : { oneOf: calls } };
}
