/**
 * Issue 14: shutdown at its edges, with the built daemon forked as systemd or a terminal runs it.
 *
 * - A stream still running when SERVICE_SHUTDOWN_TIMEOUT ends is stopped cleanly: its last line
 *   says the server is shutting down, the runner disposes its model and exits 0, nothing is
 *   logged as a crash.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
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

