/**
 * The lexer of Go's text/template (text/template/parse/lex.go), ported as a single forward scan:
 * every state consumes input or stops, and nothing backtracks over more than a couple of
 * characters, so lexing is linear in the template's length whatever it contains (`{{` followed by
 * many spaces included, which makes a regex-based splitter cubic).
 */
import { scanFieldOrVariable, scanIdentifier, scanNumberItem, scanQuoted, scanRawQuote } from "./lex-operands.js";
import { EOF, goRune, hasLeftTrimMarker, hasRightTrimMarker, isAlphaNumeric, isSpace, LEFT, RIGHT, Scanner, type Item } from "./lex-scanner.js";

export type { Item, ItemType } from "./lex-scanner.js";

type State = ((s: Scanner) => State) | null;

/** Emits an error item; the lexer stops. */
function stop(s: Scanner, msg: string): State {
  s.error(msg);
  return null;
}

/** Lexes `input` into items, ending with one `eof` or `error` item. */
export function lex(input: string): Item[] {
  const s = new Scanner(input);
  let state: State = lexText;
  while (state && !s.done) state = state(s);
  return s.items;
}

function lexText(s: Scanner): State {
  const x = s.input.indexOf(LEFT, s.pos);
  if (x < 0) {
    s.skip(s.input.length - s.pos);
    if (s.pos > s.start) s.emit("text");
    s.emit("eof");
    return null;
  }
  s.skip(x - s.pos);
  // `{{- ` trims the spaces before it.
  let trim = 0;
  if (hasLeftTrimMarker(s.input, s.pos + LEFT.length)) while (s.pos - trim > s.start && isSpace(s.input[s.pos - trim - 1]!)) trim++;
  s.skip(-trim);
  if (s.pos > s.start) s.emit("text");
  s.skip(trim);
  s.ignore();
  return lexLeftDelim;
}

function lexLeftDelim(s: Scanner): State {
  s.skip(LEFT.length);
  const afterMarker = hasLeftTrimMarker(s.input, s.pos) ? 2 : 0;
  if (s.input.startsWith("/*", s.pos + afterMarker)) {
    s.skip(afterMarker);
    s.ignore();
    return lexComment;
  }
  s.emit("leftDelim");
  s.skip(afterMarker);
  s.ignore();
  s.parenDepth = 0;
  return lexInsideAction;
}

function lexComment(s: Scanner): State {
  s.skip(2);
  const x = s.input.indexOf("*/", s.pos);
  if (x < 0) return stop(s, "unclosed comment");
  s.skip(x + 2 - s.pos);
  const { delim, trim } = s.atRightDelim();
  if (!delim) return stop(s, "comment ends before closing delimiter");
  // Comments are dropped here, as text/template does without parse.ParseComments.
  if (trim) s.skip(2);
  s.skip(RIGHT.length);
  if (trim) s.skip(s.spaceRun(s.pos));
  s.ignore();
  return lexText;
}

function lexRightDelim(s: Scanner): State {
  const { trim } = s.atRightDelim();
  if (trim) {
    s.skip(2);
    s.ignore();
  }
  s.skip(RIGHT.length);
  s.emit("rightDelim");
  if (trim) {
    s.skip(s.spaceRun(s.pos));
    s.ignore();
  }
  return lexText;
}

const SIMPLE: Record<string, "assign" | "pipe"> = { "=": "assign", "|": "pipe" };

function lexInsideAction(s: Scanner): State {
  if (s.atRightDelim().delim) {
    if (s.parenDepth === 0) return lexRightDelim;
    return stop(s, "unclosed left paren");
  }
  const r = s.next();
  if (r === EOF) return stop(s, "unclosed action");
  if (isSpace(r)) {
    s.backup(r);
    return lexSpace;
  }
  const simple = SIMPLE[r];
  if (simple) {
    s.emit(simple);
    return lexInsideAction;
  }
  switch (r) {
    case ":":
      if (s.next() !== "=") return stop(s, "expected :=");
      s.emit("declare");
      return lexInsideAction;
    case '"':
    case "'":
      return scanQuoted(s, r) ? lexInsideAction : null;
    case "`":
      return scanRawQuote(s) ? lexInsideAction : null;
    case "$":
      return scanFieldOrVariable(s, "variable") ? lexInsideAction : null;
    case "(":
      s.emit("leftParen");
      s.parenDepth++;
      return lexInsideAction;
    case ")":
      s.emit("rightParen");
      s.parenDepth--;
      if (s.parenDepth < 0) return stop(s, "unexpected right paren");
      return lexInsideAction;
  }
  if (r === ".") {
    const c = s.peek();
    if (c === EOF || c < "0" || c > "9") return scanFieldOrVariable(s, "field") ? lexInsideAction : null;
  }
  if (r === "." || r === "+" || r === "-" || (r >= "0" && r <= "9")) {
    s.backup(r);
    return scanNumberItem(s) ? lexInsideAction : null;
  }
  if (isAlphaNumeric(r)) {
    s.backup(r);
    return scanIdentifier(s) ? lexInsideAction : null;
  }
  const cp = r.codePointAt(0)!;
  if (cp >= 0x20 && cp < 0x7f) {
    s.emit("char");
    return lexInsideAction;
  }
  return stop(s, `unrecognized character in action: ${goRune(cp)}`);
}

function lexSpace(s: Scanner): State {
  let n = 0;
  while (isSpace(s.peek())) {
    s.next();
    n++;
  }
  // A trim-marked closing delimiter starts with a space: leave that space to the delimiter.
  if (hasRightTrimMarker(s.input, s.pos - 1) && s.input.startsWith(RIGHT, s.pos + 1)) {
    s.backup(s.input[s.pos - 1]!);
    if (n === 1) return lexInsideAction;
  }
  s.emit("space");
  return lexInsideAction;
}
