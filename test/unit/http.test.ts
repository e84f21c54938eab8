import t, { type Test } from "tap";
import http from "node:http";
import net from "node:net";
import { Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import {
  BrokenModelError,
  ModelNotFoundError,
  ModelRunError,
  NotFoundError,
  MethodNotAllowedError,
  NotReadyError,
  ServiceBusyError,
} from "../../src/errors.js";
import { readJson, readJsonOrEmpty } from "../../src/http/body.js";
import { createGuards } from "../../src/http/guards.js";
import { NdjsonStream, SseStream, sendJson, sendText } from "../../src/http/respond.js";
import { Router, type RequestContext } from "../../src/http/router.js";
import { createHttpServer, type HttpServer, type RequestInfo } from "../../src/http/server.js";
import { compileValidator, goReading } from "../../src/http/validate.js";
import { assertError, type RawResponse } from "../helpers/assert-error.js";

const LIMIT = 1024;

// ---------------------------------------------------------------------------------------------
// Router (pure)

t.test("router matches literal, :param and *rest patterns", async (t) => {
  const h = (): void => {};
  const r = new Router()
    .add("GET", "/api/tags", h)
    .add(["HEAD", "POST"], "/api/blobs/:digest", h)
    .add("GET", "/v1/models/*model", h)
    .add("GET", "/v1/models/special", h);
  t.same(r.match("GET", "/api/tags").params, {});
  t.same(r.match("POST", "/api/blobs/sha256:abc").params, { digest: "sha256:abc" });
  t.same(r.match("GET", "/v1/models/hf.co/user/repo:Q4_K_M").params, { model: "hf.co/user/repo:Q4_K_M" });
  t.same(r.match("GET", "/v1/models/llama3%3Alatest").params, { model: "llama3:latest" }, "params are decoded");
  t.equal(r.match("GET", "/v1/models/special").route, "/v1/models/special", "a literal wins over a wildcard");
  t.equal(r.match("HEAD", "/api/tags").route, "/api/tags", "HEAD is served by GET");
  t.throws(() => r.match("GET", "/api/blobs/a/b"), new NotFoundError("path '/api/blobs/a/b' not found"), ":param is one segment");
  t.throws(() => r.match("GET", "/v1/models/"), NotFoundError, "a wildcard needs at least one character");
  t.throws(() => r.match("GET", "/v1/models/%E0%A4%A"), NotFoundError, "a malformed escape is an unknown path");
  t.throws(() => r.match("GET", "/api/tags/"), NotFoundError, "no trailing-slash folding");
  t.throws(() => new Router().add("GET", "/a/:x/b", h), /only the last segment/);
});

t.test("router: wrong method is 405 with Allow (HEAD wherever GET, and OPTIONS)", async (t) => {
  const r = new Router().add("GET", "/api/tags", () => {}).add("DELETE", "/api/delete", () => {});
  let err: unknown;
  try {
    r.match("POST", "/api/tags");
  } catch (e) {
    err = e;
  }
  t.ok(err instanceof MethodNotAllowedError);
  t.equal((err as MethodNotAllowedError).message, "method POST not allowed on /api/tags");
  t.same((err as MethodNotAllowedError).headers, { allow: "GET, HEAD, OPTIONS" });
  t.throws(() => r.match("HEAD", "/api/delete"), { message: "method HEAD not allowed on /api/delete" }, "no HEAD without GET");
});

// ---------------------------------------------------------------------------------------------
// A real server with test routes

interface Harness {
  url: string;
  port: number;
  http: HttpServer;
  logs: Array<Record<string, unknown>>;
  events: Record<string, unknown>;
}

const validateBody = compileValidator<Record<string, unknown>>({
  type: "object",
  required: ["model", "prompt"],
  properties: {
    model: { type: "string", minLength: 1 },
    prompt: { type: "string" },
    stream: { type: "boolean" },
    stop: { anyOf: [{ type: "string" }, { type: "array", items: { type: "string" }, maxItems: 4 }] },
    format: { anyOf: [{ enum: ["json"] }, { type: "object" }] },
    keep: { type: ["string", "number"] },
    role: { enum: ["system", "user"] },
    name: { type: "string", pattern: "^[a-z]+$" },
    options: {
      type: "object",
      properties: {
        temperature: { type: "number", minimum: 0, maximum: 2 },
        top_k: { type: "integer", minimum: 0 },
        penalty: { type: "number", maximum: 2 },
        ratio: { type: "number", exclusiveMinimum: 0 },
      },
    },
    messages: {
      type: "array",
      items: { type: "object", required: ["role"], properties: { role: { type: "string" }, content: { type: "string" } } },
    },
  },
});

function routes(events: Record<string, unknown>): Router {
  return new Router()
    .add("GET", "/ok", ({ res }) => sendJson(res, 200, { ok: true }))
    .add("GET", "/text", ({ res }) => sendText(res, 200, "lmd is running"))
    .add("POST", "/echo", async ({ req, res, maxBodyBytes }) => sendJson(res, 200, await readJson(req, maxBodyBytes)))
    .add("POST", "/optional", async ({ req, res }) => sendJson(res, 200, await readJsonOrEmpty(req, LIMIT)))
    .add("POST", "/slow-body", async ({ req, res }) => sendJson(res, 200, await readJson(req, LIMIT, { timeoutMs: 150 })))
    .add("POST", "/validate", async ({ req, res }) => sendJson(res, 200, validateBody(await readJson(req, 1 << 20))))
    .add("GET", "/boom", () => {
      throw new Error("secret detail", { cause: new Error("root cause") });
    })
    .add("GET", "/silent", () => {})
    .add("GET", "/not-ready", () => {
      throw new NotReadyError("model 'demo' is not loaded");
    })
    .add("GET", "/busy", () => {
      throw new ServiceBusyError();
    })
    .add("GET", "/no-model", () => {
      throw new ModelNotFoundError("nope");
    })
    .add("GET", "/broken-model", () => {
      throw new BrokenModelError("m", "invalid messages layer");
    })
    .add("GET", "/stream-fail", async ({ res, url }) => {
      const s = new NdjsonStream(res);
      await s.write({ n: 1 });
      await s.write({ n: 2 });
      if (url.searchParams.has("unknown")) throw new TypeError("internal detail");
      throw new ModelRunError("out of memory");
    })
    .add("GET", "/stream-ok", async ({ res }) => {
      const s = new NdjsonStream(res);
      events.startedBefore = s.started;
      await s.write({ n: 1 });
      events.startedAfter = s.started;
      s.end({ done: true });
      s.end({ twice: true });
    })
    .add("GET", "/flood", async (ctx: RequestContext) => {
      const s = new NdjsonStream(ctx.res);
      const chunk = "x".repeat(64 * 1024);
      events.written = 0;
      for (let i = 0; i < 400 && !ctx.signal.aborted; i++) {
        await s.write({ i, chunk });
        events.written = i + 1;
      }
      events.floodAborted = ctx.signal.aborted;
      s.end({ done: true });
      (events.floodDone as (() => void) | undefined)?.();
    })
    .add("GET", "/sse", async ({ res, url }) => {
      const s = new SseStream(res);
      await s.write({ id: 1 });
      if (url.searchParams.has("fail")) throw new ModelRunError("runner crashed");
      s.done();
    });
}

async function startServer(t: Test): Promise<Harness> {
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString().split("\n")) if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  const events: Record<string, unknown> = {};
  const log = pino({ level: "debug" }, sink);
  const guards = createGuards({ listen: { host: "127.0.0.1", port: 0 }, allowedHosts: [], origins: [] });
  const onRequestStart = (): void => { events.started = ((events.started as number | undefined) ?? 0) + 1; };
  const onResponse = (info: RequestInfo): void => { events.lastInfo = info; };
  const srv = createHttpServer({ router: routes(events), guards, log, maxBodyBytes: LIMIT, onRequestStart, onResponse });
  await new Promise<void>((resolve) => srv.server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    srv.server.closeAllConnections();
    srv.server.close();
  });
  const port = (srv.server.address() as net.AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, port, http: srv, logs, events };
}

