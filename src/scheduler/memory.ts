/**
 * How much memory a new model may take, and the refusal when it cannot fit (CONTRACT §3).
 *
 * RAM available is the kernel's `MemAvailable` (free memory plus reclaimable page cache), capped
 * by the daemon's cgroup limit (`memory.max` − `memory.current`) when one is set: under systemd or
 * in a container the cgroup, not the machine, is what the OOM killer enforces.
 */
import { readFile } from "node:fs/promises";
import os from "node:os";
import { ModelLoadError } from "../errors.js";
import type { MemoryEstimate } from "../runner/protocol.js";
import { formatBytes } from "../units.js";

/** Bytes of RAM a new load may use now. */
export async function availableRam(): Promise<number> {
  const meminfo = await readFile("/proc/meminfo", "utf8").catch(() => "");
  const match = /^MemAvailable:\s+(\d+) kB/m.exec(meminfo);
  const machine = match?.[1] ? Number(match[1]) * 1024 : os.freemem();
  const cgroup = await cgroupHeadroom();
  return cgroup === undefined ? machine : Math.min(machine, cgroup);
}

/** `memory.max − memory.current` of this process's cgroup (v2); undefined when unlimited or unknown. */
async function cgroupHeadroom(): Promise<number | undefined> {
  const self = await readFile("/proc/self/cgroup", "utf8").catch(() => "");
  const v2 = /^0::(\/.*)$/m.exec(self)?.[1];
  if (v2 === undefined) return undefined;
  const dir = `/sys/fs/cgroup${v2 === "/" ? "" : v2}`;
  const [max, current] = await Promise.all([
    readFile(`${dir}/memory.max`, "utf8").catch(() => "max"),
    readFile(`${dir}/memory.current`, "utf8").catch(() => ""),
  ]);
  const limit = Number(max.trim());
  const used = Number(current.trim());
  if (!Number.isFinite(limit) || !Number.isFinite(used) || current.trim() === "") return undefined;
  return Math.max(0, limit - used);
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
