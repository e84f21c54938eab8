/**
 * The client library's rules (src/api/client.ts) against scripted node:http servers on loopback:
 * retries on >= 500 with growing delays and Retry-After, none on 4xx, the not-running message on
 * connection refused, and a timeout message naming the address and the limit.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { Client, ClientError, parseRetryAfter, serviceUrl } from "../../src/api/client.js";

interface Scripted {
  url: string;
  /** Arrival time (ms) of each request. */
  arrivals: number[];
}

type Answer = { status: number; body?: string; headers?: Record<string, string> } | "hang";

/** A server that answers the n-th request with script[n] (the last entry repeats). */
async function scripted(t: Test, script: Answer[]): Promise<Scripted> {
  const arrivals: number[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    const answer = script[Math.min(arrivals.length, script.length - 1)]!;
    arrivals.push(Date.now());
    if (answer === "hang") return; // never answers
    res.writeHead(answer.status, { "content-type": "application/json", ...answer.headers });
    res.end(answer.body ?? "");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, arrivals };
}

const err = (message: string) => JSON.stringify({ error: message });

t.test("500, then 503 with Retry-After, then 200: the call succeeds after growing delays", async (t) => {
  const s = await scripted(t, [
    { status: 500, body: err("an error occurred while running the model: boom") },
    { status: 503, body: err("server busy, please try again: maximum pending requests exceeded"), headers: { "retry-after": "1" } },
    { status: 200, body: JSON.stringify({ model: "tiny", response: "hello", done: true }) },
  ]);
  const retries: { attempt: number; delayMs: number; reason: string }[] = [];
  const client = new Client({ url: s.url, retryDelayMs: 100, onRetry: (r) => retries.push(r) });
  t.teardown(() => client.close());
  const res = await client.json<{ response: string }>("POST", "/api/generate", { model: "tiny", prompt: "hi", stream: false });
  t.equal(res.response, "hello", "reads `response` on 200");
  t.equal(s.arrivals.length, 3, "three requests in all");
  t.same(retries.map((r) => r.reason), ["status 500", "status 503"]);
  t.equal(retries[0]!.delayMs, 100, "first delay is the base delay");
  t.equal(retries[1]!.delayMs, 1000, "Retry-After: 1 wins over the 200 ms backoff");
  const gap1 = s.arrivals[1]! - s.arrivals[0]!;
  const gap2 = s.arrivals[2]! - s.arrivals[1]!;
  t.ok(gap1 >= 90, `first retry waited ${gap1} ms`);
  t.ok(gap2 >= 950, `second retry honoured Retry-After (${gap2} ms)`);
});

t.test("the delay grows with each attempt; after the last retry the 5xx error is thrown", async (t) => {
  const s = await scripted(t, [{ status: 500, body: err("an error occurred while running the model: out of memory") }]);
  const delays: number[] = [];
  const client = new Client({ url: s.url, retries: 3, retryDelayMs: 20, onRetry: (r) => delays.push(r.delayMs) });
  t.teardown(() => client.close());
  const e = await client.json("GET", "/api/tags").catch((x: unknown) => x);
  t.type(e, ClientError);
  t.equal((e as ClientError).message, "an error occurred while running the model: out of memory", "reads `error` on 5xx");
  t.equal((e as ClientError).status, 500);
  t.same(delays, [20, 40, 80]);
  t.equal(s.arrivals.length, 4, "one request and three retries");
});

for (const status of [400, 404]) {
  t.test(`${status}: exactly one request, the body's error is the message`, async (t) => {
    const message = status === 400 ? "prompt is required" : "model 'nope' not found, try pulling it first";
    const s = await scripted(t, [{ status, body: err(message) }, { status: 200, body: "{}" }]);
    const client = new Client({ url: s.url, retryDelayMs: 10 });
    t.teardown(() => client.close());
    const e = await client.json("POST", "/api/generate", { model: "nope" }).catch((x: unknown) => x);
    t.type(e, ClientError);
    t.equal((e as ClientError).message, message);
    t.equal((e as ClientError).status, status);
    await new Promise((r) => setTimeout(r, 100)); // a retry, if one were made, would arrive now
    t.equal(s.arrivals.length, 1, "never retried");
  });
}

t.test("a streamed NDJSON answer is an async iterator; an error line is thrown", async (t) => {
  const lines = [{ response: "a", done: false }, { response: "b", done: false }, { error: "an error occurred while running the model: out of memory" }];
  const s = await scripted(t, [{ status: 200, body: lines.map((l) => JSON.stringify(l)).join("\n") + "\n" }]);
  const client = new Client({ url: s.url });
  t.teardown(() => client.close());
  const seen: string[] = [];
  const e = await (async () => {
    for await (const chunk of client.stream<{ response: string }>("POST", "/api/generate", {})) seen.push(chunk.response);
  })().catch((x: unknown) => x);
  t.same(seen, ["a", "b"]);
  t.type(e, ClientError);
  t.equal((e as ClientError).message, "an error occurred while running the model: out of memory");
  t.equal(s.arrivals.length, 1, "a failed stream is not retried");
});

t.test("connection refused: the not-running message with the real address (after retries)", async (t) => {
  // Take a free port and close it again, so nothing listens there.
  const probe = http.createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  let retried = 0;
  const client = new Client({ host: `127.0.0.1:${port}`, retryDelayMs: 10, onRetry: () => retried++ });
  t.teardown(() => client.close());
  const e = await client.json("GET", "/api/version").catch((x: unknown) => x);
  t.type(e, ClientError);
  t.equal((e as ClientError).kind, "refused");
  t.equal((e as ClientError).message, `lmd is not running at http://127.0.0.1:${port} — start it with 'systemctl start lmd' or 'lmd serve'`);
  t.equal(retried, 3, "network errors are retried");
});

t.test("a server that never answers: a timeout message naming the address and the limit, not retried", async (t) => {
  const s = await scripted(t, ["hang"]);
  const client = new Client({ url: s.url, headersTimeoutMs: 300, retryDelayMs: 10 });
  t.teardown(() => client.close());
  const e = await client.json("GET", "/api/tags").catch((x: unknown) => x);
  t.type(e, ClientError);
  t.equal((e as ClientError).kind, "timeout");
  t.equal((e as ClientError).message, `timed out after 300ms trying to get an answer from lmd at ${s.url}`);
  t.equal(s.arrivals.length, 1);
});

t.test("SERVICE_HOST forms map to the client address", async (t) => {
  t.equal(serviceUrl(undefined), "http://127.0.0.1:11434");
  t.equal(serviceUrl("0.0.0.0:8080"), "http://127.0.0.1:8080");
  t.equal(serviceUrl(":9000"), "http://127.0.0.1:9000");
  t.equal(serviceUrl("[::]:11434"), "http://[::1]:11434");
  t.equal(serviceUrl("::"), "http://[::1]:11434");
  t.equal(serviceUrl("http://example.lan:1234"), "http://example.lan:1234");
  t.throws(() => serviceUrl("ftp://x"), /SERVICE_HOST/);
});

t.test("Retry-After as seconds or an HTTP date", async (t) => {
  t.equal(parseRetryAfter("3"), 3000);
  t.equal(parseRetryAfter(undefined), undefined);
  t.equal(parseRetryAfter("soon"), undefined);
  const ms = parseRetryAfter(new Date(Date.now() + 5000).toUTCString())!;
  t.ok(ms > 3000 && ms <= 5000, `${ms}`);
});