/** One request through node:http; `write` may send the body in pieces (chunked when no length). */
function request(port: number, options: http.RequestOptions & { body?: Buffer | string | Array<Buffer | string> }): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, agent: false, ...options }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      res.on("error", reject);
    });
    req.on("error", reject);
    const parts = options.body === undefined ? [] : Array.isArray(options.body) ? options.body : [options.body];
    for (const p of parts) req.write(p);
    req.end();
  });
}

t.test("responses: JSON, text, HEAD, request id", async (t) => {
  const { url } = await startServer(t);
  const res = await fetch(`${url}/ok`, { headers: { "x-request-id": "abc-123" } });
  t.equal(res.status, 200);
  t.equal(res.headers.get("content-type"), "application/json; charset=utf-8");
  t.equal(res.headers.get("x-request-id"), "abc-123", "a sane request id is echoed");
  t.same(await res.json(), { ok: true });
  const head = await fetch(`${url}/ok`, { method: "HEAD" });
  t.equal(head.status, 200);
  t.equal(head.headers.get("content-length"), "11", "HEAD announces the GET body's length");
  t.equal(await head.text(), "");
  const text = await fetch(`${url}/text`);
  t.equal(text.headers.get("content-type"), "text/plain; charset=utf-8");
  t.equal(await text.text(), "lmd is running");
  const bad = await fetch(`${url}/ok`, { headers: { "x-request-id": "a b\tc".repeat(3) } });
  t.match(bad.headers.get("x-request-id"), /^[0-9a-f]{16}$/, "an insane request id is replaced");
});

