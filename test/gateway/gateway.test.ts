/**
 * `lmd gateway` (the built process) in front of a real daemon with the tiny model: API keys, bearer
 * JWTs (HS256 and RS256 from a JWKS file), the rate limit, streaming, the headers it forwards, and
 * that no credential ever reaches its log.
 */
import http from "node:http";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import t, { type Test } from "tap";
import { SignJWT, exportJWK, generateKeyPair } from "jose";
import { assertError } from "../helpers/assert-error.js";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";
import { forkGateway, freePort, tempDir, type ForkedGateway } from "./helpers.js";

const KEY = "team-key-0123456789abcdef";
const OTHER_KEY = "second-key-abcdef0123456789";
const SECRET = "hs256-secret-for-tests-0123456789abcdef";
const gen = { model: "tiny", prompt: "Hello", options: { num_predict: 8, temperature: 0, seed: 3 } };
const secrets: string[] = [KEY, OTHER_KEY, SECRET];

function hs256(claims: Record<string, unknown>, secret = SECRET, exp: string | number = "5m"): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: "HS256" }).setIssuedAt().setExpirationTime(exp).sign(new TextEncoder().encode(secret));
}

t.test("the gateway in front of a real daemon", async (t) => {
  const dir = tempDir(t);
  const { url: daemon } = await startDaemon(t, { env: { SERVICE_MODELS: path.join(dir, "store") } });
  const rsa = await generateKeyPair("RS256", { extractable: true });
  const forger = await generateKeyPair("RS256", { extractable: true });
  const jwks = path.join(dir, "jwks.json");
  await writeFile(jwks, JSON.stringify({ keys: [{ ...(await exportJWK(rsa.publicKey)), kid: "k1", alg: "RS256", use: "sig" }] }));
  const keysFile = path.join(dir, "keys");
  // The file holds only the hash of OTHER_KEY: a keys file need never contain a usable key.
  const { createHash } = await import("node:crypto");
  await writeFile(keysFile, `# team keys\nsha256:${createHash("sha256").update(OTHER_KEY).digest("hex")}\n`);
  const gw = await forkGateway(t, {
    GATEWAY_UPSTREAM: daemon, GATEWAY_ALLOW_PLAINTEXT: "true", GATEWAY_API_KEYS: KEY, GATEWAY_KEYS_FILE: keysFile,
    GATEWAY_JWT_SECRET: SECRET, GATEWAY_JWKS_FILE: jwks, GATEWAY_RATE_LIMIT: "0", GATEWAY_LOG_LEVEL: "trace",
  });
  const url = gw.url;

  t.test("401 without a key, with a wrong key, with a wrong bearer", async (t) => {
    await assertError(t, await fetch(`${url}/api/version`), 401, "missing credentials: send an X-API-Key header or an Authorization: Bearer token");
    await assertError(t, await fetch(`${url}/api/version`, { headers: { "x-api-key": "not-the-key-at-all" } }), 401, "invalid API key");
    await assertError(
      t,
      await postJson(`${url}/api/generate`, gen, { headers: { "content-type": "application/json", "x-api-key": `${KEY}x` } }),
      401,
      "invalid API key",
    );
    await assertError(t, await fetch(`${url}/`, { headers: { authorization: "Basic dXNlcjpwYXNz" } }), 401);
    const res = await fetch(`${url}/api/version`);
    t.equal(res.headers.get("www-authenticate"), 'Bearer realm="lmd"', "401 names the scheme");
    await res.body?.cancel();
  });

  t.test("200 with a good key (from the variable, the hashed keys file, or as a bearer)", async (t) => {
    for (const headers of [{ "x-api-key": KEY }, { "x-api-key": OTHER_KEY }, { authorization: `Bearer ${KEY}` }]) {
      const res = await fetch(`${url}/api/version`, { headers });
      t.equal(res.status, 200);
      t.match(await res.json(), { version: String });
    }
  });

  t.test("a streamed generation passes through, line by line", async (t) => {
    const res = await postJson(`${url}/api/generate`, gen, { headers: { "content-type": "application/json", "x-api-key": KEY } });
    t.equal(res.status, 200, res.status === 200 ? "200" : await res.clone().text());
    t.equal(res.headers.get("content-type"), "application/x-ndjson");
    const lines = await readNdjson(res);
    t.ok(lines.length >= 2, `${lines.length} NDJSON lines`);
    t.match(lines.at(-1), { done: true, model: "tiny" });
    const direct = await readNdjson(await postJson(`${daemon}/api/generate`, gen));
    t.equal(lines.map((l) => l.response).join(""), direct.map((l) => l.response).join(""), "same text as straight from the daemon");
  });

  t.test("a CORS preflight passes without credentials (browsers never send them on OPTIONS)", async (t) => {
    const res = await fetch(`${url}/api/generate`, { method: "OPTIONS", headers: { origin: "http://localhost:3000", "access-control-request-method": "POST" } });
    t.equal(res.status, 204, "the daemon's answer");
    t.equal(res.headers.get("access-control-allow-origin"), "http://localhost:3000");
    await assertError(t, await fetch(`${url}/api/generate`, { method: "OPTIONS" }), 401, /^missing credentials/);
  });

  t.test("daemon errors pass through unchanged", async (t) => {
    const res = await postJson(`${url}/api/generate`, { model: "nope", prompt: "hi" }, { headers: { "content-type": "application/json", "x-api-key": KEY } });
    await assertError(t, res, 404, "model 'nope' not found, try pulling it first");
  });

  t.test("bearer JWTs: HS256 and RS256 from the JWKS file", async (t) => {
    const good = await hs256({ sub: "alice" });
    t.equal((await fetch(`${url}/api/version`, { headers: { authorization: `Bearer ${good}` } })).status, 200, "valid HS256");
    const rs = await new SignJWT({ sub: "bob" }).setProtectedHeader({ alg: "RS256", kid: "k1" }).setExpirationTime("5m").sign(rsa.privateKey);
    t.equal((await fetch(`${url}/api/version`, { headers: { authorization: `Bearer ${rs}` } })).status, 200, "valid RS256");
    const cases: [string, string, string | RegExp][] = [
      ["expired", await hs256({ sub: "alice" }, SECRET, Math.floor(Date.now() / 1000) - 3600), "invalid bearer token: token has expired"],
      [
        "forged HS256 (wrong secret)",
        await hs256({ sub: "mallory" }, "another-secret-of-sufficient-length-xx"),
        "invalid bearer token: signature verification failed",
      ],
      [
        "forged RS256 (unknown key pair)",
        await new SignJWT({ sub: "mallory" }).setProtectedHeader({ alg: "RS256", kid: "k1" }).setExpirationTime("5m").sign(forger.privateKey),
        "invalid bearer token: signature verification failed",
      ],
      [
        "unsigned (alg none)",
        [{ alg: "none" }, { sub: "x", exp: Math.floor(Date.now() / 1000) + 300 }]
          .map((part) => Buffer.from(JSON.stringify(part)).toString("base64url"))
          .join(".") + ".",
        "invalid bearer token: algorithm 'none' is not accepted",
      ],
      ["no exp", await new SignJWT({ sub: "x" }).setProtectedHeader({ alg: "HS256" }).sign(new TextEncoder().encode(SECRET)), /^invalid bearer token: /],
      ["garbage", "abc.def", "invalid bearer token: malformed JWT"],
    ];
    for (const [name, token, message] of cases) {
      t.comment(name);
      await assertError(t, await fetch(`${url}/api/version`, { headers: { authorization: `Bearer ${token}` } }), 401, message);
      secrets.push(token);
    }
    secrets.push(good, rs);
  });

  t.test("the access log: one line per request, with the key's fingerprint and never the key", async (t) => {
    const from = gw.lines.length;
    const res = await fetch(`${url}/api/version?x=1`, { headers: { "x-api-key": KEY } });
    await res.text();
    const line = await gw.waitForLog((l) => l.msg === "request" && l.status === 200, { from });
    t.match(line, { remote: "127.0.0.1", request: "GET /api/version HTTP/1.1", status: 200, keyId: /^key:[0-9a-f]{12}$/, time: /^\d{4}-/ });
    t.ok(typeof line.bytes === "number" && line.bytes > 0, "bytes sent");
    t.equal((await gw.waitForLog((l) => l.msg === "request" && l.status === 401)).keyId, "-", "refused requests are logged too");
  });

  t.test("no key, token or secret ever appears in the gateway's output", (t) => stopAndCheckLog(t, gw));
});

