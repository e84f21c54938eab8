/**
 * lmd hosts in network namespaces of their own (a veth pair to this machine, addresses that exist
 * only between them), and the proxies in front of them, for the failover and routing tests.
 * Needs root.
 */
import { spawn, spawnSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import path from "node:path";
import type { Test } from "tap";
import { forkDaemon, type ForkedDaemon } from "../helpers/process.js";

const EXAMPLES = new URL("../../examples/", import.meta.url);

function ip(args: string[]): void {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr}`);
}

/**
 * Hosts `10.<net>.<i>.2` in namespaces `<prefix><pid>-<i>`, each reached over a veth pair from
 * `10.<net>.<i>.1` here. Each test file uses its own `net`, so that files running at once do not
 * share addresses.
 */
export class HostNet {
  private readonly tag = String(process.pid % 100_000);
  constructor(private readonly prefix: string, private readonly net: number) {}

  ns(i: number): string {
    return `${this.prefix}${this.tag}-${i}`;
  }

  addr(i: number): string {
    return `10.${this.net}.${i}.2`;
  }

  /** Creates host i's namespace (removed on teardown, its veth pair with it). */
  make(t: Test, i: number): void {
    const ns = this.ns(i);
    const [outer, inner] = [`${this.prefix}${this.tag}h${i}`, `${this.prefix}${this.tag}n${i}`];
    t.teardown(() => {
      spawnSync("ip", ["netns", "del", ns]);
    });
    ip(["netns", "add", ns]);
    ip(["link", "add", outer, "type", "veth", "peer", "name", inner]);
    ip(["link", "set", inner, "netns", ns]);
    ip(["addr", "add", `10.${this.net}.${i}.1/24`, "dev", outer]);
    ip(["link", "set", outer, "up"]);
    ip(["netns", "exec", ns, "ip", "addr", "add", `${this.addr(i)}/24`, "dev", inner]);
    ip(["netns", "exec", ns, "ip", "link", "set", inner, "up"]);
    ip(["netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
  }

  /** `lmd serve` inside host i's namespace on port 11434, with its own store under `dir`. */
  startHost(t: Test, dir: string, i: number, env: Record<string, string> = {}): Promise<ForkedDaemon> {
    return forkDaemon(
      t,
      { SERVICE_HOST: `${this.addr(i)}:11434`, SERVICE_MODELS: path.join(dir, `store-${i}`), SERVICE_SHUTDOWN_TIMEOUT: "20s", ...env },
      { wrap: ["ip", "netns", "exec", this.ns(i)] },
    );
  }
}

/** Polls `url` until it answers 200 (bounded). */
export async function waitReady(url: string, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const ok = await fetch(url).then((r) => r.ok, () => false);
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} not ready after ${timeoutMs} ms`);
}

/** Reads an example and replaces each `[from, to]`; every `from` must occur (no silent drift). */
export async function render(t: Test, file: string, replacements: [string, string][]): Promise<string> {
  let text = await readFile(new URL(file, EXAMPLES), "utf8");
  for (const [from, to] of replacements) {
    t.ok(text.includes(from), `${file} contains '${from}'`);
    text = text.replaceAll(from, to);
  }
  return text;
}

/** Runs a proxy in the foreground for the rest of the test; an early failing exit fails the test. */
export function startProxy(t: Test, cmd: string, args: string[]): void {
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
