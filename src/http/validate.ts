/**
 * Request-body validation: JSON Schemas compiled with ajv, and ajv's first error turned into the
 * 400 message every client sees (`invalid type for parameter '<path>': expected <type>`). Table-driven: one small formatter per ajv keyword.
 */
import { Ajv, type AnySchemaObject, type ErrorObject, type SchemaObject } from "ajv";
import { BadRequestError } from "../errors.js";

// verbose: errors carry `schema`/`parentSchema`, which the messages need (both bounds, type names).
const ajv = new Ajv({ allErrors: false, coerceTypes: false, useDefaults: false, strict: false, verbose: true });

/** A validator: returns the body typed as `T`, or throws BadRequestError with the contract's message. */
export type Validator<T> = (body: unknown) => T;

/**
 * Compiles `schema` once; call the result per request. `asGo`: the body is read as Ollama's Go
 * server reads it (`goReading`) before it is checked.
 */
export function compileValidator<T>(schema: SchemaObject, { asGo = false } = {}): Validator<T> {
  const validate = ajv.compile(schema);
  return (raw: unknown): T => {
    const body = asGo ? goReading(raw) : raw;
    if (validate(body)) return body as T;
    throw new BadRequestError(messageFor(validate.errors ?? []));
  };
}

/**
 * An Ollama API body as Go's encoding/json and Ollama's types read it: a null field is a field not
 * set (so clients that write every unset field as null work), in the body, its `options` (and a
 * create's `parameters`) and each of its `messages`, and a message's role is lower-cased
 * (api.Message's UnmarshalJSON). Nothing deeper: inside a JSON Schema or a tool's arguments a null
 * is a value.
 */
export function goReading(body: unknown): unknown {
  if (!isRecord(body)) return body;
  const out = withoutNulls(body);
  if (isRecord(out.options)) out.options = withoutNulls(out.options);
  if (isRecord(out.parameters)) out.parameters = withoutNulls(out.parameters);
  if (Array.isArray(out.messages)) out.messages = out.messages.map((m: unknown) => (isRecord(m) ? goMessage(m) : m));
  return out;
}

function goMessage(message: Record<string, unknown>): Record<string, unknown> {
  const out = withoutNulls(message);
  if (typeof out.role === "string") out.role = out.role.toLowerCase();
  return out;
}

function withoutNulls(object: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(object).filter(([, v]) => v !== null));
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The contract's message for ajv's errors (the first one, or the most telling branch of a union). */
export function messageFor(errors: readonly ErrorObject[]): string {
  const err = pickError(errors);
  if (!err) return "invalid request body";
  const path = dottedPath(err.instancePath);
  const format = FORMATTERS[err.keyword] ?? generic;
  return format(err, path);
}

type Formatter = (err: ErrorObject, path: string) => string;

const bounds: Formatter = (err, path) => rangeMessage(lastSegment(path), err.parentSchema ?? {});

const FORMATTERS: Record<string, Formatter> = {
  required: (err, path) => `${join(path, String(err.params.missingProperty))} is required`,
  type: (err, path) => `invalid type for parameter '${path}': expected ${typeName(err.schema)}`,
  anyOf: (err, path) => `invalid type for parameter '${path}': expected ${unionTypeName(err.schema)}`,
  oneOf: (err, path) => `invalid type for parameter '${path}': expected ${unionTypeName(err.schema)}`,
  minimum: bounds,
  maximum: bounds,
  exclusiveMinimum: bounds,
  exclusiveMaximum: bounds,
  minLength: (err, path) => (err.params.limit === 1 ? `${path} is required` : generic(err, path)),
  maxItems: (err, path) => `${lastSegment(path)} must have at most ${String(err.params.limit)} items`,
  minItems: (err, path) => `${lastSegment(path)} must have at least ${String(err.params.limit)} items`,
  enum: (err, path) => `invalid value for parameter '${path}': expected one of ${(err.params.allowedValues as unknown[]).map(String).join(", ")}`,
};

function generic(err: ErrorObject, path: string): string {
  return `invalid value for parameter '${path}': ${err.message ?? "is invalid"}`;
}

/**
 * With `allErrors: false` there is one error, except under `anyOf`/`oneOf`, where ajv lists every
 * branch's failure and then the union's own. A branch that failed on something other than its type
 * accepted the value's type, so its error says more (e.g. `stop` with 20 items → maxItems);
 * otherwise the union itself is reported as a type error listing every branch's type.
 */
function pickError(errors: readonly ErrorObject[]): ErrorObject | undefined {
  const union = errors.find((e) => e.keyword === "anyOf" || e.keyword === "oneOf");
  if (!union) return errors[0];
  const branches = errors.filter((e) => e !== union && e.schemaPath.startsWith(`${union.schemaPath}/`));
  if (branches.length === 0) return { ...union, keyword: "union" }; // oneOf matched twice: generic message
  return branches.find((e) => e.keyword !== "type") ?? union;
}

function rangeMessage(name: string, schema: AnySchemaObject): string {
  const min = schema.minimum ?? schema.exclusiveMinimum;
  const max = schema.maximum ?? schema.exclusiveMaximum;
  if (min !== undefined && max !== undefined) return `${name} must be between ${min} and ${max}`;
  if (schema.exclusiveMinimum !== undefined) return `${name} must be greater than ${schema.exclusiveMinimum}`;
  if (schema.exclusiveMaximum !== undefined) return `${name} must be less than ${schema.exclusiveMaximum}`;
  if (min !== undefined) return `${name} must be at least ${min}`;
  return `${name} must be at most ${max}`;
}

/** A schema `type` as words: `"number"`, `["string", "array"]` → `"string or array"`. */
export function typeName(type: unknown): string {
  if (Array.isArray(type)) return type.map(String).join(" or ");
  return typeof type === "string" ? type : "a valid value";
}

/** The types a union's branches accept (from `type`, or from `const`/`enum` values). */
function unionTypeName(branches: unknown): string {
  if (!Array.isArray(branches)) return "a valid value";
  const names = new Set<string>();
  for (const b of branches as AnySchemaObject[]) {
    const t: unknown = b.type ?? jsonType(b.const ?? (Array.isArray(b.enum) ? b.enum[0] : undefined));
    for (const n of Array.isArray(t) ? t : [t]) if (typeof n === "string") names.add(n);
  }
  return names.size > 0 ? [...names].join(" or ") : "a valid value";
}

function jsonType(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

/** JSON pointer `/messages/0/content` → `messages[0].content`; the root is `body`. */
export function dottedPath(pointer: string): string {
  if (pointer === "") return "body";
  let out = "";
  for (const raw of pointer.slice(1).split("/")) {
    const seg = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    out += /^[0-9]+$/.test(seg) ? `[${seg}]` : out === "" ? seg : `.${seg}`;
  }
  return out;
}

function join(path: string, prop: string): string {
  return path === "body" ? prop : `${path}.${prop}`;
}

/** `options.temperature` → `temperature`; `stop[3]` → `stop[3]` (an index alone names nothing). */
function lastSegment(path: string): string {
  const dot = path.lastIndexOf(".");
  return dot < 0 ? path : path.slice(dot + 1);
}
