/**
 * A registry that misbehaves at the HTTP level: a raw `node:net` server in front of a
 * {@link TestRegistry}'s manifests and blobs, answering each request with a behaviour drawn from a
 * seeded generator (so a failing run can be replayed with its seed):
 *
 * - `keepalive`: a correct HTTP/1.1 answer on a kept-alive connection;
 * - `http10`: an HTTP/1.0 answer (with or without Content-Length), then the connection closed;
 * - `close`: HTTP/1.1 with `Connection: close`, then closed;
 * - `chunked`: HTTP/1.1 chunked transfer encoding with random chunk sizes;
 * - `cutHead`: part of the response head, then closed; `cutBody`: the head and part of the body, then closed;
 * - `reset`: the head and part of the body, then a TCP reset;
 * - `badChunk`: a chunked body whose second chunk size is not hexadecimal;
 * - `stallHead`: nothing at all, the connection held open; `stallBody`: the head and part of the body, then held.
 *
 * `GET/HEAD /v2/<repo>/manifests/<tag>` and `GET /v2/<repo>/blobs/<digest>` (with `Range`) are
 * served; everything else is 404. `stats` counts requests and the behaviours drawn.
 */
import net from "node:net";
import type { Test } from "tap";
import type { TestRegistry } from "./registry.js";

export const BEHAVIOURS = ["keepalive", "http10", "close", "chunked", "cutHead", "cutBody", "reset", "badChunk", "stallHead", "stallBody"] as const;
export type Behaviour = (typeof BEHAVIOURS)[number];

export interface ChaosOptions {
  /** Relative weights of the behaviours (missing ones are never drawn). */
  weights: Partial<Record<Behaviour, number>>;
  seed: number;
}

export interface ChaosRegistry {
  /** `127.0.0.1:<port>`, the host part of model names. */
  host: string;
  stats: { requests: number; drawn: Map<Behaviour, number>; blobGets: Map<string, number> };
  close(): Promise<void>;
}

