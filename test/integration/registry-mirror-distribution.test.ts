/**
 * A pull-through mirror as a team runs one: a second Debian `docker-registry` in proxy mode
 * (`proxy.remoteurl` = the private registry; both with TLS from the test's CA, which lmd trusts
 * through SERVICE_REGISTRY_CA). With SERVICE_REGISTRY_MIRRORS naming it, a pull of the origin's
 * model goes through the mirror: the origin's access log shows only the mirror's requests. With
 * the mirror stopped, the same pull succeeds from the origin.
 *
 * The origin has no htpasswd here: distribution 2.8 in proxy mode sends no credentials to an
 * upstream that asks for Basic authentication (it keys its upstream credentials by token realm
 * URLs), so it cannot mirror such a registry. registry-credentials.test covers htpasswd.
 */
import { readdirSync } from "node:fs";
import path from "node:path";
import t, { type Test } from "tap";
import { lmd } from "../cli/cli.js";
import { requireTool, tempDir } from "../gateway/helpers.js";
import { makeCa, startDistribution } from "../helpers/docker-registry.js";
import { forkDaemon } from "../helpers/process.js";

const LMD_AGENT = '"lmd (registry client)"';
const JSON_TYPE = { "content-type": "application/json" };

t.test("pulls go through the mirror, and to the origin when the mirror is down", async (t: Test) => {
  const binary = requireTool(t, "docker-registry", "docker-registry");
  if (!binary) return;
  const dir = tempDir(t);
  const tls = makeCa(dir);
  const origin = await startDistribution(t, binary, path.join(dir, "origin"), { tls });
  const mirror = await startDistribution(t, binary, path.join(dir, "mirror"), { tls, proxy: { remoteurl: origin.url } });
  const name = `${origin.host}/team/demo:v1`;

  // The model reaches the origin from one host (pushes never use a mirror).
  const a = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(dir, "a"), SERVICE_REGISTRY_CA: tls.ca });
  t.equal((await fetch(`${a.url}/api/copy`, { method: "POST", headers: JSON_TYPE, body: JSON.stringify({ source: "demo", destination: name }) })).status, 200);
  const pushed = await lmd(a.url, ["push", name], { timeoutMs: 120_000 });
  t.equal(pushed.code, 0, `push to the origin: ${pushed.stderr.slice(-300)}`);

  // Another host pulls with the mirror configured.
  const b = await forkDaemon(t, {
    SERVICE_HOST: "127.0.0.1:0",
    SERVICE_MODELS: path.join(dir, "b"),
    SERVICE_REGISTRY_CA: tls.ca,
    SERVICE_REGISTRY_MIRRORS: `${origin.host}=${mirror.url}`,
  });
  // Its demo model shares every blob with the pushed copy: deleted, so that the pull fetches them all.
  t.equal(
    (await fetch(`${b.url}/api/delete`, { method: "DELETE", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "demo" }) })).status,
    200,
  );
  t.same(readdirSync(path.join(dir, "b", "blobs")).filter((f) => f.startsWith("sha256-")), [], "host b starts with no blob");
  const originSeen = origin.accessLog().length;
  const pulled = await lmd(b.url, ["pull", name], { timeoutMs: 120_000 });
  t.equal(pulled.code, 0, `pull through the mirror: ${pulled.stderr.slice(-300)}`);
  const fromMirror = mirror.accessLog().filter((l) => l.endsWith(LMD_AGENT));
  t.ok(fromMirror.some((l) => /"GET \/v2\/team\/demo\/manifests\/v1 /.test(l)), "lmd asked the mirror for the manifest");
  t.ok(fromMirror.some((l) => /"GET \/v2\/team\/demo\/blobs\/sha256:[0-9a-f]{64} HTTP\/[\d.]+" 20[06] /.test(l)), "and fetched blobs from it");
  const atOrigin = origin.accessLog().slice(originSeen);
  t.ok(atOrigin.length > 0, "the mirror fetched from the origin");
  t.same(atOrigin.filter((l) => l.endsWith(LMD_AGENT)), [], "the origin saw no request from lmd: only the mirror's");
  const blobs = (store: string) => readdirSync(path.join(dir, store, "blobs")).filter((f) => f.startsWith("sha256-")).sort();
  const pushedBlobs = new Set(blobs("a"));
  t.ok(blobs("b").length > 0 && blobs("b").every((f) => pushedBlobs.has(f)), "the pulled blobs are the pushed ones (verified by digest)");

  // The mirror goes away; the pull of a model not yet on this host still succeeds, from the origin.
  t.equal((await fetch(`${b.url}/api/delete`, { method: "DELETE", headers: JSON_TYPE, body: JSON.stringify({ model: name }) })).status, 200);
  await mirror.stop();
  const mirrorSeen = mirror.accessLog().length;
  const originBefore = origin.accessLog().length;
  const again = await lmd(b.url, ["pull", name], { timeoutMs: 120_000 });
  t.equal(again.code, 0, `pull with the mirror stopped: ${again.stderr.slice(-300)}`);
  t.equal(mirror.accessLog().length, mirrorSeen, "the stopped mirror served nothing");
  t.ok(
    origin
      .accessLog()
      .slice(originBefore)
      .some((l) => /"GET \/v2\/team\/demo\/manifests\/v1 HTTP\/[\d.]+" 200 /.test(l) && l.endsWith(LMD_AGENT)),
    "lmd fetched the manifest from the origin itself",
  );
  t.ok(
    origin
      .accessLog()
      .slice(originBefore)
      .some((l) => /"GET \/v2\/team\/demo\/blobs\/sha256:[0-9a-f]{64} HTTP\/[\d.]+" 20[06] /.test(l) && l.endsWith(LMD_AGENT)),
    "and the blobs",
  );
  t.ok(
    b.lines.some((l) => l.msg === "registry mirror failed; asking the next source" && l.mirror === mirror.host),
    "the fallback is logged with the mirror's name",
  );
});
