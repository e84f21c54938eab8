/**
 * The registry settings' own rules: SERVICE_REGISTRY_MIRRORS's grammar, which credentials a
 * Docker config.json gives for a host (and when the file is refused), and the TLS failures'
 * wording.
 */
import { chmodSync, writeFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { ConfigError, loadConfig, parseMirrors } from "../../src/config.js";
import { authKeyHost, lookupCredentials } from "../../src/registry/credentials.js";
import { pullSources } from "../../src/registry/mirror.js";
import { registryRef } from "../../src/registry/reference.js";
import { describeTls } from "../../src/registry/tls.js";

t.test("SERVICE_REGISTRY_MIRRORS: host=origin pairs, in order, several per host", async (t) => {
  const m = parseMirrors("registry.ollama.ai=https://mirror.lan:5000, Registry.Ollama.ai=http://10.0.0.5:5000/ ,hf.co=https://m2", "V");
  t.same([...m], [["registry.ollama.ai", ["https://mirror.lan:5000", "http://10.0.0.5:5000"]], ["hf.co", ["https://m2"]]]);
  t.same([...parseMirrors("", "V")], []);
  for (const bad of ["mirror.lan:5000", "=https://m", "a b=https://m", "r=ftp://m", "r=https://m/path", "r=https://u:p@m", "r=not a url"]) {
    t.throws(() => parseMirrors(bad, "SERVICE_REGISTRY_MIRRORS"), ConfigError, `'${bad}' is refused`);
  }
  t.throws(() => loadConfig({ SERVICE_REGISTRY_MIRRORS: "r=https://m/v2" }), /invalid configuration: SERVICE_REGISTRY_MIRRORS: .*origin only/);
  const c = loadConfig({ HOME: "/home/u" });
  t.equal(c.registry.authFile, "/home/u/.docker/config.json", "default: the user's docker login file");
  t.equal(c.registry.caFile, undefined);
  t.equal(loadConfig({ HOME: "/home/u", SERVICE_REGISTRY_CA: "~/ca.pem" }).registry.caFile, "/home/u/ca.pem");
});

t.test("pull sources: the host's mirrors, then the registry", async (t) => {
  const mirrors = parseMirrors("registry.ollama.ai=https://m1,registry.ollama.ai=https://m2,other:5000=https://m3", "V");
  t.same(pullSources(registryRef("llama3"), mirrors).map((r) => r.origin), ["https://m1", "https://m2", "https://registry.ollama.ai"]);
  t.same(pullSources(registryRef("other:5000/a/b:c", true), mirrors).map((r) => r.origin), ["https://m3", "http://other:5000"]);
  t.same(pullSources(registryRef("hf.co/u/r:q"), mirrors).map((r) => r.origin), ["https://hf.co"], "no mirror: the registry only");
  t.equal(pullSources(registryRef("llama3"), mirrors)[0]!.repository, "library/llama3", "same repository and tag at the mirror");
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
  t.match(
    describeTls(e("UNABLE_TO_VERIFY_LEAF_SIGNATURE", "unable to verify the first certificate"), "r:5000"),
    /^the TLS certificate of registry r:5000 is not trusted \(unable to verify the first certificate\); .*SERVICE_REGISTRY_CA/,
  );
  t.match(describeTls(e("SELF_SIGNED_CERT_IN_CHAIN"), "r"), /registry r is not trusted/);
  t.match(describeTls(e("CERT_HAS_EXPIRED"), "r"), "has expired");
  t.match(describeTls(e("ERR_TLS_CERT_ALTNAME_INVALID", "Hostname/IP does not match"), "r"), "is not valid for that name");
  t.equal(describeTls(e("ECONNREFUSED"), "r"), undefined);
});
