/**
 * A private registry as a team runs one: Debian's `docker-registry` with TLS (a CA and a
 * certificate made here with openssl) and htpasswd Basic authentication. `lmd push` and `lmd pull`
 * with credentials from a Docker config.json and the CA in SERVICE_REGISTRY_CA succeed; wrong
 * credentials are a clear error derived from the 401 with nothing written to the store; without
 * the CA the error names the host and the TLS failure; no credential appears in any log line.
 */
import { chmodSync, readdirSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import t, { type Test } from "tap";
import { lmd } from "../cli/cli.js";
import { requireTool, tempDir } from "../gateway/helpers.js";
import { makeCa, makeHtpasswd, startDistribution } from "../helpers/docker-registry.js";
import { forkDaemon, type ForkedDaemon } from "../helpers/process.js";

const USER = "fleet-user";
const PASSWORD = `pw-${process.pid}-Zq8x`;

/** Every file under `dir`, with its size (what the store holds). */
function listing(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(`${path.relative(dir, p)} ${statSync(p).size}`);
    }
  };
  walk(dir);
  return out.sort();
}

function writeAuth(file: string, host: string, user: string, password: string): void {
  writeFileSync(file, JSON.stringify({ auths: { [host]: { auth: Buffer.from(`${user}:${password}`).toString("base64") } } }));
  chmodSync(file, 0o600);
}

async function pullJson(d: ForkedDaemon, model: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${d.url}/api/pull`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, stream: false }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

t.test("push and pull through a TLS registry with htpasswd, credentials from config.json", async (t: Test) => {
  const binary = requireTool(t, "docker-registry", "docker-registry");
  if (!binary || !requireTool(t, "htpasswd", "apache2-utils")) return;
  const dir = tempDir(t);
  const tls = makeCa(dir);
  makeHtpasswd(path.join(dir, "htpasswd"), USER, PASSWORD);
  const registry = await startDistribution(t, binary, path.join(dir, "registry"), { tls, htpasswd: path.join(dir, "htpasswd") });
  const auth = path.join(dir, "config.json");
  writeAuth(auth, registry.host, USER, PASSWORD);
  const secrets = [PASSWORD, Buffer.from(`${USER}:${PASSWORD}`).toString("base64")];

  const env = (store: string, extra: Record<string, string> = {}) => ({
    SERVICE_HOST: "127.0.0.1:0",
    SERVICE_MODELS: path.join(dir, store),
    SERVICE_REGISTRY_AUTH: auth,
    SERVICE_REGISTRY_CA: tls.ca,
    SERVICE_LOG_LEVEL: "debug",
    ...extra,
  });
  const a = await forkDaemon(t, env("a"));
  const name = `${registry.host}/team/demo:v1`;
  t.equal(
    (
      await fetch(`${a.url}/api/copy`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ source: "demo", destination: name }),
      })
    ).status,
    200,
  );

  const pushed = await lmd(a.url, ["push", name], { timeoutMs: 120_000 });
  t.equal(pushed.code, 0, `lmd push succeeds: ${pushed.stderr.slice(-400)}`);
  t.ok(registry.accessLog().some((l) => /"PUT \/v2\/team\/demo\/manifests\/v1 HTTP\/[\d.]+" 201 /.test(l)), "the registry stored the manifest");

  // A second host: wrong credentials first (the file is read at each pull: no restart needed).
  const b = await forkDaemon(t, env("b"));
  // Its demo model shares every blob with the pushed copy: deleted, so that the pull fetches them all.
  t.equal(
    (await fetch(`${b.url}/api/delete`, { method: "DELETE", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "demo" }) })).status,
    200,
  );
  t.same(readdirSync(path.join(dir, "b", "blobs")).filter((f) => f.startsWith("sha256-")), [], "host b starts with no blob");
  writeAuth(auth, registry.host, USER, "not-the-password");
  const storeB = path.join(dir, "b");
  const before = listing(storeB);
  const refused = await pullJson(b, name);
  t.equal(refused.status, 500);
  t.match(
    String(refused.body.error),
    new RegExp(`^pull model manifest: registry ${registry.host} refused the credentials for it in ${auth}: .*\\(status 401\\)$`),
    `a clear 401-derived error: ${String(refused.body.error)}`,
  );
  t.same(listing(storeB), before, "nothing was written to the store");
  const cli = await lmd(b.url, ["pull", name]);
  t.not(cli.code, 0, "lmd pull with wrong credentials fails");
  t.match(cli.stderr, /refused the credentials/, "and says why");

  writeAuth(auth, "elsewhere.example:5000", USER, PASSWORD);
  const none = await pullJson(b, name);
  t.match(
    String(none.body.error),
    `registry ${registry.host} requires authentication: no credentials for ${registry.host} in ${auth}`,
    "no entry for the host: said so",
  );

  writeAuth(auth, registry.host, USER, PASSWORD);
  const pulled = await lmd(b.url, ["pull", name], { timeoutMs: 120_000 });
  t.equal(pulled.code, 0, `lmd pull succeeds: ${pulled.stderr.slice(-400)}`);
  const blobsOf = (store: string) => listing(path.join(dir, store, "blobs")).filter((l) => l.startsWith("sha256-"));
  const pushedBlobs = new Set(blobsOf("a"));
  t.ok(blobsOf("b").length > 0 && blobsOf("b").every((l) => pushedBlobs.has(l)), "the pulled blobs are the pushed ones");
  const gen = await fetch(`${b.url}/api/generate`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: name, prompt: "hi", stream: false, options: { num_predict: 2 } }),
  });
  t.equal(gen.status, 200, "the pulled model runs");
  await gen.text();

  // A third host without the CA: the TLS failure, naming the host.
  const c = await forkDaemon(t, env("c", { SERVICE_REGISTRY_CA: "" }));
  const untrusted = await pullJson(c, name);
  t.equal(untrusted.status, 500);
  t.match(
    String(untrusted.body.error),
    `pull model manifest: the TLS certificate of registry ${registry.host} is not trusted`,
    `a TLS error naming the host: ${String(untrusted.body.error)}`,
  );
  t.match(String(untrusted.body.error), /SERVICE_REGISTRY_CA/, "and what to set");
  t.equal(
    (
      await fetch(`${c.url}/api/copy`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ source: "demo", destination: name }),
      })
    ).status,
    200,
  );
  const pushUntrusted = await lmd(c.url, ["push", name]);
  t.not(pushUntrusted.code, 0, "lmd push without the CA fails");
  t.match(pushUntrusted.stderr, `the TLS certificate of registry ${registry.host} is not trusted`, "with the TLS error");

  for (const d of [a, b, c]) {
    for (const secret of secrets) t.notOk(d.output().includes(secret), "no credential in the daemon's log");
    t.notOk(/Basic [A-Za-z0-9+/=]{8,}/.test(d.output()), "no Authorization header in the daemon's log");
  }
  for (const r of [pushed, cli, pulled, pushUntrusted])
    for (const secret of secrets) t.notOk(`${r.stdout}${r.stderr}`.includes(secret), "no credential in the CLI's output");
});
