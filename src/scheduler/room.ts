/**
 * Making room for a load: which idle models may go (least recently used first, never a pinned one),
 * and the memory check that evicts them only when that lets the new model fit.
 */
import type { Logger } from "pino";
import type { MemoryEstimate } from "../runner/types.js";
import type { ResolvedModel } from "../store/store.js";
import { availableRam, notEnoughMemory, shortfall, vramRoom, type Room } from "./memory.js";
import type { Loaded } from "./types.js";

/** Idle models that may be unloaded to make room, least recently used first (never a pinned one, never `except`). */
export function evictable(entries: Iterable<Loaded>, pinned: (key: string) => boolean, except?: string): Loaded[] {
  return [...entries].filter((e) => e.active === 0 && e.model.key !== except && !pinned(e.model.key)).sort((a, b) => a.lastUsed - b.lastUsed);
}

export interface RoomMaker {
  log: Logger;
  /** SERVICE_GPU_OVERHEAD: VRAM kept free on each GPU. */
  gpuOverheadBytes: number;
  /** The models that may go now, least recently used first. */
  idle: () => Loaded[];
  /** Whether the entry is still idle and still the loaded one (a request may take it meanwhile). */
  stillIdle: (entry: Loaded) => boolean;
  evict: (entry: Loaded) => Promise<void>;
}

/**
 * The memory check (runs while this load holds the one loading turn): refuses a model that cannot
 * fit even with every idle model gone, else evicts idle models, least recently used first, until
 * node-llama-cpp's estimate fits in what is available.
 */
export async function makeRoom(model: ResolvedModel, estimate: MemoryEstimate, room: RoomMaker): Promise<void> {
  // What evicting frees is counted by the runners' own accounting, not re-measured: a process's
  // memory (page cache of mmapped weights especially) shows up as available only gradually.
  const now: Room = { ram: await availableRam(), vram: vramRoom(estimate, room.gpuOverheadBytes) };
  const reclaimable = room.idle().reduce((r, e) => ({ ram: r.ram + e.runner.info.ramBytes, vram: r.vram + e.runner.info.vramBytes }), { ram: 0, vram: 0 });
  const reason = shortfall(estimate, { ram: now.ram + reclaimable.ram, vram: now.vram + reclaimable.vram });
  if (reason) {
    const facts = { model: model.display, needRam: estimate.ramBytes, needVram: estimate.vramBytes, room: now, reclaimable };
    room.log.warn(facts, "model does not fit in memory; load refused");
    throw notEnoughMemory(model.display, reason);
  }
  for (const entry of room.idle()) {
    if (!shortfall(estimate, now)) break;
    // A request may have taken the model while we measured: never evict a model in use.
    if (!room.stillIdle(entry)) continue;
    room.log.info({ model: entry.model.display, for: model.display }, "evicting an idle model to make room");
    await room.evict(entry);
    now.ram += entry.runner.info.ramBytes;
    now.vram += entry.runner.info.vramBytes;
  }
}
