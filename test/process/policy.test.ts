/**
 * The per-model policy file (SERVICE_MODELS_CONFIG) in the built daemon: two models with different
 * num_parallel, a pinned model preloaded at start and seen in /api/ps, SIGHUP re-reading the file
 * while a stream stays open, an invalid file kept out at start (exit 78) and on reload (logged).
 */
import { spawn } from "node:child_process";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { ModelStore } from "../../src/store/store.js";
import { assertError } from "../helpers/assert-error.js";
import { installTestModels } from "../helpers/models.js";
import { forkDaemon, MAIN } from "../helpers/process.js";

interface Ps {
  models: { name: string; expires_at: string; num_parallel: number; queued: number; policy?: Record<string, unknown> }[];
}

const ps = async (url: string) => ((await (await fetch(`${url}/api/ps`)).json()) as Ps).models;

t.test("policy file: preload, pin, per-model num_parallel, SIGHUP reload with an open stream", async (t) => {
  const dir = t.testdir();
  const store = new ModelStore(path.join(dir, "models"));
  await store.init();
  await installTestModels(store, [{ name: "alpha" }, { name: "beta" }]);
  const policyFile = path.join(dir, "models.yaml");
  await writeFile(
    policyFile,
    "models:\n  alpha:\n    num_parallel: 2\n    pinned: true\n    preload: true\n  beta:\n    num_parallel: 1\n    keep_alive: 1m\n    options:\n      num_predict: 3\n",
  );
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: store.root, SERVICE_MODELS_CONFIG: policyFile, SERVICE_MAX_LOADED_MODELS: "2" });

  await d.waitForLog((l) => l.msg === "model preloaded" && l.model === "alpha");
  let models = await ps(d.url);
  t.equal(models.length, 1, "the preloaded model is loaded before any request");
  t.equal(models[0]?.name, "alpha:latest");
  t.equal(models[0]?.num_parallel, 2, "alpha has 2 slots");
  t.equal(models[0]?.expires_at, "2318-01-01T00:00:00.000Z", "pinned: never expires");
  t.same(models[0]?.policy, { num_parallel: 2, pinned: true, preload: true, options: {} });
  await assertError(
    t,
    await fetch(`${d.url}/api/generate`, { method: "POST", body: JSON.stringify({ model: "alpha", prompt: "", keep_alive: 0 }) }),
    409,
    "model 'alpha' is pinned by the policy file (SERVICE_MODELS_CONFIG)",
  );

  // The policy's default options apply (num_predict 3), below the request's own.
  const short = (await (
    await fetch(`${d.url}/api/generate`, { method: "POST", body: JSON.stringify({ model: "beta", prompt: "Hi", stream: false }) })
  ).json()) as { eval_count: number };
  t.ok(short.eval_count <= 3, `beta's default num_predict 3 applies (${short.eval_count})`);
  models = await ps(d.url);
  t.equal(models.find((m) => m.name === "beta:latest")?.num_parallel, 1, "beta has 1 slot");

  // A stream on beta stays open across SIGHUP; the new file applies (beta's keep-alive).
  const res = await fetch(`${d.url}/api/generate`, {
    method: "POST",
    body: JSON.stringify({ model: "beta", prompt: "Tell a story", options: { temperature: 0, num_predict: 120 } }),
  });
  const reader = res.body!.getReader();
  await reader.read();
  const from = d.lines.length;
  await writeFile(policyFile, "models:\n  alpha:\n    num_parallel: 2\n    pinned: true\n  beta:\n    num_parallel: 1\n    keep_alive: 2h\n");
  d.child.kill("SIGHUP");
  await d.waitForLog((l) => l.msg === "policy file reloaded", { from });
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
  }
  const last = JSON.parse(text.trim().split("\n").pop() ?? "{}") as { done?: boolean; eval_count?: number };
  t.equal(last.done, true, "the stream open during SIGHUP completed");
  models = await ps(d.url);
  t.same(
    models.find((m) => m.name === "beta:latest")?.policy,
    { num_parallel: 1, keep_alive: 2 * 3600e9, pinned: false, preload: false, options: {} },
    "/api/ps shows the reloaded policy",
  );
  const expires = Date.parse(models.find((m) => m.name === "beta:latest")?.expires_at ?? "");
  t.ok(expires - Date.now() > 3600_000, "beta now stays loaded for its new keep-alive (2h)");

  // An invalid file on reload: logged, the policy in force kept, the daemon still serving.
  const before = d.lines.length;
  await writeFile(policyFile, "models:\n  beta:\n    num_parallel: lots\n");
  d.child.kill("SIGHUP");
  const logged = await d.waitForLog((l) => l.msg === "policy file not reloaded; the policy in force stays", { from: before });
  t.match(String(logged.err), /num_parallel must be integer/);
  t.equal((await ps(d.url)).find((m) => m.name === "alpha:latest")?.num_parallel, 2, "the old policy still applies");
  d.child.kill("SIGTERM");
  t.same(await d.exited, { code: 0, signal: null }, "SIGTERM still stops it");
});

t.test("an invalid policy file at start exits 78 naming the variable and the problem", async (t) => {
  const dir = t.testdir();
  const file = path.join(dir, "bad.yaml");
  await writeFile(file, "models:\n  ok:\n    pinned: maybe\n");
  const child = spawn(process.execPath, [MAIN, "serve"], {
    env: { PATH: process.env.PATH, SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(dir, "m"), SERVICE_MODELS_CONFIG: file },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  t.equal(await new Promise<number | null>((resolve) => child.on("close", resolve)), 78);
  t.equal(err, `lmd: invalid configuration: SERVICE_MODELS_CONFIG: ${file}: /models/ok/pinned must be boolean\n`);
});