t.test("the headers sent upstream: no credentials, X-Forwarded-For set", async (t) => {
  const seen: http.IncomingHttpHeaders[] = [];
  const echo = http.createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
  });
  await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
  t.teardown(() => echo.close());
  const port = (echo.address() as { port: number }).port;
  const gw = await forkGateway(t, { GATEWAY_UPSTREAM: `http://127.0.0.1:${port}`, GATEWAY_ALLOW_PLAINTEXT: "true", GATEWAY_API_KEYS: KEY, GATEWAY_JWT_SECRET: SECRET });
  const jwt = await hs256({ sub: "carol" });
  secrets.push(jwt);
  for (const headers of [{ "x-api-key": KEY, "x-forwarded-for": "10.9.8.7" }, { authorization: `Bearer ${jwt}` }, { authorization: `Bearer ${KEY}` }]) {
    const res = await fetch(`${gw.url}/api/tags`, { headers });
    t.equal(res.status, 200);
    await res.text();
  }
  t.equal(seen.length, 3);
  for (const h of seen) {
    t.notOk("x-api-key" in h, "no X-API-Key upstream");
    t.notOk("authorization" in h, "no Authorization upstream");
    t.equal(h.host, `127.0.0.1:${port}`, "Host is the upstream's own");
    t.equal(h["x-forwarded-proto"], "http");
  }
  t.equal(seen[0]?.["x-forwarded-for"], "10.9.8.7, 127.0.0.1", "the caller is appended to X-Forwarded-For");
  t.equal(seen[1]?.["x-forwarded-for"], "127.0.0.1");
  await stopAndCheckLog(t, gw);
});

