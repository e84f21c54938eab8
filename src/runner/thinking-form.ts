/**
 * How the answer's first tokens are rendered for `think`, as the model's own chat template renders
 * them, where node-llama-cpp's chat wrapper renders them otherwise (imported by the runner child's
 * generate, chat, render and load modules).
 *
 * Thinking templates decide in the generation prompt whether the model thinks, through
 * `enable_thinking`: DeepSeek-R1's opens `<think>\n` (on) or writes `<think>\n</think>` (off); Qwen 3's
 * writes nothing (on: the model decides) or an empty `<think>\n\n</think>\n\n` (off); Qwen 3.5's
 * opens `<think>\n` or writes the empty block; Gemma 4's writes `<|think|>` in a system turn or an
 * empty thought channel. node-llama-cpp's wrappers render one fixed form: its DeepSeek wrapper never
 * opens the thought (so the model's thought came back as content), its Jinja wrapper always writes
 * Qwen 3's empty block (so Qwen 3 never thought), for Qwen 3.5 `think: false` still opened the
 * thought, and its Gemma 4 wrapper always asks for thinking.
 *
 * The rule: `think` on (true, a level, or unset — Ollama's default for a thinking model) renders the
 * template's `enable_thinking: true` form, `think: false` its `enable_thinking: false` form. Once
 * per model, the template renders a one-user-turn conversation both ways (@huggingface/jinja, the
 * engine node-llama-cpp's Jinja wrapper uses), and the form is chosen among node-llama-cpp's own
 * means (an opening thought segment, open or closed, in the answer; the wrapper's empty thought block
 * left out; the wrapper's `reasoning` switch off) as the one whose rendering is exactly the
 * template's, else the one whose answer starts exactly as the template's. When none does, or the
 * template cannot render, the wrapper's own form stays: nothing is guessed.
 */
import { Template } from "@huggingface/jinja";
import {
  LlamaText,
  SpecialToken,
  SpecialTokensText,
  type ChatHistoryItem,
  type ChatModelFunctions,
  type ChatModelResponse,
  type ChatModelSegment,
  type ChatWrapper,
  type ChatWrapperGeneratedContextState,
  type LlamaModel,
} from "node-llama-cpp";

/**
 * The answer's start for one `think` value: what opens the answer, whether the wrapper's empty
 * thought block goes, and whether the wrapper's own reasoning switch is off (Gemma 4's wrapper
 * writes `<|think|>` into the system turn unless `reasoning` is false).
 */
interface Form {
  opening: ChatModelSegment | undefined;
  strip: boolean;
  noReasoning: boolean;
}

interface Forms {
  on: Form | undefined;
  off: Form | undefined;
}

const NO_FORMS: Forms = { on: undefined, off: undefined };
const forms = new WeakMap<ChatWrapper, Forms>();

/** A user message no template writes by itself: the generation prompt is what follows it. */
const SENTINEL = "\u2063lmd-user-turn\u2063";

/**
 * The history and wrapper that render the answer's start as the template does for `think`
 * (undefined counts as on). Only a fresh answer to a user turn is touched: continuations, answers
 * after tool results, and forced tool calls keep the wrapper's rendering.
 */
export function withThinkingForm(
  model: LlamaModel,
  wrapper: ChatWrapper,
  history: ChatHistoryItem[],
  think: boolean | undefined,
): { history: ChatHistoryItem[]; wrapper: ChatWrapper } {
  const last = history.at(-1);
  if (last?.type !== "model" || last.response.length > 0 || history.at(-2)?.type !== "user") return { history, wrapper };
  const form = think === false ? formsOf(model, wrapper).off : formsOf(model, wrapper).on;
  if (!form) return { history, wrapper };
  const answer: ChatModelResponse = { type: "model", response: form.opening ? [{ ...form.opening }] : [] };
  return { history: [...history.slice(0, -1), answer], wrapper: formWrapper(wrapper, form) };
}

function formWrapper(wrapper: ChatWrapper, form: Form): ChatWrapper {
  const w = form.noReasoning ? withoutReasoning(wrapper) : wrapper;
  return form.strip ? strippingEmptyThought(w) : w;
}

