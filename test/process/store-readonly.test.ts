/**
 * A store the daemon may read but not write: the daemon starts and serves what the store holds,
 * and every write (create, copy, delete, pull, a blob upload) answers 500 with the reason instead of
 * a bare "an internal error occurred". Two real refusals that root also meets: the store
 * bind-mounted read-only in a private mount namespace (what systemd's ProtectSystem=strict does to
 * a path outside ReadWritePaths=), and the daemon run as `nobody` over a store owned by root (an
 * Ollama store owned by another user). A refusal the up-front check cannot see (one directory deep
 * in the store) is answered the same way.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import path from "node:path";
import t, { type Test } from "tap";
import { assertError } from "../helpers/assert-error.js";
import { forkDaemon } from "../helpers/process.js";

/** A store with the demo model (written at first start) and a copy of it named `mine`. */
async function preparedStore(t: Test): Promise<string> {
  const store = path.join(t.testdir(), "models");
  mkdirSync(store);
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: store });
  const copied = await fetch(`${d.url}/api/copy`, { method: "POST", body: JSON.stringify({ source: "demo", destination: "mine" }) });
  t.equal(copied.status, 200, "the store is writable while it is prepared");
  d.child.kill("SIGTERM");
  await d.exited;
  return store;
}

/** Each write the API offers, against a store that refuses writes with `reason`. */
async function writesAreRefused(t: Test, url: string, reason: string): Promise<void> {
  const message = `model store is not writable: ${reason}`;
  const post = (p: string, body: unknown) => fetch(`${url}${p}`, { method: "POST", body: JSON.stringify(body) });
  const tags = (await (await fetch(`${url}/api/tags`)).json()) as { models: { name: string }[] };
  t.same(tags.models.map((m) => m.name).sort(), ["demo:latest", "mine:latest"], "reads work: the store's models are listed");
  t.equal((await post("/api/show", { model: "mine" })).status, 200, "reads work: show");
  await assertError(t, await post("/api/copy", { source: "demo", destination: "other" }), 500, message);
  await assertError(t, await post("/api/create", { model: "made", from: "demo", system: "terse", stream: false }), 500, message);
  await assertError(t, await post("/api/create", { model: "made", from: "demo", system: "terse" }), 500, message);
  await assertError(t, await fetch(`${url}/api/delete`, { method: "DELETE", body: JSON.stringify({ model: "mine" }) }), 500, message);
  await assertError(t, await fetch(`${url}/api/delete`, { method: "DELETE", body: JSON.stringify({ model: "nope" }) }), 404, "model 'nope' not found");
  await assertError(t, await post("/api/pull", { model: "127.0.0.1:9/library/x", insecure: true }), 500, message);
  const blob = `sha256:${"ab".repeat(32)}`;
  await assertError(t, await fetch(`${url}/api/blobs/${blob}`, { method: "POST", body: "hello" }), 500, message);
  const after = (await (await fetch(`${url}/api/tags`)).json()) as { models: { name: string }[] };
  t.equal(after.models.length, 2, "nothing was removed");
}

const NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"];
const canUnshare = spawnSync("unshare", ["-m", "sh", "-c", "mount --bind / /mnt"]).status === 0;
const canSetpriv = spawnSync(NOBODY[0]!, [...NOBODY.slice(1), "true"]).status === 0;
const NEEDS_MOUNT_NS = "needs root for a private mount namespace (unshare -m)";
const NEEDS_SETPRIV = "needs root to run the daemon as nobody (setpriv)";

/** A missing privilege skips the test only with LMD_SKIP_SYSTEM_TESTS=1; otherwise the test fails saying why. */
function skipUnless(available: boolean, reason: string): string | false {
  return !available && process.env.LMD_SKIP_SYSTEM_TESTS === "1" ? `${reason}; skipped because LMD_SKIP_SYSTEM_TESTS=1` : false;
}

const mountNs = { skip: skipUnless(canUnshare, NEEDS_MOUNT_NS) };
t.test("a read-only bind mount of the store (ProtectSystem=strict): writes answer 500 'read-only file system'", mountNs, async (t) => {
  if (!canUnshare) return t.fail(`${NEEDS_MOUNT_NS} (set LMD_SKIP_SYSTEM_TESTS=1 to skip)`);
  const store = await preparedStore(t);
  // The daemon alone sees the store read-only: a bind mount of it onto itself, remounted ro, in its own namespace.
  const wrap = ["unshare", "-m", "sh", "-c", 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"', store];
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: store }, { wrap });
  await writesAreRefused(t, d.url, "read-only file system");
});

const setpriv = { skip: skipUnless(canSetpriv, NEEDS_SETPRIV) };
t.test("a store owned by another user (the daemon runs as nobody): writes answer 500 'permission denied'", setpriv, async (t) => {
  if (!canSetpriv) return t.fail(`${NEEDS_SETPRIV} (set LMD_SKIP_SYSTEM_TESTS=1 to skip)`);
  const store = await preparedStore(t);
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: store, HOME: "/nonexistent" }, { wrap: NOBODY });
  await writesAreRefused(t, d.url, "permission denied");
});

t.test("a refusal deeper in the store, past the check of its top directories, answers the same", { skip: skipUnless(canSetpriv, NEEDS_SETPRIV) }, async (t) => {
  if (!canSetpriv) return t.fail(`${NEEDS_SETPRIV} (set LMD_SKIP_SYSTEM_TESTS=1 to skip)`);
  const store = await preparedStore(t);
  // The daemon's user owns the store, except the directory that holds the manifest of `mine`.
  const mine = path.join(store, "manifests", "registry.ollama.ai", "library", "mine");
  t.equal(spawnSync("chown", ["-R", "65534:65534", store]).status, 0);
  t.equal(spawnSync("chown", ["0:0", mine]).status, 0);
  const d = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: store, HOME: "/nonexistent" }, { wrap: NOBODY });
  const del = (model: string) => fetch(`${d.url}/api/delete`, { method: "DELETE", body: JSON.stringify({ model }) });
  await assertError(t, await del("mine"), 500, "model store is not writable: permission denied");
  const copied = await fetch(`${d.url}/api/copy`, { method: "POST", body: JSON.stringify({ source: "demo", destination: "other" }) });
  t.equal(copied.status, 200, "the rest of the store is writable");
  t.equal((await del("other")).status, 200);
});
