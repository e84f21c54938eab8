/**
 * The prompt of a chat, made once and the same way for the real run, `_debug_render_only` and
 * token counting, as Ollama's chatPrompt makes it. The choice is made here and nowhere else: a model
 * with a Go template is rendered in the daemon (the history cut to the context, the runner then
 * evaluates the text with its special tokens parsed); a model without one goes to its runner as
 * turns, which node-llama-cpp renders with the GGUF's own chat template.
 */
import { BadRequestError } from "../errors.js";
import type { Lease } from "../scheduler/scheduler.js";
import type { Template } from "../template/index.js";
import { HarmonyOutput, usesHarmony } from "../template/harmony.js";
import { fitHistory, type ThinkValue } from "../template/history.js";
import type { ChatTurn, GrammarSpec, ToolChoice, ToolSpec } from "../runner/types.js";
import { conversation, type Target } from "./target.js";
import { goTemplateIn, templateThinks, toApiTools, toMessages } from "./template.js";

/** A chat as the engine takes it from any API's adapter. */
export interface ChatCall {
  turns: ChatTurn[];
  tools?: ToolSpec[] | undefined;
  toolChoice?: ToolChoice | undefined;
  grammar?: GrammarSpec | undefined;
  /** true/false or a level ("low", "medium", "high"); undefined: the model's default. */
  think?: ThinkValue;
  /** Logprobs of the content tokens with this many alternatives (0–20); undefined = off. */
  logprobs?: number | undefined;
  /** false: a prompt over the context is a 400 instead of losing its oldest turns. */
  truncate?: boolean | undefined;
}

/** What rendering needs of a loaded model: its context size, its tokenizer, and (GGUF templates) whether it thinks. */
export interface PromptRuntime {
  contextSize: number;
  tokenize(text: string): Promise<ArrayLike<number>>;
  info?: { thinking?: boolean | undefined; hasChatTemplate: boolean } | undefined;
}

/** The lease's runner as a PromptRuntime; aborting `signal` (the client left) stops its tokenizing. */
export function runtimeOf(lease: Lease, signal?: AbortSignal): PromptRuntime {
  return { contextSize: lease.runner.info.contextSize, tokenize: (text) => lease.runner.tokenize(text, signal), info: lease.runner.info };
}

/** Thrown without a runner (`noRunner`): this prompt needs the model's tokenizer to be cut to fit, or its GGUF template. */
export class NeedsRunner extends Error {}

/**
 * Rendering without loading the model (`_debug_render_only`): enough whenever the prompt's bytes
 * fit `contextSize`, since a token never covers less than a byte; otherwise NeedsRunner.
 */
export function noRunner(contextSize: number): PromptRuntime {
  return { contextSize, tokenize: () => Promise.reject(new NeedsRunner()) };
}

/** A chat's prompt: rendered text (Go template), or turns the runner renders (GGUF template). */
export type ChatPrompt =
  | {
      kind: "template";
      template: Template;
      text: string;
      think: ThinkValue;
      tools: ToolSpec[] | undefined;
      droppedTokens: number;
      harmony: HarmonyOutput | undefined;
      call: TemplateCall;
    }
  | { kind: "gguf"; turns: ChatTurn[]; tools: ToolSpec[] | undefined; think: boolean | undefined };

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

/** `think` for a GGUF template: on, off or its default; on for a model without thoughts is a 400. */
function ggufThink(name: string, think: ThinkValue, rt: PromptRuntime): boolean | undefined {
  const on = think === undefined ? undefined : think !== false;
  if (on === true && !rt.info?.thinking) throw new BadRequestError(`"${name}" does not support thinking`);
  return on;
}

/**
 * The prompt this chat evaluates on the target's model: its SYSTEM and MESSAGE lines first
 * (`conversation`), the tools unless `tool_choice` is "none", through its Go template when it has one.
 */
export async function chatPrompt(target: Target, call: ChatCall, rt: PromptRuntime): Promise<ChatPrompt> {
  const turns = conversation(target.model, call.turns);
  const tools = call.toolChoice === "none" ? undefined : call.tools;
  const t = goTemplateIn(target.model);
  if (!t) {
    if (!rt.info) throw new NeedsRunner(); // the GGUF template is the runner's
    return { kind: "gguf", turns, tools, think: ggufThink(target.name, call.think, rt) };
  }
  return renderTemplate(rt, t, { name: target.name, turns, tools, think: call.think, truncate: call.truncate, harmony: usesHarmony(target.model) });
}

/** A chat through a Go template, its conversation complete. */
interface TemplateCall {
  /** The name as the client wrote it (for the thinking error). */
  name: string;
  turns: ChatTurn[];
  /** The tools offered (none when `tool_choice` is "none"). */
  tools: ToolSpec[] | undefined;
  think: ThinkValue;
  /** false: never drop messages (a prompt over the context is then the runner's 400). */
  truncate?: boolean | undefined;
  /** The model's output is harmony (gpt-oss; template/harmony.ts `usesHarmony`). */
  harmony: boolean;
}

/** The prompt a Go template makes of this chat, its history cut to the runtime's context. */
export async function renderTemplate(rt: PromptRuntime, t: Template, call: TemplateCall): Promise<Extract<ChatPrompt, { kind: "template" }>> {
  const think = effectiveThink(t, call.name, call.think, call.harmony);
  const { tools } = call;
  // Ollama's tools capability: the template must show `.Tools` to the model.
  if (tools?.length && !t.vars().has("tools")) throw new BadRequestError(`model '${call.name}' does not support tools`);
  // Harmony's parser starts inside the message the last turn leaves open, and names tools as identifiers.
  const harmony = call.harmony ? new HarmonyOutput(call.turns.at(-1)) : undefined;
  const shown = harmony && tools ? tools.map((x) => ({ ...x, name: harmony.names.add(x.name) })) : tools;
  const input = {
    messages: toMessages(call.turns),
    tools: toApiTools(shown),
    think,
    numCtx: rt.contextSize,
    tokenize: (text: string) => rt.tokenize(text),
    truncate: call.truncate,
  };
  const { prompt, dropped } = await fitHistory(t, input);
  // The tokens the dropped messages took: the whole history's prompt less the one kept (reported as truncated_tokens).
  const whole = async () => (await rt.tokenize((await fitHistory(t, { ...input, truncate: false })).prompt)).length;
  const droppedTokens = dropped > 0 ? Math.max(0, (await whole()) - (await rt.tokenize(prompt)).length) : 0;
  return { kind: "template", template: t, text: prompt, think, tools, droppedTokens, harmony, call };
}
