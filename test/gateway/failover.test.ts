/**
 * Three lmd hosts, each in a network namespace of its own (a veth pair to this machine, addresses
 * that exist only between them), behind the shipped HAProxy and nginx failover examples. A bounded
 * request loop runs through both proxies while every host is restarted in turn (SIGTERM, drain,
 * exit, start again): not one request may fail. Needs root (namespaces), nginx and haproxy.
 */
import { spawn, spawnSync } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import t, { type Test } from "tap";
import { forkDaemon, type ForkedDaemon } from "../helpers/process.js";
import { freePort, requireTool, tempDir, waitForPort } from "./helpers.js";

const HOSTS = [1, 2, 3] as const;
const tag = String(process.pid % 100_000);
const nsName = (i: number) => `lmdfo${tag}-${i}`;
const hostAddr = (i: number) => `10.231.${i}.2`;
const EXAMPLES = new URL("../../examples/", import.meta.url);

function ip(args: string[]): void {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr}`);
}

/** A namespace with a veth pair to this machine: 10.231.<i>.1 here, 10.231.<i>.2 inside. */
function makeHostNamespace(t: Test, i: number): void {
  const ns = nsName(i);
  const [outer, inner] = [`lfo${tag}h${i}`, `lfo${tag}n${i}`];
  t.teardown(() => {
    spawnSync("ip", ["netns", "del", ns]); // removes the veth pair with it
  });
  ip(["netns", "add", ns]);
  ip(["link", "add", outer, "type", "veth", "peer", "name", inner]);
  ip(["link", "set", inner, "netns", ns]);
  ip(["addr", "add", `10.231.${i}.1/24`, "dev", outer]);
  ip(["link", "set", outer, "up"]);
  ip(["netns", "exec", ns, "ip", "addr", "add", `${hostAddr(i)}/24`, "dev", inner]);
  ip(["netns", "exec", ns, "ip", "link", "set", inner, "up"]);
  ip(["netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
}

async function startHost(t: Test, dir: string, i: number): Promise<ForkedDaemon> {
  return forkDaemon(t, { SERVICE_HOST: `${hostAddr(i)}:11434`, SERVICE_MODELS: path.join(dir, `store-${i}`), SERVICE_SHUTDOWN_TIMEOUT: "20s" }, { wrap: ["ip", "netns", "exec", nsName(i)] });
}

/** Polls `url` until it answers 200 (bounded). */
async function waitReady(url: string, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const ok = await fetch(url).then((r) => r.ok, () => false);
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} not ready after ${timeoutMs} ms`);
}

/** Reads an example and replaces each `[from, to]`; every `from` must occur (no silent drift). */
async function render(t: Test, file: string, replacements: [string, string][]): Promise<string> {
  let text = await readFile(new URL(file, EXAMPLES), "utf8");
  for (const [from, to] of replacements) {
    t.ok(text.includes(from), `${file} contains '${from}'`);
    text = text.replaceAll(from, to);
  }
  return text;
}

