/**
 * Go literal syntax used by templates: strconv.Unquote for strings and characters, and the
 * number forms parse.NumberNode accepts (ints with 0x/0o/0b prefixes and `_`, floats, char constants).
 */
import type { NumberNode } from "./ast.js";

const SIMPLE: Record<string, string> = { a: "\x07", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t", v: "\v", "\\": "\\" };

/** strconv.Unquote for "..." , `...` and '...' literals; throws "invalid syntax". */
export function unquote(lit: string): string {
  const q = lit[0];
  if (lit.length < 2 || lit[lit.length - 1] !== q) throw new SyntaxError("invalid syntax");
  const body = lit.slice(1, -1);
  if (q === "`") {
    if (body.includes("`")) throw new SyntaxError("invalid syntax");
    return body.replaceAll("\r", "");
  }
  if (q !== '"' && q !== "'") throw new SyntaxError("invalid syntax");
  let out = "";
  for (let i = 0; i < body.length; ) {
    const c = body[i]!;
    if (c === q || c === "\n") throw new SyntaxError("invalid syntax");
    if (c !== "\\") {
      out += c;
      i++;
      continue;
    }
    const e = body[i + 1];
    if (e === undefined) throw new SyntaxError("invalid syntax");
    if (e in SIMPLE) {
      out += SIMPLE[e];
      i += 2;
    } else if (e === q) {
      out += e;
      i += 2;
    } else if (e === "x" || e === "u" || e === "U") {
      const n = e === "x" ? 2 : e === "u" ? 4 : 8;
      const hex = body.slice(i + 2, i + 2 + n);
      if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== n) throw new SyntaxError("invalid syntax");
      const cp = parseInt(hex, 16);
      if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000 && e !== "x")) throw new SyntaxError("invalid syntax");
      out += String.fromCodePoint(cp);
      i += 2 + n;
    } else if (e >= "0" && e <= "7") {
      const oct = body.slice(i + 1, i + 4);
      if (!/^[0-7]{3}$/.test(oct) || parseInt(oct, 8) > 255) throw new SyntaxError("invalid syntax");
      out += String.fromCharCode(parseInt(oct, 8));
      i += 4;
    } else throw new SyntaxError("invalid syntax");
  }
  if (q === "'" && [...out].length !== 1) throw new SyntaxError("invalid syntax");
  return out;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** Reads an integer literal as Go's strconv.ParseInt(text, 0, 64) would, or undefined. */
function parseGoInt(text: string): bigint | undefined {
  let s = text;
  let neg = false;
  if (s[0] === "+" || s[0] === "-") {
    neg = s[0] === "-";
    s = s.slice(1);
  }
  let base = 10;
  const p = s.slice(0, 2).toLowerCase();
  if (p === "0x") base = 16;
  else if (p === "0o") base = 8;
  else if (p === "0b") base = 2;
  else if (s.length > 1 && s[0] === "0") base = 8;
  let digits = base === 10 ? s : base === 8 && p !== "0o" ? s.slice(1) : s.slice(2);
  if (digits.includes("_")) {
    // Underscores only between digits or after a base prefix (Go's underscoreOK).
    if (/__|_$/.test(digits) || (base === 10 && digits.startsWith("_"))) return undefined;
    digits = digits.replaceAll("_", "");
  }
  const valid = { 2: /^[01]+$/, 8: /^[0-7]+$/, 10: /^[0-9]+$/, 16: /^[0-9a-fA-F]+$/ }[base]!;
  if (digits === "" && base === 8 && p !== "0o") digits = "0";
  if (!valid.test(digits)) return undefined;
  const prefix = { 2: "0b", 8: "0o", 10: "", 16: "0x" }[base]!;
  const v = BigInt(prefix + digits) * (neg ? -1n : 1n);
  return v;
}

/** parse.newNumber: the kinds `text` can be read as; throws with Go's message when none. */
export function parseNumber(pos: number, text: string, isCharConstant: boolean): NumberNode {
  const n: NumberNode = { type: "number", pos, text, isInt: false, isFloat: false, isComplex: false, int: 0n, float: 0, isChar: isCharConstant };
  if (isCharConstant) {
    const r = unquote(text).codePointAt(0)!;
    return { ...n, isInt: true, isFloat: true, int: BigInt(r), float: r };
  }
  if (text.endsWith("i")) {
    n.isComplex = true;
    return n;
  }
  const i = parseGoInt(text);
  if (i !== undefined) {
    if (i < INT64_MIN || i > INT64_MAX) {
      if (!/[.eEpP]/.test(text) && !/^[+-]?0[xX]/.test(text)) throw new SyntaxError(`integer overflow: ${JSON.stringify(text)}`);
    } else {
      return { ...n, isInt: true, isFloat: true, int: i, float: Number(i) };
    }
  }
  const f = parseGoFloat(text);
  if (f !== undefined) {
    if (!/[.eEpP]/.test(text)) throw new SyntaxError(`integer overflow: ${JSON.stringify(text)}`);
    const out = { ...n, isFloat: true, float: f };
    if (Number.isInteger(f) && f >= -(2 ** 63) && f < 2 ** 63) return { ...out, isInt: true, int: BigInt(f) };
    return out;
  }
  throw new SyntaxError(`illegal number syntax: ${JSON.stringify(text)}`);
}

function parseGoFloat(text: string): number | undefined {
  const s = text.replaceAll("_", "");
  if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s)) {
    const f = Number(s);
    return Number.isFinite(f) ? f : undefined;
  }
  return undefined; // hex floats are too rare in templates to be worth porting
}
