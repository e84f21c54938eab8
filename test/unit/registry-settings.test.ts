/**
 * The registry settings' own rules: which credentials a Docker config.json gives for a host (and
 * when the file is refused), and the TLS failures' wording.
 */
import { chmodSync, writeFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { loadConfig } from "../../src/config.js";
import { authKeyHost, lookupCredentials } from "../../src/registry/credentials.js";
import { describeTls } from "../../src/registry/tls.js";

t.test("SERVICE_REGISTRY_AUTH and SERVICE_REGISTRY_CA", async (t) => {
  const c = loadConfig({ HOME: "/home/u" });
  t.equal(c.registry.authFile, "/home/u/.docker/config.json", "default: the user's docker login file");
  t.equal(c.registry.caFile, undefined);
  t.equal(loadConfig({ HOME: "/home/u", SERVICE_REGISTRY_CA: "~/ca.pem" }).registry.caFile, "/home/u/ca.pem");
});

t.test("credentials from config.json", async (t) => {
  const dir = t.testdir();
  const file = path.join(dir, "config.json");
  const write = (value: unknown, mode = 0o600) => {
    writeFileSync(file, JSON.stringify(value));
    chmodSync(file, mode);
  };
  t.equal(authKeyHost("https://Reg.Example.com:5000/v1/"), "reg.example.com:5000");
  write({ auths: { "https://reg.example.com:5000/v1/": { auth: Buffer.from("alice:pa:ss").toString("base64") }, "other.example": { username: "bob", password: "pw" } } });
  t.same((await lookupCredentials(file, "reg.example.com:5000")).credentials, { username: "alice", password: "pa:ss" }, "auth entry, URL key");
  t.same((await lookupCredentials(file, "Other.Example")).credentials, { username: "bob", password: "pw" }, "username/password entry");
  t.match((await lookupCredentials(file, "reg.example.com")).missing, `no credentials for reg.example.com in ${file}`, "the port is part of the host");
  write({ auths: {}, credsStore: "desktop" });
  t.match((await lookupCredentials(file, "reg.example.com")).missing, /credential helper/, "a credential store is named as the reason");
  t.match((await lookupCredentials(path.join(dir, "none.json"), "x")).missing, /no credentials file .*none\.json/, "a missing file: no credentials");
  write({ auths: { x: { auth: "eDp5" } } }, 0o644);
  await t.rejects(lookupCredentials(file, "x"), /readable by every user \(mode 644\): chmod 600/, "credentials in a world-readable file are refused");
  t.equal((await lookupCredentials(file, "y")).credentials, undefined, "a world-readable file without the host's credentials is no obstacle");
  writeFileSync(file, "{not json");
  chmodSync(file, 0o600);
  await t.rejects(lookupCredentials(file, "x"), /is not JSON in Docker's config.json format/);
});

t.test("TLS failures in words, naming the host", async (t) => {
  const e = (code: string, message = code) => Object.assign(new Error(message), { code });
  t.match(describeTls(e("UNABLE_TO_VERIFY_LEAF_SIGNATURE", "unable to verify the first certificate"), "r:5000"), /^the TLS certificate of registry r:5000 is not trusted \(unable to verify the first certificate\); .*SERVICE_REGISTRY_CA/);
  t.match(describeTls(e("SELF_SIGNED_CERT_IN_CHAIN"), "r"), /registry r is not trusted/);
  t.match(describeTls(e("CERT_HAS_EXPIRED"), "r"), "has expired");
  t.match(describeTls(e("ERR_TLS_CERT_ALTNAME_INVALID", "Hostname/IP does not match"), "r"), "is not valid for that name");
  t.equal(describeTls(e("ECONNREFUSED"), "r"), undefined);
});
