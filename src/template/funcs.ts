/**
 * The functions a template can call: Go's built-ins (text/template/funcs.go) and Ollama's
 * (`json`, `currentDate`, `yesterdayDate`, `toTypeScriptType`, from its template/template.go).
 */
import type { ArgNode } from "./ast.js";
import { Budget, replaceBounded } from "./budget.js";
import { sprint, sprintf, sprintln } from "./fmt.js";
import { formatValue, goJson, goType, isTrue, kindOf, lengthOf, mapKeys, tagGo, typeName } from "./values.js";

type Param = "any" | "string";

export interface FuncSpec {
  name: string;
  params: Param[];
  variadic?: Param;
  /** and/or: arguments are evaluated one at a time and stop at the deciding one. */
  lazy?: "and" | "or";
  /** Builds its result within `b` (a long value fails as it grows, not after). */
  call(args: unknown[], b: Budget): unknown;
}

/** An error a function returned: Go reports it as `error calling <name>: <err>`. */
class CallError extends Error {}
const fail = (msg: string): never => {
  throw new CallError(msg);
};

/**
 * Runs `fn` on its argument nodes (and the previous pipeline stage's value, last). What it returns
 * is charged to `b`: a string longer than the value limit, or past the total, is an error.
 */
export function callFunction(
  fn: FuncSpec,
  argNodes: ArgNode[],
  evalArg: (n: ArgNode) => unknown,
  final: { present: boolean; value?: unknown },
  b: Budget = new Budget(),
): unknown {
  const numIn = argNodes.length + (final.present ? 1 : 0);
  if (fn.variadic) {
    if (numIn < fn.params.length) throw new Error(`wrong number of args for ${fn.name}: want at least ${fn.params.length} got ${argNodes.length}`);
  } else if (numIn !== fn.params.length) throw new Error(`wrong number of args for ${fn.name}: want ${fn.params.length} got ${numIn}`);
  if (fn.lazy) {
    let v: unknown;
    for (const n of argNodes) {
      v = evalArg(n);
      if (isTrue(v) === (fn.lazy === "or")) return v;
    }
    return final.present ? final.value : v;
  }
  const args = argNodes.map((n, i) => check(evalArg(n), fn.params[i] ?? fn.variadic ?? "any"));
  if (final.present) args.push(check(final.value, fn.params[args.length] ?? fn.variadic ?? "any"));
  // Most functions walk their string arguments (compare, measure, copy): that is work for the clock.
  for (const a of args) if (typeof a === "string") b.spend(a.length);
  try {
    const out = fn.call(args, b);
    if (typeof out === "string") b.returned(out.length);
    return out;
  } catch (e) {
    if (e instanceof CallError) throw new Error(`error calling ${fn.name}: ${e.message}`, { cause: e });
    throw e;
  }
}

function check(v: unknown, p: Param): unknown {
  if (p === "string" && typeof v !== "string") {
    if (v === undefined || v === null) throw new Error("invalid value; expected string");
    throw new Error(`wrong type for value; expected string; got ${typeName(v)}`);
  }
  return v;
}

const spec = (name: string, params: Param[], call: (args: unknown[], b: Budget) => unknown, variadic?: Param): FuncSpec => ({
  name,
  params,
  call,
  ...(variadic ? { variadic } : {}),
});

export const FUNCS = new Map<string, FuncSpec>();
const add = (f: FuncSpec): void => void FUNCS.set(f.name, f);

