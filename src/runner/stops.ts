/**
 * Stop sequences over the text a generation holds back (runner/generation.ts): each stop has a
 * Knuth–Morris–Pratt matcher fed the held text as it grows, so each character is read once per
 * stop; a token costs at most a comparison of the held text with what was fed (linear in the held
 * text, as its detokenizing already is). Ollama's runner searches the held text anew for each stop
 * at every token and tries every prefix of each stop against its end: the same answers, at a cost
 * of the held text's length times the stops' lengths per token. A client can make that large on
 * purpose (16 stops of up to the body limit, and a prompt that makes the model echo a stop's start
 * for thousands of tokens), and the runner's main thread serves every sequence of the model.
 */

/** A character the decoder gives for the bytes of a character not complete yet (more tokens may complete it). */
const REPLACEMENT = "\uFFFD";

class Matcher {
  /** failure[i]: the length of the longest proper prefix of stop[0..i] that is also its suffix. */
  private readonly failure: Int32Array;
  /** The length of the longest end of the text fed that is a start of the stop. */
  state = 0;
  /** Where the stop first occurs in the text fed, or -1. */
  found = -1;

  constructor(readonly stop: string) {
    this.failure = new Int32Array(stop.length);
    for (let i = 1, k = 0; i < stop.length; i++) {
      while (k > 0 && stop[i] !== stop[k]) k = this.failure[k - 1]!;
      if (stop[i] === stop[k]) k++;
      this.failure[i] = k;
    }
  }

  reset(): void {
    this.state = 0;
    this.found = -1;
  }

  /** Reads `text` from `from` to `to` after the text fed: the state then, and where the stop first ends up occurring (-1: nowhere). */
  read(text: string, from: number, to: number): { state: number; found: number } {
    const { stop, failure } = this;
    let k = this.state;
    let found = this.found;
    for (let i = from; i < to && found < 0; i++) {
      while (k > 0 && text[i] !== stop[k]) k = failure[k - 1]!;
      if (text[i] === stop[k]) k++;
      if (k === stop.length) {
        found = i + 1 - k;
        k = failure[k - 1]!;
      }
    }
    return { state: k, found };
  }
}

/** The stops of one generation, searched in the held text as it grows. */
export class StopSearch {
  private readonly matchers: Matcher[];
  /** The part of the held text fed so far: up to any trailing U+FFFD (a split character, which can still change). */
  private fed = "";
  /** Characters read so far, each stop's reading counted (for its tests: the work is linear in the text). */
  reads = 0;

  constructor(stops: readonly string[]) {
    this.matchers = stops.filter((s) => s !== "").map((s) => new Matcher(s));
  }

  get empty(): boolean {
    return this.matchers.length === 0;
  }

  /** The held text was handed out: start again on empty text. */
  reset(): void {
    this.fed = "";
    for (const m of this.matchers) m.reset();
  }

  /**
   * Reads the held text as it now is (the text before, grown by a token). Returns the first stop in
   * the given order that occurs in it, and where; else whether its end could be a stop's start.
   */
  update(text: string): { index: number; stop: string } | { partial: boolean } {
    let stable = text.length;
    while (stable > 0 && text[stable - 1] === REPLACEMENT) stable--;
    // Tokens only add to the text, or complete a split character at its end: if more than that
    // changed, read it anew.
    if (!text.startsWith(this.fed)) this.reset();
    const from = this.fed.length;
    this.reads += (text.length - from) * this.matchers.length;
    if (stable > from) {
      for (const m of this.matchers) {
        const { state, found } = m.read(text, from, stable);
        m.state = state;
        m.found = found;
      }
      this.fed = text.slice(0, stable);
    }
    let partial = false;
    for (const m of this.matchers) {
      // The trailing U+FFFD are read too, but not kept.
      const now = stable < text.length ? m.read(text, stable, text.length) : m;
      if (now.found >= 0) return { index: now.found, stop: m.stop };
      partial ||= now.state > 0;
    }
    return { partial };
  }
}
