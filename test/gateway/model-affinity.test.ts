/**
 * Three lmd hosts in network namespaces behind the shipped model-affinity HAProxy example, two
 * models: every request for a model lands on that model's host while the host is healthy (read
 * from each host's /metrics and /api/ps); when the host is stopped, its model's requests move to
 * another host and none fails; when it returns, they move back. Needs root (namespaces) and haproxy.
 */
import { spawnSync } from "node:child_process";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import t, { type Test } from "tap";
import type { ForkedDaemon } from "../helpers/process.js";
import { freePort, requireTool, tempDir, waitForPort } from "./helpers.js";
import { HostNet, render, startProxy, waitReady } from "./netns.js";

const HOSTS = [1, 2, 3] as const;
const net = new HostNet("lma", 232);
const JSON_TYPE = { "content-type": "application/json" };
const hostUrl = (i: number) => `http://${net.addr(i)}:11434`;

/** One counter of a host's /metrics, 0 when absent. */
async function counter(i: number, sample: string): Promise<number> {
  const text = await (await fetch(`${hostUrl(i)}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${sample} `));
  return line ? Number(line.slice(sample.length + 1)) : 0;
}

const GENERATED = 'lmd_http_requests_total{method="POST",route="/api/generate",status="200"}';
const SHOWN = 'lmd_http_requests_total{method="POST",route="/api/show",status="404"}';

/** Each host's count of `sample` (hosts that are down count as undefined). */
async function counts(sample: string): Promise<Map<number, number | undefined>> {
  return new Map(await Promise.all(HOSTS.map(async (i) => [i, await counter(i, sample).catch(() => undefined)] as const)));
}

/** Which hosts' counters grew between two readings, and by how much. */
function grown(before: Map<number, number | undefined>, after: Map<number, number | undefined>): Map<number, number> {
  const out = new Map<number, number>();
  for (const i of HOSTS) {
    const d = (after.get(i) ?? 0) - (before.get(i) ?? 0);
    if (d > 0) out.set(i, d);
  }
  return out;
}

/** The names of the models loaded on host i. */
async function loaded(i: number): Promise<string[]> {
  const body = (await (await fetch(`${hostUrl(i)}/api/ps`)).json()) as { models: { name: string }[] };
  return body.models.map((m) => m.name).sort();
}

