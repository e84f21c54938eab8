/**
 * Generators of hostile request bodies for the HTTP fuzz suite, and a runner that sends them to a
 * real daemon and checks every answer: the expected status and a body that is exactly
 * `{"error": "<string>"}` with a JSON content type (the same checks as test/helpers/assert-error.ts,
 * done without a tap assertion per case so that thousands of cases stay fast and readable).
 *
 * No generated body names an installed model (the daemon's one model is called `sentinel-q7`, and
 * every generated string that mentions it is dropped), so no case makes a model load or generate,
 * and no case sends a valid name to /api/pull or /api/push, or as /api/create's `from` (a base
 * model not in the store is pulled): each would contact a registry.
 */
import fc from "fast-check";
import { Pool } from "undici";

/** The installed model's name; generated bodies never contain it. */
export const SENTINEL = "sentinel-q7";
const clean = (s: string) => !/sentinel/i.test(s);

/** One generated request. `expect` is the set of statuses the contract allows for it. */
export interface FuzzCase {
  kind: string;
  method: string;
  path: string;
  body: Buffer;
  expect: readonly number[];
  /** When set, the error message must match. */
  message?: RegExp;
}

/** A JSON text that is not what JSON.stringify would write for it (raw numbers, duplicate keys). */
const raw = (text: string) => ({ __raw: text });
type Json = unknown;

/** Serialises a value, writing `raw(...)` pieces verbatim (huge numbers, duplicate keys). */
export function toJson(value: Json): string {
  if (value && typeof value === "object" && "__raw" in value && Object.keys(value).length === 1) return String((value as { __raw: string }).__raw);
  if (Array.isArray(value)) return `[${value.map(toJson).join(",")}]`;
  if (value && typeof value === "object") return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}:${toJson(v)}`).join(",")}}`;
  return JSON.stringify(value) ?? "null";
}

const hostileKey = fc.constantFrom(
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "valueOf",
  "__defineGetter__",
  "",
  "\u0000",
  "a".repeat(300),
);
const extraKey = fc.oneof(hostileKey, fc.string({ maxLength: 8 })).filter((k) => k !== "model" && k !== "name" && clean(k));

const hugeNumber = fc
  .constantFrom(
    "1e309",
    "-1e309",
    "1e400",
    "123456789012345678901234567890",
    "-0",
    "0.0000000000000000000001",
    "9007199254740993",
    "1E+2",
    "-9223372036854775809",
  )
  .map(raw);
const hostileString = fc
  .oneof(
    fc.string({ maxLength: 40 }),
    fc.string({ unit: "grapheme", maxLength: 20 }),
    fc.constantFrom(
      "\u0000",
      "a\u0000b",
      "\ud800",
      "\udfff\ud800",
      "../../etc/passwd",
      "/etc/shadow",
      "C:\\Windows",
      "%00",
      "${x}",
      "{{.System}}",
      "\u202e",
      "\r\n\r\nHTTP/1.1 200 OK",
    ),
  )
  .filter(clean);

/** Any JSON value, with nesting, hostile keys, huge numbers and odd strings. */
export const anyValue: fc.Arbitrary<Json> = fc.letrec<{ v: Json }>((tie) => ({
  v: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom(null, true, false, 0, -1, 1.5, 2 ** 31, 2 ** 53, -(2 ** 63), Number.MAX_VALUE),
    hugeNumber,
    hostileString,
    fc.array(tie("v"), { maxLength: 4 }),
    fc.dictionary(extraKey, tie("v"), { maxKeys: 4 }),
  ),
})).v;