add({ name: "and", params: ["any"], variadic: "any", lazy: "and", call: () => undefined });
add({ name: "or", params: ["any"], variadic: "any", lazy: "or", call: () => undefined });
add(spec("not", ["any"], ([a]) => !isTrue(a)));
add(spec("call", ["any"], ([f]) => fail(f === undefined || f === null ? "call of nil" : `non-function ${formatValue(f)} of type ${typeName(f)}`), "any"));
add(spec("len", ["any"], ([a]) => {
  if (a === undefined || a === null) return fail("len of nil pointer");
  const n = lengthOf(a);
  return n === undefined ? fail(`len of type ${typeName(a)}`) : BigInt(n);
}));
add(spec("index", ["any"], (args) => index(args[0], args.slice(1)), "any"));
add(spec("slice", ["any"], (args) => slice(args[0], args.slice(1)), "any"));
add(spec("print", [], (args, b) => sprint(args, b), "any"));
add(spec("println", [], (args, b) => sprintln(args, b), "any"));
add(spec("printf", ["string"], ([f, ...rest], b) => sprintf(f as string, rest, b), "any"));
add(spec("html", [], (args, b) => htmlEscape(evalArgsString(args, b), b), "any"));
add(spec("js", [], (args, b) => jsEscape(evalArgsString(args, b), b), "any"));
add(spec("urlquery", [], (args, b) => queryEscape(evalArgsString(args, b), b), "any"));
add(spec("eq", ["any"], ([a, ...rest]) => eq(a, rest), "any"));
add(spec("ne", ["any", "any"], ([a, b]) => !eq(a, [b])));
add(spec("lt", ["any", "any"], ([a, b]) => lt(a, b)));
add(spec("le", ["any", "any"], ([a, b]) => lt(a, b) || eq(a, [b])));
add(spec("gt", ["any", "any"], ([a, b]) => !(lt(a, b) || eq(a, [b]))));
add(spec("ge", ["any", "any"], ([a, b]) => !lt(a, b)));
// Ollama's functions (template/template.go `funcs`).
add(spec("json", ["any"], ([v], b) => goJson(v, b)));
add(spec("currentDate", [], () => dateString(0), "string"));
add(spec("yesterdayDate", [], () => dateString(-1), "string"));
add(spec("toTypeScriptType", ["any"], ([v]) => {
  const m = goType(v)?.methods?.["ToTypeScriptType"];
  return m ? m(v as never) : "any";
}));

/** time.Now().AddDate(0, 0, days).Format("2006-01-02") in local time, as Ollama does. */
function dateString(days: number): string {
  const d = new Date();
  d.setDate(d.getDate() + days);
  const p = (n: number): string => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
}

/** evalArgs: a single string argument as is, else fmt.Sprint of all. */
function evalArgsString(args: unknown[], b: Budget): string {
  return args.length === 1 && typeof args[0] === "string" ? args[0] : sprint(args, b);
}

type Basic = "invalid" | "bool" | "int" | "float" | "string" | "other";
function basicKind(v: unknown): Basic {
  const k = kindOf(v);
  return k === "bool" || k === "int" || k === "float" || k === "string" || k === "invalid" ? k : "other";
}

function eq(a: unknown, rest: unknown[]): boolean {
  if (rest.length === 0) return fail("missing argument for comparison");
  const k1 = basicKind(a);
  for (const b of rest) {
    const k2 = basicKind(b);
    if (k1 !== k2) {
      if (k1 !== "invalid" && k2 !== "invalid") fail("incompatible types for comparison");
      continue;
    }
    if (k1 === "other") {
      if (Array.isArray(a) || Array.isArray(b) || kindOf(a) === "map") fail(`non-comparable type ${formatValue(b)}: ${typeName(b)}`);
      if (a === b) return true;
    } else if (k1 === "invalid" || a === b) return true;
  }
  return false;
}

function lt(a: unknown, b: unknown): boolean {
  const k1 = basicKind(a);
  const k2 = basicKind(b);
  if (k1 === "invalid" || k1 === "other" || k2 === "invalid" || k2 === "other") return fail("invalid type for comparison");
  if (k1 !== k2) return fail("incompatible types for comparison");
  if (k1 === "bool") return fail("invalid type for comparison");
  if (k1 === "string") return Buffer.compare(Buffer.from(a as string), Buffer.from(b as string)) < 0;
  return (a as number) < (b as number);
}

function indexArg(i: unknown, cap: number): number {
  if (i === undefined || i === null) return fail("cannot index slice/array with nil");
  if (typeof i !== "bigint") return fail(`cannot index slice/array with type ${typeName(i)}`);
  if (i < 0n || i > BigInt(cap)) return fail(`index out of range: ${i}`);
  return Number(i);
}