/** A small seeded generator (mulberry32): the same seed draws the same behaviours. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), a | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

export async function startChaosRegistry(t: Test, source: Pick<TestRegistry, "blobs" | "manifests">, options: ChaosOptions): Promise<ChaosRegistry> {
  const random = seeded(options.seed);
  const entries = Object.entries(options.weights).filter(([, w]) => (w ?? 0) > 0) as Array<[Behaviour, number]>;
  const total = entries.reduce((n, [, w]) => n + w, 0);
  const draw = (): Behaviour => {
    let r = random() * total;
    for (const [b, w] of entries) if ((r -= w) < 0) return b;
    return entries.at(-1)![0];
  };
  const stats: ChaosRegistry["stats"] = { requests: 0, drawn: new Map(), blobGets: new Map() };
  const sockets = new Set<net.Socket>();

  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    let buffered = Buffer.alloc(0);
    let busy = false;
    const next = () => {
      if (busy || socket.destroyed) return;
      const end = buffered.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = buffered.subarray(0, end).toString("latin1");
      buffered = buffered.subarray(end + 4); // the client sends no request bodies here
      busy = true;
      answer(socket, head, () => {
        busy = false;
        next();
      });
    };
    socket.on("data", (d: Buffer) => {
      buffered = Buffer.concat([buffered, d]);
      next();
    });
  });

  /** Answers one request; `done` is called when the connection may carry the next one. */
  const answer = (socket: net.Socket, head: string, done: () => void) => {
    stats.requests++;
    const [line = "", ...fields] = head.split("\r\n");
    const [method = "GET", target = "/"] = line.split(" ");
    const headers = new Map(fields.map((f) => [f.slice(0, f.indexOf(":")).trim().toLowerCase(), f.slice(f.indexOf(":") + 1).trim()]));
    const path = new URL(target, "http://x").pathname;
    let status = 200;
    let type = "application/octet-stream";
    let body: Buffer;
    let extra: string[] = [];
    const manifest = /^\/v2\/(.+)\/manifests\/([^/]+)$/.exec(path);
    const blob = /^\/v2\/.+\/blobs\/(sha256:[a-f0-9]{64})$/.exec(path);
    if (manifest && source.manifests.has(`${manifest[1]}:${manifest[2]}`)) {
      body = source.manifests.get(`${manifest[1]}:${manifest[2]}`)!;
      type = "application/vnd.docker.distribution.manifest.v2+json";
    } else if (blob && source.blobs.has(blob[1]!)) {
      const data = source.blobs.get(blob[1]!)!;
      stats.blobGets.set(blob[1]!, (stats.blobGets.get(blob[1]!) ?? 0) + 1);
      const range = /^bytes=(\d+)-(\d*)$/.exec(headers.get("range") ?? "");
      const start = range ? Number(range[1]) : 0;
      const last = range?.[2] ? Math.min(Number(range[2]), data.length - 1) : data.length - 1;
      body = data.subarray(start, last + 1);
      if (range) {
        status = 206;
        extra = [`Content-Range: bytes ${start}-${last}/${data.length}`];
      }
      extra.push("Accept-Ranges: bytes", `ETag: "${blob[1]}"`);
    } else {
      status = 404;
      type = "application/json";
      body = Buffer.from(JSON.stringify({ errors: [{ code: "NOT_FOUND", message: "not found" }] }));
    }
    if (method === "HEAD") body = Buffer.alloc(0);
    const behaviour = draw();
    stats.drawn.set(behaviour, (stats.drawn.get(behaviour) ?? 0) + 1);
    const reason = status === 200 ? "OK" : status === 206 ? "Partial Content" : "Not Found";
    const headLines = (version: string, framing: string[]) =>
      [`${version} ${status} ${reason}`, `Content-Type: ${type}`, ...extra, ...framing].join("\r\n") + "\r\n\r\n";
    const sized = (version: string, more: string[] = []) => headLines(version, [`Content-Length: ${body.length}`, ...more]);
    const part = () => body.subarray(0, Math.floor(random() * body.length));
    const chunked = (bad: boolean) => {
      const out: Buffer[] = [Buffer.from(headLines("HTTP/1.1", ["Transfer-Encoding: chunked"]))];
      let i = 0;
      for (let n = 0; i < body.length; n++) {
        const size = Math.min(body.length - i, 1 + Math.floor(random() * 32 * 1024));
        out.push(Buffer.from(bad && n === 1 ? "zz\r\n" : `${size.toString(16)}\r\n`), body.subarray(i, i + size), Buffer.from("\r\n"));
        i += size;
      }
      out.push(Buffer.from("0\r\n\r\n"));
      return Buffer.concat(out);
    };
    switch (behaviour) {
      case "keepalive":
        socket.write(sized("HTTP/1.1"));
        socket.write(body, done);
        return;
      case "http10":
        // Half the time without Content-Length: the body ends where the connection does.
        socket.write(random() < 0.5 ? sized("HTTP/1.0") : headLines("HTTP/1.0", []));
        socket.end(body);
        return;
      case "close":
        socket.write(sized("HTTP/1.1", ["Connection: close"]));
        socket.end(body);
        return;
      case "chunked":
        socket.write(chunked(false), done);
        return;
      case "badChunk":
        socket.end(chunked(true));
        return;
      case "cutHead": {
        const text = sized("HTTP/1.1");
        socket.end(text.slice(0, Math.floor(random() * (text.length - 4))));
        return;
      }
      case "cutBody":
        socket.write(sized("HTTP/1.1"));
        socket.end(part());
        return;
      case "reset":
        socket.write(sized("HTTP/1.1"));
        socket.write(part(), () => socket.resetAndDestroy());
        return;
      case "stallHead":
        return; // never answered; the client gives up and closes
      case "stallBody":
        socket.write(sized("HTTP/1.1"));
        socket.write(part());
        return;
    }
  };

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  };
  t.teardown(close);
  return { host: `127.0.0.1:${(server.address() as net.AddressInfo).port}`, stats, close };
}
