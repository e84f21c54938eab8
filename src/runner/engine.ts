/**
 * The runner's node-llama-cpp instance (child-side: imported by child.ts, and by tests).
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
import type { RunnerGpu } from "./protocol.js";

export type EngineLog = (level: "debug" | "error", message: string) => void;

/** The Llama a runner loads its models with: the prebuilt or locally built addon, never a build here. */
export function openLlama(gpu: RunnerGpu, log: EngineLog): Promise<Llama> {
  return getLlama({
    gpu,
    maxThreads: 0,
    build: "never",
    progressLogs: false,
    logLevel: LlamaLogLevel.warn,
    logger: (level, message) => {
      const text = message.trim();
      if (text) log(level === LlamaLogLevel.error || level === LlamaLogLevel.fatal ? "error" : "debug", `llama.cpp: ${text}`);
    },
  });
}
