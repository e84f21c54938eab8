import t, { type Test } from "tap";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Config } from "../../src/config.js";
import { silentLogger } from "../../src/logger.js";
import { CORS_DEFAULT_HEADERS, CORS_METHODS, createGuards } from "../../src/http/guards.js";
import { sendJson } from "../../src/http/respond.js";
import { Router } from "../../src/http/router.js";
import { createHttpServer } from "../../src/http/server.js";
import { assertError, type RawResponse } from "../helpers/assert-error.js";

type GuardConfig = Pick<Config, "listen" | "allowedHosts" | "origins">;

const LOOPBACK: GuardConfig = {
  listen: { host: "127.0.0.1", port: 11434 },
  allowedHosts: ["myhost.example", "other.example:8080", "lmd_hosts"],
  origins: ["https://*.example.com", "https://exact.test"],
};

async function start(t: Test, config: GuardConfig): Promise<number> {
  const router = new Router().add("GET", "/api/version", ({ res }) => sendJson(res, 200, { version: "0.0.0" }));
  const { server } = createHttpServer({ router, guards: createGuards(config), log: silentLogger(), maxBodyBytes: 1024 });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return (server.address() as AddressInfo).port;
}

/** A request with full control of the headers (fetch cannot set Host). `host: null` sends none. */
function request(port: number, method: string, headers: Record<string, string | null>): Promise<RawResponse> {
  const { host, ...rest } = headers;
  const sent = Object.fromEntries(Object.entries(rest).filter((e): e is [string, string] => e[1] !== null));
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        method,
        path: "/api/version",
        agent: false,
        setHost: false,
        headers: host === null ? sent : { host: host ?? `127.0.0.1:${port}`, ...sent },
      },
      (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

const hostCases: Array<[string | null, boolean]> = [
  ["127.0.0.1:11434", true],
  ["127.0.0.1", true],
  ["127.1.2.3:99", true],
  ["localhost", true],
  ["LOCALHOST:11434", true],
  ["localhost.", true],
  ["[::1]:11434", true],
  ["[::1]", true],
  ["app.localhost:3000", true],
  ["myhost.example", true],
  ["MyHost.Example:9999", true],
  ["other.example:8080", true],
  ["other.example:9090", false],
  ["other.example", false],
  ["evil.com", false],
  ["evil.com:11434", false],
  ["127.0.0.1.evil.com", false],
  ["localhost.evil.com", false],
  ["0.0.0.0:11434", false],
  ["[::]:11434", false],
  ["192.168.1.10:11434", false],
  [null, false],
  // Parsed as RFC 9110 host[:port], not matched by prefix or pattern.
  ["127.0.0.1:80@evil.com", false],
  ["127.999.999.999", false],
  ["[::1", false],
  ["127.0.0.1:99999", false],
  ["localhost:80:80", false],
  ["[::ffff:7f00:1]", true],
  ["[::ffff:127.0.0.1]:11434", true],
  ["[0:0:0:0:0:0:0:1]", true],
  ["[::ffff:c0a8:10a]", false],
  ["lmd_hosts", true], // an nginx upstream name, as SERVICE_ALLOWED_HOSTS lists it
  ["lmd_hosts:8080", true],
];

t.test("Host guard while bound to loopback", async (t) => {
  const port = await start(t, LOOPBACK);
  for (const [host, allowed] of hostCases) {
    const res = await request(port, "GET", { host });
    if (allowed) t.equal(res.status, 200, `host ${host} is allowed`);
    else await assertError(t, res, 403, `host '${host ?? ""}' is not allowed`);
  }
});

t.test("Host guard applies to IPv6 loopback binds too, and not to other binds", async (t) => {
  const v6 = createGuards({ ...LOOPBACK, listen: { host: "::1", port: 11434 } });
  t.throws(() => v6.checkHost(fakeRequest({ host: "evil.com" })), { message: "host 'evil.com' is not allowed" });
  for (const host of ["0.0.0.0", "", "192.168.1.10", "::"]) {
    const port = await start(t, { ...LOOPBACK, listen: { host, port: 11434 } });
    for (const h of ["evil.com", "192.168.1.10:11434", "localhost"]) {
      t.equal((await request(port, "GET", { host: h })).status, 200, `bound to '${host}': host ${h} accepted`);
    }
  }
});

t.test("HTTP/1.0 without Host is accepted (browsers always send one)", async (t) => {
  const guards = createGuards(LOOPBACK);
  t.doesNotThrow(() => guards.checkHost(fakeRequest({}, "1.0")));
  t.throws(() => guards.checkHost(fakeRequest({}, "1.1")), { message: "host '' is not allowed" });
});

const originCases: Array<[string, boolean]> = [
  ["http://localhost", true],
  ["http://localhost:3000", true],
  ["https://localhost:8443", true],
  ["http://127.0.0.1:11434", true],
  ["https://127.0.0.1", true],
  ["http://[::1]:8080", true],
  ["app://obsidian.md", true],
  ["file://", true],
  ["tauri://localhost", true],
  ["vscode-webview://1234abcd", true],
  ["https://chat.example.com", true],
  ["https://a.b.example.com", true],
  ["https://exact.test", true],
  ["https://EXACT.test", true],
  ["https://exact.test.evil.com", false],
  ["http://exact.test", false],
  ["https://example.com", false],
  ["https://evil.com", false],
  ["http://localhost.evil.com", false],
  ["http://127.0.0.1.evil.com", false],
  ["http://0.0.0.0:11434", false],
  ["null", false],
];

t.test("CORS on simple requests: allowed origins are echoed, others are refused (403)", async (t) => {
  const port = await start(t, LOOPBACK);
  for (const [origin, allowed] of originCases) {
    const res = await request(port, "GET", { origin });
    if (!allowed) {
      await assertError(t, res, 403, `origin '${origin}' is not allowed`);
      continue;
    }
    t.equal(res.status, 200, `${origin}: served`);
    t.equal(res.headers?.["access-control-allow-origin"], origin, `${origin}: allowed`);
    t.match(res.headers?.["vary"], /origin/i, `${origin}: vary origin`);
  }
  await assertError(t, await request(port, "GET", { "sec-fetch-site": "cross-site" }), 403, "cross-site requests are not allowed");
  t.equal((await request(port, "GET", { "sec-fetch-site": "same-origin" })).status, 200, "same-origin fetch metadata is served");
  t.equal((await request(port, "GET", { origin: "https://exact.test", "sec-fetch-site": "cross-site" })).status, 200, "a cross-site request from an allowed origin is served");
  const plain = await request(port, "GET", {});
  t.equal(plain.headers?.["access-control-allow-origin"], undefined, "no Origin, no CORS headers");
  const withAuth = await request(port, "GET", { authorization: "Bearer nothing" });
  t.equal(withAuth.status, 200, "credentials are neither required nor checked");
});

t.test("CORS preflight: 204 for allowed origins, 403 for others", async (t) => {
  const port = await start(t, LOOPBACK);
  for (const [origin, allowed] of originCases) {
    const res = await request(port, "OPTIONS", {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "content-type, x-stainless-os",
    });
    if (!allowed) {
      await assertError(t, res, 403, `origin '${origin}' is not allowed`);
      continue;
    }
    t.equal(res.status, 204, `${origin}: preflight answered`);
    t.match(res.headers, {
      "access-control-allow-origin": origin,
      "access-control-allow-methods": CORS_METHODS,
      "access-control-allow-headers": "content-type, x-stainless-os",
      "access-control-max-age": "86400",
    });
    t.equal(res.body, "");
  }
  const bare = await request(port, "OPTIONS", { origin: "http://localhost:3000", "access-control-request-method": "GET" });
  t.equal(bare.headers?.["access-control-allow-headers"], CORS_DEFAULT_HEADERS, "default allowed headers when none are asked for");
  const pna = await request(port, "OPTIONS", { origin: "https://chat.example.com", "access-control-request-method": "GET", "access-control-request-private-network": "true" });
  t.equal(pna.headers?.["access-control-allow-private-network"], "true", "private network access granted to allowed origins");
  const badHost = await request(port, "OPTIONS", { host: "evil.com", origin: "http://localhost", "access-control-request-method": "GET" });
  await assertError(t, badHost, 403, "host 'evil.com' is not allowed");
  const plainOptions = await request(port, "OPTIONS", {});
  t.equal(plainOptions.status, 204, "OPTIONS without a preflight is answered by the router");
  t.equal(plainOptions.headers?.["allow"], "GET, HEAD, OPTIONS");
});

t.test("origin '*' allows every origin", async (t) => {
  const port = await start(t, { ...LOOPBACK, origins: ["*"] });
  const res = await request(port, "OPTIONS", { origin: "https://anything.test", "access-control-request-method": "POST" });
  t.equal(res.status, 204);
  t.equal(res.headers?.["access-control-allow-origin"], "https://anything.test");
});

function fakeRequest(headers: Record<string, string>, httpVersion = "1.1"): http.IncomingMessage {
  return { headers, httpVersion, method: "GET" } as unknown as http.IncomingMessage;
}
