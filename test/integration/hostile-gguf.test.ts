/**
 * Crafted GGUF files through the API: each is refused by `/api/create` with 400, and a
 * store that already holds one (copied in from elsewhere) answers 500 `failed to load model
 * '<name>': corrupt model file: <detail>` quickly, without forking a runner for it. A file that is
 * structurally sound but that llama.cpp cannot load does reach a runner, and that failure stays in
 * the runner: the daemon and its other models carry on, and no child process is left behind.
 */
import t from "tap";
import { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { installGguf } from "../../src/store/install.js";
import { assertError } from "../helpers/assert-error.js";
import { craftedCorpus, validButUnloadable } from "../helpers/crafted-gguf.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

const sha = (b: Buffer) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

// Counts every child process this test process starts (fork and spawn both go through it).
let spawned = 0;
const realSpawn = ChildProcess.prototype.spawn;
ChildProcess.prototype.spawn = function (this: ChildProcess, ...args: Parameters<ChildProcess["spawn"]>) {
  spawned++;
  return realSpawn.apply(this, args);
};

/** Child processes of this test process still alive (runners). */
function liveChildren(): number[] {
  const tasks = readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, "utf8");
  return tasks.trim() === "" ? [] : tasks.trim().split(/\s+/).map(Number);
}

t.test("/api/create refuses every crafted file with 400 and keeps no model", async (t) => {
  const { url, app } = await startDaemon(t);
  for (const [i, c] of craftedCorpus().entries()) {
    t.equal((await fetch(`${url}/api/blobs/${sha(c.data)}`, { method: "POST", body: c.data })).status, 201, `${c.name}: uploaded`);
    const res = await postJson(`${url}/api/create`, { model: `crafted-${i}`, files: { "m.gguf": sha(c.data) }, stream: false });
    const message = await assertError(t, res, 400, /^invalid GGUF file 'm\.gguf': /);
    t.match(message.replace(/^invalid GGUF file 'm\.gguf': /, ""), c.message, `${c.name}: ${message}`);
    t.equal(await app.services.store.findModel(`crafted-${i}`), undefined, `${c.name}: no model created`);
  }
  const tags = (await (await fetch(`${url}/api/tags`)).json()) as { models: Array<{ name: string }> };
  t.same(tags.models.map((m) => m.name), ["tiny:latest"]);
});

t.test("a crafted file already in the store fails to load with 500, fast, without a runner", async (t) => {
  const { url, app } = await startDaemon(t);
  const dir = path.join(app.services.config.models, "incoming"); // startDaemon owns t.testdir()
  await fs.mkdir(dir);
  const corpus = craftedCorpus();
  for (const [i, c] of corpus.entries()) {
    const file = path.join(dir, `${i}.gguf`);
    await fs.writeFile(file, c.data);
    await installGguf(app.services.store, `bad-${i}`, file);
  }
  const before = spawned;
  for (const [i, c] of corpus.entries()) {
    const started = Date.now();
    const res = await postJson(`${url}/api/generate`, { model: `bad-${i}`, prompt: "hi", stream: false });
    const prefix = `failed to load model 'bad-${i}:latest': corrupt model file: `;
    const message = await assertError(t, res, 500);
    t.ok(message.startsWith(prefix), `${c.name}: ${message}`);
    t.match(message.slice(prefix.length), c.message, `${c.name}: the validator's reason`);
    t.ok(Date.now() - started < 2000, `${c.name}: refused in ${Date.now() - started} ms`);
  }
  t.equal(spawned - before, 0, "no runner process was started for any of them");
  t.same(app.services.scheduler.list(), [], "nothing loaded");
  const ok = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 1 } });
  t.equal(ok.status, 200, "the good model is served");
});

t.test("a sound file that llama.cpp refuses: the failure stays in its runner", async (t) => {
  const { url, app } = await startDaemon(t, { env: { SERVICE_MAX_LOADED_MODELS: "2" } });
  const file = path.join(app.services.config.models, "husk.gguf");
  await fs.writeFile(file, validButUnloadable());
  await installGguf(app.services.store, "husk", file);
  const warm = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 1 } });
  t.equal(warm.status, 200);
  const tinyPid = app.services.scheduler.list()[0]?.pid;
  const before = spawned;
  const res = await postJson(`${url}/api/generate`, { model: "husk", prompt: "hi", stream: false });
  await assertError(t, res, 500, /^failed to load model 'husk:latest': /);
  t.equal(spawned - before, 1, "this one did reach a runner");
  await new Promise((r) => setTimeout(r, 200));
  t.same(liveChildren(), [tinyPid], "its runner is gone; only the good model's runner is alive");
  const again = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 1 } });
  t.equal(again.status, 200, "the other model is unaffected");
  t.equal(app.services.scheduler.list()[0]?.pid, tinyPid, "in the same runner");
  t.equal((await fetch(`${url}/api/version`)).status, 200);
});
