/**
 * What `SERVICE_FLASH_ATTENTION=auto` asks of llama.cpp for one load. llama.cpp's own "auto" turns
 * flash attention on wherever the backend has the operation, the CPU included. On the CPU, ggml's
 * flash attention and its f16 dot products work in SIMD blocks of 64 values on AVX-512 hosts (32 on
 * AVX2); a head narrower than the block goes through their scalar tail, value by value, and flash
 * attention does that for every cached token of every head, converting each value to and from
 * f16. With 32-wide heads (the demo model) a token then costs far more than without flash
 * attention, and the more so the longer the context (docs/benchmarks/history.md, "Where a token's
 * time went"). Heads of 64 values or more decode as fast either way, and flash attention keeps the
 * attention scores out of the compute buffer, so "auto" stays llama.cpp's there.
 */
import type { GgufInsights } from "node-llama-cpp";
import type { FlashAttention, LoadSpec } from "./types.js";

/** Narrower heads decode faster without flash attention on the CPU. */
export const NARROW_HEAD = 64;

/** What the rule reads of a model: its header (node-llama-cpp's `GgufInsights`, or `readGgufFileInfo`'s result wrapped). */
export type HeaderOf = Pick<GgufInsights, "ggufFileInfo">;

/** The widest key and value head of the model, or undefined if its header does not say. */
export function headWidth(insights: HeaderOf): number | undefined {
  const meta = insights.ggufFileInfo.architectureMetadata as
    { embedding_length?: unknown; attention?: { head_count?: unknown; key_length?: unknown; value_length?: unknown } } | undefined;
  const heads = meta?.attention?.head_count;
  const embedding = meta?.embedding_length;
  const derived = typeof heads === "number" && heads > 0 && typeof embedding === "number" ? embedding / heads : undefined;
  const key = typeof meta?.attention?.key_length === "number" ? meta.attention.key_length : derived;
  const value = typeof meta?.attention?.value_length === "number" ? meta.attention.value_length : key;
  return key === undefined || value === undefined ? undefined : Math.max(key, value);
}

/**
 * The flash-attention setting to give node-llama-cpp: the spec's own, except that "auto" (or none)
 * is off for a model whose every layer runs on the CPU (`gpuLayers` 0) when its heads are narrower
 * than {@link NARROW_HEAD}. A quantized KV cache needs flash attention: the scheduler sends `true`
 * with one, so this never turns it off.
 */
export function flashAttentionFor(
  spec: Pick<LoadSpec, "flashAttention" | "kvCacheType">,
  insights: HeaderOf,
  gpuLayers: number,
): FlashAttention | undefined {
  const wanted = spec.flashAttention;
  if (wanted !== undefined && wanted !== "auto") return wanted;
  if (gpuLayers > 0 || (spec.kvCacheType !== undefined && spec.kvCacheType !== "f16")) return wanted;
  const width = headWidth(insights);
  return width !== undefined && width < NARROW_HEAD ? false : wanted;
}
