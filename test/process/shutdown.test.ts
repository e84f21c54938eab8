/**
 * Issue 14: shutdown at its edges, with the built daemon forked as systemd or a terminal runs it.
 *
 * - A stream still running when SERVICE_SHUTDOWN_TIMEOUT ends is stopped cleanly: its last line
 *   says the server is shutting down, the runner disposes its model and exits 0, nothing is
 *   logged as a crash.
 * - A request received before the signal but still queued or waiting for its model's load is
 *   served if it can be within the timeout, else it gets 503 `server is shutting down`.
 *
 * A slow model load is a runner stopped with SIGSTOP while it loads: the real runner, frozen.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import t, { type Test } from "tap";
import { ModelStore } from "../../src/store/store.js";
import { installTestModels } from "../helpers/models.js";
import { forkDaemon, type ForkedDaemon } from "../helpers/process.js";

async function storeWithTiny(dir: string): Promise<string> {
  const store = new ModelStore(dir);
  await store.init();
  await installTestModels(store, [{ name: "tiny" }]);
  return dir;
}

type Line = Record<string, unknown>;

t.test("a stream still running when the shutdown timeout ends: a clean error line, the runner exits 0", async (t) => {
  const models = await storeWithTiny(path.join(t.testdir(), "models"));
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: models, SERVICE_SHUTDOWN_TIMEOUT: "1s" });
  const res = await fetch(`${d.url}/api/generate`, { method: "POST", body: JSON.stringify({ model: "tiny", prompt: "Go", options: { num_predict: 1_000_000, temperature: 0 } }) });
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
  const first = await fetch(`${d.url}/api/generate`, { method: "POST", body: JSON.stringify({ model: "tiny", prompt: "Go", options: { num_predict: 40, temperature: 0 } }) });
  const reader = first.body!.getReader();
  let text = Buffer.from((await reader.read()).value ?? []).toString();
  const runnerPid = (await runnerPidOf(d.child.pid!))!;
  process.kill(runnerPid, "SIGSTOP"); // the first request holds the only slot until SIGCONT
  t.teardown(() => void (isAlive(runnerPid) && process.kill(runnerPid, "SIGCONT")));
  const second = fetch(`${d.url}/api/generate`, { method: "POST", body: JSON.stringify({ model: "tiny", prompt: "Hello", stream: false, options: { num_predict: 5 } }) });
  await until(async () => ((await (await fetch(`${d.url}/api/ps`)).json()) as { models: { queued: number }[] }).models[0]?.queued === 1);
  process.kill(d.child.pid!, "SIGTERM");
  await d.waitForLog((l) => l.msg === "shutting down");
  process.kill(runnerPid, "SIGCONT");
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
  }
  t.match(JSON.parse(text.trim().split("\n").at(-1)!), { done: true, eval_count: 40 }, "the running stream completes");
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

/**
 * Sends a request for the unloaded `tiny` and freezes its runner (SIGSTOP) while it loads, so the
 * request waits for the load as long as the test wants. Resumed (SIGCONT) on teardown.
 */
async function requestWithLoadFrozen(t: Test, d: ForkedDaemon): Promise<{ runnerPid: number; response: Promise<Response> }> {
  const response = fetch(`${d.url}/api/generate`, { method: "POST", body: JSON.stringify({ model: "tiny", prompt: "Hello", stream: false, options: { num_predict: 5, temperature: 0 } }) });
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

async function runnerPidOf(parent: number): Promise<number | undefined> {
  for (let i = 0; i < 300; i++) {
    const children = await readFile(`/proc/${parent}/task/${parent}/children`, "utf8").catch(() => "");
    const pid = children.trim().split(/\s+/).filter(Boolean).map(Number)[0];
    if (pid) return pid;
    await new Promise((r) => setTimeout(r, 20));
  }
  return undefined;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 50));
  }
}