function startProxy(t: Test, cmd: string, args: string[]): void {
  const child = spawn(cmd, args, { stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
  child.on("exit", (code) => {
    if (code !== null && code !== 0) t.fail(`${path.basename(cmd)} exited ${code}: ${err}`);
  });
  t.teardown(() => {
    child.kill("SIGKILL");
  });
}

t.test("rolling restart of three hosts behind HAProxy and nginx: zero failed requests", async (t) => {
  if (process.getuid?.() !== 0) {
    if (process.env.LMD_SKIP_SYSTEM_TESTS === "1") return t.skip("needs root for network namespaces; skipped because LMD_SKIP_SYSTEM_TESTS=1");
    return t.fail("needs root for network namespaces (set LMD_SKIP_SYSTEM_TESTS=1 to skip)");
  }
  const haproxy = requireTool(t, "haproxy", "haproxy");
  const nginx = requireTool(t, "nginx", "nginx");
  if (!haproxy || !nginx) return;
  const dir = tempDir(t);
  for (const i of HOSTS) makeHostNamespace(t, i);
  const hosts = await Promise.all(HOSTS.map((i) => startHost(t, dir, i)));
  for (const i of HOSTS) await waitReady(`http://${hostAddr(i)}:11434/readyz`);

  const ports = { haproxy: await freePort(), nginx: await freePort() };
  const servers = (prefix: string): [string, string][] => HOSTS.map((i) => [`${prefix}10.0.0.1${i}:11434`, `${prefix}${hostAddr(i)}:11434`]);
  await writeFile(path.join(dir, "haproxy.cfg"), await render(t, "haproxy/haproxy.cfg", [["bind 127.0.0.1:11400", `bind 127.0.0.1:${ports.haproxy}`], ...servers(" ")]));
  const upstream = await render(t, "nginx/failover.conf", [["listen 127.0.0.1:11401;", `listen 127.0.0.1:${ports.nginx};`], ...servers(" ")]);
  await writeFile(path.join(dir, "nginx.conf"), `pid ${dir}/nginx.pid;\nerror_log ${dir}/nginx-error.log;\nevents {}\nhttp {\n  access_log off;\n  client_body_temp_path ${dir}/body;\n  proxy_temp_path ${dir}/proxy;\n${upstream}\n}\n`);
  t.equal(spawnSync(haproxy, ["-c", "-f", path.join(dir, "haproxy.cfg")]).status, 0, "haproxy -c accepts the example");
  startProxy(t, haproxy, ["-db", "-f", path.join(dir, "haproxy.cfg")]);
  startProxy(t, nginx, ["-c", path.join(dir, "nginx.conf"), "-g", "daemon off; master_process off;"]);
  await waitForPort(ports.haproxy);
  await waitForPort(ports.nginx);
  const proxies = [`http://127.0.0.1:${ports.haproxy}`, `http://127.0.0.1:${ports.nginx}`];

  // The bounded request loop: 4 clients, alternating proxies, until the restarts are over.
  let running = true;
  const results = { ok: 0, failed: [] as string[] };
  const client = async (c: number) => {
    for (let n = 0; running && n < 5000; n++) {
      const base = proxies[(c + n) % proxies.length]!;
      try {
        const res = await fetch(`${base}/api/generate`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "demo", prompt: "hi", stream: false, options: { num_predict: 4, temperature: 0 } }),
          signal: AbortSignal.timeout(60_000),
        });
        const body = await res.text();
        if (res.status === 200 && body.includes('"done":true')) results.ok++;
        else results.failed.push(`${base}: ${res.status} ${body.slice(0, 200)}`);
      } catch (err) {
        results.failed.push(`${base}: ${String(err)}`);
      }
    }
  };
  const clients = [0, 1, 2, 3].map(client);
  const served = (h: ForkedDaemon) => h.lines.filter((l) => l.msg === "request" && l.path === "/api/generate" && l.status === 200).length;

  /** Waits (bounded) until `check` holds. */
  const until = async (check: () => boolean, what: string) => {
    const end = Date.now() + 60_000;
    while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    t.ok(check(), what);
  };
  await until(() => hosts.every((h) => served(h) > 0), "every host serves requests before the restarts");
  for (const i of HOSTS) {
    const old = hosts[i - 1]!;
    const before = results.ok;
    old.child.kill("SIGTERM");
    const { code } = await old.exited;
    t.equal(code, 0, `host ${i} drained and exited 0`);
    hosts[i - 1] = await startHost(t, dir, i);
    await waitReady(`http://${hostAddr(i)}:11434/readyz`);
    // The proxies see it back (HAProxy: 2 good checks 500 ms apart) and send it work again.
    await until(() => served(hosts[i - 1]!) > 0, `host ${i} is back in rotation`);
    t.ok(results.ok > before, `requests kept succeeding while host ${i} restarted (${results.ok - before})`);
  }
  running = false;
  await Promise.all(clients);
  t.same(results.failed, [], `no failed request (${results.ok} succeeded)`);
});