/** Model names: absent models, invalid names and wrong types (never an installed model). */
const invalidName = fc.constantFrom(
  "../../etc/passwd",
  "/etc/passwd",
  "..",
  "a/../b",
  "a\\b",
  "x\u0000y",
  "n".repeat(400),
  "a:b:c",
  "a/b/c/d",
  "-lead",
  "sp ace",
  "%2e%2e%2f",
  ":tag",
  "host:99999999/x/y",
  "🙂",
  "a/./b",
  "ns/.:t",
);
const absentName = fc.constantFrom("nope", "nope:latest", "example.invalid/ns/nope:v1", "NoPe", "library/missing:7b");
const wrongType = fc.constantFrom<Json>(0, -1, true, null, [], {}, ["x"], { a: 1 }, raw("1e309"));
export const modelValue = fc.oneof(invalidName, absentName, wrongType, hostileString);
const modelNoRegistry = fc.oneof(invalidName, wrongType);

/** A structured body for an endpoint: its own fields filled with anything, plus extra keys. */
function objectFor(fields: Record<string, fc.Arbitrary<Json>>): fc.Arbitrary<Record<string, Json>> {
  const keys = Object.keys(fields);
  return fc
    .tuple(fc.record(fields, { requiredKeys: [] }), fc.dictionary(extraKey, anyValue, { maxKeys: 3 }), fc.subarray(keys))
    .map(([known, extra, drop]) => {
      const out: Record<string, Json> = {};
      for (const [k, v] of Object.entries(extra)) Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
      for (const [k, v] of Object.entries(known)) if (!drop.includes(k)) out[k] = v;
      return out;
    });
}

const value = anyValue;
const messages = fc.array(
  fc.oneof(fc.record({ role: fc.oneof(fc.constantFrom("user", "system", "assistant", "tool", "root"), value), content: value }, { requiredKeys: [] }), value),
  { maxLength: 3 },
);
const options = fc.oneof(
  value,
  fc.dictionary(fc.constantFrom("num_ctx", "num_predict", "temperature", "top_k", "seed", "stop", "__proto__", "num_thread"), fc.oneof(value, hugeNumber), {
    maxKeys: 4,
  }),
);

const block = fc.oneof(
  value,
  fc.record(
    {
      type: fc.oneof(fc.constantFrom("text", "tool_use", "tool_result", "thinking", "image", "document"), value),
      text: value,
      id: value,
      name: value,
      input: value,
      tool_use_id: value,
      content: value,
    },
    { requiredKeys: [] },
  ),
);
const anthropicMessages = fc.array(
  fc.oneof(
    fc.record(
      { role: fc.oneof(fc.constantFrom("user", "assistant", "system"), value), content: fc.oneof(value, fc.array(block, { maxLength: 3 })) },
      { requiredKeys: [] },
    ),
    value,
  ),
  { maxLength: 3 },
);
const responsesItems = fc.array(
  fc.oneof(
    fc.record(
      {
        type: fc.oneof(fc.constantFrom("message", "function_call", "function_call_output", "reasoning"), value),
        role: value,
        content: value,
        call_id: value,
        name: value,
        arguments: value,
        output: value,
      },
      { requiredKeys: [] },
    ),
    value,
  ),
  { maxLength: 3 },
);

