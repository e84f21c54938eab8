/**
 * How many CPU threads a model load should use when SERVICE_THREADS is not set.
 *
 * llama.cpp's CPU threads meet at spinning barriers several times per token. When another busy
 * process shares their cores, the kernel time-slices a spinning thread against it and decoding
 * collapses to a few per cent of its speed (docs/benchmarks/history.md, "Threads on a busy machine"),
 * while one thread fewer keeps most of the speed. So each load takes the
 * cores that are free when it starts:
 *
 *   threads = clamp(round(usable − busy), 1, usable)
 *
 * where `usable` is the physical cores this process may run on (affinity and the cgroup's CPU
 * quota included) and `busy` the busy time of the CPUs it may run on, measured over a short window
 * (other processes, other runners' decoding). A leaf module: the config, the runner and tests use it.
 */
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import os from "node:os";

/** Physical cores (hyper-threads counted once), or the logical CPUs where /proc/cpuinfo says nothing. */
export function physicalCores(): number {
  try {
    const pairs = new Set<string>();
    let physical = "0";
    for (const line of readFileSync("/proc/cpuinfo", "utf8").split("\n")) {
      const [key, val] = line.split(":").map((s) => s.trim());
      if (key === "physical id") physical = val ?? "0";
      if (key === "core id") pairs.add(`${physical}/${val}`);
    }
    if (pairs.size > 0) return pairs.size;
  } catch {
    // not Linux, or /proc hidden: fall through
  }
  return Math.max(1, os.availableParallelism());
}

/** CPUs the cgroup's quota allows (cgroup v2 `cpu.max`), or Infinity without a quota. */
export function cgroupCpus(): number {
  try {
    const [quota, period] = readFileSync("/sys/fs/cgroup/cpu.max", "utf8").trim().split(/\s+/);
    if (quota === undefined || quota === "max" || period === undefined) return Infinity;
    return Math.max(1, Math.ceil(Number(quota) / Number(period)));
  } catch {
    return Infinity;
  }
}

/** The cores a load may use at most: physical cores within this process's affinity and quota. */
export function usableCores(): number {
  return Math.max(1, Math.min(physicalCores(), os.availableParallelism(), cgroupCpus()));
}

/** The rule in this file's comment; `busy` is in CPUs (0.8 = one CPU 80% busy). */
export function chooseThreads(usable: number, busy: number): number {
  return Math.min(usable, Math.max(1, Math.round(usable - busy)));
}

/** CPU numbers of a kernel CPU list such as "0-3,8,10-11" (the `Cpus_allowed_list` of /proc/<pid>/status). */
export function parseCpuList(list: string): Set<number> {
  const cpus = new Set<number>();
  for (const part of list.trim().split(",")) {
    const [from, to = from] = part.split("-").map(Number);
    if (from === undefined || to === undefined || !Number.isInteger(from) || !Number.isInteger(to)) continue;
    for (let n = from; n <= to; n++) cpus.add(n);
  }
  return cpus;
}

/** The CPUs this process may run on (its affinity, a container's cpuset), or undefined where unreadable. */
function allowedCpus(): Set<number> | undefined {
  try {
    const line = readFileSync("/proc/self/status", "utf8").match(/^Cpus_allowed_list:\s*(.+)$/m);
    const cpus = line ? parseCpuList(line[1]!) : undefined;
    return cpus && cpus.size > 0 ? cpus : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Busy and total jiffies summed over the CPU lines of /proc/stat, and how many lines that is: the
 * CPUs in `allowed` (where given), since another process's work on a CPU lmd may not use takes
 * nothing from it.
 */
export function parseCpuTimes(text: string, allowed?: Set<number>): { busy: number; total: number; cpus: number } {
  let busy = 0;
  let total = 0;
  let cpus = 0;
  for (const line of text.split("\n")) {
    const cpu = /^cpu(\d+) /.exec(line);
    if (!cpu || (allowed && !allowed.has(Number(cpu[1])))) continue;
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const sum = f.reduce((a, b) => a + b, 0);
    const idle = (f[3] ?? 0) + (f[4] ?? 0); // idle + iowait
    busy += sum - idle;
    total += sum;
    cpus++;
  }
  return { busy, total, cpus };
}

const cpuTimes = async () => parseCpuTimes(await readFile("/proc/stat", "utf8"), allowedCpus());

/** {@link parseCpuTimes} of /proc/stat now (a runner's governor reads it once a second: src/runner/threads.ts). */
export const cpuTimesSync = () => parseCpuTimes(readFileSync("/proc/stat", "utf8"), allowedCpus());

/** CPUs' worth of busy time over `windowMs` (e.g. 1.0 = one CPU fully busy); 0 where /proc/stat is unreadable. */
export async function busyCpus(windowMs = 300): Promise<number> {
  try {
    const a = await cpuTimes();
    await new Promise((r) => setTimeout(r, windowMs));
    const b = await cpuTimes();
    const total = b.total - a.total;
    if (total <= 0) return 0;
    return ((b.busy - a.busy) / total) * b.cpus;
  } catch {
    return 0;
  }
}

/** Threads for a load now: the free usable cores, at least one. */
export async function autoThreads(): Promise<{ threads: number; usable: number; busy: number }> {
  const usable = usableCores();
  const busy = await busyCpus();
  return { threads: chooseThreads(usable, busy), usable, busy: Math.round(busy * 100) / 100 };
}
