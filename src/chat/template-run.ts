/**
 * Chat through a Go template, as Ollama's ChatHandler does it for template models: the prompt
 * rendered by chatPrompt (prompt.ts) is evaluated by the runner as text with special tokens, and
 * the output is split into thinking, content and tool calls, each handed to the sink as it is parsed.
 */
import type { CompletionSink, OnText } from "../runner/handle.js";
import type { GenerateStats, GrammarSpec, TokenLogprob, ToolCallSpec, ToolChoice, ToolSpec } from "../runner/types.js";
import type { Lease } from "../scheduler/scheduler.js";
import type { Template } from "../template/index.js";
import { toolCallTag } from "../template/tools.js";
import type { ResolvedOptions } from "./options.js";
import { renderTemplate, type ChatPrompt, type PromptRuntime } from "./prompt.js";
import { type OutputParser, OutputSplitter, templateThinks } from "./template.js";

/** A Go-template chat to run: its rendered prompt (with what a second pass renders again) and its settings. */
interface TemplateRun {
  prompt: Extract<ChatPrompt, { kind: "template" }>;
  opts: ResolvedOptions;
  grammar?: GrammarSpec | undefined;
  toolChoice?: ToolChoice | undefined;
  logprobs?: number | undefined;
}

/**
 * Runs the chat; content, thoughts and calls go to the sink as they are parsed. A `format` on a
 * model that thinks (its thinking parser on, or harmony's unless `think: false`) takes Ollama's two
 * passes: the model thinks unconstrained, and once its answer begins that pass stops (the answer's
 * first piece unsent), the thought is put in the conversation as an assistant turn, and a second
 * pass renders it and answers under the grammar; the parser goes on from where the first left it,
 * and the stats are the second pass's, as Ollama's. A model that answers without thinking first is
 * never constrained (as Ollama).
 */
export async function runTemplateChat(lease: Lease, rt: PromptRuntime, run: TemplateRun, sink: CompletionSink): Promise<GenerateStats> {
  const { prompt, opts } = run;
  const { template: t, think, tools, harmony, call } = prompt;
  const signal = sink.signal ?? new AbortController().signal;
  const thinks = think !== undefined && think !== false;
  const splitter: OutputParser = harmony ?? new OutputSplitter(t, { think: thinks, tools, prompt: prompt.text });
  const emit = (p: { thinking: string; content: string; calls: ToolCallSpec[] }, lps?: TokenLogprob[]) => {
    if (p.thinking) sink.onThinking?.(p.thinking);
    // Logprobs go out even while the parser holds the text back (as Ollama sends them).
    if (p.content || lps?.length) sink.onText(p.content, lps);
    if (p.calls.length > 0) sink.onToolCalls?.(p.calls);
  };
  // Harmony's calls are messages to a recipient, not JSON objects: tool_choice is not forced (as Ollama).
  const grammar = run.grammar ?? (harmony ? undefined : forcedCall(t, tools, run.toolChoice));
  // Harmony's tags are special tokens: the runner writes them out as text for its parser.
  const generate = (text: string, grammar: GrammarSpec | undefined, dropped: number, onText: OnText, runSignal: AbortSignal) => {
    const job = {
      prompt: { kind: "text" as const, text },
      sampling: opts.sampling,
      maxTokens: opts.maxTokens,
      fillContext: opts.fillContext,
      stop: opts.stop,
      grammar,
      logprobs: run.logprobs,
      truncate: call.truncate,
      droppedTokens: dropped,
      specialTokens: harmony !== undefined,
    };
    return lease.runner.complete({ kind: "generate", job }, { onText, signal: runSignal, flow: sink.flow });
  };
  const finish = (stats: GenerateStats): GenerateStats => {
    if (stats.doneReason !== "cancelled") emit(splitter.end());
    return { ...stats, context: [] };
  };
  const parse: OnText = (text, lps) => emit(splitter.add(text), lps);

  if (!(run.grammar && thinks && (harmony || templateThinks(t)))) {
    // No thought comes first: the grammar applies at once (harmony: to the final channel, opened
    // here; lmd's choice, where Ollama's constrained text would be taken for a header and dropped).
    return finish(await generate(harmony && grammar ? prompt.text + harmony.openFinal() : prompt.text, grammar, prompt.droppedTokens, parse, signal));
  }
  let thought = "";
  let answering = false;
  const stop = new AbortController();
  const first = await generate(prompt.text, undefined, prompt.droppedTokens, (text, lps) => {
    if (answering) return;
    const p = splitter.add(text);
    thought += p.thinking;
    if (thought === "" || p.content === "") return emit(p, lps);
    answering = true;
    emit({ ...p, content: "" }, lps);
    stop.abort();
  }, AbortSignal.any([signal, stop.signal]));
  if (!answering || signal.aborted) return finish(first);
  const again = await renderTemplate(rt, t, { ...call, turns: [...call.turns, { role: "assistant", content: "", thinking: thought }] });
  return finish(await generate(again.text + (again.harmony?.openFinal() ?? ""), run.grammar, again.droppedTokens, parse, signal));
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
