/**
 * The registry client's HTTP vocabulary: its error class and bounds, the dispatcher every registry
 * request goes through, reading and discarding response bodies, and saying in words what went
 * wrong. Shared by client.ts, download.ts, push.ts.
 */
import type tls from "node:tls";
import { Agent, EnvHttpProxyAgent, type Dispatcher } from "undici";
import { HttpError } from "../errors.js";
import { printable } from "../store/names.js";
import type { AddressPolicy } from "./address.js";
import { describeTls } from "./tls.js";

/** A registry failure, shown to the client (status 500 unless the registry said otherwise). */
export class RegistryError extends HttpError {
  constructor(message: string, status = 500) {
    super(status, message);
  }
}

/** Retry and transfer settings; tests may lower them. */
export const REGISTRY_DEFAULTS = {
  maxRetries: 4,
  minTimeoutMs: 500,
  maxTimeoutMs: 10_000,
  /** Blobs larger than this are downloaded as parallel ranges of about this size. */
  partSize: 64 * 1024 * 1024,
  /** Ranges in flight at once. */
  parallel: 4,
  /** No connection within this long: the registry is unreachable (not retried). */
  connectTimeoutMs: 10_000,
  /** No response head this long after the request: the registry is broken (not retried). */
  headersTimeoutMs: 30_000,
  /** The whole manifest body must arrive within this long. */
  manifestTimeoutMs: 30_000,
  /** No blob bytes for this long: the download stalled (retried, resuming with Range). Ollama's stall time. */
  bodyTimeoutMs: 30_000,
  /** A blob response whose bytes wait this long to be written is dropped and asked for again (download.ts). */
  maxBufferedBytes: 16 * 1024 * 1024,
  maxManifestBytes: 4 * 1024 * 1024,
  maxLayers: 1024,
};

export interface DispatcherOptions {
  /** Checks (and pins) every address connected to, and every proxied target's name. */
  policy: AddressPolicy;
  /** Trust for TLS besides the default store (SERVICE_REGISTRY_CA), for the registry's connections, proxied or not. */
  secureContext?: tls.SecureContext;
  /** Where HTTPS_PROXY, HTTP_PROXY and NO_PROXY (or their lower-case forms) are read; default the process's. */
  env?: NodeJS.ProcessEnv;
}

/** The proxy variables of `env`, lower-case first as curl and Go read them; undefined when none is set. */
export function proxyEnv(env: NodeJS.ProcessEnv = process.env): { httpProxy?: string; httpsProxy?: string; noProxy: string } | undefined {
  const get = (name: string) => (env[name.toLowerCase()] ?? env[name]) || undefined;
  const httpProxy = get("HTTP_PROXY");
  const httpsProxy = get("HTTPS_PROXY");
  if (!httpProxy && !httpsProxy) return undefined;
  return { httpProxy, httpsProxy, noProxy: get("NO_PROXY") ?? "" };
}

/**
 * The dispatcher for one registry client: a direct agent whose connections are checked by the
 * address policy, or, when HTTPS_PROXY/HTTP_PROXY is set, one that sends each request through the
 * proxy for its scheme (hosts in NO_PROXY still go direct) after checking the target's name
 * ({@link AddressPolicy.checkName}). Plain-http registries are asked through the proxy with
 * absolute URLs, https ones through a CONNECT tunnel. Every response goes through {@link unpaused}.
 */
