/**
 * The prompt `/api/generate` evaluates, made as Ollama's GenerateHandler makes it: raw text; a Go
 * template (the request's `template`, else the model's) with Prompt+Suffix for fill-in-the-middle,
 * else the system, the model's MESSAGE lines and the prompt as messages (through chatPrompt's
 * truncation when the template is the model's); or, for a model without a Go template, the GGUF chat template in the runner.
 */
import type { GenerateRequest } from "../api/types.js";
import { BadRequestError } from "../errors.js";
import type { PromptSpec } from "../runner/types.js";
import type { Lease } from "../scheduler/scheduler.js";
import type { ResolvedModel } from "../store/store.js";
import { parseTemplate, renderInWorker, type OllamaMessage, type Template } from "../template/index.js";
import { usesHarmony } from "../template/harmony.js";
import { fitHistory, thinkValues, type ThinkValue } from "../template/history.js";
import { effectiveThink, NeedsRunner, noRunner, type PromptRuntime } from "./prompt.js";
import { goTemplateIn } from "./template.js";

interface GeneratePrompt {
  prompt: PromptSpec;
  /** The Go template in effect (for the thinking parser), if any. */
  template: Template | undefined;
  think: ThinkValue;
  /** The output is harmony (gpt-oss; template/harmony.ts): not for raw prompts. */
  harmony?: boolean;
}

/** Checks that need no model loaded: fill-in-the-middle needs a template that uses `.Suffix`. */
export function checkGenerate(body: GenerateRequest, model: ResolvedModel): Template | undefined {
  // A request's own template is parsed for this request only; the model's is cached (goTemplate).
  const t = body.template ? parseTemplate(body.template) : goTemplateIn(model);
  // node-llama-cpp has no vision support: images are refused, never silently dropped (as chat does).
  if (body.images?.length) throw new BadRequestError(`model '${body.model}' does not support images`);
  if (body.suffix && !t?.vars().has("suffix")) throw new BadRequestError(`model '${body.model}' does not support insert`);
  return body.raw ? undefined : t;
}

/** The prompt of a generate request; `rt` gives the tokenizer and context (Go template), the capabilities (GGUF template). */
export async function generatePrompt(body: GenerateRequest, model: ResolvedModel, t: Template | undefined, rt: PromptRuntime): Promise<GeneratePrompt> {
  const context = body.context?.length ? body.context : undefined;
  if (body.raw) return { prompt: { kind: "text", text: body.prompt, context }, template: undefined, think: body.think };
  const system = body.system || model.system;
  // The model's MESSAGE lines go between the system and the prompt unless a context continues a conversation (as Ollama).
  const preamble = context ? [] : model.messages;
  if (!t) {
    const info = rt.info ?? { hasChatTemplate: false };
    if (body.think !== undefined && body.think !== false && !info.thinking) throw new BadRequestError(`"${body.model}" does not support thinking`);
    const turns = [...(system ? [{ role: "system" as const, content: system }] : []), ...preamble, { role: "user" as const, content: body.prompt }];
    if (info.hasChatTemplate)
      return {
        prompt: { kind: "chat", turns, context, think: body.think === undefined ? undefined : body.think !== false },
        template: undefined,
        think: body.think,
      };
    return { prompt: { kind: "text", text: system ? `${system}\n\n${body.prompt}` : body.prompt, context }, template: undefined, think: body.think };
  }
  const harmony = usesHarmony(model);
  const think = effectiveThink(t, body.model, body.think, harmony);
  const messages: OllamaMessage[] = [...(system ? [{ role: "system", content: system }] : []), ...preamble, { role: "user", content: body.prompt }];
  let text: string;
  if (body.suffix) text = await renderInWorker(t, { messages: [], prompt: body.prompt, suffix: body.suffix, ...thinkValues(think) });
  else if (body.template) text = await renderInWorker(t, { messages, ...thinkValues(think) });
  else text = (await fitHistory(t, { messages, think, numCtx: rt.contextSize, tokenize: (s) => rt.tokenize(s) })).prompt;
  return { prompt: { kind: "text", text, context }, template: t, think, harmony };
}

/** The prompt as text, for `_debug_render_only` (the GGUF template's rendering comes from the runner). */
export async function promptText(p: GeneratePrompt, lease: Lease, signal: AbortSignal): Promise<string> {
  if (p.prompt.kind === "text") return p.prompt.text;
  return lease.runner.render({ turns: p.prompt.turns, think: p.think === undefined ? undefined : p.think !== false }, signal);
}

/** A Go template's rendering without loading the model, when it surely fits (see noRunner). */
export async function quickRender(body: GenerateRequest, model: ResolvedModel, t: Template, numCtx: number): Promise<string | undefined> {
  try {
    const p = await generatePrompt(body, model, t, noRunner(numCtx));
    return p.prompt.kind === "text" ? p.prompt.text : undefined;
  } catch (err) {
    if (err instanceof NeedsRunner) return undefined;
    throw err;
  }
}
