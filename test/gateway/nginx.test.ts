/**
 * The shipped nginx examples (examples/nginx/), run by Debian's real nginx in front of real lmd
 * daemons. Each example is rendered with this test's ports and paths in place of the operator's
 * (every substitution must match, so the examples cannot drift from what is tested), and all of
 * them run in one nginx started on loopback.
 */
import { spawn } from "node:child_process";
import { readFile, mkdir, writeFile } from "node:fs/promises";
import http from "node:http";
import path from "node:path";
import t, { type Test } from "tap";
import { assertError } from "../helpers/assert-error.js";
import { readNdjson, startDaemon } from "../helpers/daemon.js";
import { fetchTrusting, forkGateway, freePort, makeCert, requireTool, runTool, tempDir, waitForPort } from "./helpers.js";

const EXAMPLES = new URL("../../examples/nginx/", import.meta.url);
const KEY = "replace-with-a-long-random-key-for-alice";
const USER = "alice";
const PASSWORD = "correct horse battery staple";
const VALIDATOR_KEY = "validator-key-0123456789abcdef";
const basic = (user: string, pw: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${pw}`).toString("base64")}` });

/** Reads an example and applies `[from, to]` replacements; each must occur in the file. */
async function render(t: Test, file: string, replacements: [string, string][]): Promise<string> {
  let text = await readFile(new URL(file, EXAMPLES), "utf8");
  for (const [from, to] of replacements) {
    t.ok(text.includes(from), `${file} contains '${from.trim()}'`);
    text = text.replaceAll(from, to);
  }
  return text;
}

