/**
 * The lexer's cursor over the template text (the `lexer` struct of text/template/parse/lex.go):
 * position, line, the item being built, and the small look-ahead primitives. Nothing here moves
 * backwards by more than one character.
 */

export type ItemType =
  | "error" | "bool" | "char" | "charConstant" | "assign" | "declare" | "eof" | "field"
  | "identifier" | "leftDelim" | "leftParen" | "number" | "pipe" | "rawString" | "rightDelim"
  | "rightParen" | "space" | "string" | "text" | "variable" | "dot"
  // keywords
  | "block" | "break" | "continue" | "define" | "else" | "end" | "if" | "nil" | "range" | "template" | "with";

export interface Item {
  type: ItemType;
  pos: number;
  val: string;
  line: number;
}

export const KEYWORDS = new Set<string>(["block", "break", "continue", "define", "else", "end", "if", "nil", "range", "template", "with"]);
export const LEFT = "{{";
export const RIGHT = "}}";
export const EOF = "";

export function isSpace(c: string): boolean {
  return c === " " || c === "\t" || c === "\r" || c === "\n";
}
const ALNUM = /^[\p{L}\p{Nd}_]$/u;
export function isAlphaNumeric(c: string): boolean {
  return c !== EOF && ALNUM.test(c);
}
/** `-` then a space, after a left delimiter. */
export function hasLeftTrimMarker(s: string, at: number): boolean {
  return s[at] === "-" && isSpace(s[at + 1] ?? EOF);
}
/** A space then `-`, before a right delimiter. */
export function hasRightTrimMarker(s: string, at: number): boolean {
  return isSpace(s[at] ?? EOF) && s[at + 1] === "-";
}

/** Go's %#U of a rune: U+0041 'A'. */
export function goRune(cp: number): string {
  if (cp < 0) return "U+FFFFFFFFFFFFFFFF";
  const hex = cp.toString(16).toUpperCase().padStart(4, "0");
  const printable = cp >= 0x20 && cp !== 0x7f && !(cp >= 0x80 && cp < 0xa0);
  return printable ? `U+${hex} '${String.fromCodePoint(cp)}'` : `U+${hex}`;
}

export class Scanner {
  readonly items: Item[] = [];
  pos = 0;
  start = 0;
  /** The line at `pos`. */
  line = 1;
  startLine = 1;
  parenDepth = 0;
  done = false;

  constructor(readonly input: string) {}

  /** Reads one code point ("" at the end). */
  next(): string {
    if (this.pos >= this.input.length) return EOF;
    const c = String.fromCodePoint(this.input.codePointAt(this.pos)!);
    this.pos += c.length;
    if (c === "\n") this.line++;
    return c;
  }

  peek(): string {
    return this.pos >= this.input.length ? EOF : String.fromCodePoint(this.input.codePointAt(this.pos)!);
  }

  backup(c: string): void {
    this.pos -= c.length;
    if (c === "\n") this.line--;
  }

  emit(type: ItemType): void {
    this.items.push({ type, pos: this.start, val: this.input.slice(this.start, this.pos), line: this.startLine });
    this.ignore();
  }

  ignore(): void {
    this.start = this.pos;
    this.startLine = this.line;
  }

  /** Moves pos by n (either way), keeping `line` the line at pos. */
  skip(n: number): void {
    const [from, to, sign] = n >= 0 ? [this.pos, this.pos + n, 1] : [this.pos + n, this.pos, -1];
    for (let i = from; i < to; i++) if (this.input.charCodeAt(i) === 10) this.line += sign;
    this.pos += n;
  }

  /** Emits an error item and stops the lexer. Returns false for `return s.error(...)`. */
  error(msg: string): false {
    this.items.push({ type: "error", pos: this.start, val: msg, line: this.startLine });
    this.done = true;
    return false;
  }

  accept(valid: string): boolean {
    const c = this.next();
    if (c !== EOF && valid.includes(c)) return true;
    if (c !== EOF) this.backup(c);
    return false;
  }

  acceptRun(valid: string): void {
    while (this.accept(valid));
  }

  /** At `}}` or ` -}}`. */
  atRightDelim(): { delim: boolean; trim: boolean } {
    if (hasRightTrimMarker(this.input, this.pos) && this.input.startsWith(RIGHT, this.pos + 2)) return { delim: true, trim: true };
    return { delim: this.input.startsWith(RIGHT, this.pos), trim: false };
  }

  /** Whether the next character can end a word (lex.go's atTerminator). */
  atTerminator(): boolean {
    const c = this.peek();
    if (isSpace(c)) return true;
    if (c === EOF || c === "." || c === "," || c === "|" || c === ":" || c === ")" || c === "(") return true;
    return c === RIGHT[0];
  }

  /** Length of the run of spaces at `at`. */
  spaceRun(at: number): number {
    let i = at;
    while (i < this.input.length && isSpace(this.input[i]!)) i++;
    return i - at;
  }
}
