/**
 * `lmd doctor`: the first command an operator runs. It reads the configuration as `lmd serve`
 * would (from the environment; under systemd, run it with the unit's: see docs/deployment.md) and
 * checks, in order: the configuration, the model store (writable, its size, free space), the
 * listen address (free, or who holds it), the compute backends, memory, and the unit's state
 * under systemd. It prints one line per check and exits 0 when all is well, else 1 with the first
 * problem named on the last line (`problem: ...`).
 */
import { execFile } from "node:child_process";
import { accessSync, constants, existsSync, readdirSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { mkdir, readdir, rm, stat, statfs, writeFile } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { clientUrl, loadConfig, VARIABLES, withAliases, type Config } from "../config.js";
import { availableRam } from "../scheduler/memory.js";
import { formatBytes } from "../units.js";
import { VERSION } from "../version.js";
import { EXIT, runCommand, type CommandSpec } from "./common.js";

export const spec: CommandSpec = {
  usage: "lmd doctor",
  summary: "Check the configuration, model store, address, backends, memory and systemd unit",
  maxArgs: 0,
  examples: ["lmd doctor", "sudo systemd-run --pipe --wait -p User=lmd -p EnvironmentFile=/etc/lmd/lmd.env -E SERVICE_MODELS=/var/lib/lmd/models lmd doctor"],
};

/** One check's outcome: a line to print, and the problem when there is one. */
interface Check {
  name: string;
  line: string;
  problem?: string;
}

export async function run(argv: string[]): Promise<void> {
  await runCommand(spec, argv, async () => {
    const checks: Check[] = [];
    const print = (c: Check) => process.stdout.write(`${c.name}: ${c.line}\n`);
    const config = checkConfig(process.env);
    checks.push(config.check);
    print(config.check);
    if (config.config) {
      for (const check of [checkStore, checkAddress, checkBackends, checkMemory, checkUnit]) {
        const c = await check(config.config);
        checks.push(c);
        print(c);
      }
    }
    const first = checks.find((c) => c.problem !== undefined);
    if (first) {
      process.stdout.write(`problem: ${first.problem}\n`);
      process.exitCode = EXIT.error;
    } else process.stdout.write(`ok: lmd ${VERSION} is ready to serve\n`);
  });
}

/** Variable names whose values are never printed. */
const SECRET = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH/i;

/** A value as it may be printed: secrets masked, credentials in URLs too. */
export function mask(name: string, value: string): string {
  if (SECRET.test(name)) return "********";
  return value.replace(/(\/\/[^/:@\s]+:)[^@/\s]+@/g, "$1****@");
}

function checkConfig(env: NodeJS.ProcessEnv): { check: Check; config?: Readonly<Config> } {
  let config: Readonly<Config>;
  try {
    config = loadConfig(env);
  } catch (err) {
    const message = (err as Error).message;
    return { check: { name: "configuration", line: message, problem: message } };
  }
  const { env: resolved, used } = withAliases(env);
  const set = Object.keys(VARIABLES).filter((v) => (resolved[v] ?? "").trim() !== "");
  const proxies = ["HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy"].filter((v) => env[v]);
  const shown = [...set, ...proxies].map((v) => `${v}=${mask(v, (resolved[v] ?? env[v] ?? "").trim())}`);
  const aliases = used.length > 0 ? `; read from Ollama's ${used.join(", ")}` : "";
  return {
    check: {
      name: "configuration",
      line: `valid (${shown.length > 0 ? shown.join(" ") : "all defaults"}${aliases}); listens on ${clientUrl(config.listen)}, store ${config.models}`,
    },
    config,
  };
}

async function checkStore(config: Readonly<Config>): Promise<Check> {
  const dir = config.models;
  const name = "store";
  if (!existsSync(dir)) {
    // The daemon creates it: what matters is that the nearest existing directory is writable.
    let at = path.resolve(dir);
    while (!existsSync(at) && path.dirname(at) !== at) at = path.dirname(at);
    try {
      if (!statSync(at).isDirectory()) throw Object.assign(new Error(), { code: "ENOTDIR" });
      accessSync(at, constants.W_OK);
      return { name, line: `${dir} does not exist yet; lmd serve will create it in ${at}` };
    } catch (err) {
      const problem = `model store SERVICE_MODELS=${dir} cannot be created: ${at} is not writable (${(err as NodeJS.ErrnoException).code})`;
      return { name, line: problem, problem };
    }
  }
  // Writable for real (a read-only mount or ProtectSystem= passes access(2) checks on some paths).
  const probe = path.join(dir, `.lmd-doctor-${process.pid}`);
  try {
    await mkdir(dir, { recursive: true });
    await writeFile(probe, "");
    await rm(probe, { force: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    const problem = `model store SERVICE_MODELS=${dir} is not writable (${code})`;
    return { name, line: problem, problem };
  }
  const [size, fs] = await Promise.all([duBytes(dir), statfs(dir).catch(() => undefined)]);
  const models = await countModels(dir);
  const free = fs ? `${formatBytes(fs.bavail * fs.bsize)} free` : "free space unknown";
  return { name, line: `${dir} writable, ${models} model${models === 1 ? "" : "s"}, ${formatBytes(size)} used, ${free}` };
}

async function duBytes(dir: string): Promise<number> {
  let total = 0;
  const walk = async (d: string): Promise<void> => {
    const entries = await readdir(d, { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.isFile()) total += (await stat(p).catch(() => ({ size: 0 }))).size;
    }
  };
  await walk(dir);
  return total;
}

/** Manifests under manifests/ (registry/namespace/model/tag). */
async function countModels(dir: string): Promise<number> {
  let n = 0;
  const walk = async (d: string, depth: number): Promise<void> => {
    const entries = await readdir(d, { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      if (e.isDirectory() && depth < 4) await walk(path.join(d, e.name), depth + 1);
      else if (e.isFile() && depth === 3) n++;
    }
  };
  await walk(path.join(dir, "manifests"), 0);
  return n;
}

async function checkAddress(config: Readonly<Config>): Promise<Check> {
  const name = "address";
  const where = clientUrl(config.listen);
  const err = await tryListen(config.listen);
  if (err === undefined) return { name, line: `${where} is free` };
  if (err.code !== "EADDRINUSE") {
    const problem = `cannot listen on ${where}: ${err.code ?? err.message}`;
    return { name, line: problem, problem };
  }
  const lmd = await askVersion(where);
  const holder = whoListens(config.listen.port);
  if (lmd !== undefined) return { name, line: `${where} is served by lmd ${lmd}${holder ? ` (${holder})` : ""}` };
  const problem = `${where} is in use by another program${holder ? ` (${holder})` : ""}`;
  return { name, line: problem, problem };
}

function tryListen(listen: Config["listen"]): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", (err: NodeJS.ErrnoException) => resolve(err));
    server.listen({ host: listen.host || undefined, port: listen.port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}

/** The version an lmd at that address reports (its `/` says "lmd is running"), else undefined. */
async function askVersion(base: string): Promise<string | undefined> {
  try {
    const root = await fetch(base, { signal: AbortSignal.timeout(3000) });
    if ((await root.text()).trim() !== "lmd is running") return undefined;
    const res = await fetch(`${base}/api/version`, { signal: AbortSignal.timeout(3000) });
    return ((await res.json()) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

/** `pid 123 node` for the process listening on the TCP port, when /proc lets us see it. */
function whoListens(port: number): string | undefined {
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const row of text.split("\n").slice(1)) {
      const cols = row.trim().split(/\s+/);
      const local = cols[1];
      if (!local || cols[3] !== "0A") continue; // 0A: LISTEN
      if (Number.parseInt(local.split(":")[1] ?? "", 16) === port && cols[9]) inodes.add(cols[9]);
    }
  }
  if (inodes.size === 0) return undefined;
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (m && inodes.has(m[1]!)) {
        let comm = "";
        try {
          comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
        } catch {
          // The process may have exited meanwhile: the pid alone still answers.
        }
        return `pid ${pid}${comm ? ` ${comm}` : ""}`;
      }
    }
  }
  return undefined;
}

/**
 * The backends found and the one a load would use, as the daemon finds them at start
 * (src/backend.ts: the files first, then a probe process that opens node-llama-cpp as a runner
 * would, naming the device).
 */
async function checkBackends(config: Readonly<Config>): Promise<Check> {
  const name = "backends";
  const { findBackend, installedBackends, SYSTEM_PACKAGE } = await import("../backend.js");
  const found = ["cpu", ...installedBackends().installed.map((b) => (b.packaged ? `${b.backend} (${SYSTEM_PACKAGE[b.backend]})` : b.backend))];
  const report = await findBackend(config.gpu);
  const mode = config.gpu === false ? "false" : config.gpu;
  const use = report.backend === "cpu" ? "cpu" : `${report.backend} (${report.devices.join(", ") || "a GPU"}, ${formatBytes(report.vramBytes)} of VRAM)`;
  const unused = report.unused.map((u) => `${u.backend} not used: ${u.reason}`);
  const line = `found ${found.join(", ")}; SERVICE_GPU=${mode} would use ${use}${unused.length > 0 ? `; ${unused.join("; ")}` : ""}`;
  // SERVICE_GPU=cuda or vulkan with that backend unusable: every model load would fail.
  if (config.gpu !== false && config.gpu !== "auto" && report.backend !== config.gpu) {
    return { name, line, problem: `SERVICE_GPU=${config.gpu}, but the ${config.gpu} backend cannot be used: ${report.error ?? "no usable device"}` };
  }
  return { name, line };
}

async function checkMemory(): Promise<Check> {
  const available = await availableRam();
  return { name: "memory", line: `${formatBytes(os.totalmem())} total, ${formatBytes(available)} available to new models (cgroup limit included)` };
}

/** The unit's state when this host runs systemd (PID 1 is systemd); not a problem when stopped. */
async function checkUnit(): Promise<Check> {
  const name = "unit";
  if (!existsSync("/run/systemd/system")) return { name, line: "not under systemd" };
  const out = await new Promise<string | undefined>((resolve) => {
    execFile(
      "systemctl",
      ["show", "-p", "LoadState,ActiveState,SubState,StatusText,MainPID,NRestarts,Result", "lmd.service"],
      { timeout: 5000 },
      (err, stdout) => resolve(err ? undefined : stdout),
    );
  });
  if (out === undefined) return { name, line: "systemctl did not answer" };
  const p = Object.fromEntries(out.trim().split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
  if (p.LoadState === "not-found") return { name, line: "lmd.service is not installed" };
  const pid = p.MainPID && p.MainPID !== "0" ? `, pid ${p.MainPID}` : "";
  const line = `lmd.service ${p.ActiveState} (${p.SubState})${pid}${p.StatusText ? `: ${p.StatusText}` : ""}; restarts ${p.NRestarts ?? 0}`;
  if (p.ActiveState === "failed") return { name, line, problem: `lmd.service failed (${p.Result}); see journalctl -u lmd -p err` };
  return { name, line };
}