export function registryDispatcher(options: DispatcherOptions): Dispatcher {
  const { policy, secureContext } = options;
  const trust = secureContext ? { secureContext } : {};
  const agentOptions = {
    bodyTimeout: REGISTRY_DEFAULTS.bodyTimeoutMs,
    headersTimeout: REGISTRY_DEFAULTS.headersTimeoutMs,
    connect: { timeout: REGISTRY_DEFAULTS.connectTimeoutMs, lookup: policy.lookup, ...trust },
  };
  const proxy = proxyEnv(options.env);
  if (!proxy) return new Agent(agentOptions).compose(unpaused);
  policy.proxied = true;
  const checked: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (opts, handler) => {
    const fail = (err: unknown) => failBeforeStart(handler, err instanceof Error ? err : new Error(String(err)));
    policy.checkName(new URL(String(opts.origin)).hostname).then(() => {
      try {
        dispatch(opts, handler);
      } catch (err) {
        fail(err); // a closed dispatcher: the request's failure, never an unhandled rejection
      }
    }, fail);
    return true;
  };
  // Through a tunnel, TLS to the registry is set up by `requestTls` (`connect` reaches the proxy).
  return new EnvHttpProxyAgent({ ...agentOptions, ...proxy, proxyTunnel: false, requestTls: trust }).compose(unpaused, checked);
}

/** Ends a request that never reached the network with `err`, in whichever handler interface it speaks. */
function failBeforeStart(handler: Dispatcher.DispatchHandler, err: Error): void {
  const controller = { abort: () => undefined, pause: () => undefined, resume: () => undefined, aborted: true, paused: false, reason: err };
  const legacy = handler as { onError?: (err: Error) => void };
  if (handler.onResponseError) handler.onResponseError(controller as Dispatcher.DispatchController, err);
  else legacy.onError?.(err);
}

/**
 * Never lets a response pause undici's HTTP/1 parser. Undici 7 throws an assertion from a socket's
 * 'end' handler when the peer closes a connection (HTTP/1.0, `Connection: close`) while a reader
 * that fell behind has paused the parser: nothing can catch it, and the process stops. (Undici 8
 * fixes it, and needs Node 22.) So a handler's pause is kept here instead ({@link Unpaused}): what
 * arrives meanwhile waits in a bounded queue, and the parser reads on. Readers keep up on their
 * own (download.ts writes a blob as it arrives; readLimited stops at its limit). An exception
 * thrown by a handler fails its own request instead of reaching the socket.
 */
const unpaused: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (opts, handler) => dispatch(opts, handler.onRequestStart ? new Unpaused(handler) : unpausedLegacy(handler as LegacyHandler));

type Headers = Record<string, string | string[] | undefined>;

/** What may wait for a paused reader (a reader keeping up holds far less: about one body buffer). */
const QUEUE_LIMIT = 64 * 1024 * 1024;

/** The handler interface undici's own request() handler still speaks (uploads dispatch it directly). */
interface LegacyHandler {
  onConnect?(abort: (err?: Error) => void, context?: unknown): void;
  onHeaders?(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean | void;
  onData?(chunk: Buffer): boolean | void;
  onComplete?(trailers: Buffer[] | null): void;
  onError?(err: Error): void;
  onUpgrade?(statusCode: number, headers: Buffer[] | string[] | null, socket: unknown): void;
  onResponseStarted?(): void;
  onBodySent?(chunk: unknown): void;
}

function unpausedLegacy(inner: LegacyHandler): Dispatcher.DispatchHandler {
  let abort: (err?: Error) => void = () => undefined;
  const guard = (call: () => unknown): boolean => {
    try {
      call();
    } catch (err) {
      abort(err instanceof Error ? err : new Error(String(err)));
    }
    return true; // never false: false pauses the parser
  };
  const handler: LegacyHandler = {
    onConnect: (a, context) => {
      abort = a;
      inner.onConnect?.(a, context);
    },
    onHeaders: (statusCode, headers, resume, statusText) => guard(() => inner.onHeaders?.(statusCode, headers, resume, statusText)),
    onData: (chunk) => guard(() => inner.onData?.(chunk)),
    onComplete: (trailers) => void guard(() => inner.onComplete?.(trailers)),
    onError: (err) => inner.onError?.(err),
    onUpgrade: (statusCode, headers, socket) => inner.onUpgrade?.(statusCode, headers, socket),
    onResponseStarted: () => inner.onResponseStarted?.(),
    onBodySent: (chunk) => inner.onBodySent?.(chunk),
  };
  return handler as unknown as Dispatcher.DispatchHandler;
}

/**
 * Passes a response on to `inner`, honouring its pause() without pausing the connection: what
 * arrives while it is paused (data, the end, an error) is queued and handed on, in order, when it
 * resumes. More than {@link QUEUE_LIMIT} queued aborts the request.
 */
class Unpaused implements Dispatcher.DispatchHandler {
  private outer: Dispatcher.DispatchController | undefined;
  private wrapped: Dispatcher.DispatchController | undefined;
  private paused = false;
  private draining = false;
  private readonly queue: Array<() => void> = [];
  private queuedBytes = 0;

