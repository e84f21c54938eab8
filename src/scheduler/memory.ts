/**
 * How much memory a new model may take, and the refusal when it cannot fit.
 *
 * RAM available is the kernel's `MemAvailable` (free memory plus reclaimable page cache), capped
 * by the daemon's cgroup limit (v2's `memory.max` − `memory.current`, v1's `memory.limit_in_bytes` −
 * `memory.usage_in_bytes`) when one is set: under systemd or in a container the cgroup, not the
 * machine, is what the OOM killer enforces.
 */
import { readFile } from "node:fs/promises";
import os from "node:os";
import { ModelLoadError } from "../errors.js";
import type { MemoryEstimate } from "../runner/types.js";
import { formatBytes } from "../units.js";

/** Where the memory check reads the kernel's files: the real ones, or a fixture tree in tests. */
export interface MemoryFiles {
  /** `/proc/meminfo`. */
  meminfo: string;
  /** `/proc/self/cgroup`. */
  selfCgroup: string;
  /** Where cgroupfs is mounted: `/sys/fs/cgroup` (v2, or v1's per-controller directories below it). */
  cgroupRoot: string;
}

const SYSTEM: MemoryFiles = { meminfo: "/proc/meminfo", selfCgroup: "/proc/self/cgroup", cgroupRoot: "/sys/fs/cgroup" };

/** Bytes of RAM a new load may use now. */
export async function availableRam(files: MemoryFiles = SYSTEM): Promise<number> {
  const meminfo = await readFile(files.meminfo, "utf8").catch(() => "");
  const match = /^MemAvailable:\s+(\d+) kB/m.exec(meminfo);
  const machine = match?.[1] ? Number(match[1]) * 1024 : os.freemem();
  const cgroup = await cgroupHeadroom(files);
  return cgroup === undefined ? machine : Math.min(machine, cgroup);
}

/**
 * Limit − usage of this process's memory cgroup, the smallest over it and its ancestors (a parent's
 * limit binds its children too); undefined when no level limits memory or nothing can be read.
 * cgroup v1 (a `memory` controller line in /proc/self/cgroup: `memory.limit_in_bytes` and
 * `memory.usage_in_bytes` under `<root>/memory`) is read where it is mounted, else v2 (the `0::` line:
 * `memory.max` and `memory.current`).
 */
export async function cgroupHeadroom(files: MemoryFiles = SYSTEM): Promise<number | undefined> {
  const self = await readFile(files.selfCgroup, "utf8").catch(() => "");
  const v1 = /^\d+:(?:[^:\n]*,)?memory(?:,[^:\n]*)?:(\/.*)$/m.exec(self)?.[1];
  if (v1 !== undefined) {
    const headroom = await headroomUp(`${files.cgroupRoot}/memory`, v1, "memory.limit_in_bytes", "memory.usage_in_bytes");
    if (headroom !== null) return headroom;
  }
  const v2 = /^0::(\/.*)$/m.exec(self)?.[1];
  if (v2 === undefined) return undefined;
  const headroom = await headroomUp(files.cgroupRoot, v2, "memory.max", "memory.current");
  return headroom ?? undefined;
}

/** A v1 limit this large is the kernel's way of saying "none" (PAGE_COUNTER_MAX in bytes). */
const NO_LIMIT = 2 ** 60;

/**
 * The smallest limit − usage from `group` up to the hierarchy's root; undefined when no level has a
 * limit; null when `group` cannot be read at all (not mounted there). Inside a container the path
 * in /proc/self/cgroup may not exist in its own view of cgroupfs: the mount's root is then its group.
 */
async function headroomUp(mount: string, group: string, limitFile: string, usageFile: string): Promise<number | undefined | null> {
  const levels = group.split("/").filter(Boolean);
  const read = (dir: string, file: string) => readFile(`${dir}/${file}`, "utf8").then((s) => s.trim(), () => undefined);
  let start = levels.length;
  while (start > 0 && (await read(`${mount}/${levels.slice(0, start).join("/")}`, usageFile)) === undefined) start--;
  let best: number | undefined;
  let readAny = false;
  for (let n = start; n >= 0; n--) {
    const dir = n === 0 ? mount : `${mount}/${levels.slice(0, n).join("/")}`;
    const [limitText, usageText] = await Promise.all([read(dir, limitFile), read(dir, usageFile)]);
    if (limitText !== undefined || usageText !== undefined) readAny = true;
    const limit = Number(limitText);
    const used = Number(usageText);
    // `max` (v2) or a huge number (v1) means no limit at this level; the root has no files in v2.
    if (limitText === undefined || usageText === undefined || !Number.isFinite(limit) || !Number.isFinite(used) || limit >= NO_LIMIT) continue;
    const headroom = Math.max(0, limit - used);
    best = best === undefined ? headroom : Math.min(best, headroom);
  }
  return readAny ? best : null;
}

/** What is free now, and what evicting idle models would add. */
export interface Room {
  ram: number;
  vram: number;
}

/**
 * VRAM a new load may use now: what the runner's GPUs report free, less SERVICE_GPU_OVERHEAD on
 * each of them (the free figure is their sum). Never negative.
 */
export function vramRoom(estimate: Pick<MemoryEstimate, "vramFreeBytes" | "gpuDevices">, overheadPerGpu: number): number {
  const devices = estimate.gpuDevices ?? (estimate.vramFreeBytes > 0 ? 1 : 0);
  return Math.max(0, estimate.vramFreeBytes - overheadPerGpu * devices);
}

/** Why `estimate` does not fit in `room`, or undefined when it fits. */
export function shortfall(estimate: MemoryEstimate, room: Room): string | undefined {
  if (estimate.ramBytes > room.ram) return `needs ${formatBytes(estimate.ramBytes)}, ${formatBytes(room.ram)} available`;
  if (estimate.vramBytes > room.vram) return `needs ${formatBytes(estimate.vramBytes)} of VRAM, ${formatBytes(room.vram)} available`;
  return undefined;
}

/** The contract's refusal: 500 `failed to load model '<name>': not enough memory to load the model (needs X, Y available)`. */
export function notEnoughMemory(name: string, reason: string): ModelLoadError {
  return new ModelLoadError(name, `not enough memory to load the model (${reason})`);
}
