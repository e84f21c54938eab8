/**
 * How Go values look to a template, in JS. Plain data maps onto Go's dynamic types:
 * `undefined`/`null` → nil, string → string, boolean → bool, number → float64, bigint → int,
 * array → []any, plain object → map[string]any. Go's typed values that Ollama hands its templates
 * (structs such as templateMessage, maps with a String() method, ...) are objects tagged with a
 * {@link GoType}: field order, JSON tags, Stringer and Marshaler behaviour, zero values.
 */
import { Budget, replaceBounded } from "./budget.js";

export interface GoField {
  /** Go field name (what `.Name` looks up). */
  name: string;
  /** JSON key; absent → the Go name. */
  json?: string;
  omitempty?: boolean;
}

export interface GoType {
  kind: "struct" | "map" | "slice";
  /** Type name as Go prints it in errors, e.g. "*template.templateMessage". */
  name: string;
  /** Struct fields in declaration order. */
  fields?: readonly GoField[];
  /** Zero value of a map's element type (missingkey=zero); absent → nil interface. */
  elemZero?: () => unknown;
  /** fmt.Stringer. */
  string?: (v: never) => string;
  /** json.Marshaler: returns JSON text. */
  json?: (v: never) => string;
  /** Methods callable from a template (`.ToTypeScriptType`); String comes from `string`. */
  methods?: Record<string, (v: never) => unknown>;
  /** A nil map or slice of this type. */
  nil?: boolean;
}

const TYPE = Symbol("goType");

/** Attaches Go type information to `v` (not enumerable, so JSON and keys are unaffected). */
export function tagGo<T extends object>(v: T, type: GoType): T {
  Object.defineProperty(v, TYPE, { value: type, enumerable: false });
  return v;
}

export function goType(v: unknown): GoType | undefined {
  return typeof v === "object" && v !== null ? (v as { [TYPE]?: GoType })[TYPE] : undefined;
}

export type Kind = "invalid" | "string" | "bool" | "int" | "float" | "slice" | "map" | "struct" | "func";

export function kindOf(v: unknown): Kind {
  if (v === undefined || v === null) return "invalid";
  switch (typeof v) {
    case "string": return "string";
    case "boolean": return "bool";
    case "number": return "float";
    case "bigint": return "int";
    case "function": return "func";
  }
  const t = goType(v);
  if (t) return t.kind;
  return Array.isArray(v) ? "slice" : "map";
}

/** The Go type name of `v` for error messages. */
export function typeName(v: unknown): string {
  const t = goType(v);
  if (t) return t.name;
  switch (kindOf(v)) {
    case "invalid": return "<nil>";
    case "string": return "string";
    case "bool": return "bool";
    case "int": return "int";
    case "float": return "float64";
    case "slice": return "[]interface {}";
    case "func": return "func";
    default: return "map[string]interface {}";
  }
}

/** Entries of a map value (own enumerable keys). */
export function mapKeys(v: object): string[] {
  return goType(v)?.nil ? [] : Object.keys(v);
}

/** Number of elements of a slice or map, bytes of a string. */
export function lengthOf(v: unknown): number | undefined {
  switch (kindOf(v)) {
    case "string": return Buffer.byteLength(v as string, "utf8");
    case "slice": return goType(v)?.nil ? 0 : (v as unknown[]).length;
    case "map": return mapKeys(v as object).length;
    default: return undefined;
  }
}

/** Go's truth (text/template isTrue): false, 0, nil, and empty strings, slices and maps are false. */
export function isTrue(v: unknown): boolean {
  switch (kindOf(v)) {
    case "invalid": return false;
    case "bool": return v as boolean;
    case "int": return v !== 0n;
    case "float": return v !== 0;
    case "string": case "slice": case "map": return lengthOf(v)! > 0;
    default: return true;
  }
}