/** Fields each endpoint reads (the model field from `model`). */
export function endpointFields(model: fc.Arbitrary<Json>): Record<string, Record<string, fc.Arbitrary<Json>>> {
  return {
    "POST /api/generate": {
      model, prompt: value, system: value, template: value, context: value, format: value, options,
      stream: value, keep_alive: value, raw: value, images: value,
    },
    "POST /api/chat": { model, messages, tools: value, format: value, options, stream: value, think: value, keep_alive: value },
    "POST /api/embed": { model, input: value, truncate: value, dimensions: fc.oneof(value, hugeNumber), options },
    "POST /api/embeddings": { model, prompt: value, options },
    "POST /api/show": { model, name: model, verbose: value },
    "POST /api/create": {
      model, name: model, from: fc.oneof(modelNoRegistry, fc.constant("sha256:" + "0".repeat(64))),
      files: fc.oneof(value, fc.dictionary(hostileString, fc.oneof(value, fc.constant("sha256:" + "1".repeat(64))))),
      template: value, system: value, parameters: value, messages, license: value, adapters: value,
    },
    "POST /api/copy": { source: model, destination: model },
    "DELETE /api/delete": { model, name: model },
    "POST /api/pull": { model: modelNoRegistry, name: modelNoRegistry, insecure: value, stream: value },
    "POST /api/push": { model: modelNoRegistry, name: modelNoRegistry, insecure: value, stream: value },
    "POST /v1/chat/completions": {
      model, messages, stream: value, max_tokens: fc.oneof(value, hugeNumber), temperature: fc.oneof(value, hugeNumber),
      tools: value, response_format: value, stream_options: value, stop: value,
    },
    "POST /v1/completions": { model, prompt: value, stream: value, max_tokens: fc.oneof(value, hugeNumber), suffix: value, echo: value },
    "POST /v1/embeddings": { model, input: value, dimensions: fc.oneof(value, hugeNumber), encoding_format: value },
    "POST /v1/messages": {
      model, max_tokens: fc.oneof(value, hugeNumber), messages: anthropicMessages, system: value, tools: value, tool_choice: value,
      thinking: value, stop_sequences: value, stream: value, temperature: fc.oneof(value, hugeNumber), top_k: value,
    },
    "POST /v1/messages/count_tokens": { model, messages: anthropicMessages, system: value, tools: value, tool_choice: value },
    "POST /v1/responses": {
      model, input: fc.oneof(value, responsesItems), instructions: value, tools: value, tool_choice: value, text: value,
      max_output_tokens: fc.oneof(value, hugeNumber), previous_response_id: value, include: value, top_logprobs: value, stream: value,
    },
    "POST /api/rerank": {
      model, query: value, documents: fc.oneof(value, fc.array(fc.oneof(value, fc.record({ text: value }, { requiredKeys: [] })), { maxLength: 3 })),
      top_n: fc.oneof(value, hugeNumber), return_documents: value,
    },
  };
}

