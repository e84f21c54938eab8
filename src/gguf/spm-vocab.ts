/**
 * The SentencePiece-style ("llama") tokenizer vocabulary of generated models, built from the
 * English words of vocab-words.ts: byte fallback, printable ASCII, then word pieces with all
 * their prefixes, so that llama.cpp's SPM tokenizer always reaches a listed word as one token.
 */
import { VOCAB_WORDS } from "./vocab-words.js";

/** GGUF `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`). */
export const TokenType = { normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 } as const;

/** A tokenizer vocabulary as GGUF stores it: three parallel arrays plus the special ids. */
export interface SpmVocab {
  tokens: string[];
  scores: number[];
  types: number[];
  unkId: number;
  bosId: number;
  eosId: number;
}

/** The SentencePiece word-boundary marker that stands for a space. */
const SPACE = "\u2581";
/** Word endings and clitics, so words outside the list still split into sensible pieces. */
const SUFFIXES = ["'s", "n't", "'re", "'ll", "'ve", "'d", "'m", "s", "es", "ed", "ing", "er", "ly", "est", "tion"];
/** How many of the most frequent words also get a capitalised form early (sentence starts). */
const EARLY_CAPITALS = 300;

/** Endings of words that are rarely verbs: they get no `-ing`/`-ed` forms. */
const NOT_A_VERB = /(tion|sion|ity|ness|ment|al|ful|ous|ive|ly|ic|ist|ism|ance|ence|ship|hood|er|or|ry|ary|ian|ing|ed|s|'.*)$/;

const capitalize = (w: string): string => w.charAt(0).toUpperCase() + w.slice(1);

function plural(w: string): string {
  if (/(s|x|z|ch|sh)$/.test(w)) return `${w}es`;
  if (/[^aeiou]y$/.test(w)) return `${w.slice(0, -1)}ies`;
  return `${w}s`;
}

function withEnding(w: string, ending: "ed" | "ing"): string {
  const stem = w.endsWith("e") ? w.slice(0, -1) : w;
  if (ending === "ed" && /[^aeiou]y$/.test(w)) return `${w.slice(0, -1)}ied`;
  return stem + ending;
}

/**
 * Candidate pieces, best first. Every word comes as `▁word` (a word after a space); later tiers
 * add capitals, inflections and forms without the marker (a word after punctuation).
 */
function* candidates(): Generator<string> {
  const words = VOCAB_WORDS.filter((w) => !w.includes("'") || w.length > 2);
  yield* SUFFIXES;
  for (const [i, w] of words.entries()) {
    yield SPACE + w;
    if (i < EARLY_CAPITALS || w === "hello") yield SPACE + capitalize(w);
  }
  for (const w of words) if (!w.includes("'")) yield SPACE + plural(w);
  for (const [i, w] of words.entries()) if (i >= EARLY_CAPITALS) yield SPACE + capitalize(w);
  for (const w of words) yield w;
  for (const w of words) if (!NOT_A_VERB.test(w)) yield SPACE + withEnding(w, "ing");
  for (const w of words) if (!NOT_A_VERB.test(w)) yield SPACE + withEnding(w, "ed");
  for (const w of words) yield capitalize(w);
  for (const w of words) if (!w.includes("'")) yield SPACE + capitalize(plural(w));
}

/**
 * Builds a vocabulary of exactly `size` tokens: `<unk>`, `<s>`, `</s>`, the extra control tokens,
 * 256 byte-fallback tokens, the printable ASCII characters, then word pieces.
 *
 * llama.cpp's SPM tokenizer only reaches a multi-character token by merging two adjacent tokens
 * whose concatenation is in the vocabulary, so each piece enters together with all its prefixes.
 * Then the piece that starts with `▁` can always absorb its right neighbour inside the word, and a
 * listed word always ends up as one token. Longer pieces score higher, ties go to the more frequent.
 * Unused slots are padded with `<unusedN>` tokens of type UNUSED.
 */
export function buildSpmVocab(size: number, controlTokens: readonly string[] = []): SpmVocab {
  const tokens = ["<unk>", "<s>", "</s>", ...controlTokens];
  const types: number[] = [TokenType.unknown, TokenType.control, TokenType.control, ...controlTokens.map(() => TokenType.control)];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(TokenType.byte);
  }
  const fixed = tokens.length;
  const pieces: string[] = [SPACE];
  for (let c = 0x21; c < 0x7f; c++) pieces.push(String.fromCharCode(c));
  if (fixed + pieces.length > size) throw new RangeError(`vocabulary size must be at least ${fixed + pieces.length}`);
  const seen = new Set(pieces);
  for (const piece of candidates()) {
    const missing: string[] = [];
    for (let end = 2; end <= piece.length; end++) {
      const prefix = piece.slice(0, end);
      if (!seen.has(prefix)) missing.push(prefix);
    }
    if (fixed + pieces.length + missing.length > size) break;
    for (const p of missing) { seen.add(p); pieces.push(p); }
  }
  const scores = tokens.map(() => 0);
  pieces.forEach((p, i) => { tokens.push(p); types.push(TokenType.normal); scores.push(p.length - i / pieces.length); });
  for (let n = 0; tokens.length < size; n++) { tokens.push(`<unused${n}>`); types.push(TokenType.unused); scores.push(0); }
  return { tokens, scores, types, unkId: 0, bosId: 1, eosId: 2 };
}