t.test("unknown path 404, wrong method 405 with Allow", async (t) => {
  const { url } = await startServer(t);
  await assertError(t, await fetch(`${url}/nope?secret=1`), 404, "path '/nope' not found");
  const res = await fetch(`${url}/ok`, { method: "DELETE" });
  t.equal(res.headers.get("allow"), "GET, HEAD, OPTIONS");
  await assertError(t, res, 405, "method DELETE not allowed on /ok");
  const opt = await fetch(`${url}/echo`, { method: "OPTIONS" });
  t.equal(opt.status, 204, "plain OPTIONS answers with Allow");
  t.equal(opt.headers.get("allow"), "POST, OPTIONS");
});

t.test("request bodies", async (t) => {
  const { url, port } = await startServer(t);
  const post = (path: string, body: RequestInit["body"]): Promise<Response> => fetch(`${url}${path}`, { method: "POST", body });

  const ok = await post("/echo", JSON.stringify({ a: "é" }));
  t.same(await ok.json(), { a: "é" });
  const bom = await post("/echo", Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"b":1}')]));
  t.same(await bom.json(), { b: 1 }, "a UTF-8 BOM is ignored");

  await assertError(t, await post("/echo", undefined), 400, "missing request body");
  await assertError(t, await post("/echo", "  \n"), 400, "missing request body");
  await assertError(t, await post("/echo", "{nope"), 400, /^invalid JSON in request body: ./);
  await assertError(t, await post("/echo", '{"a": 1'), 400, /^invalid JSON in request body: ./);
  await assertError(
    t,
    await post("/echo", Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])),
    400,
    "invalid JSON in request body: invalid UTF-8",
  );
  for (const body of ["[1,2]", '"text"', "null", "42"]) {
    await assertError(t, await post("/echo", body), 400, "invalid JSON in request body: expected an object");
  }
  t.same(await (await post("/optional", undefined)).json(), {}, "optional body: empty is {}");
  await assertError(t, await post("/optional", "[]"), 400, "invalid JSON in request body: expected an object");

  const big = JSON.stringify({ x: "y".repeat(LIMIT) });
  await assertError(t, await post("/echo", big), 413, `request body too large (limit ${LIMIT} bytes)`);
  const exact = JSON.stringify({ x: "y".repeat(LIMIT - 8) });
  t.equal(Buffer.byteLength(exact), LIMIT);
  t.equal((await post("/echo", exact)).status, 200, "a body of exactly the limit is accepted");

  const chunked = await request(port, { method: "POST", path: "/echo", body: Array.from({ length: 64 }, () => "y".repeat(100)) });
  t.equal(chunked.headers?.["connection"], "close", "the connection is closed after a refused upload");
  await assertError(t, chunked, 413, `request body too large (limit ${LIMIT} bytes)`);
  const big2 = await request(port, { method: "POST", path: "/echo", body: Array.from({ length: 2000 }, () => "y".repeat(1000)) });
  await assertError(t, big2, 413, undefined);
  const huge = await post("/echo", "y".repeat(10_000_000));
  await assertError(t, huge, 413, `request body too large (limit ${LIMIT} bytes)`);
});

t.test("Content-Length announcing more than the limit is refused before reading", async (t) => {
  const { port } = await startServer(t);
  // The client announces 10 MB, sends 10 bytes and waits: the answer must come without the rest.
  const res = await new Promise<RawResponse>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/echo", agent: false, headers: { "content-length": 10_000_000 } }, (r) => {
      let body = "";
      r.on("data", (c: Buffer) => (body += c.toString()));
      r.on("end", () => {
        req.destroy();
        resolve({ status: r.statusCode ?? 0, headers: r.headers, body });
      });
    });
    req.on("error", reject);
    req.write('{"a":"bcd"');
  });
  await assertError(t, res, 413, `request body too large (limit ${LIMIT} bytes)`);
});