t.test("429 past the rate limit, with Retry-After, per key", async (t) => {
  const { url: daemon } = await startDaemon(t, { models: [], env: { SERVICE_MODELS: path.join(tempDir(t), "store") } });
  const gw = await forkGateway(t, {
    GATEWAY_UPSTREAM: daemon,
    GATEWAY_ALLOW_PLAINTEXT: "true",
    GATEWAY_API_KEYS: `${KEY},${OTHER_KEY}`,
    GATEWAY_RATE_LIMIT: "3",
  });
  for (let i = 0; i < 3; i++) t.equal((await fetch(`${gw.url}/api/version`, { headers: { "x-api-key": KEY } })).status, 200, `request ${i + 1} of 3`);
  const res = await fetch(`${gw.url}/api/version`, { headers: { "x-api-key": KEY } });
  const retry = Number(res.headers.get("retry-after"));
  await assertError(t, res, 429, "rate limit exceeded: at most 3 requests per minute per key");
  t.ok(retry >= 1 && retry <= 20, `Retry-After ${retry}s (one token every 20s)`);
  t.equal((await fetch(`${gw.url}/api/version`, { headers: { "x-api-key": OTHER_KEY } })).status, 200, "another key has its own bucket");
  await stopAndCheckLog(t, gw);
});

t.test("502 when the daemon cannot be reached", async (t) => {
  const gw = await forkGateway(t, { GATEWAY_UPSTREAM: `http://127.0.0.1:${await freePort()}`, GATEWAY_ALLOW_PLAINTEXT: "true", GATEWAY_API_KEYS: KEY });
  await assertError(t, await fetch(`${gw.url}/api/version`, { headers: { "x-api-key": KEY } }), 502, "the lmd service is not reachable through the gateway");
  await stopAndCheckLog(t, gw);
});

/** SIGTERM the gateway, expect a clean exit, and check its whole output for any secret. */
async function stopAndCheckLog(t: Test, gw: ForkedGateway): Promise<void> {
  gw.child.kill("SIGTERM");
  t.same(await gw.exited, { code: 0, signal: null }, "SIGTERM: clean exit");
  const out = gw.output();
  t.ok(out.includes('"msg":"request"'), "the access log was written");
  for (const s of secrets) t.notOk(out.includes(s), `secret ${s.slice(0, 8)}… is not in the log`);
  t.notOk(/"(authorization|x-api-key)"\s*:/i.test(out), "no credential header in the log");
}
