/**
 * The backend probe's smoke test (runner/probe.ts): a backend that opens can still fail at its
 * first decode, so a tiny generated model is loaded with every layer offloaded, a few tokens are
 * decoded and one is sampled. The model file (a few MB) is written into `dir` and removed.
 */
import { rm } from "node:fs/promises";
import path from "node:path";
import type { Llama } from "node-llama-cpp";
import { makeModel } from "../gguf/make-model.js";

/** Resolves with the sampled token; throws (or aborts the process) when the backend cannot decode. */
export async function smokeTest(llama: Llama, dir: string): Promise<number> {
  const file = path.join(dir, "smoke.gguf");
  try {
    await makeModel(file, { preset: "tiny" });
    const model = await llama.loadModel({ modelPath: file, gpuLayers: "max" });
    try {
      const context = await model.createContext({ contextSize: 128, sequences: 1, threads: 1 });
      try {
        for await (const token of context.getSequence().evaluate(model.tokenize("The quick brown fox"))) return token;
        throw new Error("the smoke test sampled no token");
      } finally {
        await context.dispose();
      }
    } finally {
      await model.dispose();
    }
  } finally {
    await rm(file, { force: true });
  }
}
