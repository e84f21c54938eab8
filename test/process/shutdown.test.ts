/**
 * Shutdown at its edges, with the built daemon forked as systemd or a terminal runs it.
 *
 * - A stream still running when SERVICE_SHUTDOWN_TIMEOUT ends is stopped cleanly: its last line
 *   says the server is shutting down, the runner disposes its model and exits 0, nothing is
 *   logged as a crash.
 * - A request received before the signal but still queued or waiting for its model's load is
 *   served if it can be within the timeout, else it gets 503 `server is shutting down`.
 * - A log reader that went away (`lmd serve | tee log`, then Ctrl+C) never keeps the daemon alive.
 *
 * A slow model load is a runner stopped with SIGSTOP while it loads: the real runner, frozen.
 */
import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { createServer } from "node:net";
import path from "node:path";
import t, { type Test } from "tap";
import { ModelStore } from "../../src/store/store.js";
import { installTestModels } from "../helpers/models.js";
import { forkDaemon, isAlive, MAIN, runnerPidOf, type ForkedDaemon } from "../helpers/process.js";

async function storeWithTiny(dir: string): Promise<string> {
  const store = new ModelStore(dir);
  await store.init();
  // Greedy requests here must run to num_predict: where a random model meets end-of-sequence
  // depends on the CPU's kernels (textOnly in src/gguf/make-model.ts).
  await installTestModels(store, [{ name: "tiny", make: { preset: "tiny", textOnly: true } }]);
  return dir;
}

type Line = Record<string, unknown>;

t.test("a stream still running when the shutdown timeout ends: a clean error line, the runner exits 0", async (t) => {
  const models = await storeWithTiny(path.join(t.testdir(), "models"));
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: models, SERVICE_SHUTDOWN_TIMEOUT: "1s" });
  const res = await fetch(`${d.url}/api/generate`, {
    method: "POST",
    body: JSON.stringify({ model: "tiny", prompt: "Go", options: { num_predict: 1_000_000, temperature: 0 } }),
  });
  t.equal(res.status, 200);
  const reader = res.body!.getReader();
  let text = Buffer.from((await reader.read()).value ?? []).toString();
  const runnerPid = await runnerPidOf(d.child.pid!);
  t.ok(runnerPid, "a runner is generating");
  d.child.kill("SIGTERM");
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
  }
  const lines = text.trim().split("\n").map((l) => JSON.parse(l) as Line);
  t.same(lines.at(-1), { error: "server is shutting down" }, "the stream's last line says why it ended");
  t.ok(lines.slice(0, -1).every((l) => l.done === false && typeof l.response === "string"), "every line before it is a chunk");
  t.same(await d.exited, { code: 0, signal: null }, "the daemon exits 0");
  await until(() => !isAlive(runnerPid!));
  t.ok(d.lines.some((l) => l.msg === "shutdown timeout reached; stopping in-flight requests"), "the timeout is logged as such");
  t.ok(d.lines.some((l) => l.msg === "model unloaded" && l.model === "tiny:latest"), "the model was unloaded");
  t.same(problems(d), [], "nothing logged at error level, no runner output (a stack) on stderr");
  t.equal(d.stderr(), "", "nothing on stderr");
});

t.test("a request waiting for its model's load when SIGTERM arrives is served within the timeout", async (t) => {
  const models = await storeWithTiny(path.join(t.testdir(), "models"));
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: models, SERVICE_SHUTDOWN_TIMEOUT: "120s" });
  const { runnerPid, response } = await requestWithLoadFrozen(t, d);
  process.kill(d.child.pid!, "SIGTERM");
  await d.waitForLog((l) => l.msg === "shutting down");
  process.kill(runnerPid, "SIGCONT"); // the load goes on
  const res = await response;
  t.equal(res.status, 200, "served, not refused");
  const body = (await res.json()) as Line;
  t.match(body, { model: "tiny", done: true, eval_count: 5 }, "a complete answer");
  t.same(await d.exited, { code: 0, signal: null }, "then the daemon exits 0");
  await until(() => !isAlive(runnerPid));
  t.same(problems(d), []);
});

t.test("a request queued behind a busy slot when SIGTERM arrives is served within the timeout", async (t) => {
  const models = await storeWithTiny(path.join(t.testdir(), "models"));
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: models, SERVICE_SHUTDOWN_TIMEOUT: "120s", SERVICE_NUM_PARALLEL: "1" });
  // Long enough to be still running when the runner is stopped below, on a fast machine too.
  const first = await fetch(`${d.url}/api/generate`, {
    method: "POST",
    body: JSON.stringify({ model: "tiny", prompt: "Go", options: { num_predict: 1500, temperature: 0 } }),
  });
  const reader = first.body!.getReader();
  let text = Buffer.from((await reader.read()).value ?? []).toString();
  const runnerPid = (await runnerPidOf(d.child.pid!))!;
  process.kill(runnerPid, "SIGSTOP"); // the first request holds the only slot until SIGCONT
  t.teardown(() => void (isAlive(runnerPid) && process.kill(runnerPid, "SIGCONT")));
  const second = fetch(`${d.url}/api/generate`, {
    method: "POST",
    body: JSON.stringify({ model: "tiny", prompt: "Hello", stream: false, options: { num_predict: 5 } }),
  });
  await until(async () => ((await (await fetch(`${d.url}/api/ps`)).json()) as { models: { queued: number }[] }).models[0]?.queued === 1);
  process.kill(d.child.pid!, "SIGTERM");
  await d.waitForLog((l) => l.msg === "shutting down");
  process.kill(runnerPid, "SIGCONT");
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
  }
  t.match(JSON.parse(text.trim().split("\n").at(-1)!), { done: true, eval_count: 1500 }, "the running stream completes");
  const res = await second;
  t.equal(res.status, 200, "the queued request is served, not refused");
  t.match(await res.json(), { done: true, eval_count: 5 });
  t.same(await d.exited, { code: 0, signal: null });
  t.same(problems(d), []);
});

