/**
 * Tokenizing in time linear in the text (child-side: imported by child/load.ts and the runner's jobs).
 *
 * llama.cpp's SentencePiece tokenizer writes a character that no vocabulary entry covers as its
 * bytes, and before each such character it reserves room for exactly those bytes in its output:
 * every such character copies all the tokens made so far. Text of emoji or newlines (byte tokens in
 * Llama-style vocabularies) therefore costs time quadratic in its length. Here such text goes to
 * llama.cpp in chunks of at most a few thousand characters, cut only where the cut cannot change a
 * token: between two characters that no vocabulary entry holds side by side (SentencePiece merges
 * only into entries of the vocabulary, so no token can span such a cut), never just after a special
 * token's text, and never at whitespace when some special token strips whitespace around it.
 * A chunk after the first is tokenized with the character before the cut in front of it, whose own
 * tokens are then taken off: the chunk sees the same left context as in the whole text (no space
 * prefix of its own). Other vocabulary types go to llama.cpp whole: their tokenizers are linear.
 *
 * The asynchronous forms return to the event loop between chunks, so that a cancel (or another
 * job's decode) is seen while a long text is tokenized.
 */
import { setImmediate as nextTurn } from "node:timers/promises";
import { SpecialToken, SpecialTokensText, type LlamaModel, type LlamaText, type Token } from "node-llama-cpp";

/** UTF-16 code units of text per call into llama.cpp (a seam is looked for from here on). */
export const CHUNK_UNITS = 1024;

/** llama.cpp's tokenizer as the addon exposes it: no BOS/EOS added, special tokens parsed when asked. */
type Native = (text: string, parseSpecial: boolean) => Uint32Array;

interface Seams {
  /** Every two adjacent characters in some vocabulary entry (SentencePiece's escaped space included). */
  pairs: Set<string>;
  /** Special tokens' texts by their last UTF-16 unit. */
  specials: Map<string, string[]>;
  /** Special tokens' texts by their first UTF-16 unit. */
  starts: Map<string, string[]>;
  /**
   * Some special token strips the whitespace beside it: a cut in whitespace must then not be in a
   * run of whitespace that a special token's text begins or ends.
   */
  strips: boolean;
}

interface Linear {
  raw: Native;
  /** Where text may be cut; undefined for a vocabulary that is not cut. Read from the vocabulary the first time a long text comes. */
  readonly seams: Seams | undefined;
}

const linears = new WeakMap<LlamaModel, Linear>();

/** The addon object node-llama-cpp calls for every tokenization of this model. */
function addonOf(model: LlamaModel): { tokenize: Native } {
  return (model as unknown as { _model: { tokenize: Native } })._model;
}

/**
 * Makes every tokenization of `model` linear, node-llama-cpp's own included (chat rendering, stop
 * triggers, grammars): its addon's tokenize is replaced by the chunked one. Idempotent.
 */
export function installLinearTokenizer(model: LlamaModel): void {
  linearOf(model);
}

function linearOf(model: LlamaModel): Linear {
  const linear = linears.get(model);
  if (linear) return linear;
  const addon = addonOf(model);
  const raw = addon.tokenize.bind(addon) as Native;
  let seams: Seams | undefined | null = null;
  const made: Linear = {
    raw,
    get seams() {
      if (seams === null) seams = model.vocabularyType === "spm" ? seamsOf(model) : undefined;
      return seams;
    },
  };
  linears.set(model, made);
  // The addon's methods are read-only on its prototype: an own property of the instance replaces it.
  const linearTokenize: Native = (text, parseSpecial) => {
    if (text.length <= 2 * CHUNK_UNITS || made.seams === undefined) return raw(text, parseSpecial);
    try {
      const parts = [...pieces(made, text, parseSpecial)];
      return parts.length === 1 ? parts[0]! : concat(parts);
    } catch (err) {
      if (err instanceof SeamMismatch) return raw(text, parseSpecial);
      throw err;
    }
  };
  Object.defineProperty(addon, "tokenize", { value: linearTokenize, configurable: true, writable: true });
  return made;
}

