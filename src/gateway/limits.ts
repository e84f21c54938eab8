/**
 * Abuse limits the gateway applies per client address: a cap on open
 * connections (total and per address), a limit on failed authentications per address, and the
 * gateway's own answers to requests Node's parser refuses. The address is the socket's peer: behind
 * another proxy every client shares it, so raise the limits there (docs/deployment.md says so).
 */
import type { Server } from "node:http";
import type { Socket } from "node:net";
import { addressKey, capConnections } from "../http/connections.js";
import type { Logger } from "../logger.js";

/**
 * The connection caps (src/http/connections.ts): `total` in all and `perAddress` per client
 * network (its address's prefix). One over a cap replaces the oldest idle connection under it;
 * refused only while all are busy: plain HTTP gets a readable 503, a TLS socket (no handshake yet)
 * is only closed.
 */
export function capGatewayConnections(
  server: Server,
  limits: { total: number; perAddress: number; prefix: { v4: number; v6: number }; firstRequestMs: number },
  log: Logger,
  tls: boolean,
): void {
  capConnections(server, {
    total: limits.total,
    firstRequestMs: limits.firstRequestMs,
    perKey: limits.perAddress,
    keyOf: (address) => addressKey(address, limits.prefix),
    refuse: (socket) => (tls ? socket.destroy() : refuseRaw(socket, 503, "too many connections", { "retry-after": "1" })),
  }, log);
}

/** Writes a whole HTTP/1.1 answer with an `{"error"}` body on a raw socket, then closes it. */
export function refuseRaw(socket: Socket, status: number, message: string, headers: Record<string, string> = {}): void {
  if (socket.destroyed || !socket.writable) return void socket.destroy();
  const body = JSON.stringify({ error: message });
  const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("");
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}connection: close\r\n\r\n${body}`,
  );
  // A client that never reads must not keep the socket: it is destroyed shortly after.
  setTimeout(() => socket.destroy(), 2_000).unref();
}

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request",
  408: "Request Timeout",
  413: "Payload Too Large",
  431: "Request Header Fields Too Large",
  503: "Service Unavailable",
};

/**
 * Node's `clientError` (a request its parser refuses, or a header/request timeout) answered as
 * every lmd error is: `{"error"}` with 400, 408 or 431 instead of Node's empty default.
 */
export function answerClientErrors(server: Server, log: Logger): void {
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Socket) => {
    const [status, message] = clientErrorAnswer(err.code);
    log.debug({ remote: socket.remoteAddress, code: err.code, status }, "malformed request refused");
    if (err.code === "ECONNRESET" || (socket as Socket & { _httpMessage?: unknown })._httpMessage) return void socket.destroy();
    refuseRaw(socket, status, message);
  });
}

/** The status and message for a `clientError` code (exported for the unit test). */
export function clientErrorAnswer(code: string | undefined): [number, string] {
  if (code === "HPE_HEADER_OVERFLOW") return [431, "request headers too large"];
  if (code === "ERR_HTTP_REQUEST_TIMEOUT" || code === "ERR_HTTP_HEADERS_TIMEOUT") return [408, "request timed out"];
  return [400, "malformed HTTP request"];
}

/**
 * Failed authentications per address: after `limit` failures within a minute the address is
 * refused with 429 (whatever it sends) until a minute has passed since its first counted failure.
 */
export class AuthFailureLimiter {
  private readonly failures = new Map<string, { count: number; since: number }>();
  static readonly WINDOW_MS = 60_000;

  /** `limit` 0 disables the limit. */
  constructor(private readonly limit: number, private readonly now: () => number = () => performance.now()) {}

  /** Seconds the address must wait, or 0 when it may try. */
  blockedFor(address: string): number {
    const entry = this.current(address);
    if (this.limit === 0 || entry === undefined || entry.count < this.limit) return 0;
    return Math.max(1, Math.ceil((entry.since + AuthFailureLimiter.WINDOW_MS - this.now()) / 1000));
  }

  /** Counts a failure; true when this one reached the limit (the caller logs it once). */
  fail(address: string): boolean {
    if (this.limit === 0) return false;
    const entry = this.current(address) ?? { count: 0, since: this.now() };
    entry.count++;
    this.failures.set(address, entry);
    return entry.count === this.limit;
  }

  /** Forgets expired windows; bounds memory. */
  sweep(): void {
    for (const address of [...this.failures.keys()]) this.current(address);
  }

  private current(address: string) {
    const entry = this.failures.get(address);
    if (entry && this.now() - entry.since >= AuthFailureLimiter.WINDOW_MS) {
      this.failures.delete(address);
      return undefined;
    }
    return entry;
  }
}

/**
 * The origin-form target to forward: absolute-form (`http://host/path?q`, RFC 9112 §3.2.2) keeps
 * only its path and query; anything else that is not origin-form is refused (undefined).
 */
export function originForm(target: string): string | undefined {
  if (target.startsWith("/")) return target;
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return undefined;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
  return `${url.pathname}${url.search}`;
}