function index(item: unknown, indexes: unknown[]): unknown {
  if (item === undefined || item === null) return fail("index of untyped nil");
  let cur: unknown = item;
  for (const ix of indexes) {
    if (cur === undefined || cur === null) return fail("index of nil pointer");
    const k = kindOf(cur);
    if (k === "slice" || k === "string") {
      const bytes = k === "string" ? Buffer.from(cur as string) : null;
      const len = bytes ? bytes.length : lengthOf(cur)!;
      const x = indexArg(ix, len);
      if (x === len) return fail(`index out of range: ${x}`);
      cur = bytes ? BigInt(bytes[x]!) : (cur as unknown[])[x];
    } else if (k === "map") {
      if (typeof ix !== "string") return fail(`value has type ${typeName(ix)}; should be string`);
      const obj = cur as Record<string, unknown>;
      const t = goType(cur);
      cur = mapKeys(obj).includes(ix) ? obj[ix] : t?.elemZero ? t.elemZero() : null;
    } else return fail(`can't index item of type ${typeName(cur)}`);
  }
  return cur;
}

function slice(item: unknown, indexes: unknown[]): unknown {
  if (item === undefined || item === null) return fail("slice of untyped nil");
  if (indexes.length > 3) return fail(`too many slice indexes: ${indexes.length}`);
  const k = kindOf(item);
  if (k === "string" && indexes.length === 3) return fail("cannot 3-index slice a string");
  if (k !== "string" && k !== "slice") return fail(`can't slice item of type ${typeName(item)}`);
  const len = lengthOf(item)!;
  const idx = [0, len, len];
  indexes.forEach((ix, i) => (idx[i] = indexArg(ix, len)));
  if (idx[0]! > idx[1]!) return fail(`invalid slice index: ${idx[0]} > ${idx[1]}`);
  if (indexes.length === 3 && idx[1]! > idx[2]!) return fail(`invalid slice index: ${idx[1]} > ${idx[2]}`);
  if (k === "string") return Buffer.from(item as string).subarray(idx[0], idx[1]).toString("utf8");
  const out = (goType(item)?.nil ? [] : (item as unknown[])).slice(idx[0], idx[1]);
  const t = goType(item);
  return t ? tagGo(out, { ...t, nil: false }) : out;
}

/** template.HTMLEscapeString. */
function htmlEscape(s: string, b: Budget): string {
  return replaceBounded(s, /[\0"'&<>]/g, (c) => ({ "\0": "\uFFFD", '"': "&#34;", "'": "&#39;", "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]!, b);
}

const JS_SPECIAL: Record<string, string> = { "\\": "\\\\", "'": "\\'", '"': '\\"', "<": "\\u003C", ">": "\\u003E", "&": "\\u0026", "=": "\\u003D" };

/** template.JSEscapeString: ASCII specials and controls, and non-ASCII controls and separators. */
function jsEscape(s: string, b: Budget): string {
  // eslint-disable-next-line no-control-regex -- control characters are what this escapes
  return replaceBounded(s, /[\\'"<>&=\x00-\x1f]|(?=[^\x00-\x7f])[\p{C}\p{Z}]/gu, (ch) => {
    const cp = ch.codePointAt(0)!;
    if (cp < 0x80) return JS_SPECIAL[ch] ?? `\\u00${cp.toString(16).toUpperCase().padStart(2, "0")}`;
    return `\\u${cp.toString(16).toUpperCase().padStart(4, "0")}`;
  }, b);
}

/** url.QueryEscape: unreserved bytes kept, space as '+', every other byte of the UTF-8 as %XX. */
function queryEscape(s: string, b: Budget): string {
  return replaceBounded(s, /[^A-Za-z0-9\-_.~]/gu, (ch) => {
    if (ch === " ") return "+";
    let out = "";
    for (const byte of Buffer.from(ch)) out += `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
    return out;
  }, b);
}
