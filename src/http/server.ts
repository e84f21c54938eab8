/**
 * The HTTP server: request id → logger → guards → route → handler, and the ONE place where a
 * thrown error becomes a response, always `{"error": "..."}` with no other field. One access-log line
 * per request.
 */
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import type { Duplex } from "node:stream";
import { NotReadyError, ServiceBusyError, ShuttingDownError, toErrorResponse } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Guards } from "./guards.js";
import { BODY_IDLE_TIMEOUT_MS } from "./body.js";
import { capConnections } from "./connections.js";
import { lingerOnClose } from "./linger.js";
import { clientGone, endStreamWithError, sendJson } from "./respond.js";
import type { RequestContext, Router } from "./router.js";

/** What the access log (and a metrics hook) learns about each finished request. */
export interface RequestInfo {
  reqId: string;
  remote: string | undefined;
  method: string;
  /** Path without the query string (it may hold secrets). */
  path: string;
  /** The matched route pattern, when one matched (bounded cardinality, for metrics). */
  route: string | undefined;
  status: number;
  /** Bytes written to the socket for this response, headers included. */
  bytes: number;
  durationMs: number;
  /** True when the client went away before the response finished. */
  aborted: boolean;
}

/** Options of {@link createHttpServer}. */
export interface HttpServerOptions {
  router: Router;
  guards: Guards;
  log: Logger;
  /** Largest JSON body (`SERVICE_MAX_BODY`); handed to handlers as `ctx.maxBodyBytes`. */
  maxBodyBytes: number;
  /** Called as each request arrives, before the guards (metrics: requests in flight). */
  onRequestStart?: (ctx: RequestContext) => void;
  /** Called once per request when its response finishes or closes (metrics). */
  onResponse?: (info: RequestInfo) => void;
  /** Overrides of {@link SERVER_LIMITS} (tests use short timeouts). */
  limits?: Partial<ServerLimits>;
}

/** Resource limits of the daemon's HTTP server (not configuration variables: sane fixed bounds). */
export interface ServerLimits {
  /** The whole request head must arrive within this (slowloris); → 408 and the connection closed. */
  headersTimeoutMs: number;
  /** A request body (JSON or a blob upload) that sends nothing for this long → 408, connection closed. */
  bodyIdleTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /**
   * Open connections at most. One more takes the place of the oldest idle connection (no request
   * in progress); only when every connection is serving a request is it closed at once, unread.
   */
  maxConnections: number;
}

/**
 * 1024 connections: room for the default queue (`SERVICE_MAX_QUEUE` 512) twice over, and far below
 * the file descriptors a daemon gets, so a flood of sockets cannot starve the store and runners of fds.
 * 10 s for a request head (a few hundred bytes), counted from the connection's opening for its
 * first request: a socket that sends nothing is closed then, and sooner when the cap needs its place.
 */
export const SERVER_LIMITS: Readonly<ServerLimits> = Object.freeze({
  headersTimeoutMs: 10_000,
  bodyIdleTimeoutMs: BODY_IDLE_TIMEOUT_MS,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 1024,
});

/** The server and its shutdown switch. */
export interface HttpServer {
  server: http.Server;
  /** From now on every new request gets 503 `server is shutting down` (and the connection closes). */
  startDraining(): void;
  readonly draining: boolean;
}

/** Timeouts: headers must arrive quickly; streams may run long, so no whole-request limit. */
export const SERVER_TIMEOUTS = { headersTimeoutMs: SERVER_LIMITS.headersTimeoutMs, requestTimeoutMs: 0, keepAliveTimeoutMs: 5_000 } as const;

/** How often Node looks for heads that are late: a quarter of the timeout (Node's default is 30 s). */
export function headersCheckInterval(headersTimeoutMs: number): number {
  return Math.min(30_000, Math.max(50, Math.floor(headersTimeoutMs / 4)));
}