function seamsOf(model: LlamaModel): Seams | undefined {
  const meta = model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: unknown } } };
  const tokens = meta.tokenizer?.ggml?.tokens;
  if (!Array.isArray(tokens)) return undefined;
  const pairs = new Set<string>();
  const specials = new Map<string, string[]>();
  const starts = new Map<string, string[]>();
  let strips = false;
  for (let id = 0; id < tokens.length; id++) {
    const text = tokens[id];
    if (typeof text !== "string") return undefined;
    const chars = [...text];
    for (let i = 1; i < chars.length; i++) pairs.add(chars[i - 1]! + chars[i]!);
    const attributes = model.getTokenAttributes(id as Token);
    if (attributes.lstrip || attributes.rstrip) strips = true;
    if ((attributes.control || attributes.userDefined || attributes.unknown) && text.length > 0) {
      const last = text[text.length - 1]!;
      specials.set(last, [...(specials.get(last) ?? []), text]);
      starts.set(text[0]!, [...(starts.get(text[0]!) ?? []), text]);
    }
  }
  return { pairs, specials, starts, strips };
}

/** SentencePiece's view of a character: llama.cpp writes a space as U+2581 before it tokenizes. */
function escaped(char: string): string {
  return char === " " ? "\u2581" : char;
}

/** C's isspace, which llama.cpp's stripping uses. */
const isWhitespace = (char: string) => char === " " || (char >= "\t" && char <= "\r");
const isHigh = (unit: number) => unit >= 0xd800 && unit <= 0xdbff;
const isLow = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff;

/** The character (code point) that ends just before `p`, or undefined when that is half a pair. */
function charBefore(text: string, p: number): string | undefined {
  const unit = text.charCodeAt(p - 1);
  if (isLow(unit)) return p >= 2 && isHigh(text.charCodeAt(p - 2)) ? text.slice(p - 2, p) : undefined;
  return isHigh(unit) ? undefined : text[p - 1];
}

/** The character (code point) that starts at `p`, or undefined when that is half a pair. */
function charAt(text: string, p: number): string | undefined {
  const unit = text.charCodeAt(p);
  if (isHigh(unit)) return p + 1 < text.length && isLow(text.charCodeAt(p + 1)) ? text.slice(p, p + 2) : undefined;
  return isLow(unit) ? undefined : text[p];
}

/** The run of whitespace last looked at, [start, end): long runs are measured once. */
interface Run {
  start: number;
  end: number;
}

const specialEndsAt = (seams: Seams, text: string, p: number) => p > 0 && (seams.specials.get(text[p - 1]!) ?? []).some((s) => text.endsWith(s, p));
const specialStartsAt = (seams: Seams, text: string, p: number) => p < text.length && (seams.starts.get(text[p]!) ?? []).some((s) => text.startsWith(s, p));

/** The run of whitespace around `p` (text[p - 1] or text[p] is whitespace). */
function runAround(text: string, p: number, last: Run | undefined): Run {
  if (last && last.start <= p && p <= last.end) return last;
  let start = p;
  while (start > 0 && isWhitespace(text[start - 1]!)) start--;
  let end = p;
  while (end < text.length && isWhitespace(text[end]!)) end++;
  return { start, end };
}

/** True when tokenizing text[0, p) and text[p, …) apart gives the tokens of the whole. */
function isSeam(seams: Seams, text: string, p: number, run: { last?: Run }): boolean {
  const a = charBefore(text, p);
  const b = charAt(text, p);
  if (a === undefined || b === undefined) return false;
  if (seams.pairs.has(escaped(a) + escaped(b))) return false;
  if (specialEndsAt(seams, text, p)) return false;
  if (seams.strips && (isWhitespace(a) || isWhitespace(b))) {
    run.last = runAround(text, p, run.last);
    if (specialEndsAt(seams, text, run.last.start) || specialStartsAt(seams, text, run.last.end)) return false;
  }
  return true;
}

/** The first seam at or after `from` (before the text's end), or -1. */
function nextSeam(seams: Seams, text: string, from: number, run: { last?: Run } = {}): number {
  for (let p = Math.max(1, from); p < text.length; p++) if (isSeam(seams, text, p, run)) return p;
  return -1;
}

/** Thrown when a chunk's tokens do not start with those of the character put before it. */
class SeamMismatch extends Error {}

/**
 * Tokens of text[start, …) in chunks, each the tokens the whole text has there. `start` is 0 or a
 * seam. The first chunk ends at a seam past the text's first non-space (node-llama-cpp's leading
 * space handling looks at a text's start only, and must see the same start in a chunk).
 */
function* pieces(linear: Linear, text: string, parseSpecial: boolean, start = 0, chunk = CHUNK_UNITS): Generator<Uint32Array> {
  const seams = linear.seams!;
  let from = start;
  const firstWord = text.search(/[^ ]/);
  const run: { last?: Run } = {};
  while (from < text.length) {
    const earliest = from === 0 ? Math.max(chunk, firstWord + 1) : from + chunk;
    const end = text.length - from <= 2 * chunk || firstWord < 0 ? -1 : nextSeam(seams, text, earliest, run);
    const until = end < 0 ? text.length : end;
    if (from === 0) yield linear.raw(text.slice(0, until), parseSpecial);
    else yield afterSeam(linear.raw, text, from, until, parseSpecial);
    from = until;
  }
}