/**
 * What the model's evaluation starts from beyond the wrapper's rendering: node-llama-cpp opens the
 * thought itself on an empty answer when the wrapper says the template does (`openOnResponseStart`).
 */
function openedByLlamaChat(wrapper: ChatWrapper, history: readonly ChatHistoryItem[], think: boolean | undefined): LlamaText | undefined {
  const thought = wrapper.settings.segments?.thought;
  const last = history.at(-1);
  if (think === false || thought?.openOnResponseStart !== true || last?.type !== "model" || last.response.length > 0) return undefined;
  return markup(thought.prefix);
}

/** A segment's prefix or suffix as text (undefined for node-llama-cpp's `openedOnStart` marker). */
function markup(value: unknown): LlamaText | undefined {
  return typeof value === "string" || LlamaText.isLlamaText(value) ? LlamaText(value) : undefined;
}

/**
 * The prompt of a fresh answer or of the given history, as evaluation starts from it: the wrapper's
 * rendering with the `think` form, and the thought LlamaChat would open by itself (written out here,
 * for `_debug_render_only` and for /api/generate, which evaluates the prompt without LlamaChat).
 */
export function answerPrompt(
  model: LlamaModel,
  wrapper: ChatWrapper,
  history: ChatHistoryItem[],
  think: boolean | undefined,
  functions?: ChatModelFunctions,
): { text: LlamaText; stopTriggers: LlamaText[] } {
  const formed = withThinkingForm(model, wrapper, history, think);
  const state = formed.wrapper.generateContextState({
    chatHistory: formed.history,
    ...(functions ? { availableFunctions: functions, documentFunctionParams: true } : {}),
  });
  const opened = openedByLlamaChat(formed.wrapper, formed.history, think);
  return { text: opened ? LlamaText(state.contextText, opened) : state.contextText, stopTriggers: state.stopGenerationTriggers };
}

/**
 * The thought's tags as text, and whether a fresh answer with thinking on starts inside the thought:
 * what /api/generate's output splitting needs (undefined when the wrapper has no thought segment).
 */
export function thoughtTags(model: LlamaModel, wrapper: ChatWrapper): { open: string; close: string; opened: boolean } | undefined {
  const thought = wrapper.settings.segments?.thought;
  const open = markup(thought?.prefix)?.toString().trim();
  const close = markup(thought?.suffix)?.toString().trim();
  if (!open || !close) return undefined;
  try {
    const { text } = answerPrompt(model, wrapper, [{ type: "user", text: SENTINEL }, { type: "model", response: [] }], true);
    return { open, close, opened: promptText(text, model).trimEnd().endsWith(open) };
  } catch {
    return undefined;
  }
}

function formsOf(model: LlamaModel, wrapper: ChatWrapper): Forms {
  let found = forms.get(wrapper);
  if (!found) {
    found = findForms(model, wrapper);
    forms.set(wrapper, found);
  }
  return found;
}

function findForms(model: LlamaModel, wrapper: ChatWrapper): Forms {
  const thought = wrapper.settings.segments?.thought;
  const template = (model.fileInfo.metadata as { tokenizer?: { chat_template?: unknown } }).tokenizer?.chat_template;
  if (!thought || typeof template !== "string") return NO_FORMS;
  const candidates: Form[] = [];
  const switchable = typeof (wrapper as { reasoning?: unknown }).reasoning === "boolean";
  for (const noReasoning of switchable ? [false, true] : [false]) {
    for (const strip of [false, true]) {
      candidates.push({ opening: undefined, strip, noReasoning });
      for (const ended of [true, false])
        for (const text of ["", "\n", "\n\n"]) candidates.push({ opening: { type: "segment", segmentType: "thought", text, ended }, strip, noReasoning });
    }
  }
  // The whole prompt as the template writes it, else (a wrapper that words the system part its own
  // way) at least the answer's start.
  const match = (think: boolean): Form | undefined => {
    const want = templateParts(model, template, think);
    if (!want) return undefined;
    const got = candidates.map((c) => ({ c, parts: wrapperParts(model, wrapper, c, think) }));
    return (got.find((g) => g.parts?.before === want.before && g.parts.after === want.after) ??
      got.find((g) => !g.c.noReasoning && g.parts?.after === want.after))?.c;
  };
  return { on: match(true), off: match(false) };
}

