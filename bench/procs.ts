/**
 * Every process the benchmark starts (daemons, llama-server, the direct process, CPU hogs) is
 * registered here, so that a failed or interrupted run does not leave them running: they are
 * killed when the benchmark exits, whatever the reason.
 */
import type { ChildProcess } from "node:child_process";
import { busyCpus } from "../src/cpu.js";

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

/**
 * Waits until the host's CPUs are idle (under 0.2 CPUs busy over 50 ms; 2 s at most). A server's
 * decoding threads go on polling for work after a request ends (llama-server's ggml threadpool for
 * ~100 ms here, lmd's ~20 ms), and the next workload measured must not share the CPUs with them:
 * in interleaved rounds, whichever server followed llama-server lost part of its round to it.
 */
export async function settle(): Promise<void> {
  const until = performance.now() + 2000;
  while (performance.now() < until && (await busyCpus(50)) > 0.2);
}
