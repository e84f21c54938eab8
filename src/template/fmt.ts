/**
 * The part of Go's fmt that templates reach through print, printf and println: %v %+v %s %q %d
 * %t %c %x %X %o %b %e %f %g %%, widths, precisions and the - + 0 space # flags, with Go's
 * %!verb(type=value) notes for mismatches, missing and extra operands.
 */
import { Budget, codePointsUpTo, firstCodePoints, replaceBounded } from "./budget.js";
import { formatFloatG, formatValue, kindOf, typeName } from "./values.js";

/*
 * Each function takes the render's budget: the result's length is checked after every piece is
 * added (joining strings is nearly free, walking them is not), and long walks read the clock.
 */

/** fmt.Sprint: spaces between operands when neither side is a string. */
export function sprint(args: unknown[], b: Budget = new Budget()): string {
  let out = "";
  args.forEach((a, i) => {
    if (i > 0 && kindOf(a) !== "string" && kindOf(args[i - 1]) !== "string") out += " ";
    out += formatValue(a);
    b.growing(out.length);
  });
  return out;
}

/** fmt.Sprintln: spaces always, then a newline. */
export function sprintln(args: unknown[], b: Budget = new Budget()): string {
  let out = "";
  args.forEach((a, i) => {
    out += (i > 0 ? " " : "") + formatValue(a);
    b.growing(out.length);
  });
  return `${out}\n`;
}

interface Spec {
  minus: boolean;
  plus: boolean;
  zero: boolean;
  space: boolean;
  sharp: boolean;
  width?: number;
  prec?: number;
}

/** fmt.Sprintf. */
export function sprintf(format: string, args: unknown[], b: Budget = new Budget()): string {
  let out = "";
  let argi = 0;
  let i = 0;
  while (i < format.length) {
    b.growing(out.length);
    b.spend(1);
    if (format[i] !== "%") {
      // A run of literal text is copied as one slice, not a character at a time.
      const next = format.indexOf("%", i);
      const end = next < 0 ? format.length : next;
      out += format.slice(i, end);
      b.spend(end - i);
      i = end;
      continue;
    }
    i++;
    const spec: Spec = { minus: false, plus: false, zero: false, space: false, sharp: false };
    for (; i < format.length; i++) {
      const f = format[i];
      if (f === "-") spec.minus = true;
      else if (f === "+") spec.plus = true;
      else if (f === "0") spec.zero = true;
      else if (f === " ") spec.space = true;
      else if (f === "#") spec.sharp = true;
      else break;
    }
    const num = (): number | undefined => {
      if (format[i] === "*") {
        i++;
        const a = args[argi++];
        return typeof a === "bigint" ? Number(a) : undefined;
      }
      const m = /^\d+/.exec(format.slice(i));
      if (!m) return undefined;
      i += m[0].length;
      return Number(m[0]);
    };
    // Go's fmt refuses widths and precisions beyond a million (tooLarge), which also keeps a
    // template from asking for a gigabyte of padding.
    spec.width = num();
    if (spec.width !== undefined && spec.width > 1e6) {
      out += "%!(BADWIDTH)";
      spec.width = undefined;
    }
    if (format[i] === ".") {
      i++;
      spec.prec = num() ?? 0;
      if (spec.prec > 1e6) {
        out += "%!(BADPREC)";
        spec.prec = undefined;
      }
    }
    if (i >= format.length) {
      out += "%!(NOVERB)";
      break;
    }
    const verb = String.fromCodePoint(format.codePointAt(i)!);
    i += verb.length;
    if (verb === "%") {
      out += "%";
      continue;
    }
    if (argi >= args.length) {
      out += `%!${verb}(MISSING)`;
      continue;
    }
    out += formatOne(verb, spec, args[argi++], b);
  }
  b.growing(out.length);
  if (argi < args.length) {
    out += `%!(EXTRA ${args.slice(argi).map((a) => (a === undefined || a === null ? "<nil>" : `${typeName(a)}=${formatValue(a)}`)).join(", ")})`;
  }
  return out;
}

function pad(s: string, spec: Spec, numeric: boolean): string {
  const w = spec.width ?? 0;
  if (w === 0) return s;
  const len = codePointsUpTo(s, w);
  if (len >= w) return s;
  if (spec.minus) return s + " ".repeat(w - len);
  if (spec.zero && numeric) {
    const sign = /^[+\- ]/.test(s) ? s[0]! : "";
    return sign + "0".repeat(w - len) + s.slice(sign.length);
  }
  return " ".repeat(w - len) + s;
}

function bad(verb: string, v: unknown): string {
  return v === undefined || v === null ? `%!${verb}(<nil>)` : `%!${verb}(${typeName(v)}=${formatValue(v)})`;
}

