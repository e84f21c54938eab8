/**
 * Disk full: the store lives on a 2 MiB tmpfs this test mounts (CI runs as root). A blob upload
 * and a pull that do not fit answer 507 `no space left on device` and leave no partial file.
 */
import t, { type Test } from "tap";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { sha256, startTestRegistry } from "../helpers/registry.js";

async function smallStore(t: Test): Promise<string | undefined> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "lmd-full-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", dir], { stdio: "pipe" });
  } catch (err) {
    await fs.rmdir(dir);
    t.skip(`cannot mount a tmpfs (needs root): ${String((err as Error).message).split("\n")[0]}`);
    return undefined;
  }
  t.teardown(async () => {
    execFileSync("umount", ["-l", dir]);
    await fs.rmdir(dir);
  });
  return dir;
}

const leftovers = (root: string) => readdirSync(path.join(root, "blobs"));

t.test("a blob upload that fills the disk → 507, no partial file", async (t) => {
  const root = await smallStore(t);
  if (!root) return;
  const { url } = await startDaemon(t, { env: { SERVICE_MODELS: root }, models: [] });
  const data = randomBytes(3 * 1024 * 1024);
  const res = await fetch(`${url}/api/blobs/${sha256(data)}`, { method: "POST", body: data });
  await assertError(t, res, 507, "no space left on device");
  t.same(leftovers(root), [], "the temporary file is removed");
  const small = Buffer.from("fits");
  t.equal((await fetch(`${url}/api/blobs/${sha256(small)}`, { method: "POST", body: small })).status, 201, "the store still works");
});

t.test("a pull that fills the disk → 507, no partial file", async (t) => {
  const root = await smallStore(t);
  if (!root) return;
  const reg = await startTestRegistry(t);
  reg.addModel("library/big", "latest", [{ mediaType: "application/vnd.ollama.image.model", data: randomBytes(3 * 1024 * 1024) }]);
  const { url } = await startDaemon(t, { env: { SERVICE_MODELS: root }, models: [] });
  const res = await postJson(`${url}/api/pull`, { model: `${reg.host}/library/big`, insecure: true, stream: false });
  await assertError(t, res, 507, "no space left on device");
  t.same(leftovers(root), [], "partial download and its progress file are removed");
  t.same(readdirSync(path.join(root, "manifests")), [], "no manifest written");
});