/** Every generated case for one endpoint, `n` of the structured kind and proportionally fewer of the others. */
export function casesFor(endpoint: string, n: number, limit: number, seed: number): FuzzCase[] {
  const [method, path] = endpoint.split(" ") as [string, string];
  const noRegistry = endpoint.endsWith("/pull") || endpoint.endsWith("/push");
  const fields = endpointFields(noRegistry ? modelNoRegistry : modelValue)[endpoint]!;
  const structured = objectFor(fields);
  const jsonText = structured.map(toJson).filter(clean);
  const c = (kind: string, body: Buffer | string, expect: readonly number[], message?: RegExp): FuzzCase => ({
    kind,
    method,
    path,
    body: Buffer.isBuffer(body) ? body : Buffer.from(body),
    expect,
    ...(message ? { message } : {}),
  });
  const badJson = /^(invalid JSON in request body: .+|missing request body)$/s;
  const sample = <T>(arb: fc.Arbitrary<T>, runs: number, offset: number) => fc.sample(arb, { numRuns: runs, seed: seed + offset });
  const out: FuzzCase[] = [];
  for (const text of sample(jsonText, n, 1)) out.push(c("structured", text, [400, 404]));
  for (const bytes of sample(fc.uint8Array({ maxLength: 512 }), n / 8, 2)) out.push(c("random bytes", Buffer.from(bytes), [400], badJson));
  for (const [text, cut] of sample(fc.tuple(jsonText, fc.nat()), n / 8, 3))
    out.push(c("truncated JSON", text.slice(0, cut % Math.max(1, text.length)), [400], badJson));
  for (const [text, at, bytes] of sample(
    fc.tuple(jsonText, fc.nat(), fc.constantFrom([0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80], [0x00], [0x1f])),
    n / 8,
    4,
  )) {
    const b = Buffer.from(text);
    const i = text.length > 2 ? 1 + (at % (b.length - 1)) : 0;
    out.push(c("invalid UTF-8 or control byte", Buffer.concat([b.subarray(0, i), Buffer.from(bytes), b.subarray(i)]), [400], badJson));
  }
  for (const [a, b] of sample(fc.tuple(jsonText, jsonText), n / 16, 5)) {
    // Duplicate keys: the second object's members repeat (and override) the first's.
    const dup = a.length > 2 && b.length > 2 ? `${a.slice(0, -1)},${b.slice(1)}` : a;
    out.push(c("duplicate keys", dup, [400, 404]));
  }
  // Pull and push must never see a valid name (it would contact a registry): "../x" is refused first.
  const fixedModel = noRegistry ? "../x" : "nope";
  for (const [depth, where] of sample(
    fc.tuple(fc.integer({ min: 1000, max: Math.floor(limit / 2) - 100 }), fc.constantFrom("options", "format", "messages", "prompt", "zz")),
    n / 32,
    6,
  )) {
    out.push(c("deep nesting", `{"model":"${fixedModel}","${where}":${"[".repeat(depth)}${"]".repeat(depth)}}`, [400, 404]));
    out.push(c("deep object nesting", `{"model":"${fixedModel}","${where}":${'{"a":'.repeat(depth / 5)}1${"}".repeat(depth / 5)}}`, [400, 404]));
  }
  for (const [delta, field] of sample(fc.tuple(fc.integer({ min: -64, max: 4096 }), fc.constantFrom("prompt", "model", "input", "x")), n / 32, 7)) {
    const prefix = `{"${field}":"`;
    const size = Math.max(prefix.length + 2, limit + delta);
    const body = `${prefix}${"A".repeat(size - prefix.length - 2)}"}`;
    out.push(c("giant string near the limit", body, delta > 0 ? [413] : [400, 404], delta > 0 ? /^request body too large \(limit \d+ bytes\)$/ : undefined));
  }
  for (const text of [
    "",
    " ",
    "null",
    "[]",
    "1",
    '"x"',
    "true",
    "{",
    "}",
    '{"model":',
    "\u0000",
    "{}{}",
    "[{}]",
    '{"__proto__":{"model":"../x"}}',
    '{"constructor":{"prototype":{"polluted":1}}}',
  ]) {
    out.push(c("edge", text, [400, 404]));
  }
  return out;
}

/** What went wrong with one case, or undefined when the answer was right. */
export function judge(k: FuzzCase, status: number, contentType: string | undefined, text: string): string | undefined {
  // An empty `expect` means "anything but a 5xx"; a success or a HEAD answer has no error body to check.
  if (k.expect.length === 0 ? status >= 500 : !k.expect.includes(status))
    return `status ${status}, expected ${k.expect.join("|") || "< 500"}: ${text.slice(0, 200)}`;
  if (status < 400 || k.method === "HEAD") return undefined;
  if (!String(contentType ?? "").startsWith("application/json")) return `content-type ${String(contentType)}`;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return `body is not JSON: ${text.slice(0, 200)}`;
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) return `body is not an object: ${text.slice(0, 200)}`;
  const keys = Object.keys(body);
  if (keys.length !== 1 || keys[0] !== "error" || typeof (body as { error: unknown }).error !== "string")
    return `body is not exactly {"error": string}: ${text.slice(0, 200)}`;
  if (k.message && !k.message.test((body as { error: string }).error))
    return `message ${JSON.stringify((body as { error: string }).error)} does not match ${String(k.message)}`;
  return undefined;
}

/** A failure, with enough of the case to reproduce it. */
export interface Failure {
  kind: string;
  endpoint: string;
  problem: string;
  body: string;
}

