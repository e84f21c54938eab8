/**
 * SERVICE_REGISTRY_CA is trusted besides the default store, not instead of it: a registry whose
 * CA is in the store Node trusts anyway and another whose CA is only in SERVICE_REGISTRY_CA are
 * both reached over verified TLS. The first CA is put in that store the two ways an operator
 * would: the system's store (OpenSSL's, which Node uses with --use-openssl-ca; SSL_CERT_FILE
 * stands for /etc/ssl/certs here) and NODE_EXTRA_CA_CERTS. Without either, it is refused.
 */
import { mkdirSync, readFileSync } from "node:fs";
import https from "node:https";
import type { AddressInfo } from "node:net";
import path from "node:path";
import t, { type Test } from "tap";
import { tempDir } from "../gateway/helpers.js";
import { makeCa } from "../helpers/docker-registry.js";
import { forkDaemon } from "../helpers/process.js";

/** An https server on loopback answering every registry request 404 (a registry without the model). */
async function registry(t: Test, tls: { cert: string; key: string }): Promise<string> {
  const server = https.createServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) }, (_req, res) => {
    res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ errors: [{ code: "MANIFEST_UNKNOWN", message: "manifest unknown" }] }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

t.test("SERVICE_REGISTRY_CA adds to the default store", async (t) => {
  const dir = tempDir(t);
  mkdirSync(path.join(dir, "system"));
  mkdirSync(path.join(dir, "company"));
  const [system, company] = [makeCa(path.join(dir, "system")), makeCa(path.join(dir, "company"))];
  const [publicHost, privateHost] = [await registry(t, system), await registry(t, company)];
  const pull = async (url: string, host: string) => {
    const res = await fetch(`${url}/api/pull`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: `${host}/team/m:v1`, stream: false }),
    });
    return String(((await res.json()) as { error?: string }).error);
  };
  const both = await forkDaemon(t, {
    SERVICE_HOST: "127.0.0.1:0",
    SERVICE_MODELS: path.join(dir, "a"),
    NODE_EXTRA_CA_CERTS: system.ca,
    SERVICE_REGISTRY_CA: company.ca,
  });
  t.equal(await pull(both.url, publicHost), `model '${publicHost}/team/m:v1' not found in the registry`, "NODE_EXTRA_CA_CERTS's CA is still trusted");
  t.equal(await pull(both.url, privateHost), `model '${privateHost}/team/m:v1' not found in the registry`, "and SERVICE_REGISTRY_CA's");
  const systemStore = await forkDaemon(t, {
    SERVICE_HOST: "127.0.0.1:0",
    SERVICE_MODELS: path.join(dir, "c"),
    NODE_OPTIONS: "--use-openssl-ca",
    SSL_CERT_FILE: system.ca,
    SERVICE_REGISTRY_CA: company.ca,
  });
  t.equal(await pull(systemStore.url, publicHost), `model '${publicHost}/team/m:v1' not found in the registry`, "the system store's CA is still trusted");
  t.equal(await pull(systemStore.url, privateHost), `model '${privateHost}/team/m:v1' not found in the registry`, "beside SERVICE_REGISTRY_CA's");
  const companyOnly = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(dir, "b"), SERVICE_REGISTRY_CA: company.ca });
  t.match(
    await pull(companyOnly.url, publicHost),
    `the TLS certificate of registry ${publicHost} is not trusted`,
    "without either, the first is not trusted: the store trusted it",
  );
});
