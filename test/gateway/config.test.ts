/**
 * The gateway's configuration rules (refusing unsafe setups with exit 78), its packaged env file,
 * and the key set and token bucket on their own.
 */
import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { ConfigError } from "../../src/config.js";
import { GATEWAY_VARIABLES, loadGatewayConfig } from "../../src/gateway/config.js";
import { generateKey, hashKey, KeySet, keyId } from "../../src/gateway/keys.js";
import { RateLimiter } from "../../src/gateway/rate-limit.js";
import { forkGateway, makeCert, tempDir } from "./helpers.js";

const KEY = "config-test-key-0123456789";

t.test("unsafe or incomplete configurations exit 78 naming the variable", async (t) => {
  const dir = tempDir(t);
  const cases: [string, Record<string, string>, RegExp][] = [
    ["no credentials", { GATEWAY_ALLOW_PLAINTEXT: "true" }, /GATEWAY_API_KEYS: no credentials configured/],
    ["no TLS off loopback", { GATEWAY_API_KEYS: KEY, GATEWAY_HOST: "0.0.0.0:0" }, /GATEWAY_TLS_CERT: a TLS certificate and key .* are required/],
    ["no TLS on loopback without asking", { GATEWAY_API_KEYS: KEY }, /GATEWAY_TLS_CERT: a TLS certificate and key/],
    ["plain HTTP off loopback", { GATEWAY_API_KEYS: KEY, GATEWAY_HOST: ":0", GATEWAY_ALLOW_PLAINTEXT: "true" }, /GATEWAY_ALLOW_PLAINTEXT: plain HTTP is refused on 'all interfaces'/],
    ["plain HTTP on a LAN address", { GATEWAY_API_KEYS: KEY, GATEWAY_HOST: "192.168.1.10:0", GATEWAY_ALLOW_PLAINTEXT: "true" }, /GATEWAY_ALLOW_PLAINTEXT: plain HTTP is refused on '192.168.1.10'/],
    ["certificate without key", { GATEWAY_API_KEYS: KEY, GATEWAY_TLS_CERT: "/nonexistent.crt" }, /GATEWAY_TLS_KEY: GATEWAY_TLS_CERT is set/],
    ["unreadable certificate", { GATEWAY_API_KEYS: KEY, GATEWAY_TLS_CERT: path.join(dir, "none.crt"), GATEWAY_TLS_KEY: path.join(dir, "none.key") }, /GATEWAY_TLS_CERT: cannot read '.*none\.crt': ENOENT/],
    ["short JWT secret", { GATEWAY_JWT_SECRET: "too-short", GATEWAY_ALLOW_PLAINTEXT: "true" }, /GATEWAY_JWT_SECRET: must NOT have fewer than 32 characters/],
    ["bad rate limit", { GATEWAY_API_KEYS: KEY, GATEWAY_ALLOW_PLAINTEXT: "true", GATEWAY_RATE_LIMIT: "lots" }, /GATEWAY_RATE_LIMIT: must be integer/],
    ["bad upstream", { GATEWAY_API_KEYS: KEY, GATEWAY_ALLOW_PLAINTEXT: "true", GATEWAY_UPSTREAM: "ftp://x" }, /GATEWAY_UPSTREAM: unsupported scheme 'ftp'/],
    ["short key", { GATEWAY_API_KEYS: "abc", GATEWAY_ALLOW_PLAINTEXT: "true" }, /GATEWAY_API_KEYS: GATEWAY_API_KEYS entry 1: a key must be at least 16 characters long/],
    ["missing keys file", { GATEWAY_KEYS_FILE: path.join(dir, "nokeys"), GATEWAY_ALLOW_PLAINTEXT: "true" }, /GATEWAY_KEYS_FILE: ENOENT/],
  ];
  await Promise.all(cases.map(async ([name, env, message]) => {
    const gw = await forkGateway(t, env, { waitListening: false });
    t.same(await gw.exited, { code: 78, signal: null }, `${name}: exit 78`);
    t.match(gw.output(), message, `${name}: message names the variable`);
    t.notOk(gw.output().includes("too-short"), `${name}: no value echoed`);
  }));
});

t.test("HTTPS on all interfaces and plain HTTP on loopback both start", async (t) => {
  const dir = tempDir(t);
  const { cert, key } = makeCert(dir, "ok");
  const tlsGw = await forkGateway(t, { GATEWAY_API_KEYS: KEY, GATEWAY_HOST: "0.0.0.0:0", GATEWAY_TLS_CERT: cert, GATEWAY_TLS_KEY: key });
  t.match(tlsGw.url, /^https:/);
  const plain = await forkGateway(t, { GATEWAY_API_KEYS: KEY, GATEWAY_HOST: "[::1]:0", GATEWAY_ALLOW_PLAINTEXT: "true" }, { waitListening: false });
  t.match(await plain.waitForLog((l) => l.msg === "lmd gateway listening"), { address: "::1", tls: false });
  const mismatched = await forkGateway(
    t,
    { GATEWAY_API_KEYS: KEY, GATEWAY_TLS_CERT: cert, GATEWAY_TLS_KEY: makeCert(dir, "other").key },
    { waitListening: false },
  );
  t.same(await mismatched.exited, { code: 78, signal: null }, "a key that does not match the certificate: exit 78");
  t.match(mismatched.output(), /GATEWAY_TLS_KEY: .* do not form a usable TLS identity/);
});