t.test("a body that stops arriving times out with 408", async (t) => {
  const { port } = await startServer(t);
  const res = await new Promise<RawResponse>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/slow-body", agent: false, headers: { "content-length": 100 } }, (r) => {
      let body = "";
      r.on("data", (c: Buffer) => (body += c.toString()));
      r.on("end", () => {
        req.destroy();
        resolve({ status: r.statusCode ?? 0, headers: r.headers, body });
      });
    });
    req.on("error", reject);
    req.write('{"a":');
  });
  await assertError(t, res, 408, "request body timeout");
});

t.test("validation messages, one per keyword", async (t) => {
  const { url } = await startServer(t);
  const base = { model: "m", prompt: "p" };
  const cases: Array<[string, unknown, string]> = [
    ["required prompt", { model: "m" }, "prompt is required"],
    ["required model", { prompt: "p" }, "model is required"],
    ["empty model", { model: "", prompt: "p" }, "model is required"],
    ["type", { ...base, stream: "yes" }, "invalid type for parameter 'stream': expected boolean"],
    ["type in nested object", { ...base, options: { temperature: "hot" } }, "invalid type for parameter 'options.temperature': expected number"],
    ["integer", { ...base, options: { top_k: 1.5 } }, "invalid type for parameter 'options.top_k': expected integer"],
    ["type in array", { ...base, messages: [{ role: "user", content: 5 }] }, "invalid type for parameter 'messages[0].content': expected string"],
    ["required in array", { ...base, messages: [{ content: "x" }] }, "messages[0].role is required"],
    ["union type", { ...base, keep: true }, "invalid type for parameter 'keep': expected string or number"],
    ["anyOf type", { ...base, stop: 5 }, "invalid type for parameter 'stop': expected string or array"],
    ["anyOf branch with the right type", { ...base, stop: ["a", "b", "c", "d", "e"] }, "stop must have at most 4 items"],
    ["anyOf enum branch", { ...base, format: "xml" }, "invalid value for parameter 'format': expected one of json"],
    ["between", { ...base, options: { temperature: 3 } }, "temperature must be between 0 and 2"],
    ["between (low)", { ...base, options: { temperature: -1 } }, "temperature must be between 0 and 2"],
    ["at least", { ...base, options: { top_k: -1 } }, "top_k must be at least 0"],
    ["at most", { ...base, options: { penalty: 5 } }, "penalty must be at most 2"],
    ["exclusive", { ...base, options: { ratio: 0 } }, "ratio must be greater than 0"],
    ["enum", { ...base, role: "admin" }, "invalid value for parameter 'role': expected one of system, user"],
    ["other keyword", { ...base, name: "A1" }, 'invalid value for parameter \'name\': must match pattern "^[a-z]+$"'],
  ];
  for (const [name, body, message] of cases) {
    const res = await fetch(`${url}/validate`, { method: "POST", body: JSON.stringify(body) });
    await assertError(t, res, 400, message);
    t.comment(name);
  }
  const good = await fetch(`${url}/validate`, {
    method: "POST",
    body: JSON.stringify({ ...base, stop: ["a"], format: "json", options: { temperature: 2, top_k: 0 } }),
  });
  t.equal(good.status, 200, "valid bodies pass, bounds inclusive");
});

t.test("errors: unknown errors are a generic 500, details go to the log", async (t) => {
  const { url, logs, events } = await startServer(t);
  const res = await fetch(`${url}/boom?token=secret`, { headers: { "x-request-id": "req-500" } });
  await assertError(t, res, 500, "an internal error occurred");
  await sleep(20);
  const lines = logs.filter((l) => l.reqId === "req-500");
  t.equal(lines.length, 1, "one line for the request");
  const failed = lines[0];
  t.match(
    failed,
    { msg: "request failed", level: 50, method: "GET", path: "/boom", status: 500, remote: "127.0.0.1" },
    "at error level, as the request's line",
  );
  t.match((failed?.err as { stack?: string } | undefined)?.stack, /secret detail/);
  t.match(JSON.stringify(failed?.err), /root cause/, "the cause is logged");
  t.type(failed?.bytes, "number");
  t.type(failed?.durationMs, "number");
  t.notMatch(JSON.stringify(logs), /token=secret/, "the query string is never logged");
  t.match(events.lastInfo, { reqId: "req-500", route: "/boom", status: 500, aborted: false }, "the metrics hook sees each response");
  t.equal(events.started, 1, "and each request start");

  await assertError(t, await fetch(`${url}/silent`), 500, "an internal error occurred");
});

