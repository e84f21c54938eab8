/**
 * Every process the benchmark starts (daemons, llama-server, the direct process, CPU hogs) is
 * registered here, so that a failed or interrupted run does not leave them running: they are
 * killed when the benchmark exits, whatever the reason.
 */
import type { ChildProcess } from "node:child_process";

const live = new Set<ChildProcess>();

function killAll(): void {
  for (const child of live) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  live.clear();
}

process.once("exit", killAll);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => {
    process.stderr.write(`bench: ${signal} received, stopping its processes\n`);
    killAll();
    process.exit(130);
  });
}

/** Registers `child` to be killed when the benchmark exits; returns it. */
export function track<T extends ChildProcess>(child: T): T {
  live.add(child);
  child.once("exit", () => live.delete(child));
  return child;
}

/** SIGTERM, then wait for the exit (SIGKILL after `graceMs`). */
export async function stopProcess(child: ChildProcess | undefined, graceMs = 15_000): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}