t.test("loadGatewayConfig: defaults and forms", async (t) => {
  const c = loadGatewayConfig({ GATEWAY_API_KEYS: ` ${KEY} , ,`, GATEWAY_HOST: "127.0.0.1", GATEWAY_ALLOW_PLAINTEXT: "true", GATEWAY_TLS_CERT: "" });
  t.same(c.listen, { host: "127.0.0.1", port: 11443 }, "default port 11443");
  t.equal(c.upstream, "http://127.0.0.1:11434");
  t.same(c.apiKeys, [KEY]);
  t.equal(c.rateLimit, 60);
  t.equal(c.tls, undefined);
  t.equal(c.shutdownTimeoutMs, 30_000);
  t.equal(loadGatewayConfig({ GATEWAY_API_KEYS: KEY, GATEWAY_ALLOW_PLAINTEXT: "true", GATEWAY_HOST: "localhost:1", GATEWAY_UPSTREAM: "10.0.0.5:11434/" }).upstream, "http://10.0.0.5:11434");
  t.same(
    loadGatewayConfig({ GATEWAY_API_KEYS: KEY, GATEWAY_TLS_CERT: "/c", GATEWAY_TLS_KEY: "/k" }).listen,
    { host: "", port: 11443 },
    "default: all interfaces",
  );
  t.throws(
    () => loadGatewayConfig({ GATEWAY_API_KEYS: KEY, GATEWAY_ALLOW_PLAINTEXT: "true", GATEWAY_HOST: "127.0.0.1:99999" }),
    new ConfigError("GATEWAY_HOST", "port '99999' must be an integer between 0 and 65535"),
  );
});

t.test("the packaged env file lists every GATEWAY_* variable, commented out, with its default", async (t) => {
  const text = readFileSync(new URL("../../packaging/lmd-gateway.env", import.meta.url), "utf8");
  const listed = [...text.matchAll(/^#(GATEWAY_[A-Z0-9_]+)=(.*)$/gm)].map((m) => [m[1], m[2]]);
  t.same(listed, Object.entries(GATEWAY_VARIABLES).map(([name, v]) => [name, v.default]));
  t.notOk(/^GATEWAY_/m.test(text), "nothing is set");
});

t.test("docs/deployment.md documents every GATEWAY_* variable with its default", async (t) => {
  const text = readFileSync(new URL("../../docs/deployment.md", import.meta.url), "utf8");
  const rows = [...text.matchAll(/^\| `(GATEWAY_[A-Z0-9_]+)` \| (`([^`]*)`|\(none\)) \|/gm)].map((m) => [m[1], m[3] ?? ""]);
  t.same(rows, Object.entries(GATEWAY_VARIABLES).map(([name, v]) => [name, v.default]));
});

t.test("KeySet: plain keys and sha256 lines, constant-time match, short ids", async (t) => {
  const dir = tempDir(t);
  const { key, hashLine } = generateKey();
  t.match(key, /^lmd_[A-Za-z0-9_-]{43}$/);
  const file = path.join(dir, "keys");
  await writeFile(file, `# comment\n\n${hashLine}   # alice\n  ${KEY}\n`);
  const set = new KeySet();
  await set.load(["env-key-abcdefghijklmnop"], file);
  t.equal(set.size, 3);
  t.equal(set.match(key), keyId(hashKey(key)));
  t.match(set.match(key), /^key:[0-9a-f]{12}$/);
  t.equal(hashLine.slice(7, 19), set.match(key)?.slice(4), "the id is the start of the hash an operator sees in the file");
  t.ok(set.match(KEY));
  t.ok(set.match("env-key-abcdefghijklmnop"));
  t.equal(set.match(`${KEY} `), undefined);
  t.equal(set.match(""), undefined);
  await writeFile(file, "sha256:1234\n");
  await t.rejects(set.load([], file), /keys:1: 'sha256:' must be followed by 64 hex digits/);
  t.equal(set.size, 3, "a failed load changes nothing");
});

t.test("RateLimiter: a token bucket per key", async (t) => {
  let now = 0;
  const limiter = new RateLimiter(6, () => now);
  for (let i = 0; i < 6; i++) t.same(limiter.take("a"), { allowed: true });
  t.same(limiter.take("a"), { allowed: false, retryAfterSeconds: 10 }, "one token per 10 s");
  t.same(limiter.take("b"), { allowed: true }, "keys are independent");
  now += 4_000;
  t.same(limiter.take("a"), { allowed: false, retryAfterSeconds: 6 });
  now += 6_000;
  t.same(limiter.take("a"), { allowed: true }, "refilled");
  now += 120_000;
  limiter.sweep();
  for (let i = 0; i < 6; i++) t.same(limiter.take("a"), { allowed: true }, "full again after a quiet while");
  t.same(new RateLimiter(0).take("x"), { allowed: true }, "0 = no limit");
});

t.test("the per-client network prefixes: /32 and /64 by default, settable, bounded", async (t) => {
  const base = { GATEWAY_API_KEYS: KEY, GATEWAY_ALLOW_PLAINTEXT: "true", GATEWAY_HOST: "127.0.0.1:0" };
  t.same(loadGatewayConfig(base).addressPrefix, { v4: 32, v6: 64 });
  t.same(loadGatewayConfig({ ...base, GATEWAY_IPV4_PREFIX: "24", GATEWAY_IPV6_PREFIX: "48" }).addressPrefix, { v4: 24, v6: 48 });
  t.throws(() => loadGatewayConfig({ ...base, GATEWAY_IPV4_PREFIX: "33" }));
  t.throws(() => loadGatewayConfig({ ...base, GATEWAY_IPV6_PREFIX: "129" }));
});
