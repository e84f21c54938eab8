/**
 * The lexer's scanners for words inside an action — identifiers and keywords, fields, variables,
 * quoted strings, characters and numbers — each a forward scan from lex.go. Each returns false
 * after emitting an error item.
 */
import { EOF, goRune, isAlphaNumeric, KEYWORDS, type ItemType, type Scanner } from "./lex-scanner.js";

export function scanIdentifier(s: Scanner): boolean {
  for (;;) {
    const r = s.next();
    if (!isAlphaNumeric(r)) {
      if (r !== EOF) s.backup(r);
      break;
    }
  }
  const word = s.input.slice(s.start, s.pos);
  if (!s.atTerminator()) return s.error(`bad character ${goRune(s.peek().codePointAt(0)!)}`);
  if (KEYWORDS.has(word)) s.emit(word as ItemType);
  else if (word === "true" || word === "false") s.emit("bool");
  else s.emit("identifier");
  return true;
}

/** After `.` or `$`: a field/variable name, or `.`/`$` alone. */
export function scanFieldOrVariable(s: Scanner, type: "field" | "variable"): boolean {
  if (s.atTerminator()) {
    s.emit(type === "variable" ? "variable" : "dot");
    return true;
  }
  let r: string;
  for (;;) {
    r = s.next();
    if (!isAlphaNumeric(r)) {
      if (r !== EOF) s.backup(r);
      break;
    }
  }
  if (!s.atTerminator()) return s.error(`bad character ${goRune(r === EOF ? -1 : r.codePointAt(0)!)}`);
  s.emit(type);
  return true;
}

/** After an opening `"` or `'`: up to the closing quote, escapes skipped, no newline. */
export function scanQuoted(s: Scanner, quote: string): boolean {
  for (;;) {
    let c = s.next();
    if (c === "\\") {
      c = s.next();
      if (c !== EOF && c !== "\n") continue;
    }
    if (c === EOF || c === "\n") return s.error(quote === '"' ? "unterminated quoted string" : "unterminated character constant");
    if (c === quote) break;
  }
  s.emit(quote === '"' ? "string" : "charConstant");
  return true;
}

/** After an opening backquote. */
export function scanRawQuote(s: Scanner): boolean {
  const x = s.input.indexOf("`", s.pos);
  if (x < 0) return s.error("unterminated raw quoted string");
  s.skip(x + 1 - s.pos);
  s.emit("rawString");
  return true;
}

/** A number, including complex `1+2i`; its value is checked by the parser. */
export function scanNumberItem(s: Scanner): boolean {
  if (!scanNumber(s)) return s.error(`bad number syntax: ${JSON.stringify(s.input.slice(s.start, s.pos))}`);
  const sign = s.peek();
  if (sign === "+" || sign === "-") {
    // Complex: 1+2i. No spaces, must end in 'i'.
    if (!scanNumber(s) || s.input[s.pos - 1] !== "i") return s.error(`bad number syntax: ${JSON.stringify(s.input.slice(s.start, s.pos))}`);
  }
  s.emit("number");
  return true;
}

function scanNumber(s: Scanner): boolean {
  s.accept("+-");
  let digits = "0123456789_";
  if (s.accept("0")) {
    if (s.accept("xX")) digits = "0123456789abcdefABCDEF_";
    else if (s.accept("oO")) digits = "01234567_";
    else if (s.accept("bB")) digits = "01_";
  }
  s.acceptRun(digits);
  if (s.accept(".")) s.acceptRun(digits);
  if (digits.length === 11 && s.accept("eE")) {
    s.accept("+-");
    s.acceptRun("0123456789_");
  }
  if (digits.length === 23 && s.accept("pP")) {
    s.accept("+-");
    s.acceptRun("0123456789_");
  }
  s.accept("i");
  if (isAlphaNumeric(s.peek())) {
    s.next();
    return false;
  }
  return true;
}