/** Tokens of text[from, until) in the whole text's context, `from` being a seam. */
function afterSeam(raw: Native, text: string, from: number, until: number, parseSpecial: boolean): Uint32Array {
  const lead = charBefore(text, from)!;
  const leadTokens = raw(lead, parseSpecial);
  const tokens = raw(lead + text.slice(from, until), parseSpecial);
  for (let i = 0; i < leadTokens.length; i++) if (tokens[i] !== leadTokens[i]) throw new SeamMismatch();
  return tokens.subarray(leadTokens.length);
}

function concat(parts: Uint32Array[]): Uint32Array {
  const out = new Uint32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

type TokenizeOptions = "trimLeadingSpace" | undefined;

/**
 * `model.tokenize(text, parseSpecial, options)`, returning to the event loop between chunks and
 * stopping (with the signal's reason) once `signal` is aborted. The first chunk goes through
 * node-llama-cpp's tokenize with `options`; the rest continue it from their seams.
 */
export async function tokenizeAsync(model: LlamaModel, text: string, parseSpecial: boolean, options?: TokenizeOptions, signal?: AbortSignal): Promise<Token[]> {
  signal?.throwIfAborted();
  const linear = linearOf(model);
  if (text.length <= 2 * CHUNK_UNITS) return model.tokenize(text, parseSpecial, options);
  const seams = linear.seams;
  if (seams === undefined) return model.tokenize(text, parseSpecial, options);
  const firstWord = text.search(/[^ ]/);
  const first = firstWord < 0 ? -1 : nextSeam(seams, text, Math.max(CHUNK_UNITS, firstWord + 1));
  if (first < 0) return model.tokenize(text, parseSpecial, options);
  const out: Token[] = model.tokenize(text.slice(0, first), parseSpecial, options);
  try {
    for (const part of pieces(linear, text, parseSpecial, first)) {
      for (const token of part) out.push(token as Token);
      await nextTurn();
      signal?.throwIfAborted();
    }
  } catch (err) {
    if (!(err instanceof SeamMismatch)) throw err;
    return model.tokenize(text, parseSpecial, options);
  }
  return out;
}

/** `LlamaText.tokenize(model.tokenizer)` (node-llama-cpp's rules for its parts), through {@link tokenizeAsync}. */
export async function tokenizeLlamaText(model: LlamaModel, text: LlamaText, signal?: AbortSignal): Promise<Token[]> {
  const out: Token[] = [];
  let pending = "";
  const push = (tokens: readonly Token[]) => {
    for (const token of tokens) out.push(token);
  };
  const flush = async () => {
    const options = out.length > 0 || pending.length > 0 ? "trimLeadingSpace" : undefined;
    if (pending !== "") push(await tokenizeAsync(model, pending, false, options, signal));
  };
  for (const value of text.values) {
    if (value instanceof SpecialToken) {
      await flush();
      push(value.tokenize(model.tokenizer));
      pending = "";
    } else if (value instanceof SpecialTokensText) {
      await flush();
      const trim = out.length > 0 || pending.length > 0;
      if (value.value !== "") push(await tokenizeAsync(model, value.value, true, trim ? "trimLeadingSpace" : undefined, signal));
      pending = "";
    } else pending += value;
  }
  await flush();
  return out;
}

/**
 * Tokens of `text` as llama.cpp's tokenizer makes them (no BOS), in chunks of about `chunk` units,
 * and how many chunks that took (a test compares them with the whole text's tokens); undefined for
 * a vocabulary that is not cut.
 */
export function tokenizeInChunks(model: LlamaModel, text: string, parseSpecial: boolean, chunk: number): { tokens: Uint32Array; chunks: number } | undefined {
  const linear = linearOf(model);
  if (linear.seams === undefined) return undefined;
  const parts = [...pieces(linear, text, parseSpecial, 0, chunk)];
  return { tokens: concat(parts), chunks: parts.length };
}

/** Tokens of `text` from one call into llama.cpp (the tokenizer as it is, quadratic cases included); for tests. */
export function tokenizeWhole(model: LlamaModel, text: string, parseSpecial: boolean): Uint32Array {
  return linearOf(model).raw(text, parseSpecial);
}