/** Sends every case (`concurrency` at a time over keep-alive connections) and returns the failures. */
export async function runCases(url: string, cases: readonly FuzzCase[], concurrency = 8): Promise<Failure[]> {
  const pool = new Pool(url, { connections: concurrency, headersTimeout: 20_000, bodyTimeout: 20_000 });
  const failures: Failure[] = [];
  let next = 0;
  const worker = async () => {
    while (next < cases.length) {
      const k = cases[next++]!;
      let problem: string | undefined;
      try {
        const res = await pool.request({ method: k.method, path: k.path, headers: { "content-type": "application/json" }, body: k.body });
        const text = await res.body.text();
        problem = judge(k, res.statusCode, res.headers["content-type"] as string | undefined, text);
      } catch (err) {
        problem = `request failed: ${(err as Error).message}`;
      }
      if (problem) failures.push({ kind: k.kind, endpoint: `${k.method} ${k.path}`, problem, body: k.body.toString("latin1").slice(0, 300) });
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    await pool.close();
  }
  return failures;
}

const segment = fc.oneof(
  fc.constantFrom(
    "api", "v1", "blobs", "models", "generate", "chat", "tags", "ps", "show", "..", ".", "%2e%2e", "%2E%2e%2f", "%00", "%ff", "%", "",
    "sha256:" + "a".repeat(64), "sha256-" + "b".repeat(64), "sha256:" + "A".repeat(64), "etc", "passwd", "~root", ";", "%0d%0aX-Injected:%201",
  ),
  fc.string({ maxLength: 12 }).map(encodeURIComponent),
  fc.string({ unit: "grapheme", maxLength: 6 }).map(encodeURIComponent),
);

/** Random methods and paths (traversal, encoded NUL/CRLF, odd digests): never a 5xx, errors in the contract's shape. */
export function pathCases(n: number, seed: number): FuzzCase[] {
  const arb = fc.tuple(
    fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"),
    fc.array(segment, { minLength: 0, maxLength: 5 }),
    fc.option(fc.string({ maxLength: 8 }).map(encodeURIComponent), { nil: undefined }),
    fc.oneof(fc.constant(""), anyValue.map(toJson)),
  );
  return (
    fc
      .sample(arb, { numRuns: n, seed })
      .map(([method, segs, query, body]) => ({
        method,
        path: `/${segs.join("/")}${query === undefined ? "" : `?${query}`}`,
        body: Buffer.from(body),
        expect: [] as number[],
        kind: "path",
      }))
      // Never /api/pull or /api/push, however spelled ("/api/%2e/pull" normalises to it): a valid name there reaches a registry.
      .filter((k) => clean(k.path) && clean(k.body.toString()) && !/pull|push/i.test(decodedPath(k.path)))
  );
}

/** Blob uploads and checks with digests that are malformed or do not match the body. */
export function blobCases(n: number, seed: number): FuzzCase[] {
  const hex = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString("hex"));
  const digest = fc.oneof(
    hex.map((h) => `sha256:${h}`),
    hex.map((h) => `sha256-${h}`),
    hex.map((h) => `sha256:${h.toUpperCase()}`),
    hex.map((h) => `sha256:${h.slice(1)}`),
    hex.map((h) => `sha512:${h}`),
    fc.string({ maxLength: 80 }).map(encodeURIComponent),
    fc.constantFrom("..", "%2e%2e", "sha256:..%2f..%2fetc%2fpasswd", "sha256:%00"),
  );
  const arb = fc.tuple(fc.constantFrom("POST", "HEAD"), digest, fc.uint8Array({ maxLength: 256 }));
  return fc.sample(arb, { numRuns: n, seed }).map(([method, d, body]) => ({
    kind: "blob digest",
    method,
    path: `/api/blobs/${d}`,
    body: method === "HEAD" ? Buffer.alloc(0) : Buffer.from(body),
    // A well-formed digest that does not match the bytes is a 400 (mismatch); a missing one on HEAD is a 404.
    expect: [400, 404],
  }));
}

function decodedPath(p: string): string {
  const normal = new URL(`http://x${p}`).pathname;
  try {
    return `${normal} ${decodeURIComponent(normal)}`;
  } catch {
    return normal;
  }
}