t.test("refusals that are the answer (4xx, /readyz's 503) are one info line with their message, no stack", async (t) => {
  const { url, logs } = await startServer(t);
  for (const [path, id, status] of [["/not-ready", "probe", 503], ["/nowhere", "missing", 404], ["/busy", "full", 503]] as const) {
    const res = await fetch(`${url}${path}`, { headers: { "x-request-id": id } });
    t.equal(res.status, status);
    await res.arrayBuffer();
  }
  await sleep(20);
  const of = (id: string) => logs.filter((l) => l.reqId === id);
  t.equal(of("probe").length, 1, "one line for the probe");
  t.match(of("probe")[0], { msg: "request", level: 30, status: 503, error: "model 'demo' is not loaded" });
  t.equal(of("probe")[0]?.err, undefined, "no stack");
  t.equal(of("missing").length, 1);
  t.match(of("missing")[0], { msg: "request", level: 30, status: 404, error: "path '/nowhere' not found" });
  t.match(of("full")[0], { msg: "request", level: 40, status: 503, error: /maximum pending requests/ }, "a full queue is a warning");
  t.notOk(logs.some((l) => (l.level as number) >= 50), "nothing at error priority");
});

t.test("store errors get their status at the door: a missing model is a refusal, a broken one a failure", async (t) => {
  const { url, logs } = await startServer(t);
  await assertError(t, await fetch(`${url}/no-model`, { headers: { "x-request-id": "gone" } }), 404, "model 'nope' not found, try pulling it first");
  await assertError(t, await fetch(`${url}/broken-model`, { headers: { "x-request-id": "broken" } }), 500, "failed to load model 'm': invalid messages layer");
  await sleep(20);
  t.match(
    logs.filter((l) => l.reqId === "gone"),
    [{ msg: "request", level: 30, status: 404, error: "model 'nope' not found, try pulling it first" }],
    "one info line",
  );
  t.match(logs.filter((l) => l.reqId === "broken"), [{ msg: "request failed", level: 50, status: 500 }], "one line at error priority");
});

t.test("NDJSON: header on first write, error as the last line", async (t) => {
  const { url, events } = await startServer(t);
  const ok = await fetch(`${url}/stream-ok`);
  t.equal(ok.headers.get("content-type"), "application/x-ndjson");
  t.equal(await ok.text(), '{"n":1}\n{"done":true}\n');
  t.same([events.startedBefore, events.startedAfter], [false, true]);

  const res = await fetch(`${url}/stream-fail`);
  t.equal(res.status, 200);
  const lines = (await res.text()).trimEnd().split("\n").map((l) => JSON.parse(l) as unknown);
  t.same(lines, [{ n: 1 }, { n: 2 }, { error: "an error occurred while running the model: out of memory" }]);
  const hidden = await (await fetch(`${url}/stream-fail?unknown`)).text();
  t.equal(hidden.trimEnd().split("\n").at(-1), '{"error":"an internal error occurred"}');
});

t.test("NDJSON: writes wait for a slow reader (backpressure)", async (t) => {
  const { port, events } = await startServer(t);
  const done = new Promise<void>((resolve) => (events.floodDone = resolve));
  const res = await new Promise<http.IncomingMessage>((resolve) => http.get({ host: "127.0.0.1", port, path: "/flood", agent: false }, resolve));
  res.pause();
  await sleep(300);
  const stalled = events.written as number;
  t.ok(stalled < 400, `the writer stalls while the client does not read (${stalled} of 400 written)`);
  await sleep(100);
  t.equal(events.written, stalled, "and stays stalled");
  let text = "";
  res.setEncoding("utf8");
  res.on("data", (c: string) => (text += c));
  res.resume();
  await new Promise((resolve) => res.on("end", resolve));
  await done;
  const lines = text.trimEnd().split("\n");
  t.equal(lines.length, 401, "every line arrives once the client reads");
  t.same(JSON.parse(lines.at(-1) ?? ""), { done: true });
});

