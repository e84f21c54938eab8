/**
 * A client that sends a streaming generate and then stops reading must not make
 * the daemon buffer every token nor hold its slot forever. While the socket does not drain, the
 * runner pauses that job's token loop (src/runner/flow.ts); a client that reads again gets the
 * whole stream; one that never does is dropped after SERVICE_WRITE_TIMEOUT, its job cancelled and
 * its slot freed (src/http/respond.ts, streamLimits).
 */
import { readFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import t from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";

t.test("a streaming client that never reads is dropped after SERVICE_WRITE_TIMEOUT and its slot freed", async (t) => {
  const { url } = await startDaemon(t, {
    env: { SERVICE_WRITE_TIMEOUT: "1s", SERVICE_NUM_PARALLEL: "1", SERVICE_KEEP_ALIVE: "-1", SERVICE_CONTEXT_LENGTH: "32768" },
    models: [{ name: "tiny", make: { preset: "tiny", contextLength: 32768, textOnly: true } }],
  });
  const port = Number(new URL(url).port);
  // Big lines (20 logprobs per token, ~2 KB) fill the kernel's socket buffers (a few MB on
  // loopback) within a few thousand tokens; a 32k context makes the generation outlast them.
  const body = JSON.stringify({
    model: "tiny",
    prompt: "once upon a time",
    stream: true,
    logprobs: true,
    top_logprobs: 20,
    options: { num_predict: -1, temperature: 0 },
  });
  const socket = net.connect({ port, host: "127.0.0.1" });
  let closed = false;
  socket.on("error", () => undefined);
  socket.on("close", () => (closed = true));
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  socket.pause(); // never read a byte
  socket.write(`POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  t.teardown(() => socket.destroy());

  // The slot is busy at first: wait until the model is generating for the non-reader.
  await new Promise((r) => setTimeout(r, 1500));
  const t0 = performance.now();
  const rssBefore = process.memoryUsage().rss;
  const second = await postJson(
    `${url}/api/generate`,
    { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 2 } },
    { signal: AbortSignal.timeout(60_000) },
  );
  t.equal(second.status, 200, "a second request on the 1-slot daemon is served");
  t.equal((await second.json() as { done?: boolean }).done, true);
  t.comment(`second request served after ${Math.round(performance.now() - t0)} ms`);
  const ps = await (await fetch(`${url}/api/ps`)).json() as { models: Array<Record<string, unknown>> };
  t.ok(ps.models.length <= 1, "ps answers");
  // Bounded buffering: the daemon (this process) did not grow by the stream's output.
  t.ok(process.memoryUsage().rss - rssBefore < 64 * 1024 * 1024, "RSS stayed within 64 MiB of where it was");
  // Reading now finds a stream the daemon cut short: what the kernel held, then the close, and
  // no final `done` line.
  let received = "";
  socket.on("data", (d: Buffer) => (received += d.toString("latin1")));
  socket.resume();
  t.ok(closed || await waitClosed(socket), "the non-reader's connection was closed by the daemon");
  t.match(received, /^HTTP\/1\.1 200/, "the stream had started");
  t.notMatch(received, /"done":true/, "the generation never finished");
  t.ok(received.length < 16 * 1024 * 1024, `what had been sent is bounded (${received.length} bytes)`);
});

function waitClosed(socket: net.Socket): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), 20_000); // generous: the kernel buffers a few MB to read first, on a busy machine
    socket.once("close", () => (clearTimeout(timer), resolve(true)));
  });
}

t.test("a client that stops reading pauses its generation, and reading again gets the whole stream", async (t) => {
  const { url, app } = await startDaemon(t, {
    env: { SERVICE_WRITE_TIMEOUT: "5m", SERVICE_NUM_PARALLEL: "1", SERVICE_KEEP_ALIVE: "-1", SERVICE_CONTEXT_LENGTH: "32768" },
    models: [{ name: "tiny", make: { preset: "tiny", contextLength: 32768, textOnly: true } }],
  });
  // ~1.6 KB a line (20 logprobs a token): 6,000 tokens are ~10 MB, about twice what the kernel's
  // loopback buffers take (measured: ~4.5 MB), so the generation outlasts them.
  const predict = 6000;
  const res = await openStream(url, {
    model: "tiny",
    prompt: "once upon a time",
    stream: true,
    logprobs: true,
    top_logprobs: 20,
    options: { num_predict: predict, temperature: 0 },
  });
  t.teardown(() => res.destroy());
  res.pause(); // read nothing: Node's client stops reading the socket once its small buffer is full
  t.equal(res.statusCode, 200);
  const pid = app.services.scheduler.list()[0]?.pid;
  if (pid === undefined) throw new Error("no runner");

  // The socket fills, then the runner must stop computing (its CPU time stops growing) while
  // the request keeps its slot: paused, not dropped.
  const stalledAt = await waitForIdleCpu(pid, 120_000);
  t.ok(stalledAt !== undefined, "the runner stopped generating while the client did not read");
  const hold = 3000;
  const before = cpuTicks(pid);
  await new Promise((r) => setTimeout(r, hold));
  t.ok(cpuTicks(pid) - before <= 10, `it stayed paused for ${hold} ms (${cpuTicks(pid) - before} ticks of CPU)`);
  t.equal(busySlots(await (await fetch(`${url}/metrics`)).text()), 1, "the request still holds its slot");

  // Reading again resumes the generation: every token arrives, in order, and the stream ends.
  const lines = await readLines(res);
  const final = lines[lines.length - 1] ?? {};
  t.equal(final.done, true, "the stream finished with its final line");
  t.equal(final.done_reason, "length");
  t.equal(final.eval_count, predict, "every token was generated");
  const tokenLines = lines.slice(0, -1);
  const logprobCount = tokenLines.reduce((n, l) => n + (Array.isArray(l.logprobs) ? l.logprobs.length : 0), 0);
  t.equal(logprobCount, predict, "every generated token reached the client (one logprob each)");
  const text = tokenLines.map((l) => String(l.response ?? "")).join("");
  const context = Array.isArray(final.context) ? (final.context as number[]) : [];
  const detok = async (tokens: number[]) =>
    ((await (await postJson(`${url}/api/detokenize`, { model: "tiny", tokens })).json()) as { content?: string }).content;
  // The text of the whole context is the prompt's followed by what was streamed (the generated
  // tokens' text as it reads in place: the first keeps its leading space).
  t.equal(await detok(context), `${await detok(context.slice(0, -predict))}${text}`, "the streamed text is exactly the generated tokens' text");
  // Nothing was produced while the client did not read: the lines' own timestamps show the pause.
  const times = tokenLines.map((l) => Date.parse(String(l.created_at)));
  const gap = Math.max(...times.slice(1).map((x, i) => x - times[i]!));
  t.ok(gap >= hold, `the longest pause between two lines (${gap} ms) covers the ${hold} ms the client did not read`);
});

/** Starts a streaming POST with Node's http client and resolves with the response (head read). */
function openStream(url: string, body: unknown): Promise<http.IncomingMessage> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path: "/api/generate", method: "POST", headers: { "content-type": "application/json" } },
      resolve,
    );
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

/** CPU time (user + system, in clock ticks) of a process, from /proc. */
function cpuTicks(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return Number(fields[11]) + Number(fields[12]);
}

/** Resolves with the time once `pid` used (almost) no CPU for a whole second; undefined after `timeoutMs`. */
async function waitForIdleCpu(pid: number, timeoutMs: number): Promise<number | undefined> {
  const end = performance.now() + timeoutMs;
  let last = cpuTicks(pid);
  while (performance.now() < end) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = cpuTicks(pid);
    if (now - last <= 2) return performance.now();
    last = now;
  }
  return undefined;
}

function busySlots(metrics: string): number {
  return Number(/^lmd_busy_slots (\d+)/m.exec(metrics)?.[1]);
}

/** Reads the rest of an NDJSON stream; a stream cut short yields its complete lines. */
async function readLines(res: http.IncomingMessage): Promise<Record<string, unknown>[]> {
  let text = "";
  res.setEncoding("utf8");
  try {
    for await (const chunk of res) text += chunk as string;
  } catch {
    // cut short: the assertions on the final line say so
  }
  const lines = text.split("\n");
  if (!text.endsWith("\n")) lines.pop(); // a partial last line
  return lines.filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as Record<string, unknown>);
}