t.test("nginx examples in front of real daemons", async (t) => {
  const nginx = requireTool(t, "nginx", "nginx");
  const htpasswd = requireTool(t, "htpasswd", "apache2-utils");
  if (!nginx || !htpasswd) return;
  const dir = tempDir(t);
  const { url: daemon } = await startDaemon(t, { env: { SERVICE_MODELS: path.join(dir, "store") } });
  const { cert, key } = makeCert(dir, "nginx");
  const htfile = path.join(dir, "lmd.htpasswd");
  // The command the examples document (bcrypt); nginx checks it through the system's crypt(3).
  t.equal(runTool(htpasswd, ["-B", "-b", "-c", htfile, USER, PASSWORD]).status, 0, "htpasswd -B made the password file");

  // An external validator for auth_request: allows one key, names the caller.
  const validations: http.IncomingHttpHeaders[] = [];
  const validator = http.createServer((req, res) => {
    validations.push(req.headers);
    const ok = req.headers["x-api-key"] === VALIDATOR_KEY;
    res.writeHead(ok ? 204 : 401, ok ? { "x-lmd-client": "validated-user" } : {}).end();
  });
  await new Promise<void>((resolve) => validator.listen(0, "127.0.0.1", resolve));
  t.teardown(() => validator.close());
  const validatorPort = (validator.address() as { port: number }).port;

  // The gateway (plain HTTP on loopback) behind the TLS example.
  const keysFile = path.join(dir, "gateway-keys");
  await writeFile(keysFile, `${KEY}\n`);
  const gw = await forkGateway(t, { GATEWAY_UPSTREAM: daemon, GATEWAY_ALLOW_PLAINTEXT: "true", GATEWAY_KEYS_FILE: keysFile });

  // Two more daemons for the load balancer; each counts the requests it serves.
  const counts = [0, 0];
  const backends = await Promise.all([0, 1].map(async (i) => {
    const d = await startDaemon(t, { models: [], env: { SERVICE_ALLOWED_HOSTS: "lmd_hosts", SERVICE_MODELS: path.join(dir, `store-${i}`) } });
    d.app.server.on("request", () => counts[i]!++);
    return d;
  }));

  const ports = {
    basic: await freePort(),
    apiKey: await freePort(),
    authRequest: await freePort(),
    tls: await freePort(),
    http: await freePort(),
    lb: await freePort(),
  };
  const common = (port: number): [string, string][] => [
    ["listen 443 ssl http2;", `listen 127.0.0.1:${port} ssl http2;`],
    ["    listen [::]:443 ssl http2;\n", ""],
    ["/etc/nginx/snippets/", `${dir}/snippets/`],
  ];
  const certs: [string, string][] = [["/etc/ssl/lmd/fullchain.pem", cert], ["/etc/ssl/lmd/privkey.pem", key]];
  const conf = path.join(dir, "conf");
  await mkdir(conf);
  await mkdir(path.join(dir, "snippets"));
  for (const snippet of ["lmd-proxy.conf", "lmd-tls.conf"]) await writeFile(path.join(dir, "snippets", snippet), await render(t, snippet, []));
  const rendered: Record<string, string> = {
    "basic-auth.conf": await render(t, "basic-auth.conf", [...common(ports.basic), ...certs, ["/etc/nginx/lmd.htpasswd", htfile], ["http://127.0.0.1:11434", daemon]]),
    "api-key.conf": await render(t, "api-key.conf", [...common(ports.apiKey), ...certs, ["http://127.0.0.1:11434", daemon]]),
    "auth-request.conf": await render(t, "auth-request.conf", [...common(ports.authRequest), ...certs, ["http://127.0.0.1:9180/validate", `http://127.0.0.1:${validatorPort}/validate`], ["http://127.0.0.1:11434", daemon]]),
    "tls.conf": await render(t, "tls.conf", [
      ...common(ports.tls), ["/etc/letsencrypt/live/lmd.example.com/fullchain.pem", cert], ["/etc/letsencrypt/live/lmd.example.com/privkey.pem", key],
      ["listen 80;", `listen 127.0.0.1:${ports.http};`], ["    listen [::]:80;\n", ""], ["http://127.0.0.1:11443", gw.url],
    ]),
    "load-balancing.conf": await render(t, "load-balancing.conf", [
      ...common(ports.lb), ...certs, ["/etc/nginx/lmd.htpasswd", htfile],
      ["server 10.0.0.11:11434", `server ${new URL(backends[0]!.url).host}`], ["server 10.0.0.12:11434", `server ${new URL(backends[1]!.url).host}`],
    ]),
  };
  for (const [name, text] of Object.entries(rendered)) await writeFile(path.join(conf, name), text);
  const temp = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map((k) => `${k}_temp_path ${dir}/${k};`).join("\n  ");
  const main = path.join(dir, "nginx.conf");
  await writeFile(main, `${process.getuid?.() === 0 ? "user root;\n" : ""}worker_processes 1;
events { worker_connections 256; }
http {
  access_log ${dir}/access.log;
  ${temp}
  include ${conf}/*.conf;
}
`);
  const tested = runTool(nginx, ["-t", "-p", dir, "-c", main, "-g", `pid ${dir}/nginx.pid; error_log stderr;`]);
  t.equal(tested.status, 0, `nginx -t accepts the examples: ${tested.output.trim()}`);
  if (tested.status !== 0) return;
  const child = spawn(nginx, ["-p", dir, "-c", main, "-g", `daemon off; pid ${dir}/nginx.pid; error_log stderr;`], { stdio: ["ignore", "ignore", "pipe"] });
  let errors = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => (errors += d));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  t.teardown(async () => {
    child.kill("SIGTERM");
    await exited;
  });
  await Promise.all(Object.values(ports).map((p) => waitForPort(p))).catch((err: unknown) => {
    throw new Error(`nginx did not start: ${String(err)}; stderr: ${errors}`);
  });
  const { fetch: httpsFetch, agent } = fetchTrusting(await readFile(cert));
  t.teardown(() => agent.close());
  const at = (port: number, p: string) => `https://127.0.0.1:${port}${p}`;

  t.test("basic-auth.conf: 401 JSON without or with wrong credentials, 200 with", async (t) => {
    const none = await httpsFetch(at(ports.basic, "/api/version"));
    t.match(none.headers.get("www-authenticate"), /^Basic realm="lmd"/, "the Basic challenge is kept");
    await assertError(t, none, 401, "authentication required");
    await assertError(t, await httpsFetch(at(ports.basic, "/api/version"), { headers: basic(USER, "wrong") }), 401, "authentication required");
    const ok = await httpsFetch(at(ports.basic, "/api/version"), { headers: basic(USER, PASSWORD) });
    t.equal(ok.status, 200);
    t.match(await ok.json(), { version: String });
  });

  t.test("api-key.conf: 401 JSON without or with a wrong key, 200 and a stream with the key", async (t) => {
    await assertError(t, await httpsFetch(at(ports.apiKey, "/api/version")), 401, "missing or invalid API key");
    await assertError(t, await httpsFetch(at(ports.apiKey, "/api/version"), { headers: { "x-api-key": `${KEY}-not` } }), 401, "missing or invalid API key");
    const ok = await httpsFetch(at(ports.apiKey, "/api/version"), { headers: { "x-api-key": KEY } });
    t.equal(ok.status, 200);
    await ok.text();
    const res = await httpsFetch(at(ports.apiKey, "/api/generate"), {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": KEY },
      body: JSON.stringify({ model: "tiny", prompt: "Hi", options: { num_predict: 6, temperature: 0 } }),
    });
    t.equal(res.status, 200, res.status === 200 ? "200" : await res.clone().text());
    const lines = await readNdjson(res);
    t.ok(lines.length >= 2, "streamed NDJSON");
    t.match(lines.at(-1), { done: true });
  });

  t.test("auth-request.conf: the validator decides; its refusal is 401 JSON", async (t) => {
    await assertError(t, await httpsFetch(at(ports.authRequest, "/api/version")), 401, "authentication required");
    const ok = await httpsFetch(at(ports.authRequest, "/api/version?x=1"), { headers: { "x-api-key": VALIDATOR_KEY } });
    t.equal(ok.status, 200);
    await ok.text();
    t.match(validations.at(-1), { "x-original-uri": "/api/version?x=1", "x-original-method": "GET", "x-api-key": VALIDATOR_KEY });
  });

  t.test("tls.conf: HTTPS in front of lmd gateway; plain HTTP redirects", async (t) => {
    const redirect = await fetch(`http://127.0.0.1:${ports.http}/api/version`, { redirect: "manual" });
    t.equal(redirect.status, 301);
    t.equal(redirect.headers.get("location"), `https://127.0.0.1/api/version`);
    const res = await httpsFetch(at(ports.tls, "/api/version"));
    await assertError(t, res, 401, "missing API key: send it in the X-API-Key header");
    t.match(res.headers.get("strict-transport-security"), /max-age=/);
    const ok = await httpsFetch(at(ports.tls, "/api/version"), { headers: { "x-api-key": KEY } });
    t.equal(ok.status, 200);
    await ok.text();
    const line = await gw.waitForLog((l) => l.msg === "request" && l.status === 200);
    t.match(line, { keyId: /^key:/, forwardedFor: "127.0.0.1" }, "the gateway logs the caller nginx saw");
  });

  t.test("load-balancing.conf: requests spread over two daemons", async (t) => {
    await assertError(t, await httpsFetch(at(ports.lb, "/api/version")), 401, "authentication required");
    for (let i = 0; i < 10; i++) {
      const res = await httpsFetch(at(ports.lb, "/api/version"), { headers: basic(USER, PASSWORD) });
      t.equal(res.status, 200, `request ${i + 1}`);
      await res.text();
    }
    t.ok(counts[0]! >= 3 && counts[1]! >= 3, `both daemons served requests (${counts[0]} and ${counts[1]})`);
    t.equal(counts[0]! + counts[1]!, 10, "each request reached exactly one daemon");
  });

});
