/**
 * A text generation on one sequence with Ollama's stop rules: what node-llama-cpp's
 * `LlamaCompletion.generateCompletionWithMeta` does for a token prompt, without its per-token
 * machinery (a stream regulator, two stop detectors, four native detokenize calls per token), which
 * on a small host takes CPU time from the decoding threads (docs/benchmarks/history.md, "lmd's own
 * text generation").
 *
 * The same as node-llama-cpp, token for token: the BOS it prepends, the prompt cache (the sequence
 * keeps the longest common prefix), the sampling options and the repeat penalty over the tokens
 * handed out, `maxTokens` (with `fillContext`, at most what fits), the end-of-generation tokens
 * (Gemma's extra ones included), the abort, and its context shift (a tenth of the context, the BOS
 * kept) when a generation reaches the context's end. Its text differs in one place: the first
 * token keeps its leading space, as in Ollama (see {@link leadTokens}).
 *
 * Stop sequences work as in Ollama's runner: the text not yet handed out is searched for each stop
 * (the first one in the request's order that occurs wins) and cut there; while its end could be the
 * start of a stop, or of a character split across tokens, it is held back. node-llama-cpp matched
 * stops against each token's text without its context, so on SentencePiece vocabularies (Llama 2,
 * Mistral, Gemma) a stop such as " Human:" never matched: the token "▁Human" reads "Human" alone.
 * Held text is handed out at the length limit, as Ollama does. The search (runner/stops.ts) costs
 * time linear in the held text, where Ollama's costs its length times the stops' at every token.
 */
import {
  LlamaGrammarEvaluationState,
  LlamaVocabularyType,
  type LlamaContextSequence,
  type LlamaGrammar,
  type LlamaModel,
  type LlamaText,
  type Token,
} from "node-llama-cpp";
import type { SamplingOptions } from "./sampling.js";
import { StopSearch } from "./stops.js";

export interface GenerationOptions {
  signal: AbortSignal;
  maxTokens?: number | undefined;
  /** Generate until the context is full instead of shifting it (`num_predict: -2`). */
  fillContext?: boolean | undefined;
  sampling: SamplingOptions;
  stop: readonly string[];
  /**
   * A grammar (`format`); its stop triggers (plain text, see {@link plainTriggers}) end the generation.
   * Its `trimWhitespaceSuffix` trims only node-llama-cpp's final response, never the chunks lmd sends.
   */
  grammar?: LlamaGrammar | undefined;
  /** Special tokens are written as their text (GenerateJob `specialTokens`); else as nothing. */
  specialTokens?: boolean | undefined;
  /** The tokens handed out, with `onTextChunk` right after for their text. */
  onToken(tokens: Token[]): void;
  onTextChunk(text: string): void;
}

export interface GenerationResult {
  stopReason: "eogToken" | "customStopTrigger" | "stopGenerationTrigger" | "maxTokens" | "abort";
  /** The stop sequence that ended the generation (a request's, `customStopTrigger`). */
  stop?: string;
}

/** A character's bytes split across tokens read as U+FFFD until the rest comes; UTF-8 has at most 4. */
const REPLACEMENT = "\uFFFD";
const MAX_PARTIAL_TOKENS = 4;

/** Gemma's end-of-turn-like tokens that its vocabulary does not mark as such (as node-llama-cpp). */
const extraEos = new WeakMap<LlamaModel, ReadonlySet<Token>>();
function extraEosTokens(model: LlamaModel): ReadonlySet<Token> {
  let found = extraEos.get(model);
  if (found) return found;
  const set = new Set<Token>();
  const arch = model.fileInfo.metadata?.general?.architecture as string | undefined;
  if (arch === "gemma" || arch === "gemma2") {
    for (const token of model.iterateAllTokens()) {
      const text = model.detokenize([token], true);
      if (text === "<|file_separator|>" || text === "<|fim_prefix|>") set.add(token);
      if (set.size === 2) break;
    }
  }
  found = set;
  extraEos.set(model, found);
  return found;
}

