/**
 * Issue 13 item 8: a client that sends a streaming generate and then never reads must not hold
 * its slot for as long as the model generates, nor make the daemon buffer every token. After
 * SERVICE_WRITE_TIMEOUT with output waiting, the daemon closes the connection, cancels the job
 * and the slot serves the next request (src/http/respond.ts, streamLimits).
 */
import net from "node:net";
import t from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";

t.test("a streaming client that never reads is dropped after SERVICE_WRITE_TIMEOUT and its slot freed", async (t) => {
  const { url } = await startDaemon(t, { env: { SERVICE_WRITE_TIMEOUT: "1s", SERVICE_NUM_PARALLEL: "1", SERVICE_KEEP_ALIVE: "-1", SERVICE_CONTEXT_LENGTH: "32768" }, models: [{ name: "tiny", make: { preset: "tiny", contextLength: 32768 } }] });
  const port = Number(new URL(url).port);
  // Big lines (20 logprobs per token, ~2 KB) fill the kernel's socket buffers (a few MB on
  // loopback) within a few thousand tokens; a 32k context makes the generation outlast them.
  const body = JSON.stringify({ model: "tiny", prompt: "once upon a time", stream: true, logprobs: true, top_logprobs: 20, options: { num_predict: -1, temperature: 0 } });
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
  const second = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 2 } }, { signal: AbortSignal.timeout(60_000) });
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