/** strconv.FormatFloat(f, 'g', -1, 64): what %v prints for a float64. */
export function formatFloatG(f: number): string {
  if (Number.isNaN(f)) return "NaN";
  if (!Number.isFinite(f)) return f > 0 ? "+Inf" : "-Inf";
  if (f === 0) return Object.is(f, -0) ? "-0" : "0";
  const [mant, e] = f.toExponential().split("e") as [string, string];
  const exp = Number(e);
  // Shortest digits; exponent form when the exponent is < -4 or >= 6 (strconv's rule for precision -1).
  if (exp < -4 || exp >= 6) return `${mant}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  return String(f);
}

/** fmt's %v of `v` (%+v with `plus`). */
export function formatValue(v: unknown, plus = false): string {
  if (v === undefined || v === null) return "<nil>";
  switch (typeof v) {
    case "string": return v;
    case "boolean": return v ? "true" : "false";
    case "number": return formatFloatG(v);
    case "bigint": return v.toString();
    case "function": return "0x0";
  }
  const t = goType(v);
  if (t?.string) return t.string(v as never);
  if (Array.isArray(v)) return `[${v.map((x) => formatValue(x, plus)).join(" ")}]`;
  if (t?.kind === "struct") {
    const parts = (t.fields ?? []).map((f) => (plus ? `${f.name}:` : "") + formatValue((v as Record<string, unknown>)[f.name], plus));
    return `{${parts.join(" ")}}`;
  }
  const obj = v as Record<string, unknown>;
  const keys = mapKeys(obj).sort(compareStrings);
  return `map[${keys.map((k) => `${k}:${formatValue(obj[k], plus)}`).join(" ")}]`;
}

/** Byte-wise string order, as Go sorts map keys. */
export function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** Go's json.Marshal: sorted map keys, struct tags, HTML-safe escaping (<, >, & as \u003c...). */
export function goJson(v: unknown, b: Budget = new Budget()): string {
  // A string (a template can pass one of any length) is escaped a chunk at a time: its JSON can be
  // six times as long, and that should fail at the limit rather than be built first.
  if (typeof v === "string") return replaceBounded(v, JSON_STRING_ESCAPES, jsonEscape, b, '"', '"');
  return replaceBounded(jsonOf(v), /[<>&\u2028\u2029]/g, jsonEscape, b);
}

/** What JSON.stringify escapes in a string (lone surrogates included), and Go's HTML-safe characters. */
// eslint-disable-next-line no-control-regex -- control characters are what this escapes
const JSON_STRING_ESCAPES = /["\\\x00-\x1f<>&\u2028\u2029]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

function jsonEscape(c: string): string {
  return "<>&\u2028\u2029".includes(c) ? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}` : JSON.stringify(c).slice(1, -1);
}

function jsonOf(v: unknown): string {
  if (v === undefined || v === null) return "null";
  switch (typeof v) {
    case "string": return JSON.stringify(v);
    case "boolean": return v ? "true" : "false";
    case "number": return Number.isFinite(v) ? JSON.stringify(v) : "null";
    case "bigint": return v.toString();
    case "function": return "null";
  }
  const t = goType(v);
  if (t?.json) return t.json(v as never);
  if (t?.nil) return "null";
  if (Array.isArray(v)) return `[${v.map(jsonOf).join(",")}]`;
  const obj = v as Record<string, unknown>;
  if (t?.kind === "struct") {
    const parts: string[] = [];
    for (const f of t.fields ?? []) {
      const x = obj[f.name];
      if (f.omitempty && isEmptyValue(x)) continue;
      parts.push(`${JSON.stringify(f.json ?? f.name)}:${jsonOf(x)}`);
    }
    return `{${parts.join(",")}}`;
  }
  const keys = mapKeys(obj).sort(compareStrings);
  return `{${keys.map((k) => `${JSON.stringify(k)}:${jsonOf(obj[k])}`).join(",")}}`;
}

/** An ordered map's JSON (keys in insertion order), as Ollama's orderedmap marshals. */
export function orderedJson(obj: Record<string, unknown>): string {
  return `{${Object.keys(obj).map((k) => `${JSON.stringify(k)}:${jsonOf(obj[k])}`).join(",")}}`;
}

/** encoding/json's isEmptyValue, for omitempty. */
function isEmptyValue(v: unknown): boolean {
  switch (kindOf(v)) {
    case "invalid": return true;
    case "struct": return false;
    default: return !isTrue(v);
  }
}