/**
 * What a generation's first tokens are read after. llama.cpp drops the leading space of the first
 * token it detokenizes on vocabularies that add one when they tokenize (SentencePiece: "▁there"
 * reads "there" alone), and node-llama-cpp reads text after context tokens only when those have text
 * of their own (a chat prompt ends with special tokens, which have none). Ollama's runners hand out
 * each token's piece as it is (" there"): read after a token of plain text, the first keeps its space.
 */
const leads = new WeakMap<LlamaModel, Token[]>();
function leadTokens(model: LlamaModel): Token[] {
  let found = leads.get(model);
  if (!found) leads.set(model, (found = model.tokenize("a", false).slice(-1)));
  return found;
}

/**
 * For the generations node-llama-cpp runs itself (chat prompts rendered by a GGUF template): their
 * first text chunk with the leading space llama.cpp dropped given back (see {@link leadTokens}).
 * Called with each chunk and the tokens since the chunk before; only the first chunk can change.
 */
export function keepFirstSpace(model: LlamaModel): (tokens: readonly Token[], text: string) => string {
  let first = true;
  return (tokens, text) => {
    if (!first || text === "") return text;
    first = false;
    const read = model.detokenize(tokens, false, leadTokens(model));
    return read === ` ${text}` ? read : text;
  };
}

/** The token node-llama-cpp puts before a completion's input. */
function beginningToken(model: LlamaModel): Token | undefined {
  const type = model.vocabularyType;
  if (type === LlamaVocabularyType.rwkv || type === LlamaVocabularyType.ugm) return undefined;
  if (type === LlamaVocabularyType.wpm || model.tokens.shouldPrependBosToken) return model.tokens.bos ?? undefined;
  return undefined;
}

/** The BOS (if the model takes one) and as many of the last `tokens` as fit in `room`. */
function fit(model: LlamaModel, tokens: readonly Token[], room: number): Token[] {
  const bos = beginningToken(model);
  const out: Token[] = bos === undefined ? [] : [bos];
  const size = Math.max(0, Math.min(room - out.length, tokens.length));
  if (size === 0 && tokens.length > 0) throw new Error("The context size is too small to generate a response for the given input");
  if (size > 0) out.push(...tokens.slice(-size));
  return out;
}

/** A grammar's stop triggers as text; undefined if one is not plain text. */
export function plainTriggers(grammar: LlamaGrammar | undefined): string[] | undefined {
  const texts: string[] = [];
  for (const trigger of (grammar?.stopGenerationTriggers ?? []) as readonly LlamaText[]) {
    if (!trigger.values.every((v): v is string => typeof v === "string")) return undefined;
    texts.push(trigger.values.join(""));
  }
  return texts;
}

