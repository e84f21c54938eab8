/**
 * A refusal sent before the body is read reaches the client every
 * time (lingering close: no reset destroys the answer), and a client that keeps sending, or
 * drips, is closed at the documented bound (src/http/linger.ts: 2 s after the answer, or the body
 * limit + 4 MiB discarded). Raw sockets: the client writes as fast as the socket takes it.
 */
import net from "node:net";
import t from "tap";
import { LINGER } from "../../src/http/linger.js";
import { startDaemon } from "../helpers/daemon.js";

const TEN_MB = Buffer.alloc(10 * 1024 * 1024, 0x61);

interface Outcome {
  response: string;
  error?: string;
  closedAfterMs: number;
}

/** Sends a request head and a body (Content-Length or chunked) over a fresh socket and reads the answer to the close. */
function send(port: number, head: string, body: Buffer, chunked: boolean): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    let response = "";
    let error: string | undefined;
    const t0 = performance.now();
    socket.on("data", (d: Buffer) => (response += d.toString("latin1")));
    socket.on("error", (err: NodeJS.ErrnoException) => (error ??= err.code ?? err.message));
    socket.on("close", () => resolve({ response, error, closedAfterMs: performance.now() - t0 }));
    socket.on("connect", () => {
      socket.write(head);
      if (!chunked) socket.end(body);
      else {
        for (let i = 0; i < body.length; i += 1024 * 1024) {
          socket.write(`${Math.min(1024 * 1024, body.length - i).toString(16)}\r\n`);
          socket.write(body.subarray(i, i + 1024 * 1024));
          socket.write("\r\n");
        }
        socket.end("0\r\n\r\n");
      }
    });
  });
}

/** Status and JSON body of a raw HTTP/1.1 response. */
function parse(raw: string): { status: number; body: unknown } {
  const [head = "", body = ""] = raw.split("\r\n\r\n");
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), body: body ? JSON.parse(body) : undefined };
}

t.test("100 oversized bodies with Content-Length and 20 chunked: every client reads its 413", async (t) => {
  const { url } = await startDaemon(t);
  const port = Number(new URL(url).port);
  const rssBefore = process.memoryUsage().rss;
  const failures: string[] = [];
  const runs: Array<[boolean, number]> = [[false, 100], [true, 20]];
  for (const [chunked, count] of runs) {
    const framing = chunked ? "Transfer-Encoding: chunked" : `Content-Length: ${TEN_MB.length}`;
    const head = `POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${framing}\r\n\r\n`;
    for (let i = 0; i < count; i++) {
      const out = await send(port, head, TEN_MB, chunked);
      const { status, body } = parse(out.response);
      const ok =
        status === 413 &&
        out.error === undefined &&
        JSON.stringify(Object.keys(body as object)) === '["error"]' &&
        typeof (body as { error: unknown }).error === "string";
      if (!ok) failures.push(`${chunked ? "chunked" : "content-length"} #${i}: status ${status}, error ${out.error ?? "none"}, ${out.response.slice(0, 120)}`);
    }
  }
  t.same(failures, [], "every one read a 413 with exactly {\"error\": string}, none saw a reset");
  const growth = (process.memoryUsage().rss - rssBefore) / 1024 / 1024;
  t.ok(growth < 64, `RSS (daemon and client in this process) grew ${growth.toFixed(1)} MiB over 1.2 GB discarded`);
});

t.test("a client that keeps sending slowly is closed at the bound", async (t) => {
  const { url } = await startDaemon(t);
  const port = Number(new URL(url).port);
  for (const [what, path, length] of [["oversized body", "/api/generate", 10 * 1024 * 1024], ["404-bound request", "/nowhere", 100_000]] as const) {
    const result = await new Promise<Outcome>((resolve) => {
      const socket = net.connect({ port, host: "127.0.0.1", allowHalfOpen: true });
      let response = "";
      let error: string | undefined;
      const t0 = performance.now();
      let drip: NodeJS.Timeout | undefined;
      socket.on("data", (d: Buffer) => (response += d.toString("latin1")));
      socket.on("error", (err: NodeJS.ErrnoException) => (error ??= err.code));
      socket.on("close", () => {
        clearInterval(drip);
        resolve({ response, error, closedAfterMs: performance.now() - t0 });
      });
      socket.on("connect", () => {
        socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${length}\r\n\r\n{`);
        // One byte every 100 ms, for at most 20 s: far longer than the bound.
        let n = 0;
        drip = setInterval(() => (n++ < 200 && !socket.destroyed ? socket.write("x") : socket.destroy()), 100);
      });
    });
    const { status } = parse(result.response);
    t.equal(status, path === "/nowhere" ? 404 : 413, `${what}: the answer arrived`);
    t.ok(
      result.closedAfterMs < LINGER.ms + 3_000,
      `${what}: closed by the server ${Math.round(result.closedAfterMs)} ms after connecting (bound ${LINGER.ms} ms after the answer)`,
    );
  }
});
