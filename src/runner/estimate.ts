/**
 * The memory a load will take, by node-llama-cpp's own estimates (imported only by runner/child/load.ts).
 *
 * The runner child computes this from the GGUF header before it loads anything, and the parent
 * decides (after evicting idle models if that makes room) whether the load may go ahead. The
 * estimate does not allocate the model or the context: `GgufInsights` simulates them.
 */
import { GgmlType, GgufInsights, readGgufFileInfo, type Llama } from "node-llama-cpp";
import type { LoadSpec, MemoryEstimate } from "./types.js";
import { flashAttentionFor } from "./attention.js";
import { batchSizeFor } from "./batch.js";

/** Estimates RAM and VRAM for `spec`; resolves `gpuLayers` "auto" the way node-llama-cpp would. */
export async function estimateLoad(llama: Llama, spec: LoadSpec): Promise<MemoryEstimate> {
  const insights = await GgufInsights.from(await readGgufFileInfo(spec.path), llama);
  const gpuLayers = await resolveGpuLayers(llama, insights, spec);
  const trainContext = insights.trainContextSize ?? spec.contextSize;
  const contextSize = Math.min(spec.contextSize, trainContext || spec.contextSize);
  const model = await insights.estimateModelResourceRequirementsV2({ gpuLayers });
  const flashAttention = flashAttentionFor(spec, insights, gpuLayers);
  const batchSize = batchSizeFor({ ...spec, contextSize }, gpuLayers);
  const context = await insights.estimateContextResourceRequirementsV2({
    contextSize,
    modelGpuLayers: gpuLayers,
    sequences: spec.sequences,
    ...(batchSize === undefined ? {} : { batchSize }),
    ...(flashAttention === undefined ? {} : { flashAttention }),
    ...(kvType(spec) === undefined ? {} : { kvCacheKeyType: kvType(spec), kvCacheValueType: kvType(spec) }),
  });
  const vram = llama.gpu === false ? { free: 0, total: 0 } : await llama.getVramState();
  const gpuDevices = llama.gpu === false ? 0 : (await llama.getGpuDeviceNames()).length;
  return {
    ramBytes: model.cpuRam + context.cpuRam,
    vramBytes: model.gpuVram + context.gpuVram,
    vramFreeBytes: vram.free,
    gpuDevices,
    gpuLayers,
  };
}

/** Layers to offload: the request's `num_gpu`, else as many as fit (node-llama-cpp's "auto"), 0 on CPU. */
async function resolveGpuLayers(llama: Llama, insights: GgufInsights, spec: LoadSpec): Promise<number> {
  if (llama.gpu === false) return 0;
  if (spec.gpuLayers !== undefined) return Math.min(spec.gpuLayers, insights.totalLayers);
  try {
    const resolved = await insights.configurationResolver.resolveModelGpuLayersV2("auto");
    return resolved.gpuLayers;
  } catch {
    // Nothing fits in VRAM: the model runs on the CPU, and the RAM check decides.
    return 0;
  }
}

/** The KV cache's element type as node-llama-cpp's estimate names it; undefined = its default (f16). */
function kvType(spec: LoadSpec): GgmlType | undefined {
  if (spec.kvCacheType === "q8_0") return GgmlType.Q8_0;
  if (spec.kvCacheType === "q4_0") return GgmlType.Q4_0;
  return undefined;
}