/** Generates after `prompt` (without the BOS) on `sequence`; see the module comment. */
export async function generateText(sequence: LlamaContextSequence, prompt: readonly Token[], options: GenerationOptions): Promise<GenerationResult> {
  const { model, context } = sequence;
  const { signal, sampling, grammar, onToken, onTextChunk } = options;
  const grammarStops = plainTriggers(grammar) ?? [];
  const stops = new StopSearch([...options.stop, ...grammarStops]);
  const eos = extraEosTokens(model);
  const isEnd = (token: Token) => model.isEogToken(token) || eos.has(token);
  const shiftSize = Math.max(1, Math.floor(context.contextSize / 10));
  const input = fit(model, prompt, context.contextSize - shiftSize);
  const maxTokens = !options.fillContext
    ? options.maxTokens
    : Math.min(options.maxTokens !== undefined && options.maxTokens > 0 ? options.maxTokens : Infinity, context.contextSize - input.length);
  sequence.tokenPredictor?.updateInputTokens?.(input.slice());

  /** Tokens handed out, and those generated but held back (a stop's start, a split character). */
  const out: Token[] = [];
  let held: Token[] = [];
  const penalty = sampling.repeatPenalty;
  const evaluateOptions = {
    temperature: sampling.temperature,
    minP: sampling.minP,
    topK: sampling.topK,
    topP: sampling.topP,
    ...(sampling.seed !== undefined ? { seed: sampling.seed } : {}),
    ...(penalty
      ? {
          repeatPenalty: {
            punishTokens: () => {
              const last = out.slice(-penalty.lastTokens);
              const nl = model.tokens.nl;
              return penalty.penalizeNewLine || nl == null ? last : last.filter((t) => t !== nl);
            },
            maxPunishTokens: penalty.lastTokens,
            penalty: penalty.penalty,
            frequencyPenalty: penalty.frequencyPenalty,
            presencePenalty: penalty.presencePenalty,
          },
        }
      : {}),
    ...(grammar ? { grammarEvaluationState: new LlamaGrammarEvaluationState({ model, grammar }) } : {}),
    evaluationPriority: 5 as const,
    yieldEogToken: true,
  };
  const lead = leadTokens(model);
  const special = options.specialTokens === true;
  const textOf = (tokens: readonly Token[]) => model.detokenize(tokens, special, out.length > 0 ? out : lead);
  const emit = (tokens: Token[], text: string) => {
    onToken(tokens);
    onTextChunk(text);
    out.push(...tokens);
  };
  /** Hands out the held tokens whose text lies before `index` of their text, and that text. */
  const releaseBefore = (index: number) => {
    const all = textOf(held);
    // The most tokens whose text ends by `index` (a binary search: their text only grows with them).
    let n = held.length;
    if (all.length > index) {
      let [lo, hi] = [0, held.length - 1];
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (textOf(held.slice(0, mid)).length <= index) lo = mid;
        else hi = mid - 1;
      }
      n = lo;
    }
    const text = all.slice(0, index);
    if (n > 0 || text) emit(held.slice(0, n), text);
    held = [];
  };

  let pending: Token[] = input;
  let generated = 0;
  for (;;) {
    // The prompt cache: keep what the sequence shares with the input, evaluate at least its last token.
    if (pending.length === 1 && sequence.nextTokenIndex !== 0) await sequence.eraseContextTokenRanges([{ start: 0, end: sequence.nextTokenIndex }]);
    else {
      await sequence.adaptStateToTokens(pending.slice(0, -1), false);
      pending = pending.slice(sequence.nextTokenIndex);
    }
    if (signal.aborted) return { stopReason: "abort" };
    let shift = false;
    for await (const token of sequence.evaluate(pending, evaluateOptions)) {
      generated++;
      const last = maxTokens !== undefined && maxTokens > 0 && generated >= maxTokens;
      if (isEnd(token)) {
        releaseBefore(Infinity);
        return { stopReason: "eogToken" };
      }
      held.push(token);
      const text = textOf(held);
      const search = stops.empty ? { partial: false } : stops.update(text);
      if ("stop" in search) {
        releaseBefore(search.index);
        return options.stop.includes(search.stop) ? { stopReason: "customStopTrigger", stop: search.stop } : { stopReason: "stopGenerationTrigger" };
      }
      const partial = text.endsWith(REPLACEMENT) && held.length < MAX_PARTIAL_TOKENS && !model.isSpecialToken(token);
      if (last) releaseBefore(Infinity);
      else if (!(partial || search.partial)) {
        emit(held, text);
        held = [];
        stops.reset();
      }
      if (signal.aborted) return { stopReason: "abort" };
      if (last) return { stopReason: "maxTokens" };
      if (sequence.nextTokenIndex >= context.contextSize - 1) {
        shift = true;
        break;
      }
    }
    if (!shift) throw new Error("The context size is too small to generate a response");
    // node-llama-cpp's context shift: the BOS and the last (context - a tenth) tokens, evaluated anew.
    pending = fit(model, [...prompt, ...out, ...held], context.contextSize - shiftSize);
  }
}
