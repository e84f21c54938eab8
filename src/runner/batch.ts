/**
 * The prompt batch a context gets when neither the model nor the request sets `num_batch`. On the
 * CPU, ggml computes each matrix product over the whole batch of activations at once (and, without
 * flash attention, holds the batch's attention scores): 256 tokens of them fit the cores' caches
 * better than 512 (llama.cpp's and node-llama-cpp's default, sized for GPUs), and a prompt decodes as
 * fast or faster (bench/prefill-batch.ts; docs/benchmarks.md). A model with any layer on a GPU keeps
 * node-llama-cpp's default.
 */
import type { LoadSpec } from "./types.js";

/** The default prompt batch of a context whose every layer runs on the CPU. */
export const CPU_BATCH = 256;

/** The batch size to give node-llama-cpp for a context (undefined: its default). */
export function batchSizeFor(spec: Pick<LoadSpec, "batchSize" | "contextSize" | "sequences">, gpuLayers: number): number | undefined {
  if (spec.batchSize !== undefined) return spec.batchSize;
  return gpuLayers === 0 ? Math.min(CPU_BATCH, spec.contextSize * spec.sequences) : undefined;
}
