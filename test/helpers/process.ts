/**
 * Forks the built daemon (`dist/src/main.js serve`) as a user or systemd would, for tests of
 * signals, exit statuses and logs. Its stdout (pino JSON lines) is collected and parsed.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Test } from "tap";

export const MAIN = fileURLToPath(new URL("../../dist/src/main.js", import.meta.url));

export interface ForkedDaemon {
  child: ChildProcess;
  url: string;
  /** Parsed JSON log lines so far. */
  lines: Record<string, unknown>[];
  stderr: () => string;
  /** Resolves with the exit code and signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Waits until a log line matches. */
  waitForLog(match: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
}

/** Spawns `lmd serve` with `env` (added to a minimal environment) and waits until it listens. */
export async function forkDaemon(t: Test, env: Record<string, string>, options: { waitListening?: boolean } = {}): Promise<ForkedDaemon> {
  const child = spawn(process.execPath, [MAIN, "serve"], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/root", SERVICE_THREADS: "1", SERVICE_GPU: "false", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Record<string, unknown>[] = [];
  const waiters = new Set<() => void>();
  let err = "";
  let buf = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => {
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
      for (const w of [...waiters]) w();
    }
  });
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  const waitForLog = (match: (line: Record<string, unknown>) => boolean, timeoutMs = 60_000) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const check = () => {
        const found = lines.find(match);
        if (found) {
          waiters.delete(check);
          clearTimeout(timer);
          resolve(found);
        }
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`no matching log line within ${timeoutMs} ms; stderr: ${err.slice(-500)}; log: ${JSON.stringify(lines.slice(-5))}`));
      }, timeoutMs);
      waiters.add(check);
      void exited.then(() => setTimeout(check, 50));
      check();
    });
  let url = "";
  if (options.waitListening !== false) {
    const listening = await waitForLog((l) => l.msg === "lmd listening");
    const host = String(listening.address);
    url = `http://${host.includes(":") ? `[${host}]` : host}:${String(listening.port)}`;
  }
  return { child, url, lines, stderr: () => err, exited, waitForLog };
}
