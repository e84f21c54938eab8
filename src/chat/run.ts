/**
 * The engine's chat entries behind `/api/chat` and its adapters (`/v1/chat/completions`,
 * `/v1/messages`, `/v1/responses`), and the raw completion of `/v1/completions`: resolve → lease a
 * slot → build the prompt (prompt.ts) → run the runner job with the caller's sink → release. The
 * real run, `_debug_render_only` and token counting build the prompt through the same `chatPrompt`.
 */
import type { CompletionSink } from "../runner/handle.js";
import { emptyStats, type GenerateStats } from "../runner/types.js";
import { chatPrompt, NeedsRunner, noRunner, runtimeOf, type ChatCall } from "./prompt.js";
import type { Services } from "./services.js";
import { requireCompletion, withLease, type Target } from "./target.js";
import { runTemplateChat } from "./template-run.js";

export type { ChatCall } from "./prompt.js";

/** What a finished completion reports: its stats and how long the request waited for the load. */
export interface CompletionOutput {
  stats: GenerateStats;
  loadNs: number;
}

/** Tools are offered to the model: given, and not turned off by `tool_choice: "none"`. */
function offersTools(call: ChatCall): boolean {
  return Boolean(call.tools?.length) && call.toolChoice !== "none";
}

/** The call with SERVICE_TRUNCATE in force where the request says nothing. */
function withTruncate(services: Services, call: ChatCall): ChatCall {
  return { ...call, truncate: call.truncate ?? services.config.truncate };
}

/**
 * Runs a chat on the target's model; content, thoughts and tool calls go to `sink` as they come
 * (tool calls as soon as each is parsed, or when the job ends), and aborting its signal cancels it.
 * `think` on a model without thoughts is a 400.
 */
export async function runChat(services: Services, target: Target, call: ChatCall, sink: CompletionSink & { signal: AbortSignal }): Promise<CompletionOutput> {
  await requireCompletion(services, target, "chat", offersTools(call));
  const { opts } = target;
  call = withTruncate(services, call);
  return withLease(services, sink.signal, target, async (lease) => {
    const rt = runtimeOf(lease, sink.signal);
    const prompt = await chatPrompt(target, call, rt); // its 400s come first, whatever num_predict says
    if (opts.maxTokens === 0) return { loadNs: lease.loadNs, stats: emptyStats("length") };
    if (prompt.kind === "template") {
      const stats = await runTemplateChat(lease, rt, { prompt, opts, grammar: call.grammar, toolChoice: call.toolChoice, logprobs: call.logprobs }, sink);
      return { loadNs: lease.loadNs, stats };
    }
    const job = {
      turns: prompt.turns,
      sampling: opts.sampling,
      maxTokens: opts.maxTokens,
      fillContext: opts.fillContext,
      stop: opts.stop,
      grammar: call.grammar,
      tools: call.tools,
      toolChoice: call.toolChoice,
      think: prompt.think,
      logprobs: call.logprobs,
      truncate: call.truncate,
    };
    return { loadNs: lease.loadNs, stats: await lease.runner.complete({ kind: "chat", job }, sink) };
  });
}

/**
 * The prompt a chat would evaluate, without running the model (`_debug_render_only`). A Go template
 * renders here without loading the model whenever the prompt surely fits the context (see noRunner);
 * otherwise the model is loaded for its tokenizer (Go template) or its own chat template (GGUF).
 */
export async function renderChat(services: Services, signal: AbortSignal, target: Target, call: ChatCall): Promise<string> {
  await requireCompletion(services, target, "chat", offersTools(call));
  call = withTruncate(services, call);
  const quick = await chatPrompt(target, call, noRunner(target.numCtx)).catch((err: unknown) => {
    if (err instanceof NeedsRunner) return undefined;
    throw err;
  });
  if (quick?.kind === "template") return quick.text;
  return withLease(services, signal, target, async (lease) => {
    const prompt = await chatPrompt(target, call, runtimeOf(lease, signal));
    if (prompt.kind === "template") return prompt.text;
    return lease.runner.render({ turns: prompt.turns, tools: prompt.tools, think: prompt.think }, signal);
  });
}

/** Tokens of the prompt a chat call renders to (system, tools and turns), evaluating nothing. */
export async function countChatTokens(services: Services, signal: AbortSignal, target: Target, call: ChatCall): Promise<number> {
  await requireCompletion(services, target, "chat", offersTools(call));
  const { opts } = target;
  call = withTruncate(services, call);
  return withLease(services, signal, target, async (lease) => {
    const prompt = await chatPrompt(target, call, runtimeOf(lease, signal));
    if (prompt.kind === "template") return (await lease.runner.tokenize(prompt.text, signal)).length;
    const job = {
      turns: prompt.turns,
      sampling: opts.sampling,
      stop: [],
      tools: call.tools,
      toolChoice: call.toolChoice,
      think: prompt.think,
      countOnly: true,
    };
    return (await lease.runner.complete({ kind: "chat", job }, { onText: () => undefined, signal })).promptTokens;
  });
}

/** Raw text completion (for `/v1/completions`): the prompt is evaluated as given, no template. */
export function runCompletion(
  services: Services,
  target: Target,
  prompt: string,
  logprobs: number | undefined,
  sink: CompletionSink & { signal: AbortSignal },
): Promise<CompletionOutput> {
  const { opts } = target;
  return withLease(services, sink.signal, target, async (lease) => {
    if (opts.maxTokens === 0) return { loadNs: lease.loadNs, stats: emptyStats("length") };
    const job = {
      prompt: { kind: "text" as const, text: prompt },
      sampling: opts.sampling,
      maxTokens: opts.maxTokens,
      fillContext: opts.fillContext,
      stop: opts.stop,
      logprobs,
      truncate: services.config.truncate,
    };
    return { loadNs: lease.loadNs, stats: await lease.runner.complete({ kind: "generate", job }, sink) };
  });
}
