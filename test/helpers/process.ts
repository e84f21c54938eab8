/**
 * Forks the built `lmd` (`dist/src/main.js <command>`) as a user or systemd would, for tests of
 * signals, exit statuses and logs. Its stdout (pino JSON lines) is collected and parsed.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type { Test } from "tap";

export const MAIN = fileURLToPath(new URL("../../dist/src/main.js", import.meta.url));

export interface ForkedLmd {
  child: ChildProcess;
  /** Parsed JSON log lines so far (a line that is not JSON is kept as `{ raw }`). */
  lines: Record<string, unknown>[];
  /** Everything written to stdout and stderr so far (to check that no secret leaks). */
  output(): string;
  stderr(): string;
  /** Resolves with the exit code and signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Waits for a log line matching `match` among the lines after the first `from`. */
  waitForLog(match: (line: Record<string, unknown>) => boolean, options?: { from?: number; timeoutMs?: number }): Promise<Record<string, unknown>>;
}

export interface ForkedDaemon extends ForkedLmd {
  url: string;
}

/**
 * Spawns `lmd <args>` with `env` over a minimal environment; killed on teardown if still running.
 * `wrap` runs it through a command that execs it in place (e.g. `ip netns exec <ns>`).
 */
export function forkLmd(t: Test, args: string[], env: Record<string, string>, wrap: string[] = []): ForkedLmd {
  const argv = [...wrap, process.execPath, MAIN, ...args];
  const child = spawn(argv[0]!, argv.slice(1), {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/root", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Record<string, unknown>[] = [];
  const waiters = new Set<() => void>();
  let out = "";
  let err = "";
  let buf = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => {
    out += d;
    buf += d;
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        lines.push({ raw: line });
      }
    }
    for (const w of [...waiters]) w();
  });
  child.stderr!.setEncoding("utf8").on("data", (d: string) => {
    out += d;
    err += d;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
  });
  const waitForLog: ForkedLmd["waitForLog"] = (match, { from = 0, timeoutMs = 60_000 } = {}) =>
    new Promise((resolve, reject) => {
      const check = () => {
        const found = lines.slice(from).find(match);
        if (!found) return;
        waiters.delete(check);
        clearTimeout(timer);
        resolve(found);
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`no matching log line within ${timeoutMs} ms; output: ${out.slice(-800)}`));
      }, timeoutMs);
      waiters.add(check);
      // A process that exited will print nothing more: fail at once instead of at the timeout.
      void exited.then(() => setTimeout(() => {
        if (!waiters.has(check)) return;
        waiters.delete(check);
        clearTimeout(timer);
        reject(new Error(`lmd ${args.join(" ")} exited; output: ${out.slice(-800)}`));
      }, 50));
      check();
    });
  return { child, lines, output: () => out, stderr: () => err, exited, waitForLog };
}

/** Spawns `lmd serve` (one inference thread, no GPU) and waits until it listens unless told not to. */
export async function forkDaemon(t: Test, env: Record<string, string>, options: { waitListening?: boolean; wrap?: string[] } = {}): Promise<ForkedDaemon> {
  const lmd = forkLmd(t, ["serve"], { SERVICE_THREADS: "1", SERVICE_GPU: "false", ...env }, options.wrap);
  let url = "";
  if (options.waitListening !== false) {
    const listening = await lmd.waitForLog((l) => l.msg === "lmd listening");
    const host = String(listening.address);
    url = `http://${host.includes(":") ? `[${host}]` : host}:${String(listening.port)}`;
  }
  return { ...lmd, url };
}

/**
 * The pid of a process's first child (the runner of a forked daemon) once it runs its own program,
 * waiting up to ~30 s for it. Until its exec a forked child is a copy of its parent, and the parent
 * waits inside spawn for that exec: a child stopped (SIGSTOP) before it would freeze the daemon too.
 */
export async function runnerPidOf(parent: number): Promise<number | undefined> {
  const parentCommand = await readFile(`/proc/${parent}/cmdline`, "utf8").catch(() => "");
  for (let i = 0; i < 300; i++) {
    const children = await readFile(`/proc/${parent}/task/${parent}/children`, "utf8").catch(() => "");
    const pid = children.trim().split(/\s+/).filter(Boolean).map(Number)[0];
    if (pid && (await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => parentCommand)) !== parentCommand) return pid;
    await new Promise((r) => setTimeout(r, pid ? 10 : 100)); // forked, not yet exec'd: look again soon
  }
  return undefined;
}

/** True while a process with this pid exists. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