t.test("NDJSON: a client that goes away releases a waiting writer and aborts the signal", async (t) => {
  const { port, events, logs } = await startServer(t);
  const done = new Promise<void>((resolve) => (events.floodDone = resolve));
  const req = http.get({ host: "127.0.0.1", port, path: "/flood", agent: false }, (res) => {
    res.pause();
    setTimeout(() => req.destroy(), 100);
  });
  req.on("error", () => {});
  await done;
  t.equal(events.floodAborted, true);
  t.ok((events.written as number) < 400);
  await sleep(20);
  t.match(logs.find((l) => l.msg === "request" && l.path === "/flood"), { aborted: true, status: 200 });
});

t.test("SSE: data events, [DONE], and the error event", async (t) => {
  const { url } = await startServer(t);
  const res = await fetch(`${url}/sse`);
  t.equal(res.headers.get("content-type"), "text/event-stream");
  t.equal(res.headers.get("cache-control"), "no-cache");
  t.equal(await res.text(), 'data: {"id":1}\n\ndata: [DONE]\n\n');
  const failed = await fetch(`${url}/sse?fail`);
  t.equal(await failed.text(), 'data: {"id":1}\n\ndata: {"error":"an error occurred while running the model: runner crashed"}\n\n');
});

t.test("draining: new requests get 503 with Retry-After", async (t) => {
  const { url, http: srv } = await startServer(t);
  t.equal((await fetch(`${url}/ok`)).status, 200);
  srv.startDraining();
  t.equal(srv.draining, true);
  const res = await fetch(`${url}/ok`);
  t.equal(res.headers.get("retry-after"), "5");
  t.equal(res.headers.get("connection"), "close");
  await assertError(t, res, 503, "server is shutting down");
});

/** Sends `text` on a new connection and parses the one answer that comes back before the server closes it. */
async function rawExchange(port: number, text: string): Promise<RawResponse> {
  const raw = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(text));
    let data = "";
    socket.on("data", (c) => (data += c.toString()));
    socket.on("end", () => resolve(data));
    socket.on("error", reject);
  });
  const [head = "", body = ""] = raw.split("\r\n\r\n");
  const headers = Object.fromEntries(head.split("\r\n").slice(1).map((l) => [l.split(":")[0]?.toLowerCase() ?? "", l.slice(l.indexOf(":") + 1).trim()]));
  return { status: Number(head.split(" ")[1]), headers, body };
}

t.test("malformed requests get the contract's body from Node's parser errors", async (t) => {
  const { port } = await startServer(t);
  await assertError(t, await rawExchange(port, "NOT A REQUEST\r\n\r\n"), 400, "bad request");
});

t.test("what Node would answer itself gets the contract's body: an unknown Expect, CONNECT", async (t) => {
  const { port } = await startServer(t);
  const expect = "POST /echo HTTP/1.1\r\nhost: 127.0.0.1\r\nexpect: foo\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
  await assertError(t, await rawExchange(port, expect), 417, "expectation failed: only 100-continue is supported");
  await assertError(t, await rawExchange(port, "CONNECT 127.0.0.1:22 HTTP/1.1\r\nhost: 127.0.0.1:22\r\n\r\n"), 405, "method CONNECT not allowed");
});

t.test("goReading: null is not set in the body, its options and its messages, and nowhere deeper", async (t) => {
  const format = { type: "object", properties: { a: { enum: [null, "x"] } } };
  const body = {
    model: "m",
    system: null,
    format,
    options: { temperature: null, top_k: 3 },
    parameters: { seed: null, stop: ["x"] },
    messages: [{ role: "USER", content: null, tool_calls: [{ function: { name: "f", arguments: { a: null } } }] }, "not an object"],
  };
  t.same(goReading(body), {
    model: "m",
    format,
    options: { top_k: 3 },
    parameters: { stop: ["x"] },
    messages: [{ role: "user", tool_calls: [{ function: { name: "f", arguments: { a: null } } }] }, "not an object"],
  });
  t.equal(body.system, null, "the body read is a copy");
  for (const other of [null, [null], "text", 1]) t.same(goReading(other), other, `${JSON.stringify(other)} passes as it is`);
  const parsed = JSON.parse('{"__proto__": {"polluted": true}, "x": null}') as unknown;
  const read = goReading(parsed) as Record<string, unknown>;
  t.equal(({} as Record<string, unknown>).polluted, undefined, "a __proto__ key stays an own field");
  t.ok(Object.hasOwn(read, "__proto__"));
});
