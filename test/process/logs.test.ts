/**
 * The daemon's log on stdout is JSON for a pipe or a file, and readable lines
 * when stdout is a terminal (a real pty, driven with tmux), one line per record.
 */
import path from "node:path";
import t from "tap";
import { ModelStore } from "../../src/store/store.js";
import { installTestModels } from "../helpers/models.js";
import { forkDaemon } from "../helpers/process.js";
import { terminal, terminalSkip } from "../cli/cli.js";

async function storeWithTiny(dir: string): Promise<string> {
  const store = new ModelStore(dir);
  await store.init();
  await installTestModels(store, [{ name: "tiny" }]);
  return dir;
}

t.test("stdout a terminal: readable lines, not JSON; Ctrl+C stops the daemon", { skip: terminalSkip }, async (t) => {
  const models = await storeWithTiny(path.join(t.testdir(), "models"));
  const term = await terminal(t, "127.0.0.1:0", ["serve"], { env: { SERVICE_MODELS: models, SERVICE_THREADS: "1", SERVICE_GPU: "false" } });
  const started = await term.waitFor(/lmd listening/, 60_000);
  t.match(started, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: lmd listening \{.*"port":\d+.*\}$/m, "time, level, message and its fields on one line");
  t.notMatch(started, /"level":|"msg":/, "no JSON");
  await term.keys(["C-c"]);
  const stopped = await term.waitFor(/all models unloaded; exiting/, 60_000);
  t.match(stopped, /^(\^C)?\[[\d:.]+\] INFO: shutting down \{"signal":"SIGINT"\}$/m, "the terminal echoes ^C, then the line");
  for (let i = 0; i < 100 && (await term.exitStatus()) === undefined; i++) await new Promise((r) => setTimeout(r, 100));
  t.equal(await term.exitStatus(), 0, "exit status 0");
});

t.test("stdout a pipe: one JSON object per line", async (t) => {
  const models = await storeWithTiny(path.join(t.testdir(), "models"));
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: models });
  await fetch(`${d.url}/api/tags`);
  await d.waitForLog((l) => l.msg === "request");
  d.child.kill("SIGTERM");
  t.same(await d.exited, { code: 0, signal: null });
  t.ok(d.lines.length >= 4, `${d.lines.length} lines`);
  for (const line of d.lines) t.match(line, { level: Number, time: String, pid: d.child.pid, msg: String }, `JSON: ${JSON.stringify(line).slice(0, 80)}`);
  t.ok(d.lines.some((l) => l.msg === "all models unloaded; exiting"), "the last line is written before the exit");
});
