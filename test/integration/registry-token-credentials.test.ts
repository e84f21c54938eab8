/**
 * The token flow with credentials (a registry whose token server wants a user and password, as
 * Harbor's or GitLab's do), against the loopback registry: the realm is asked with the credentials
 * of SERVICE_REGISTRY_AUTH as Basic authentication, and neither they nor the token reach the blob
 * host the registry redirects to. Wrong or missing credentials are clear errors, and nothing is
 * written to the store.
 */
import { chmodSync, readdirSync, writeFileSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { testGguf } from "../helpers/models.js";
import { startTestRegistry } from "../helpers/registry.js";

const MODEL = "application/vnd.ollama.image.model";

t.test("a token server that wants credentials", async (t) => {
  const reg = await startTestRegistry(t, { auth: true, redirect: true, tokenCredentials: "alice:s3cret" });
  reg.addModel("team/tiny", "v1", [{ mediaType: MODEL, data: await fs.readFile(await testGguf()) }]);
  const auth = path.join(t.testdir(), "config.json");
  const write = (value: unknown) => {
    writeFileSync(auth, JSON.stringify(value));
    chmodSync(auth, 0o600);
  };
  const d = await startDaemon(t, { models: [], env: { SERVICE_REGISTRY_AUTH: auth } });
  const pull = async () =>
    (await (await postJson(`${d.url}/api/pull`, { model: `${reg.host}/team/tiny:v1`, insecure: true, stream: false })).json()) as Record<string, unknown>;
  const blobs = () => readdirSync(path.join(d.config.models, "blobs")).filter((f) => !f.startsWith(".tmp"));

  t.same(
    await pull(),
    {
      error: `pull model manifest: registry ${reg.host} requires authentication: no credentials file ${auth} (SERVICE_REGISTRY_AUTH): invalid username or password (status 401)`,
    },
    "no file: said so",
  );
  write({ auths: { [reg.host]: { username: "alice", password: "wrong" } } });
  t.same(
    await pull(),
    { error: `pull model manifest: registry ${reg.host} refused the credentials for it in ${auth}: invalid username or password (status 401)` },
    "wrong password: the token server's 401, in words",
  );
  t.same(blobs(), [], "nothing written to the store");

  write({ auths: { [`http://${reg.host}/`]: { auth: Buffer.from("alice:s3cret").toString("base64") } } });
  const before = reg.stats.tokenRequests;
  t.same(await pull(), { status: "success" });
  t.ok(reg.stats.tokenRequests > before, "a token was fetched with the credentials");
  const toBlobHost = reg.stats.blobRequests.filter((r) => r.server === "blobhost");
  t.ok(toBlobHost.length > 0, "blobs came from the blob host (a redirect)");
  t.same(toBlobHost.map((r) => r.authorization), toBlobHost.map(() => undefined), "no Authorization went to the blob host");
  t.ok(
    reg.stats.blobRequests.filter((r) => r.server === "registry").every((r) => r.authorization?.startsWith("Bearer ")),
    "the registry got the token, never the password",
  );
});

t.test("a 401 without a challenge", async (t) => {
  const reg = await startTestRegistry(t);
  reg.addModel("team/tiny", "v1", [{ mediaType: MODEL, data: Buffer.from("not used") }]);
  const d = await startDaemon(t, { models: [] });
  const pull = async () =>
    (await (await postJson(`${d.url}/api/pull`, { model: `${reg.host}/team/tiny:v1`, insecure: true, stream: false })).json()) as Record<string, unknown>;
  reg.faults.failStatus = { path: /manifests/, status: 401 };
  t.same(await pull(), { error: `pull model manifest: registry ${reg.host} requires authentication and names no scheme (no WWW-Authenticate)` });
});
