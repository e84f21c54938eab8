/**
 * The engine's entries behind `/api/generate`: the prompt (generate-prompt.ts) rendered for
 * `_debug_render_only` or run, and the output split into thinking, content and a harmony answer's
 * tool calls by the parser the prompt calls for.
 */
import type { GenerateRequest } from "../api/types.js";
import type { CompletionSink } from "../runner/handle.js";
import { emptyStats, type GrammarSpec, type TokenLogprob } from "../runner/types.js";
import { HarmonyOutput } from "../template/harmony.js";
import { checkGenerate, generatePrompt, promptText, quickRender } from "./generate-prompt.js";
import { runtimeOf } from "./prompt.js";
import type { CompletionOutput } from "./run.js";
import type { Services } from "./services.js";
import { withLease, type Target } from "./target.js";
import { type OutputParser, OutputSplitter } from "./template.js";

/** The prompt a generate request would evaluate (`_debug_render_only`); the model is loaded only when the prompt needs it. */
export async function renderGenerate(services: Services, signal: AbortSignal, target: Target, body: GenerateRequest): Promise<string> {
  const template = checkGenerate(body, target.model);
  if (template) {
    const quick = await quickRender(body, target.model, template, target.numCtx);
    if (quick !== undefined) return quick;
  }
  return withLease(services, signal, target, async (lease) => {
    const built = await generatePrompt(body, target.model, template, runtimeOf(lease, signal));
    return promptText(built, lease, signal);
  });
}

/**
 * Runs a generate request. Each piece of output goes to the sink as thinking (`onThinking`, when
 * there is any) followed by its text (`onText`, called for every piece, its text empty when the
 * piece was all thought), so that an adapter may write the two together; a harmony answer's tool
 * calls come at the end (`onToolCalls`), as Ollama sends them in its last object.
 */
export async function runGenerate(
  services: Services,
  target: Target,
  body: GenerateRequest,
  grammar: GrammarSpec | undefined,
  logprobs: number | undefined,
  sink: CompletionSink & { signal: AbortSignal },
): Promise<CompletionOutput> {
  const { model, opts } = target;
  const template = checkGenerate(body, model);
  return withLease(services, sink.signal, target, async (lease) => {
    const built = await generatePrompt(body, model, template, runtimeOf(lease, sink.signal));
    const harmony = built.harmony ? new HarmonyOutput() : undefined;
    // A constrained harmony answer: the prompt opens the final channel (template-run.ts).
    const prompt = harmony && grammar && built.prompt.kind === "text" ? { ...built.prompt, text: built.prompt.text + harmony.openFinal() } : built.prompt;
    const tags = prompt.kind === "chat" ? lease.runner.info.thoughts : undefined;
    const splitter: OutputParser | undefined =
      harmony ??
      (built.template && prompt.kind === "text"
        ? new OutputSplitter(built.template, { think: built.think !== undefined && built.think !== false, prompt: prompt.text })
        : tags && prompt.kind === "chat" && prompt.think !== false
          ? new OutputSplitter(tags, { think: true, prompt: tags.opened ? tags.open : "" })
          : undefined);
    const job = {
      prompt,
      sampling: opts.sampling,
      maxTokens: opts.maxTokens,
      fillContext: opts.fillContext,
      stop: opts.stop,
      grammar,
      logprobs,
      truncate: body.truncate ?? services.config.truncate,
      specialTokens: built.harmony,
    };
    const piece = (text: string, thinking: string, lps?: TokenLogprob[]) => {
      if (thinking) sink.onThinking?.(thinking);
      sink.onText(text, lps);
    };
    const onText = (chunk: string, lps?: TokenLogprob[]) => {
      if (!splitter) return piece(chunk, "", lps);
      const p = splitter.add(chunk);
      piece(p.content, p.thinking, lps);
    };
    const stats =
      opts.maxTokens === 0
        ? emptyStats("length", body.context ?? [])
        : await lease.runner.complete({ kind: "generate", job }, { onText, signal: sink.signal, flow: sink.flow });
    if (stats.doneReason === "cancelled") return { stats, loadNs: lease.loadNs };
    // What the parser held to the end: a harmony answer's tool call comes in the last object (as Ollama's).
    const rest = splitter?.end();
    if (rest) piece(rest.content, rest.thinking);
    if (rest?.calls.length) sink.onToolCalls?.(rest.calls);
    return { stats, loadNs: lease.loadNs };
  });
}
