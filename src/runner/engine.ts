/**
 * The runner's node-llama-cpp instance (child-side: imported by runner/child/load.ts, and by tests).
 *
 * Every context a runner makes — the model's, the draft's, the embedding and ranking ones — gets
 * the load's thread count explicitly, and no two of them decode at once: the runner has one libuv
 * thread, so their native decodes run one after another. node-llama-cpp's `maxThreads` would split
 * a budget between the contexts that hold a reservation instead (its ThreadsSplitter), and a draft
 * context keeps its reservation until a timer after its last decode: the target's verification
 * batch, decoded right after the draft's, got 1 thread of 2 — speculative decoding ran the target at
 * half speed. `maxThreads: 0` turns the splitter off; each context decodes with its own threads.
 */
import { getLlama, LlamaLogLevel, type Llama } from "node-llama-cpp";
import type { RunnerGpu } from "./types.js";

export type EngineLog = (level: "debug" | "error", message: string) => void;

/**
 * The Llama a runner loads its models with: the prebuilt or locally built addon, never a build here.
 *
 * `cuda` or `vulkan` insists on that backend (docs/configuration.md). node-llama-cpp tests a prebuilt
 * binary before it loads it and refuses one with no usable device, but a local build (a CUDA build
 * made with bench/build-cuda.sh, say) loads untested, and when its backend finds no device (no
 * driver, a driver older than the CUDA runtime) it comes back with `gpu: false`: the models would
 * then run on the CPU with nothing but a log line to say so. That is refused here, with llama.cpp's
 * own reason.
 */
export async function openLlama(gpu: RunnerGpu, log: EngineLog, get: typeof getLlama = getLlama, gpuOverheadBytes = 0): Promise<Llama> {
  let lastError = "";
  const llama = await get({
    gpu,
    maxThreads: 0,
    // SERVICE_GPU_OVERHEAD on top of node-llama-cpp's own margin: "auto" layers leave it free.
    ...(gpuOverheadBytes > 0 ? { vramPadding: (total: number) => vramPadding(total, gpuOverheadBytes) } : {}),
    build: "never",
    progressLogs: false,
    logLevel: LlamaLogLevel.warn,
    logger: (level, message) => {
      const text = message.trim();
      const error = level === LlamaLogLevel.error || level === LlamaLogLevel.fatal;
      if (error && text) lastError = text;
      if (text) log(error ? "error" : "debug", `llama.cpp: ${text}`);
    },
  });
  if ((gpu === "cuda" || gpu === "vulkan") && llama.gpu !== gpu) {
    await llama.dispose();
    throw new Error(`SERVICE_GPU is ${gpu}, but the ${gpu} backend found no usable device${lastError ? ` (${lastError})` : ""}`);
  }
  return llama;
}

/**
 * The VRAM node-llama-cpp leaves out of its "auto" layer choice: its default margin (8 % of the
 * total, at most 1.6 GiB) plus the operator's reserve.
 */
export function vramPadding(totalVram: number, overheadBytes: number): number {
  return Math.floor(Math.min(totalVram * 0.08, 1.6 * 1024 ** 3)) + overheadBytes;
}
