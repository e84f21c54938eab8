/**
 * What one render may spend: steps, time, and the characters it builds. Strings are cheap to join
 * in JS (a `print $a $a` is a rope, not a copy), so counting steps alone lets a few steps build a
 * value of hundreds of millions of characters that the next function then has to walk. Every
 * value a function returns is therefore held to a length, the sum of all of them to a total, the
 * output to a length, and long operations check the clock as they go, not only between steps.
 */

/** Limits on one render; the defaults suit prompts of any real size. */
export interface ExecLimits {
  maxSteps?: number;
  /** Characters written to the output. */
  maxOutput?: number;
  /** Characters in any one value a function returns (or builds on its way there). */
  maxValue?: number;
  /** Characters returned by all function calls together. */
  maxBuilt?: number;
  timeoutMs?: number;
}

const MI = 1024 * 1024;
export const DEFAULT_LIMITS: Required<ExecLimits> = { maxSteps: 5_000_000, maxOutput: 32 * MI, maxValue: 32 * MI, maxBuilt: 64 * MI, timeoutMs: 1_000 };

/** A limit was reached; the evaluator reports it with the position it was reached at. */
export class LimitError extends Error {}

/** How many characters of work pass between two looks at the clock. */
const CLOCK_EVERY = 64 * 1024;

export class Budget {
  readonly limits: Required<ExecLimits>;
  private readonly deadline: number;
  private steps = 0;
  private output = 0;
  private built = 0;
  private work = 0;

  constructor(limits: ExecLimits = {}) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    this.deadline = Date.now() + this.limits.timeoutMs;
  }

  /** One step of the walk. */
  step(): void {
    if (++this.steps > this.limits.maxSteps) throw new LimitError(`template execution exceeded ${this.limits.maxSteps} steps`);
    if ((this.steps & 15) === 0) this.clock();
  }

  clock(): void {
    if (Date.now() > this.deadline) throw new LimitError(`template execution exceeded ${this.limits.timeoutMs} ms`);
  }

  /** Work proportional to `chars` characters: the clock is read every so many. */
  spend(chars: number): void {
    this.work += chars;
    if (this.work >= CLOCK_EVERY) {
      this.work = 0;
      this.clock();
    }
  }

  /** `chars` more characters go to the output. */
  write(chars: number): void {
    this.output += chars;
    if (this.output > this.limits.maxOutput) throw new LimitError(`template output exceeded ${this.limits.maxOutput} characters`);
  }

  /** A value being built has reached `length` characters (checked as it grows, before it is finished). */
  growing(length: number): void {
    if (length > this.limits.maxValue) throw new LimitError(`template value exceeded ${this.limits.maxValue} characters`);
  }

  /** A function returned a value of `length` characters. */
  returned(length: number): void {
    this.growing(length);
    this.built += length;
    if (this.built > this.limits.maxBuilt) throw new LimitError(`template functions returned more than ${this.limits.maxBuilt} characters in all`);
    this.spend(length);
  }
}

/** Strings are transformed this many UTF-16 units at a time, so that growth and time are checked as they go. */
const CHUNK = 64 * 1024;

/**
 * `s.replace(re, fn)` done a chunk at a time (never splitting a surrogate pair), checking the
 * result's length and the clock after each chunk, so an expanding escape of a long value stops at
 * the limit instead of first building a string several times the limit. `re` must be global.
 */
export function replaceBounded(s: string, re: RegExp, fn: (m: string) => string, b: Budget, prefix = "", suffix = ""): string {
  if (s.length <= CHUNK) {
    const out = prefix + s.replace(re, fn) + suffix;
    b.growing(out.length);
    return out;
  }
  const parts: string[] = [prefix];
  let length = prefix.length + suffix.length;
  for (let i = 0; i < s.length; ) {
    let end = Math.min(s.length, i + CHUNK);
    const last = s.charCodeAt(end - 1);
    if (end < s.length && last >= 0xd800 && last <= 0xdbff) end++;
    const part = s.slice(i, end).replace(re, fn);
    parts.push(part);
    length += part.length;
    b.growing(length);
    b.spend(end - i);
    i = end;
  }
  parts.push(suffix);
  return parts.join("");
}

/**
 * The number of code points in `s`, counted only up to `limit` (a width or precision, at most a
 * million): no array of characters is built, and a long string costs no more than the limit.
 */
export function codePointsUpTo(s: string, limit: number): number {
  let n = 0;
  for (let i = 0; i < s.length && n < limit; n++) {
    i += pairAt(s, i) ? 2 : 1;
  }
  return n;
}

/** The first `count` code points of `s` (a precision), found without building an array. */
export function firstCodePoints(s: string, count: number): string {
  let i = 0;
  for (let n = 0; i < s.length && n < count; n++) {
    i += pairAt(s, i) ? 2 : 1;
  }
  return s.slice(0, i);
}

/** A surrogate pair (one code point) starts at `i`. */
function pairAt(s: string, i: number): boolean {
  const c = s.charCodeAt(i);
  if (c < 0xd800 || c > 0xdbff) return false;
  const d = s.charCodeAt(i + 1);
  return d >= 0xdc00 && d <= 0xdfff;
}
