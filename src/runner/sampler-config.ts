/**
 * Giving node-llama-cpp's native sampler its config once per token, cheaply: the decode loop
 * (runner/fast-evaluate.ts) resolves a sequence's sampling options as node-llama-cpp does and passes
 * the result to the addon only when it changed.
 */
import type { LlamaContextSequence } from "node-llama-cpp";

type EvaluateOptions = NonNullable<Parameters<LlamaContextSequence["evaluate"]>[1]>;

/** node-llama-cpp's AddonSampler, as the decode loop uses it. */
export interface AddonSampler {
  applyConfig(config: unknown): void;
  dispose(): void;
}

/** A sampler config as node-llama-cpp resolves it: numbers, typed arrays, a grammar state, DRY's breakers. */
type SamplerConfig = Record<string, unknown> & { dryRepeatPenaltyStrength?: number; dryRepeatPenaltySequenceBreakers?: unknown };

function sameConfig(a: SamplerConfig, b: SamplerConfig): boolean {
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const key of keys) {
    const x = a[key];
    const y = b[key];
    if (x === y) continue;
    if (!(x instanceof Uint32Array || x instanceof Float32Array) || !(y instanceof Uint32Array || y instanceof Float32Array)) return false;
    if (x.constructor !== y.constructor || x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  }
  return true;
}

/**
 * A function to call before each sampling: it applies `resolve()`'s config to `sampler` when it
 * differs from the last one applied.
 */
export function samplerConfigurer(sampler: AddonSampler, options: EvaluateOptions, resolve: () => unknown): () => void {
  // As node-llama-cpp's LlamaSampler.applyConfig: DRY's sequence breakers go to the addon only when they change.
  let breakers: unknown;
  // The addon acts only on what changed, so a config equal to the last one is not passed again (the
  // addon reads its ~30 properties each time); with a repeat penalty, the tokens change each time.
  let applied: SamplerConfig | undefined;
  // Options without functions (no repeat penalty, a fixed seed) resolve to the same config each time.
  const functions = [options.repeatPenalty && options.repeatPenalty.punishTokens, options.grammarEvaluationState, options.tokenBias];
  const fixed = Number.isFinite(options.seed) && !functions.some((o) => typeof o === "function");
  return () => {
    if (fixed && applied) return;
    const config = resolve() as SamplerConfig;
    if (config.dryRepeatPenaltyStrength != null && Array.isArray(config.dryRepeatPenaltySequenceBreakers)) {
      if (config.dryRepeatPenaltySequenceBreakers === breakers) config.dryRepeatPenaltySequenceBreakers = false;
      else breakers = config.dryRepeatPenaltySequenceBreakers;
    }
    if (applied && sameConfig(applied, config)) return;
    sampler.applyConfig(config);
    applied = config;
  };
}