/** Creates (does not start) the daemon's HTTP server. */
export function createHttpServer(options: HttpServerOptions): HttpServer {
  let draining = false;
  const limits: ServerLimits = { ...SERVER_LIMITS, ...options.limits };
  // requireHostHeader off: a missing Host is refused by the Host guard, with the contract's body.
  // Node checks the headers timeout only every connectionsCheckingInterval (30 s by default).
  const connectionsCheckingInterval = headersCheckInterval(limits.headersTimeoutMs);
  const server = http.createServer({ requireHostHeader: false, noDelay: true, connectionsCheckingInterval }, (req, res) => {
    watchBodyIdle(req, res, limits.bodyIdleTimeoutMs);
    handle(options, req, res, draining).catch((err: unknown) => {
      // Only a bug in the error path itself lands here; never let it take the daemon down.
      options.log.error({ err }, "failed to answer a request");
      res.destroy();
    });
  });
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = SERVER_TIMEOUTS.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  capConnections(server, { total: limits.maxConnections, firstRequestMs: limits.headersTimeoutMs }, options.log);
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => answerClientError(err, socket));
  // What Node answers itself, with no body or none at all, in the contract's shape instead: an
  // Expect other than 100-continue (417), and CONNECT, a proxy's method no route takes (405).
  server.on("checkExpectation", (_req: IncomingMessage, res: ServerResponse) => {
    sendJson(res, 417, { error: "expectation failed: only 100-continue is supported" }, { connection: "close" });
  });
  server.on("connect", (_req: IncomingMessage, socket: Duplex) => answerRaw(socket, 405, "method CONNECT not allowed"));
  return {
    server,
    startDraining: () => { draining = true; },
    get draining() { return draining; },
  };
}

async function handle(options: HttpServerOptions, req: IncomingMessage, res: ServerResponse, draining: boolean): Promise<void> {
  const started = performance.now();
  const id = requestId(req.headers["x-request-id"]);
  // A child logger per request is built only when a handler logs (most requests log only the
  // access line, which carries reqId itself).
  let log: Logger | undefined;
  const url = parseUrl(req.url ?? "/");
  // The client-gone signal costs an AbortController and a listener per request, a large share of a
  // small request's cost, so it is made on first use, by the routes that run models.
  let signal: AbortSignal | undefined;
  const ctx: RequestContext = {
    req, res, url, params: {}, id, maxBodyBytes: options.maxBodyBytes,
    get log() {
      return (log ??= options.log.child({ reqId: id }));
    },
    get signal() {
      return (signal ??= clientGone(req, res));
    },
  };
  let route: string | undefined;
  const outcome: Outcome = {};
  res.setHeader("x-request-id", id);
  logWhenDone(options, ctx, started, () => route, outcome, () => log);
  options.onRequestStart?.(ctx);
  try {
    options.guards.checkHost(req);
    if (options.guards.cors(req, res)) return;
    if (draining) throw new ShuttingDownError();
    const match = options.router.match(req.method ?? "GET", url.pathname);
    route = match.route;
    ctx.params = match.params;
    await match.handler(ctx);
    if (!res.headersSent) throw new Error(`handler for ${match.route} returned without responding`);
  } catch (err) {
    respondWithError(ctx, err, draining, outcome);
  }
}

/**
 * How a request that did not succeed ends, for its one log line: a failure (a bug, a crashed
 * runner, a failed load: error priority, with the stack) or a refusal that is the answer (a 4xx,
 * `/readyz` saying not ready, the shutdown: info; a full queue: warning), with its message.
 */
interface Outcome {
  failure?: unknown;
  refusal?: { message: string; level: "info" | "warn" };
}

/** Turns any thrown value into the response (or the stream's last line) and logs it. */
function respondWithError(ctx: RequestContext, err: unknown, draining: boolean, outcome: Outcome): void {
  const { req, res } = ctx;
  const { status, body, headers } = toErrorResponse(err);
  // A request stopped by the shutdown or by its client leaving is no failure of the server.
  if (status >= 500 && !(err instanceof ServiceBusyError) && !ctx.signal.aborted) outcome.failure = err;
  else
    outcome.refusal = {
      message: body.error,
      level: err instanceof ServiceBusyError && !(err instanceof ShuttingDownError) && !(err instanceof NotReadyError) ? "warn" : "info",
    };
  if (res.destroyed) return;
  if (res.headersSent) return endStreamWithError(res, body.error);
  // A refusal before the body was read to its end closes the connection (a client dripping a body
  // must not hold it), lingering so that a client still sending reads the answer, not a reset.
  const unread = !req.complete;
  if (unread) lingerOnClose(req, ctx.maxBodyBytes);
  const close = draining || unread ? { connection: "close" } : {};
  sendJson(res, status, body, { ...headers, ...close });
}

