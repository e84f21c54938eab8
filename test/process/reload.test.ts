/**
 * Reloading the built daemon: SIGHUP always reloads and never stops it (with or without a policy
 * file); `lmd reload` (the unit's ExecReload=) gets the outcome through the control socket in
 * RUNTIME_DIRECTORY and fails on an invalid file while the old policy stays; SERVICE_LOG_LEVEL is
 * re-read; a policy file that is a FIFO or too large is refused without holding the daemon.
 */
import { spawn } from "node:child_process";
import { execFileSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { POLICY_MAX_BYTES } from "../../src/scheduler/policy.js";
import { forkDaemon, MAIN } from "../helpers/process.js";

/** Runs `lmd reload` with the environment given; resolves with its exit code and stderr. */
function lmdReload(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN, "reload"], { env: { PATH: process.env.PATH, ...env }, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("close", (code) => resolve({ code, stderr }));
  });
}

const ps = async (url: string) => ((await (await fetch(`${url}/api/ps`)).json()) as { models: { name: string; num_parallel: number }[] }).models;

t.test("SIGHUP without a policy file reloads; the daemon keeps serving", async (t) => {
  const dir = t.testdir();
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(dir, "models") });
  const from = d.lines.length;
  d.child.kill("SIGHUP");
  await d.waitForLog((l) => l.msg === "reloaded", { from });
  t.equal((await fetch(`${d.url}/api/version`)).status, 200, "still answering after SIGHUP");
  t.notOk(d.lines.some((l) => l.msg === "shutting down"), "SIGHUP did not start a shutdown");
  d.child.kill("SIGTERM");
  t.same(await d.exited, { code: 0, signal: null });
});

t.test("lmd reload: the outcome through the control socket; an invalid file fails, the old policy stays", async (t) => {
  const dir = t.testdir();
  const policy = path.join(dir, "models.yaml");
  await writeFile(policy, "models:\n  demo:\n    num_parallel: 2\n    preload: true\n");
  // A short path: a Unix socket's path has room for 107 bytes, less than a fixture directory's.
  const runtime = await mkdtemp(path.join(os.tmpdir(), "lmd-run-"));
  t.teardown(() => rm(runtime, { recursive: true, force: true }));
  const d = await forkDaemon(t, {
    SERVICE_HOST: "127.0.0.1:0",
    SERVICE_MODELS: path.join(dir, "models"),
    SERVICE_MODELS_CONFIG: policy,
    RUNTIME_DIRECTORY: runtime,
  });
  await d.waitForLog((l) => l.msg === "model preloaded");
  t.equal((await ps(d.url))[0]?.num_parallel, 2);

  await writeFile(policy, "models:\n  demo:\n    num_parallel: 3\n    preload: true\n");
  let from = d.lines.length;
  const ok = await lmdReload({ RUNTIME_DIRECTORY: runtime, SERVICE_LOG_LEVEL: "debug" });
  t.same(ok, { code: 0, stderr: "" }, "lmd reload exits 0 once the new policy is in force");
  t.ok(d.lines.slice(from).some((l) => l.msg === "policy file reloaded"), "the file was re-read before lmd reload returned");
  t.match(d.lines.slice(from).find((l) => l.msg === "log level changed"), { from: "info", to: "debug" }, "SERVICE_LOG_LEVEL is re-read");

  await writeFile(policy, "models:\n  demo:\n    num_parallel: many\n");
  from = d.lines.length;
  const bad = await lmdReload({ RUNTIME_DIRECTORY: runtime });
  t.equal(bad.code, 1, "an invalid file: lmd reload exits 1");
  t.match(bad.stderr, /^Error: reload failed: .*num_parallel must be integer\n$/, "naming the problem");
  t.match(d.lines.slice(from).find((l) => l.msg === "policy file not reloaded; the policy in force stays"), { level: 50 }, "logged at error");
  t.notOk(d.lines.slice(from).some((l) => l.msg === "reloaded"));

  const badLevel = await lmdReload({ RUNTIME_DIRECTORY: runtime, SERVICE_LOG_LEVEL: "loud" });
  t.equal(badLevel.code, 1, "an invalid log level fails the reload too");
  t.match(badLevel.stderr, /SERVICE_LOG_LEVEL 'loud'/);
  t.equal((await fetch(`${d.url}/api/version`)).status, 200, "the daemon keeps serving");
  d.child.kill("SIGTERM");
  t.same(await d.exited, { code: 0, signal: null });
});

t.test("a burst of SIGHUPs: reloads run one at a time, the waiting ones joined", async (t) => {
  const dir = t.testdir();
  const policy = path.join(dir, "models.yaml");
  await writeFile(policy, "models:\n  demo:\n    num_parallel: 2\n");
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(dir, "models"), SERVICE_MODELS_CONFIG: policy });
  const from = d.lines.length;
  for (let i = 0; i < 8; i++) d.child.kill("SIGHUP");
  await d.waitForLog((l) => l.msg === "reloaded", { from });
  await new Promise((r) => setTimeout(r, 2000)); // room for any further reads to show
  const reads = d.lines.slice(from).filter((l) => l.msg === "policy file reloaded").length;
  t.ok(reads >= 1 && reads <= 2, `8 SIGHUPs read the file ${reads} time(s): one running, one joined by the rest`);
  d.child.kill("SIGTERM");
  t.same(await d.exited, { code: 0, signal: null });
});

t.test("a policy file replaced by a FIFO or a huge file: refused, the daemon keeps answering", async (t) => {
  const dir = t.testdir();
  const policy = path.join(dir, "models.yaml");
  await writeFile(policy, "models:\n  demo:\n    num_parallel: 2\n");
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(dir, "models"), SERVICE_MODELS_CONFIG: policy });
  await rm(policy);
  execFileSync("mkfifo", [policy]);
  let from = d.lines.length;
  // More SIGHUPs than libuv has file threads (4): a read that blocked would hold each one.
  for (let i = 0; i < 6; i++) {
    d.child.kill("SIGHUP");
    await d.waitForLog((l) => l.msg === "policy file not reloaded; the policy in force stays", { from });
    from = d.lines.length;
  }
  const refused = d.lines.filter((l) => l.msg === "policy file not reloaded; the policy in force stays");
  t.match(refused.at(-1), { err: `${policy}: not a regular file` });
  // /api/tags reads the store through libuv's file threads: it answers only if none is held.
  const tags = await fetch(`${d.url}/api/tags`, { signal: AbortSignal.timeout(20_000) });
  t.equal(tags.status, 200, "file system requests still run");

  await rm(policy);
  await writeFile(policy, `models:\n${"  # padding\n".repeat(Math.ceil(POLICY_MAX_BYTES / 12) + 1)}  demo:\n    num_parallel: 3\n`);
  from = d.lines.length;
  d.child.kill("SIGHUP");
  const big = await d.waitForLog((l) => l.msg === "policy file not reloaded; the policy in force stays", { from });
  t.match(big.err, new RegExp(`more than the ${POLICY_MAX_BYTES} a policy file may have`));
  d.child.kill("SIGTERM");
  t.same(await d.exited, { code: 0, signal: null });
});
