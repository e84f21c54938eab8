/**
 * The HTTP client of lmd's API, shared by the CLI, the gateway and the tests. Its rules:
 *
 * - 200: the body is the result (`response` for generate); 4xx/5xx: the body's `error` is the message.
 * - Retries with a growing delay (honouring `Retry-After`) only on status >= 500 and network
 *   errors, never on 4xx, and never once a 200 stream has started (its output is already out).
 * - Connection refused says that lmd is not running and how to start it; a timeout names the
 *   address and the limit.
 *
 * A leaf: imports nothing from the server except config.ts's pure address helpers.
 */
import { Agent, request, type Dispatcher } from "undici";
import { clientUrl, parseListenAddress } from "../config.js";

/** Why a call failed: an HTTP error answer, or no answer at all. */
export type ClientErrorKind = "http" | "refused" | "timeout" | "network" | "stream";

/** A failed call. `message` is what a user should read (the server's `error`, or ours). */
export class ClientError extends Error {
  constructor(
    message: string,
    readonly kind: ClientErrorKind,
    /** HTTP status for kind `http` (and `stream`: 200). */
    readonly status?: number,
  ) {
    super(message);
    this.name = "ClientError";
  }
}

export interface ClientOptions {
  /** Base URL; default from `host`. */
  url?: string;
  /** A `SERVICE_HOST` value (any form the daemon accepts); default `127.0.0.1:11434`. */
  host?: string;
  /** Retries after the first attempt (default 3). */
  retries?: number;
  /** First retry delay in ms, doubled each attempt (default 250). */
  retryDelayMs?: number;
  /** Longest delay between attempts, `Retry-After` included (default 30 s). */
  maxRetryDelayMs?: number;
  /** TCP connect limit (default 10 s). */
  connectTimeoutMs?: number;
  /**
   * Limit for the response headers (default 10 min: a model load happens before the first byte,
   * and may take up to SERVICE_LOAD_TIMEOUT).
   */
  headersTimeoutMs?: number;
  /** Limit for silence between body chunks (default 10 min; 0 = none). */
  bodyTimeoutMs?: number;
  /** Called before each retry (the CLI may tell the user). */
  onRetry?: (info: { attempt: number; delayMs: number; reason: string }) => void;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Extra headers (e.g. content-type of a blob upload). */
  headers?: Record<string, string>;
  /** Raw body instead of JSON; a function so that a retry can make a fresh stream. */
  rawBody?: () => Dispatcher.DispatchOptions["body"];
}

/** The address a client uses for a SERVICE_HOST value (0.0.0.0 → 127.0.0.1, :: → ::1). */
export function serviceUrl(host: string | undefined): string {
  return clientUrl(parseListenAddress(host && host.trim() !== "" ? host : "127.0.0.1:11434", "SERVICE_HOST"));
}

/** A client for the daemon at `SERVICE_HOST` in `env`. */
export function clientFromEnv(env: Record<string, string | undefined>, options: ClientOptions = {}): Client {
  return new Client({ host: env.SERVICE_HOST, ...options });
}