function formatOne(verb: string, spec: Spec, v: unknown, b: Budget): string {
  const kind = kindOf(v);
  switch (verb) {
    case "v":
      if (kind === "float") return pad(signed(formatFloatG(v as number), spec), spec, true);
      if (kind === "int") return pad(signed((v as bigint).toString(), spec), spec, true);
      return pad(formatValue(v, spec.plus), spec, false);
    case "s":
      if (kind === "int" || kind === "float" || kind === "bool" || kind === "invalid") return bad(verb, v);
      return pad(truncate(formatValue(v), spec.prec), spec, false);
    case "q":
      if (kind === "string") return pad(spec.sharp && !(v as string).includes("`") ? `\`${v as string}\`` : goQuoteString(v as string, b), spec, false);
      if (kind === "int") return pad(`'${String.fromCodePoint(Number(v))}'`, spec, false);
      if (kind === "slice" || kind === "map" || kind === "struct") return pad(goQuoteString(formatValue(v), b), spec, false);
      return bad(verb, v);
    case "t":
      return kind === "bool" ? pad(String(v), spec, false) : bad(verb, v);
    case "d": case "b": case "o": case "x": case "X": case "c": case "U":
      if (kind === "int") return pad(intVerb(verb, v as bigint, spec), spec, verb !== "c");
      if (kind === "string" && (verb === "x" || verb === "X")) {
        b.growing(2 * Buffer.byteLength(v as string));
        const hex = Buffer.from(v as string).toString("hex");
        return pad(verb === "X" ? hex.toUpperCase() : hex, spec, false);
      }
      if (kind === "float" && (verb === "x" || verb === "X" || verb === "b")) return bad(verb, v);
      return bad(verb, v);
    case "e": case "E": case "f": case "F": case "g": case "G":
      if (kind === "float" || kind === "int") return pad(floatVerb(verb, Number(v), spec), spec, true);
      return bad(verb, v);
    case "T":
      return pad(typeName(v), spec, false);
  }
  return bad(verb, v);
}

function signed(s: string, spec: Spec): string {
  if (s.startsWith("-")) return s;
  return spec.plus ? `+${s}` : spec.space ? ` ${s}` : s;
}

function truncate(s: string, prec: number | undefined): string {
  return prec === undefined ? s : firstCodePoints(s, prec);
}

function intVerb(verb: string, n: bigint, spec: Spec): string {
  if (verb === "c") return String.fromCodePoint(Number(n));
  if (verb === "U") return `U+${n.toString(16).toUpperCase().padStart(4, "0")}`;
  const neg = n < 0n;
  const abs = neg ? -n : n;
  const base = { d: 10, b: 2, o: 8, x: 16, X: 16 }[verb]!;
  let digits = abs.toString(base);
  if (verb === "X") digits = digits.toUpperCase();
  if (spec.prec !== undefined) digits = digits.padStart(spec.prec, "0");
  if (spec.sharp) digits = (({ b: "0b", o: "0", x: "0x", X: "0X" } as Record<string, string>)[verb] ?? "") + digits;
  return signed((neg ? "-" : "") + digits, spec);
}

function floatVerb(verb: string, f: number, spec: Spec): string {
  let s: string;
  const lower = verb.toLowerCase();
  if (!Number.isFinite(f)) s = Number.isNaN(f) ? "NaN" : f > 0 ? "+Inf" : "-Inf";
  else if (lower === "f") s = toFixedEven(f, spec.prec ?? 6);
  else if (lower === "e") s = expForm(toExponentialEven(f, spec.prec ?? 6));
  else if (spec.prec === undefined) s = formatFloatG(f);
  else {
    const p = Math.max(spec.prec, 1);
    const e = toExponentialEven(f, p - 1);
    const exp = Number(e.split("e")[1]);
    s = exp < -4 || exp >= p ? expForm(e) : String(Number(e));
  }
  if (verb === "E" || verb === "G") s = s.toUpperCase();
  return signed(s, spec);
}

/*
 * JS rounds an exact tie (2.5 to 0 places) up, Go's strconv to even: read the exact decimal
 * expansion further, and where it is exactly half, keep the even digit.
 */
const EXTRA = 25;

function toFixedEven(x: number, prec: number): string {
  const js = x.toFixed(prec);
  const extra = Math.min(100, prec + EXTRA) - prec;
  if (extra <= 0 || Math.abs(x) >= 1e21) return js;
  const long = x.toFixed(prec + extra);
  return halfEven(js, long.slice(0, long.length - extra).replace(/\.$/, ""), long.slice(long.length - extra), "");
}

function toExponentialEven(x: number, prec: number): string {
  const js = x.toExponential(prec);
  const extra = Math.min(100, prec + EXTRA) - prec;
  if (extra <= 0) return js;
  const [m, e] = x.toExponential(prec + extra).split("e") as [string, string];
  return halfEven(js, m.slice(0, m.length - extra).replace(/\.$/, ""), m.slice(m.length - extra), `e${e}`);
}

function halfEven(js: string, kept: string, rest: string, suffix: string): string {
  if (!/^50*$/.test(rest)) return js;
  return Number(kept[kept.length - 1]) % 2 === 0 ? kept + suffix : js;
}

/** JS "1.5e+3" → Go "1.5e+03". */
function expForm(s: string): string {
  return s.replace(/e([+-])(\d)$/, "e$10$2");
}

const QUOTED: Record<string, string> = {
  '"': '\\"',
  "\\": "\\\\",
  "\n": "\\n",
  "\t": "\\t",
  "\r": "\\r",
  "\x07": "\\a",
  "\b": "\\b",
  "\f": "\\f",
  "\v": "\\v",
};

/** strconv.Quote (as far as templates need it: ASCII and C1 controls escaped, the rest kept). */
export function goQuoteString(s: string, b: Budget = new Budget()): string {
  // eslint-disable-next-line no-control-regex -- control characters are what this escapes
  return replaceBounded(s, /["\\\x00-\x1f\x7f-\x9f]/g, (ch) => {
    const q = QUOTED[ch];
    if (q) return q;
    const cp = ch.charCodeAt(0);
    return cp < 0x80 ? `\\x${cp.toString(16).padStart(2, "0")}` : `\\u${cp.toString(16).padStart(4, "0")}`;
  }, b, '"', '"');
}