/** Text before and after the user turn. */
interface Parts {
  before: string;
  after: string;
}

/** The template's one-user-turn prompt for `enable_thinking`, its BOS text left out (undefined when it cannot render). */
function templateParts(model: LlamaModel, template: string, enableThinking: boolean): Parts | undefined {
  try {
    const bos = tokenText(model, model.tokens.bos);
    const text = new Template(template).render({
      messages: [{ role: "user", content: SENTINEL }],
      add_generation_prompt: true,
      enable_thinking: enableThinking,
      bos_token: bos,
      eos_token: tokenText(model, model.tokens.eos),
    });
    return split(bos && text.startsWith(bos) ? text.slice(bos.length) : text);
  } catch {
    return undefined;
  }
}

/** What the wrapper (with the form applied) renders for the user turn, plus what LlamaChat opens itself. */
function wrapperParts(model: LlamaModel, wrapper: ChatWrapper, form: Form, think: boolean): Parts | undefined {
  try {
    const history: ChatHistoryItem[] = [{ type: "user", text: SENTINEL }, { type: "model", response: form.opening ? [{ ...form.opening }] : [] }];
    const w = formWrapper(wrapper, form);
    const state = w.generateContextState({ chatHistory: history });
    const opened = openedByLlamaChat(w, history, think);
    return split(promptText(opened ? LlamaText(state.contextText, opened) : state.contextText, model));
  } catch {
    return undefined;
  }
}

function split(text: string): Parts | undefined {
  const at = text.lastIndexOf(SENTINEL);
  return at < 0 ? undefined : { before: text.slice(0, at), after: text.slice(at + SENTINEL.length) };
}

/** The same wrapper with its own reasoning switch off. */
function withoutReasoning(wrapper: ChatWrapper): ChatWrapper {
  const off = Object.create(wrapper) as ChatWrapper & { reasoning: boolean };
  off.reasoning = false;
  return off;
}

/** The same wrapper, but an empty thought block that ends its rendering is left out. */
function strippingEmptyThought(wrapper: ChatWrapper): ChatWrapper {
  const thought = wrapper.settings.segments?.thought;
  const prefix = markup(thought?.prefix);
  const suffix = markup(thought?.suffix);
  if (!prefix || !suffix) return wrapper;
  const block = LlamaText(prefix, suffix).toString();
  const stripped = Object.create(wrapper) as ChatWrapper;
  stripped.generateContextState = (options): ChatWrapperGeneratedContextState => {
    const state = wrapper.generateContextState.call(stripped, options);
    const values = [...state.contextText.values];
    const last = values.at(-1);
    if (!(last instanceof SpecialTokensText) || !last.value.endsWith(block)) return state;
    values[values.length - 1] = new SpecialTokensText(last.value.slice(0, -block.length));
    return { ...state, contextText: LlamaText(values) };
  };
  return stripped;
}

/**
 * The text as llama.cpp's template rendering prints it: builtin special tokens (BOS, EOS, EOT) by
 * their vocabulary text (`<|begin_of_text|>`), not node-llama-cpp's placeholder names. The BOS
 * node-llama-cpp puts first is the one evaluation adds (add_bos_token), not template text: left out,
 * as llama.cpp's template rendering and a Go template's rendering leave it out.
 */
export function promptText(text: LlamaText, model: LlamaModel): string {
  const values = [...text.values];
  const first = values[0];
  if (first instanceof SpecialToken && first.value === "BOS") values.shift();
  return values.map((v) => (v instanceof SpecialToken ? model.detokenize(v.tokenize(model.tokenizer), true) : v.toString())).join("");
}

function tokenText(model: LlamaModel, token: number | null): string {
  return token === null ? "" : model.detokenize([token as never], true);
}