const TIMEOUT_CODES = new Set(["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);

export class Client {
  /** Base URL, e.g. `http://127.0.0.1:11434`. */
  readonly url: string;
  private readonly options: Required<Omit<ClientOptions, "url" | "host" | "onRetry">> & Pick<ClientOptions, "onRetry">;
  private readonly agent: Agent;

  constructor(options: ClientOptions = {}) {
    this.url = (options.url ?? serviceUrl(options.host)).replace(/\/+$/, "");
    this.options = {
      retries: options.retries ?? 3,
      retryDelayMs: options.retryDelayMs ?? 250,
      maxRetryDelayMs: options.maxRetryDelayMs ?? 30_000,
      connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
      headersTimeoutMs: options.headersTimeoutMs ?? 600_000,
      bodyTimeoutMs: options.bodyTimeoutMs ?? 600_000,
      onRetry: options.onRetry,
    };
    this.agent = new Agent({
      connect: { timeout: this.options.connectTimeoutMs },
      headersTimeout: this.options.headersTimeoutMs,
      bodyTimeout: this.options.bodyTimeoutMs,
    });
  }

  /** Closes idle connections (lets a short-lived process exit at once). */
  async close(): Promise<void> {
    await this.agent.close();
  }

  /** A JSON call: the parsed 200 body (undefined for an empty one), or a ClientError. */
  async json<T>(method: string, path: string, body?: unknown, call: CallOptions = {}): Promise<T> {
    const res = await this.send(method, path, body, call);
    const text = await this.readText(res);
    if (text.trim() === "") return undefined as T;
    return JSON.parse(text) as T;
  }

  /** Status of a call whose answer has no useful body (HEAD); 4xx statuses are returned, not thrown. */
  async status(method: string, path: string, call: CallOptions = {}): Promise<number> {
    const res = await this.send(method, path, undefined, call, true);
    await res.body.dump();
    return res.statusCode;
  }

  /**
   * An NDJSON stream as an async iterator of objects. A `{"error": ...}` line (an error after the
   * 200 was sent) is thrown as a ClientError of kind `stream`. A non-streamed JSON answer (one
   * object) is yielded as a single item.
   */
  async *stream<T>(method: string, path: string, body?: unknown, call: CallOptions = {}): AsyncGenerator<T, void, undefined> {
    const res = await this.send(method, path, body, call);
    let buffered = "";
    const parse = (line: string): T => {
      const obj = JSON.parse(line) as T & { error?: unknown };
      if (typeof obj.error === "string") throw new ClientError(obj.error, "stream", 200);
      return obj;
    };
    try {
      res.body.setEncoding("utf8");
      for await (const chunk of res.body as AsyncIterable<string>) {
        buffered += chunk;
        let i: number;
        while ((i = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, i).trim();
          buffered = buffered.slice(i + 1);
          if (line !== "") yield parse(line);
        }
      }
    } catch (err) {
      throw this.translate(err);
    } finally {
      // Stopping early (break, abort) must close the response so the server sees the client gone.
      if (!res.body.destroyed) res.body.destroy();
    }
    if (buffered.trim() !== "") yield parse(buffered.trim());
  }

  /** Sends with the retry rules; resolves with a 2xx response (or any status when `anyStatus`). */
  private async send(method: string, path: string, body: unknown, call: CallOptions, anyStatus = false): Promise<Dispatcher.ResponseData> {
    const { retries } = this.options;
    for (let attempt = 0; ; attempt++) {
      let retryAfterMs: number | undefined;
      let reason: string;
      let failure: ClientError;
      try {
        const res = await request(this.url + path, {
          method: method as Dispatcher.HttpMethod,
          dispatcher: this.agent,
          signal: call.signal,
          headers: { ...(body !== undefined ? { "content-type": "application/json" } : {}), ...call.headers },
          body: call.rawBody ? call.rawBody() : body !== undefined ? JSON.stringify(body) : undefined,
        });
        if (res.statusCode < 400 || (anyStatus && res.statusCode < 500)) return res;
        failure = new ClientError(await this.errorMessage(res), "http", res.statusCode);
        if (res.statusCode < 500) throw failure; // 4xx: the request itself is wrong; never retried
        retryAfterMs = parseRetryAfter(res.headers["retry-after"]);
        reason = `status ${res.statusCode}`;
      } catch (err) {
        if (err instanceof ClientError) throw err;
        if (call.signal?.aborted) throw err;
        failure = this.translate(err);
        if (failure.kind === "timeout") throw failure; // waiting that long again helps nobody
        reason = failure.message;
      }
      if (attempt >= retries) throw failure;
      const backoff = this.options.retryDelayMs * 2 ** attempt;
      const delayMs = Math.min(this.options.maxRetryDelayMs, Math.max(backoff, retryAfterMs ?? 0));
      this.options.onRetry?.({ attempt: attempt + 1, delayMs, reason });
      await sleep(delayMs, call.signal);
    }
  }

  private async readText(res: Dispatcher.ResponseData): Promise<string> {
    try {
      return await res.body.text();
    } catch (err) {
      throw this.translate(err);
    }
  }

  /** The `error` of an error body; the status line when the body is not the contract's shape. */
  private async errorMessage(res: Dispatcher.ResponseData): Promise<string> {
    const text = await res.body.text().catch(() => "");
    try {
      const obj = JSON.parse(text) as { error?: unknown };
      if (typeof obj.error === "string") return obj.error;
    } catch {
      // not JSON: fall through
    }
    return text.trim() !== "" ? `${res.statusCode}: ${text.trim().slice(0, 200)}` : `the server answered status ${res.statusCode}`;
  }

  /** Turns undici/node errors into the messages above (connection refused, timeout). */
  private translate(err: unknown): ClientError {
    if (err instanceof ClientError) return err;
    const code = errorCode(err);
    if (code === "ECONNREFUSED") {
      return new ClientError(`lmd is not running at ${this.url} — start it with 'systemctl start lmd' or 'lmd serve'`, "refused");
    }
    if (code !== undefined && TIMEOUT_CODES.has(code)) {
      const [what, ms] =
        code === "UND_ERR_CONNECT_TIMEOUT" ? ["connect to", this.options.connectTimeoutMs]
        : code === "UND_ERR_HEADERS_TIMEOUT" ? ["get an answer from", this.options.headersTimeoutMs]
        : ["get more data from", this.options.bodyTimeoutMs];
      return new ClientError(`timed out after ${formatMs(ms)} trying to ${what} lmd at ${this.url}`, "timeout");
    }
    const detail = err instanceof Error ? err.message : String(err);
    return new ClientError(`cannot reach lmd at ${this.url}: ${detail}${code && !detail.includes(code) ? ` (${code})` : ""}`, "network");
  }
}

/** The code of an error or of its cause (undici wraps socket errors). */
function errorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && code !== "UND_ERR") return code;
    // An AggregateError (IPv4 and IPv6 both refused) holds the real errors in `errors`.
    const inner = (e as { errors?: unknown[] }).errors;
    if (Array.isArray(inner) && inner.length > 0) return errorCode(inner[0]);
  }
  return undefined;
}

/** `Retry-After` as seconds or an HTTP date, in ms; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || text.trim() === "") return undefined;
  if (/^[0-9]+$/.test(text.trim())) return Number(text.trim()) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