function logWhenDone(
  options: HttpServerOptions,
  ctx: RequestContext,
  started: number,
  route: () => string | undefined,
  outcome: Outcome,
  requestLog: () => Logger | undefined,
): void {
  const { req, res } = ctx;
  const socket = req.socket;
  const before = socket.bytesWritten;
  // Read now: once the socket is destroyed, remoteAddress is undefined.
  const remote = socket.remoteAddress;
  res.once("close", () => {
    const info: RequestInfo = {
      reqId: ctx.id,
      remote,
      method: req.method ?? "",
      path: ctx.url.pathname,
      route: route(),
      status: res.statusCode,
      bytes: socket.bytesWritten - before,
      durationMs: Math.round((performance.now() - started) * 10) / 10,
      aborted: !res.writableFinished,
    };
    const { route: _route, aborted, ...fields } = info;
    // The model the request named, when a route resolved one (it set it on the request's logger).
    const model = requestLog()?.bindings().model as string | undefined;
    const line: Record<string, unknown> = model === undefined ? fields : { ...fields, model };
    if (aborted) line.aborted = true;
    // One line per request, from the root logger (the line carries reqId itself): a failure at
    // error priority with its stack, a refusal with its message, anything else at info.
    if (outcome.failure !== undefined) options.log.error({ ...line, err: outcome.failure }, "request failed");
    else if (outcome.refusal) options.log[outcome.refusal.level]({ ...line, error: outcome.refusal.message }, "request");
    else options.log.info(line, "request");
    options.onResponse?.(info);
  });
}

/** Echoes a sane `x-request-id`; otherwise makes one up. */
/** Request ids: a random prefix per process and a counter; unique, and far cheaper than random bytes per request. */
const ID_PREFIX = randomBytes(4).toString("hex");
let idCounter = 0;

function requestId(header: string | string[] | undefined): string {
  if (typeof header === "string" && /^[A-Za-z0-9._:@/+=-]{1,128}$/.test(header)) return header;
  return `${ID_PREFIX}${(++idCounter).toString(16).padStart(8, "0")}`;
}

/**
 * The request target as a URL. Origin-form targets are appended to a fixed base (never resolved
 * against it, so `//x` stays a path); absolute-form targets keep only their path and query.
 */
function parseUrl(target: string): URL {
  const base = "http://lmd.invalid";
  try {
    if (target.startsWith("/")) return new URL(base + target);
    const abs = new URL(target);
    return new URL(base + abs.pathname + abs.search);
  } catch {
    return new URL(`${base}/${encodeURIComponent(target)}`); // routes to a 404 naming the target
  }
}

/**
 * A body that stops arriving ends with 408 and a closed connection, whatever the handler does with
 * it (readJson has its own timer; a blob upload streams to disk and has none). The socket's byte
 * count is watched rather than the stream itself, so no data is taken from the handler; a socket
 * paused by our own backpressure (a slow disk) or with data still unread does not count as idle.
 */
function watchBodyIdle(req: IncomingMessage, res: ServerResponse, timeoutMs: number): void {
  // A request without a body (no Content-Length, no Transfer-Encoding: RFC 9112 §6.3) has nothing to
  // watch; `req.complete` is still false when the request event fires, so it cannot tell.
  const hasBody = req.headers["transfer-encoding"] !== undefined || (req.headers["content-length"] ?? "0") !== "0";
  if (!hasBody || req.complete || timeoutMs <= 0) return;
  const socket = req.socket;
  let seen = socket.bytesRead;
  let idleSince = Date.now();
  // Node does not end a request whose response was already sent when its socket closes: a handler
  // still reading the body (a blob upload) would wait forever. Destroying it makes the read fail.
  const onSocketClose = () => {
    if (!req.complete) req.destroy();
  };
  socket.once("close", onSocketClose);
  const timer = setInterval(() => {
    if (req.complete) socket.off("close", onSocketClose);
    if (req.complete || res.writableEnded || socket.destroyed) return clearInterval(timer);
    if (socket.bytesRead !== seen || socket.isPaused() || req.readableLength > 0) {
      seen = socket.bytesRead;
      idleSince = Date.now();
      return;
    }
    if (Date.now() - idleSince < timeoutMs) return;
    clearInterval(timer);
    if (res.headersSent) socket.destroy();
    else sendJson(res, 408, { error: "request body timeout" }, { connection: "close" });
  }, Math.max(25, Math.floor(timeoutMs / 4)));
  timer.unref();
  res.once("close", () => {
    clearInterval(timer);
    if (req.complete) socket.off("close", onSocketClose);
  });
}

/** Node's own parse errors (bad request line, huge headers, timeouts) in the contract's body shape. */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  const [status, message] =
    err.code === "HPE_HEADER_OVERFLOW" ? [431, "request header fields too large"]
    : err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? [408, "request timeout"]
    : [400, "bad request"];
  answerRaw(socket, status, message);
}

/** An error answer written straight to the socket (no request object to answer through), then closed. */
function answerRaw(socket: Duplex, status: number, message: string): void {
  const body = JSON.stringify({ error: message });
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ""}\r\ncontent-type: application/json; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
