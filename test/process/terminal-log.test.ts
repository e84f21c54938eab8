/**
 * The daemon's log on a terminal (a pty made by util-linux's `script`): one line per request, a
 * refusal (4xx, /readyz saying not ready) at info with its message and no stack.
 */
import { spawn } from "node:child_process";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import t from "tap";
import { isAlive, MAIN, runnerPidOf } from "../helpers/process.js";

t.test("on a terminal: one line per request; refusals at info with their message", async (t) => {
  const dir = t.testdir();
  const command = `${process.execPath} ${MAIN} serve`;
  const child = spawn("script", ["-qfec", command, "/dev/null"], {
    env: {
      PATH: process.env.PATH,
      HOME: dir,
      TERM: "dumb",
      NO_COLOR: "1",
      SERVICE_HOST: "127.0.0.1:0",
      SERVICE_MODELS: path.join(dir, "models"),
      SERVICE_GPU: "false",
      SERVICE_THREADS: "1",
    },
    stdio: ["pipe", "pipe", "pipe"],
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  // The daemon is script's child: killed by its pid if the test ends early (a vanished terminal
  // is not a stop: its SIGHUP means reload).
  const daemon: { pid?: number } = {};
  t.teardown(async () => {
    if (daemon.pid !== undefined && isAlive(daemon.pid)) process.kill(daemon.pid, "SIGKILL");
    child.kill("SIGKILL");
    await exited;
  });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  // ANSI colours off: the lines are compared as text.
  // eslint-disable-next-line no-control-regex -- ESC starts the colour codes removed here
  const text = () => out.replace(/\u001b\[[0-9;]*m/g, "").replace(/\r/g, "");
  let port: string | undefined;
  for (let i = 0; i < 600 && port === undefined; i++) {
    port = /lmd listening .*"port":(\d+)/.exec(text())?.[1];
    if (port === undefined) await sleep(100);
  }
  t.ok(port, "the daemon listens");
  daemon.pid = await runnerPidOf(child.pid!);
  const url = `http://127.0.0.1:${port}`;
  for (const [p, id] of [["/readyz?model=demo", "probe-1"], ["/api/show", "show-1"]] as const) {
    const res = await fetch(`${url}${p}`, {
      method: p === "/api/show" ? "POST" : "GET",
      body: p === "/api/show" ? JSON.stringify({ model: "missing" }) : undefined,
      headers: { "x-request-id": id },
    });
    t.ok(res.status === 503 || res.status === 404, `${p}: ${res.status}`);
    await res.arrayBuffer();
  }
  await sleep(300);
  const lines = text().split("\n");
  const of = (id: string) => lines.filter((l) => l.includes(id));
  t.equal(of("probe-1").length, 1, "the probe is one line");
  t.match(of("probe-1")[0], /INFO: request .*"status":503.*"error":"model 'demo' is not loaded"/);
  t.equal(of("show-1").length, 1, "a 404 is one line");
  t.match(of("show-1")[0], /INFO: request .*"status":404.*"error":"model 'missing' not found/, "carrying its message");
  t.notMatch(text(), /ERROR|^\s+at /m, "no error, no stack");
  child.stdin.write("\u0003"); // Ctrl+C on the terminal
  await exited;
  for (let i = 0; i < 100 && daemon.pid !== undefined && isAlive(daemon.pid); i++) await sleep(100);
  t.notOk(daemon.pid !== undefined && isAlive(daemon.pid), "Ctrl+C stops it");
});