  constructor(private readonly inner: Dispatcher.DispatchHandler) {}

  /** The controller the inner handler sees (none before a connection). */
  private wrap(controller: Dispatcher.DispatchController): Dispatcher.DispatchController {
    if (!controller) return controller;
    if (this.outer !== controller || !this.wrapped) {
      this.outer = controller;
      const self = this;
      this.wrapped = {
        abort: (reason: Error) => controller.abort(reason),
        pause: () => {
          self.paused = true;
        },
        resume: () => {
          self.paused = false;
          self.drain();
        },
        get aborted() {
          return controller.aborted;
        },
        get paused() {
          return self.paused;
        },
        get reason() {
          return controller.reason;
        },
      };
    }
    return this.wrapped;
  }

  /** Runs `call` now, or queues it behind what waits while the inner handler is paused. */
  private deliver(call: () => void, bytes = 0): void {
    if (!this.paused && this.queue.length === 0) return call();
    this.queue.push(call);
    this.queuedBytes += bytes;
    if (this.queuedBytes > QUEUE_LIMIT) this.outer?.abort(new RegistryError("a registry response was not read in time"));
  }

  private drain(): void {
    if (this.draining) return;
    this.draining = true;
    try {
      while (!this.paused && this.queue.length > 0) this.queue.shift()!();
      if (this.queue.length === 0) this.queuedBytes = 0;
    } finally {
      this.draining = false;
    }
  }

  /** An exception from the inner handler fails its own request; it never reaches the socket. */
  private guard(controller: Dispatcher.DispatchController, call: () => void): () => void {
    return () => {
      try {
        call();
      } catch (err) {
        if (!controller) throw err;
        controller.abort(err instanceof Error ? err : new Error(String(err)));
      }
    };
  }

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.guard(controller, () => this.inner.onRequestStart?.(this.wrap(controller), context))();
  }

  onRequestUpgrade(controller: Dispatcher.DispatchController, statusCode: number, headers: Headers, socket: import("node:stream").Duplex): void {
    this.inner.onRequestUpgrade?.(this.wrap(controller), statusCode, headers as never, socket);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: Headers, statusMessage?: string): void {
    this.deliver(this.guard(controller, () => this.inner.onResponseStart?.(this.wrap(controller), statusCode, headers as never, statusMessage)));
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.deliver(this.guard(controller, () => this.inner.onResponseData?.(this.wrap(controller), chunk)), chunk.length);
  }

  onResponseEnd(controller: Dispatcher.DispatchController, trailers: Headers): void {
    this.deliver(() => {
      try {
        this.inner.onResponseEnd?.(this.wrap(controller), trailers as never);
      } catch (err) {
        // As undici does: a handler that throws at the end gets the error (a retry handler retries on it).
        this.inner.onResponseError?.(this.wrap(controller), err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  onResponseError(controller: Dispatcher.DispatchController, err: Error): void {
    const call = () => this.inner.onResponseError?.(this.wrap(controller), err);
    if (!controller?.aborted) return this.deliver(call);
    // Aborted (a reader that let go of the body, a signal): nobody wants what waits.
    this.queue.length = 0;
    this.paused = false;
    call();
  }
}

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
export async function readLimited(body: Dispatcher.ResponseData["body"] | AsyncIterable<Buffer>, limit: number, timeoutMs?: number, timeoutMessage?: string): Promise<string> {
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
