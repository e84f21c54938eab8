/**
 * Clean failures at the edges — a port in use, an unusable model store, a CLI whose
 * reader goes away.
 */
import { spawn, spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { forkDaemon, MAIN } from "../helpers/process.js";

function serve(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [MAIN, "serve"], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  return new Promise((resolve) => child.on("exit", (code) => (clearTimeout(timer), resolve({ code, stderr }))));
}

t.test("a port in use: one human line on stderr, exit 1, nothing written to the store", async (t) => {
  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
  t.teardown(() => blocker.close());
  const port = (blocker.address() as { port: number }).port;
  const models = path.join(t.testdir(), "m");
  const r = await serve({ SERVICE_HOST: `127.0.0.1:${port}`, SERVICE_MODELS: models });
  t.equal(r.code, 1);
  t.equal(r.stderr, `lmd: cannot listen on 127.0.0.1:${port}: address already in use — is another server running? set SERVICE_HOST\n`);
  t.notOk(existsSync(path.join(models, "manifests", "registry.ollama.ai")), "the demo model is not written");
});

t.test("an unusable SERVICE_MODELS: one line naming the variable and the path, exit 78", async (t) => {
  const dir = t.testdir();
  writeFileSync(path.join(dir, "file"), "");
  const notDir = await serve({ SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(dir, "file", "models") });
  t.equal(notDir.code, 78);
  t.match(notDir.stderr, /^lmd: cannot use the model store SERVICE_MODELS=\S+file\/models: .*\(ENOTDIR\)/);
  t.equal(notDir.stderr.split("\n").length, 2, "one line");
  const ro = mkdtempSync(path.join(tmpdir(), "lmd-ro-"));
  if (spawnSync("mount", ["-t", "tmpfs", "-o", "ro", "tmpfs", ro]).status === 0) {
    t.teardown(() => void (spawnSync("umount", [ro]), rmSync(ro, { recursive: true, force: true })));
    const r = await serve({ SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(ro, "models") });
    t.equal(r.code, 78);
    t.match(r.stderr, /^lmd: cannot use the model store SERVICE_MODELS=\S+\/models: read-only file system \(EROFS\)\n$/);
  } else t.skip("EROFS: cannot mount a read-only tmpfs here (not root?)");
  if (spawnSync("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "true"]).status === 0) {
    const child = spawnSync("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, MAIN, "serve"], {
      env: { PATH: process.env.PATH ?? "", HOME: "/nonexistent", SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(dir, "denied") },
      encoding: "utf8",
      timeout: 20_000,
    });
    t.equal(child.status, 78);
    t.match(child.stderr, /^lmd: cannot use the model store SERVICE_MODELS=\S+denied: permission denied \(EACCES\)/);
  } else t.skip("EACCES: setpriv to nobody is not possible here");
});

t.test("`lmd run demo hi | head -c 1` exits quietly", async (t) => {
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(t.testdir(), "m") });
  const r = spawnSync("bash", ["-c", `set -o pipefail; "${process.execPath}" "${MAIN}" run demo "hello there" | head -c 1 >/dev/null`], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root", SERVICE_HOST: d.url }, encoding: "utf8", timeout: 60_000,
  });
  t.equal(r.stderr, "", "nothing on stderr");
  t.equal(r.status, 0, "exit 0");
});
