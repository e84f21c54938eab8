/**
 * Three lmd hosts, each in a network namespace of its own (a veth pair to this machine, addresses
 * that exist only between them), behind the shipped HAProxy and nginx failover examples. A bounded
 * request loop runs through both proxies while every host is restarted in turn (SIGTERM, drain,
 * exit, start again): not one request may fail. Needs root (namespaces), nginx and haproxy.
 */
import { spawnSync } from "node:child_process";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import t, { type Test } from "tap";
import type { ForkedDaemon } from "../helpers/process.js";
import { freePort, requireTool, tempDir, waitForPort } from "./helpers.js";
import { HostNet, render, startProxy, waitReady } from "./netns.js";

const HOSTS = [1, 2, 3] as const;
const net = new HostNet("lfo", 231);
const hostAddr = (i: number) => net.addr(i);
const startHost = (t: Test, dir: string, i: number) => net.startHost(t, dir, i);

t.test("rolling restart of three hosts behind HAProxy and nginx: zero failed requests", async (t) => {
  if (process.getuid?.() !== 0) {
    if (process.env.LMD_SKIP_SYSTEM_TESTS === "1") return t.skip("needs root for network namespaces; skipped because LMD_SKIP_SYSTEM_TESTS=1");
    return t.fail("needs root for network namespaces (set LMD_SKIP_SYSTEM_TESTS=1 to skip)");
  }
  const haproxy = requireTool(t, "haproxy", "haproxy");
  const nginx = requireTool(t, "nginx", "nginx");
  if (!haproxy || !nginx) return;
  const dir = tempDir(t);
  for (const i of HOSTS) net.make(t, i);
  const hosts = await Promise.all(HOSTS.map((i) => startHost(t, dir, i)));
  for (const i of HOSTS) await waitReady(`http://${hostAddr(i)}:11434/readyz`);

  const ports = { haproxy: await freePort(), nginx: await freePort() };
  const servers = (prefix: string): [string, string][] => HOSTS.map((i) => [`${prefix}10.0.0.1${i}:11434`, `${prefix}${hostAddr(i)}:11434`]);
  await writeFile(
    path.join(dir, "haproxy.cfg"),
    await render(t, "haproxy/haproxy.cfg", [["bind 127.0.0.1:11400", `bind 127.0.0.1:${ports.haproxy}`], ...servers(" ")]),
  );
  const upstream = await render(t, "nginx/failover.conf", [["listen 127.0.0.1:11401;", `listen 127.0.0.1:${ports.nginx};`], ...servers(" ")]);
  await writeFile(
    path.join(dir, "nginx.conf"),
    `pid ${dir}/nginx.pid;\nerror_log ${dir}/nginx-error.log;\nevents {}\nhttp {\n  access_log off;\n  client_body_temp_path ${dir}/body;\n  proxy_temp_path ${dir}/proxy;\n${upstream}\n}\n`,
  );
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
