/**
 * The registry client's HTTP vocabulary: its error class and bounds (settings.ts), the dispatcher
 * every registry request goes through (dispatcher.ts), reading and discarding response bodies, and
 * saying in words what went wrong. Shared by client.ts, download.ts, push.ts.
 */
import type { Dispatcher } from "undici";
import { printable } from "../store/names.js";
import { REGISTRY_DEFAULTS, RegistryError } from "./settings.js";
import { describeTls } from "./tls.js";

export { registryDispatcher, proxyEnv, type DispatcherOptions } from "./dispatcher.js";
export { REGISTRY_DEFAULTS, RegistryError } from "./settings.js";

/** The part of a response the helpers need. */
interface Answer {
  statusCode: number;
  body: Dispatcher.ResponseData["body"];
}

/** Throws a RegistryError (`<what>: <detail>`) unless the status is expected; reads the registry's error text. */
export async function expectStatus(res: Answer, ok: number[], what: string): Promise<void> {
  if (ok.includes(res.statusCode)) return;
  const text = await readLimited(res.body, 4096, 5_000).catch(() => "");
  let detail = `status ${res.statusCode}`;
  try {
    const errors = (JSON.parse(text) as { errors?: Array<{ message?: string; code?: string }> }).errors;
    const first = errors?.[0];
    if (first) detail = `${first.message ?? first.code ?? detail} (status ${res.statusCode})`;
  } catch {
    // not JSON: keep the status
  }
  throw new RegistryError(what ? `${what}: ${printable(detail)}` : printable(detail));
}

/**
 * Reads a whole body as text, refusing more than `limit` bytes; with `timeoutMs`, refusing a body
 * that has not ended by then (`timeoutMessage`). The body is destroyed on every failure.
 */
export async function readLimited(
  body: Dispatcher.ResponseData["body"] | AsyncIterable<Buffer>,
  limit: number,
  timeoutMs?: number,
  timeoutMessage?: string,
): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  let expired = false;
  const timer = timeoutMs === undefined ? undefined : setTimeout(() => {
    expired = true;
    discard(body);
  }, timeoutMs);
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) throw new RegistryError("registry response too large");
      chunks.push(chunk);
    }
  } catch (err) {
    discard(body);
    if (expired) throw new RegistryError(timeoutMessage ?? "registry response timed out");
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** Drops a response body that will not be read: destroyed, so its connection is not held. */
export function discard(body: unknown): void {
  const b = body as { destroyed?: boolean; destroy?: () => void; on?: (e: string, f: () => void) => void };
  if (typeof b?.destroy === "function" && !b.destroyed) {
    b.on?.("error", () => undefined); // the destroy's own error has no reader
    b.destroy();
  }
}

export function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** `Bearer realm="...",service="...",scope="..."` → its parameters. */
export function parseChallenge(value: string): Record<string, string> | undefined {
  const m = /^\s*Bearer\s+(.*)$/i.exec(value);
  if (!m?.[1]) return undefined;
  const out: Record<string, string> = {};
  for (const p of m[1].matchAll(/([a-zA-Z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))/g)) {
    if (p[1]) out[p[1].toLowerCase()] = (p[2] ?? p[3] ?? "").replace(/\\(.)/g, "$1");
  }
  return out;
}

/** What went wrong talking to `host`, in words (never a bare error code or class name). */
export function describe(err: unknown, host: string): string {
  const e = err as { code?: string; message?: string; statusCode?: number };
  const unreachable = (why: string) => `cannot reach registry ${host}: ${why}`;
  switch (e?.code) {
    case "ECONNREFUSED":
      return unreachable("connection refused");
    case "ENOTFOUND":
      return unreachable("host not found");
    case "EAI_AGAIN":
      return unreachable("DNS lookup failed (temporary failure: offline?)");
    case "ENETUNREACH":
    case "ENETDOWN":
      return unreachable("network unreachable");
    case "EHOSTUNREACH":
    case "EHOSTDOWN":
      return unreachable("host unreachable");
    case "ECONNRESET":
    case "UND_ERR_SOCKET":
      return unreachable("connection reset");
    case "UND_ERR_CONNECT_TIMEOUT":
      return unreachable(`no connection within ${seconds(REGISTRY_DEFAULTS.connectTimeoutMs)}`);
    case "UND_ERR_HEADERS_TIMEOUT":
      return `registry ${host} sent no answer within ${seconds(REGISTRY_DEFAULTS.headersTimeoutMs)}`;
    case "UND_ERR_BODY_TIMEOUT":
      return `the registry stopped sending data for ${seconds(REGISTRY_DEFAULTS.bodyTimeoutMs)} (stalled)`;
    case "LMD_ADDRESS_REFUSED":
      return `registry redirect refused: ${printable(e.message ?? "")}`;
    case "UND_ERR_REQ_RETRY":
      // undici's retry gave up: a status it retries answered too often, or a body cut off mid-way could not be resumed.
      if (e.statusCode && e.statusCode >= 400) break;
      return `the connection to registry ${host} broke mid-answer and could not be resumed (${printable(e.message ?? "")})`;
    case "UND_ERR_RES_CONTENT_LENGTH_MISMATCH":
      return `registry ${host} closed the connection before the end of its answer`;
  }
  if (isParserError(err)) {
    const why = /\(([^)]*)\)\s*$/.exec(e.message ?? "")?.[1] ?? e.message ?? "";
    return `registry ${host} sent a malformed HTTP answer (${printable(why)})`;
  }
  const tlsFailure = describeTls(err, host);
  if (tlsFailure) return tlsFailure;
  if (e?.statusCode) return `registry ${host} answered status ${e.statusCode}`;
  return unreachable(printable(e?.code ?? e?.message ?? String(err)));
}

/** undici's HTTPParserError (an answer that is not HTTP/1.1), which may carry no code. */
export function isParserError(err: unknown): boolean {
  const e = err as { code?: unknown; name?: unknown };
  return e?.name === "HTTPParserError" || (typeof e?.code === "string" && e.code.startsWith("HPE_"));
}

/** `800` → `0.8 s`. */
export function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(1))} s`;
}