t.test("model-affinity.cfg: one host per model while healthy, failover and return", async (t: Test) => {
  if (process.getuid?.() !== 0) {
    if (process.env.LMD_SKIP_SYSTEM_TESTS === "1") return t.skip("needs root for network namespaces; skipped because LMD_SKIP_SYSTEM_TESTS=1");
    return t.fail("needs root for network namespaces (set LMD_SKIP_SYSTEM_TESTS=1 to skip)");
  }
  const haproxy = requireTool(t, "haproxy", "haproxy");
  if (!haproxy) return;
  const dir = tempDir(t);
  for (const i of HOSTS) net.make(t, i);
  // Room for every model on every host, so that a model sent to the wrong host stays visible in
  // /api/ps (with one model per host, the next load would evict it).
  const env = { SERVICE_KEEP_ALIVE: "-1", SERVICE_MAX_LOADED_MODELS: "3" };
  const hosts = new Map<number, ForkedDaemon>();
  for (const host of await Promise.all(HOSTS.map((i) => net.startHost(t, dir, i, env)))) hosts.set(hosts.size + 1, host);
  for (const i of HOSTS) await waitReady(`${hostUrl(i)}/readyz`);

  const port = await freePort();
  const servers: [string, string][] = HOSTS.map((i) => [` 10.0.0.1${i}:11434`, ` ${net.addr(i)}:11434`]);
  const cfg = path.join(dir, "haproxy.cfg");
  await writeFile(cfg, await render(t, "haproxy/model-affinity.cfg", [["bind 127.0.0.1:11400", `bind 127.0.0.1:${port}`], ...servers]));
  t.equal(spawnSync(haproxy, ["-c", "-f", cfg]).status, 0, "haproxy -c accepts the example");
  startProxy(t, haproxy, ["-db", "-f", cfg]);
  await waitForPort(port);
  const proxy = `http://127.0.0.1:${port}`;

  // Which host each candidate name hashes to, asked with a request that loads nothing (/api/show
  // of a model no host has): two names on different hosts make the test show separation.
  const homeOf = new Map<string, number>();
  for (const name of ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]) {
    const before = await counts(SHOWN);
    for (let n = 0; n < 3; n++)
      t.equal((await fetch(`${proxy}/api/show`, { method: "POST", headers: JSON_TYPE, body: JSON.stringify({ model: name }) })).status, 404);
    const moved = grown(before, await counts(SHOWN));
    t.equal(moved.size, 1, `every /api/show for '${name}' went to one host (${JSON.stringify([...moved])})`);
    homeOf.set(name, [...moved.keys()][0]!);
  }
  const names = [...homeOf.keys()];
  const a = names[0]!;
  const b = names.find((n) => homeOf.get(n) !== homeOf.get(a));
  if (!b) return t.fail(`every candidate name hashed to host ${homeOf.get(a)}: ${JSON.stringify([...homeOf])}`);
  const [homeA, homeB] = [homeOf.get(a)!, homeOf.get(b)!];
  for (const i of HOSTS) {
    for (const name of [a, b])
      t.equal(
        (await fetch(`${hostUrl(i)}/api/copy`, { method: "POST", headers: JSON_TYPE, body: JSON.stringify({ source: "demo", destination: name }) })).status,
        200,
      );
  }

  const failed: string[] = [];
  const generate = async (model: string): Promise<void> => {
    try {
      const res = await fetch(`${proxy}/api/generate`, {
        method: "POST",
        headers: JSON_TYPE,
        body: JSON.stringify({ model, prompt: "hi", stream: false, options: { num_predict: 2, temperature: 0 } }),
        signal: AbortSignal.timeout(60_000),
      });
      const text = await res.text();
      if (res.status !== 200 || !text.includes('"done":true')) failed.push(`${model}: ${res.status} ${text.slice(0, 200)}`);
    } catch (err) {
      failed.push(`${model}: ${String(err)}`);
    }
  };
  /** Sends `n` requests for `model` one after another; returns which hosts served them. */
  const phase = async (model: string, n: number): Promise<Map<number, number>> => {
    const before = await counts(GENERATED);
    for (let k = 0; k < n; k++) await generate(model);
    return grown(before, await counts(GENERATED));
  };

  t.same([...(await phase(a, 5))], [[homeA, 5]], `all 5 requests for '${a}' were served by host ${homeA}`);
  t.same([...(await phase(b, 5))], [[homeB, 5]], `all 5 requests for '${b}' were served by host ${homeB}`);
  t.same([...(await phase(a, 3))], [[homeA, 3]], `'${a}' stays on host ${homeA} after '${b}' was served`);
  for (const i of HOSTS) {
    const want = [...(i === homeA ? [`${a}:latest`] : []), ...(i === homeB ? [`${b}:latest`] : [])].sort();
    t.same(await loaded(i), want, `host ${i} has loaded only its own models`);
  }

  // Host A stops (drain, exit) under two clients' loops of requests for its model, and starts again.
  let running = true;
  let sent = 0;
  const client = async () => {
    while (running && sent < 5000) {
      sent++;
      await generate(a);
    }
  };
  const loop = Promise.all([client(), client()]);
  const until = async (check: () => Promise<boolean>, what: string) => {
    const end = Date.now() + 60_000;
    let ok = await check();
    while (!ok && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 200));
      ok = await check();
    }
    t.ok(ok, what);
  };
  const old = hosts.get(homeA)!;
  old.child.kill("SIGTERM");
  t.equal((await old.exited).code, 0, `host ${homeA} drained and exited 0`);
  const elsewhere = await counts(GENERATED);
  let movedTo: number | undefined;
  await until(async () => {
    const moved = grown(elsewhere, await counts(GENERATED));
    movedTo = [...moved.keys()].find((i) => i !== homeA);
    return movedTo !== undefined;
  }, `requests for '${a}' moved to another host while host ${homeA} is down`);
  if (movedTo !== undefined) t.ok((await loaded(movedTo)).includes(`${a}:latest`), `host ${movedTo} loaded '${a}'`);

  hosts.set(homeA, await net.startHost(t, dir, homeA, env));
  await waitReady(`${hostUrl(homeA)}/readyz`);
  await until(async () => ((await counts(GENERATED)).get(homeA) ?? 0) > 0, `requests for '${a}' moved back to host ${homeA}`);
  running = false;
  await loop;
  t.same([...(await phase(a, 5))], [[homeA, 5]], `once back, all 5 requests for '${a}' are served by host ${homeA} again`);
  t.same([...(await phase(b, 3))], [[homeB, 3]], `'${b}' never left host ${homeB}`);
  t.same(failed, [], `no request failed (${sent} sent during the stop and return)`);
});
