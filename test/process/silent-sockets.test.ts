/**
 * Sockets that connect and send nothing cannot lock clients out. At the default cap of 1024
 * connections, 1,024 silent sockets would otherwise close every new connection unanswered until
 * the head timeout, with nothing in the log. A new connection takes a silent one's place at once, the cap is logged (warn, rate-limited), and silent sockets
 * are closed 10 s after they opened (Node's own head timeout starts only with a first byte).
 */
import net from "node:net";
import path from "node:path";
import t from "tap";
import { forkDaemon } from "../helpers/process.js";

t.test("1,030 silent sockets: clients are served at once, the cap is logged, the silent ones closed", async (t) => {
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(t.testdir(), "m"), SERVICE_LOG_LEVEL: "info" });
  const port = Number(new URL(d.url).port);
  const silent: { closedAt?: number }[] = [];
  const sockets: net.Socket[] = [];
  t.teardown(() => sockets.forEach((s) => s.destroy()));
  const opened = performance.now();
  for (let i = 0; i < 1030; i++) {
    const entry: { closedAt?: number } = {};
    const s = net.connect(port, "127.0.0.1");
    s.on("error", () => undefined).on("close", () => (entry.closedAt = performance.now()));
    sockets.push(s);
    silent.push(entry);
    await new Promise((resolve) => s.once("connect", resolve).once("close", resolve));
  }
  await new Promise((resolve) => setTimeout(resolve, 300));
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`${d.url}/api/version`, { signal: AbortSignal.timeout(5_000) }).catch((e: Error) => e);
    t.equal(res instanceof Response ? res.status : String(res), 200, `a client is served while the silent sockets are open (${i + 1})`);
  }
  const warn = await d.waitForLog((l) => l.level === 40 && /connection cap reached/.test(String(l.msg)), { timeoutMs: 5_000 });
  t.equal(warn.maxConnections, 1024, "the cap is logged with its number");
  t.equal(d.lines.filter((l) => /connection cap reached/.test(String(l.msg))).length, 1, "once, not once per connection");
  // Ten seconds after opening without a request, the rest are closed.
  const deadline = performance.now() + 20_000;
  while (silent.some((s) => s.closedAt === undefined) && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 250));
  const open = silent.filter((s) => s.closedAt === undefined).length;
  t.equal(open, 0, "every silent socket is closed by the server");
  const last = Math.max(...silent.map((s) => s.closedAt ?? Infinity)) - opened;
  t.ok(last < 20_000, `the last within 20 s of opening (${(last / 1000).toFixed(1)} s)`);
});
