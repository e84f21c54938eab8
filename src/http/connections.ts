/**
 * The connection cap, made fair. A plain cap lets anyone who opens that many sockets and sends
 * nothing lock every other client out until the head timeout closes them (and Node only looks
 * every so often), logging nothing. Here a connection over the cap first takes the place of the
 * oldest *idle* connection — one with no request in progress: silent since it connected, still
 * sending its head, or a keep-alive waiting for its next request — and is refused only when
 * every connection is serving a request. Silent sockets therefore cost their owner sockets, and
 * cost other clients nothing. Reaching the cap is logged (warn), at most once per interval with
 * the counts since the last line, so a flood cannot flood the log.
 *
 * Used by the daemon (one cap) and the gateway (a cap in all and one per client network, the
 * key of a connection being its address's prefix: see `addressKey`).
 */
import type { Server } from "node:http";
import { isIPv4, isIPv6, type Socket } from "node:net";
import { Server as TlsServer, type TLSSocket } from "node:tls";
import type { Logger } from "../logger.js";

export interface ConnectionCap {
  /** Open connections at most, all clients together. */
  total: number;
  /** Open connections at most per key (client network); absent: no such cap. */
  perKey?: number;
  /** The key a connection counts under (default: its address). */
  keyOf?: (address: string) => string;
  /** How a connection over the cap is refused (default: closed at once). */
  refuse?: (socket: Socket) => void;
  /** Least time between two log lines about the cap (default 10 s). */
  logEveryMs?: number;
  /**
   * A connection that has sent nothing this long after it opened is closed. Node's own head
   * timeout starts only with the first byte, so a socket that sends nothing was never closed.
   */
  firstRequestMs: number;
}

interface Conn {
  socket: Socket;
  key: string;
  /** Requests in progress on it (a response not yet finished). */
  busy: number;
  /** Closes it unless a request arrives first. */
  silence: NodeJS.Timeout | undefined;
  /** Over TLS, the socket that carries HTTP once the handshake is done. */
  app?: TLSSocket;
}

/** Guards `server` (HTTP or HTTPS); replaces Node's `maxConnections`, which only refuses. */
export function capConnections(server: Server, cap: ConnectionCap, log: Logger): void {
  const conns = new Map<Socket, Conn>();
  const byKey = new Map<string, number>();
  const keyOf = cap.keyOf ?? ((a: string) => a);
  const logEveryMs = cap.logEveryMs ?? 10_000;
  const tls = server instanceof TlsServer;
  let lastLog = -Infinity;
  let evicted = 0;
  let refused = 0;

  const report = (address: string, why: "total" | "key") => {
    const now = performance.now();
    if (now - lastLog < logEveryMs) return;
    lastLog = now;
    log.warn(
      {
        remote: address,
        open: conns.size,
        maxConnections: cap.total,
        ...(cap.perKey === undefined ? {} : { maxPerClient: cap.perKey }),
        cap: why,
        idleClosed: evicted,
        refused,
      },
      why === "total"
        ? "connection cap reached: idle connections are closed for new ones, and new ones refused while every connection is busy"
        : "connection cap for one client reached: its idle connections are closed for new ones, and new ones refused while all are busy",
    );
    evicted = 0;
    refused = 0;
  };

  /** Closes the oldest connection without a request in progress (of `key`, when given). */
  const evictIdle = (key?: string): boolean => {
    for (const c of conns.values()) {
      if (c.busy > 0 || (key !== undefined && c.key !== key)) continue;
      drop(c);
      c.socket.destroy();
      evicted++;
      return true;
    }
    return false;
  };

  const drop = (c: Conn) => {
    clearTimeout(c.silence);
    if (!conns.delete(c.socket)) return;
    const left = (byKey.get(c.key) ?? 1) - 1;
    if (left <= 0) byKey.delete(c.key);
    else byKey.set(c.key, left);
  };

  server.on("connection", (socket: Socket) => {
    const address = socket.remoteAddress ?? "-";
    const key = keyOf(address);
    if (cap.perKey !== undefined && (byKey.get(key) ?? 0) >= cap.perKey) {
      report(address, "key");
      if (!evictIdle(key)) return refuse(socket);
    }
    if (conns.size >= cap.total) {
      report(address, "total");
      if (!evictIdle()) return refuse(socket);
    }
    const c: Conn = { socket, key, busy: 0, silence: undefined };
    // Only a socket that sent nothing (over TLS: no handshake, or nothing after it); once bytes
    // came, Node's head timeout runs and answers 408.
    c.silence = setTimeout(() => {
      const carrier = tls ? c.app : socket;
      if (!carrier || carrier.bytesRead === 0) socket.destroy();
    }, cap.firstRequestMs);
    c.silence.unref();
    conns.set(socket, c);
    byKey.set(key, (byKey.get(key) ?? 0) + 1);
    socket.once("close", () => drop(c));
  });

  server.on("secureConnection", (app: TLSSocket) => {
    const c = conns.get((app as TLSSocket & { _parent?: Socket })._parent ?? app);
    if (c) c.app = app;
  });

  server.on("request", (req: { socket: Socket }, res: { once(e: "close", f: () => void): void }) => {
    // Over TLS the request's socket wraps the raw one that was counted.
    const raw = (req.socket as Socket & { _parent?: Socket })._parent ?? req.socket;
    const c = conns.get(raw);
    if (!c) return;
    clearTimeout(c.silence);
    c.busy++;
    res.once("close", () => c.busy--);
  });

  function refuse(socket: Socket): void {
    refused++;
    if (cap.refuse) cap.refuse(socket);
    else socket.destroy();
  }
}

/**
 * The network a client address belongs to, as a key: its first `v4` bits (IPv4, and IPv4 mapped
 * into IPv6) or `v6` bits (IPv6). One host on IPv6 commonly holds a whole /64, so keying on the
 * exact address would give it 2^64 keys.
 */
export function addressKey(address: string, prefix: { v4: number; v6: number }): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  const v4 = mapped ?? (isIPv4(address) ? address : undefined);
  if (v4 !== undefined) {
    const n = v4.split(".").reduce((acc, part) => acc * 256 + Number(part), 0);
    const bits = Math.max(0, Math.min(32, prefix.v4));
    const masked = bits === 0 ? 0 : Math.floor(n / 2 ** (32 - bits)) * 2 ** (32 - bits);
    return `${[24, 16, 8, 0].map((s) => Math.floor(masked / 2 ** s) % 256).join(".")}/${bits}`;
  }
  const zoneless = address.replace(/%.*$/, "");
  if (!isIPv6(zoneless)) return address;
  const groups = expandIPv6(zoneless);
  const bits = Math.max(0, Math.min(128, prefix.v6));
  let out = "";
  for (let i = 0; i < 8; i++) {
    const keep = Math.max(0, Math.min(16, bits - i * 16));
    const g = keep === 0 ? 0 : (groups[i]! >> (16 - keep)) << (16 - keep);
    out += (i ? ":" : "") + g.toString(16);
  }
  return `${out}/${bits}`;
}

/** The eight 16-bit groups of an IPv6 address (`::` expanded, a trailing dotted quad read). */
function expandIPv6(address: string): number[] {
  let text = address;
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes("::") ? (text.split("::") as [string, string]) : [text, undefined];
  const h = head ? head.split(":") : [];
  const tl = tail === undefined ? [] : tail ? tail.split(":") : [];
  const fill = tail === undefined ? [] : Array<string>(8 - h.length - tl.length).fill("0");
  return [...h, ...fill, ...tl].map((g) => parseInt(g, 16));
}