t.test("a request still waiting for its model's load when the timeout ends gets 503; the load is stopped", async (t) => {
  const models = await storeWithTiny(path.join(t.testdir(), "models"));
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: models, SERVICE_SHUTDOWN_TIMEOUT: "2s" });
  const { runnerPid, response } = await requestWithLoadFrozen(t, d);
  process.kill(d.child.pid!, "SIGTERM");
  const res = await response;
  t.equal(res.status, 503);
  t.equal(res.headers.get("retry-after"), "5");
  t.same(await res.json(), { error: "server is shutting down" });
  t.ok(d.lines.some((l) => l.msg === "shutdown timeout reached; stopping in-flight requests"), "refused at the timeout, not at the signal");
  t.same(await d.exited, { code: 0, signal: null }, "the daemon exits 0 (the frozen load does not hold it)");
  await until(() => !isAlive(runnerPid));
  t.pass("the loading runner was stopped");
  t.same(problems(d), []);
});

for (const signals of [["SIGINT"], ["SIGINT", "SIGINT"]] as const) {
  t.test(`stdout's reader went away (\`lmd serve 2>&1 | tee log\`, Ctrl+C): ${signals.join(" + ")} still ends the daemon at once`, async (t) => {
    // Ctrl+C reaches tee too, so the daemon logs its shutdown into a pipe nobody reads; with npm
    // start in between, npm forwards a second SIGINT.
    const port = await freePort();
    const child = spawn(process.execPath, [MAIN, "serve"], {
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "/root",
        SERVICE_HOST: `127.0.0.1:${port}`,
        SERVICE_MODELS: path.join(t.testdir(), "m"),
        SERVICE_THREADS: "1",
        SERVICE_GPU: "false",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on("exit", (code, signal) => resolve({ code, signal })),
    );
    t.teardown(() => void (child.exitCode === null && child.signalCode === null && child.kill("SIGKILL")));
    let stderr = "";
    child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
    // The only reader of stdout: gone after the first line.
    const reader = spawn("head", ["-n", "1"], { stdio: [child.stdout, "ignore", "ignore"] });
    child.stdout.destroy();
    await new Promise((resolve) => reader.on("exit", resolve));
    await until(async () => (await fetch(`http://127.0.0.1:${port}/api/version`).then((r) => r.status, () => 0)) === 200);
    await fetch(`http://127.0.0.1:${port}/api/tags`); // an access log line into the broken pipe
    for (const signal of signals) child.kill(signal);
    // A clean shutdown with nothing in flight takes well under a second; the bug held the process
    // for 10 s and more (pino's worker-thread transport waiting on its dead destination at exit).
    const result = await Promise.race([exited, new Promise<"still running">((r) => setTimeout(() => r("still running"), 6000))]);
    if (result === "still running") t.fail(`still running 6 s after ${signals.join(" + ")}: ${await procState(child.pid!)}`);
    else t.ok(result.code === 0 || (signals.length === 2 && result.code === 1), `exit status ${result.code} (0, or 1 for a second signal)`);
    t.equal(stderr, "", "nothing on stderr");
  });
}

/**
 * Sends a request for the unloaded `tiny` and freezes its runner (SIGSTOP) while it loads, so the
 * request waits for the load as long as the test wants. Resumed (SIGCONT) on teardown.
 */
async function requestWithLoadFrozen(t: Test, d: ForkedDaemon): Promise<{ runnerPid: number; response: Promise<Response> }> {
  const response = fetch(`${d.url}/api/generate`, {
    method: "POST",
    body: JSON.stringify({ model: "tiny", prompt: "Hello", stream: false, options: { num_predict: 5, temperature: 0 } }),
  });
  const runnerPid = await runnerPidOf(d.child.pid!);
  if (!runnerPid) throw new Error("no runner started");
  process.kill(runnerPid, "SIGSTOP");
  t.teardown(() => void (isAlive(runnerPid) && process.kill(runnerPid, "SIGCONT")));
  const ps = (await (await fetch(`${d.url}/api/ps`)).json()) as { models: unknown[] };
  t.same(ps.models, [], "the model is still loading");
  t.notOk(d.lines.some((l) => l.msg === "model loaded"), "no load has finished");
  return { runnerPid, response };
}

/** Log lines at error level or above, and runner output forwarded to the log (a stack trace). */
function problems(d: ForkedDaemon): Line[] {
  return d.lines.filter((l) => Number(l.level) >= 50 || String(l.msg).startsWith("runner output:") || "raw" in l);
}



async function until(check: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** State, CPU ticks and parent of a process that should have exited (for the failure message). */
async function procState(pid: number): Promise<string> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return `state ${f[0]}, ppid ${f[1]}, utime ${f[11]} ticks`;
}
