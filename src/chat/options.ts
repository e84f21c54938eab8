/**
 * Turns Ollama's model options (the model's PARAMETER defaults, overridden by the request's
 * `options`) into what a runner job needs. Shared by every completion.
 */
import type { Logger } from "pino";
import type { ModelOptions } from "../api/types.js";
import type { SamplingSpec } from "../runner/types.js";
import { optionsSchema } from "../api/schemas.js";

/** Ollama's defaults, so clients see the behaviour they know. */
const DEFAULT_OPTIONS = {
  temperature: 0.8,
  top_k: 40,
  top_p: 0.9,
  min_p: 0,
  repeat_penalty: 1.1,
  repeat_last_n: 64,
  presence_penalty: 0,
  frequency_penalty: 0,
  penalize_newline: true,
  num_predict: -1,
} as const;

const KNOWN = new Set(Object.keys(optionsSchema.properties));

export interface ResolvedOptions {
  sampling: SamplingSpec;
  /** undefined = no limit; 0 = generate nothing. */
  maxTokens: number | undefined;
  fillContext: boolean;
  stop: string[];
  numGpu: number | undefined;
  /** Load settings, as Ollama's runner options: CPU threads (0: chosen by lmd), prompt batch size, memory-mapped weights. */
  numThread: number | undefined;
  numBatch: number | undefined;
  useMmap: boolean | undefined;
  /** Load with prompt-lookup speculative decoding (a load setting, like num_ctx). */
  promptLookup: boolean;
  /** Draft tokens below this probability end a draft (a load setting). */
  draftPMin: number | undefined;
  /** Draft tokens at most per step (a load setting); undefined = lmd's schedule. */
  draftNumPredict: number | undefined;
}

/** Merges model defaults and request options; unknown keys are ignored and logged at debug. */
export function resolveOptions(modelParams: Record<string, unknown>, request: ModelOptions | undefined, log: Logger): ResolvedOptions {
  const unknown = Object.keys(request ?? {}).filter((k) => !KNOWN.has(k));
  if (unknown.length > 0) log.debug({ keys: unknown }, "ignoring unknown options");
  const o = { ...DEFAULT_OPTIONS, ...pickKnown(modelParams), ...pickKnown(request ?? {}) } as Required<Pick<ModelOptions, keyof typeof DEFAULT_OPTIONS>> &
    ModelOptions;
  const numPredict = o.num_predict;
  const stop = o.stop === undefined ? [] : Array.isArray(o.stop) ? o.stop : [o.stop];
  return {
    sampling: {
      temperature: o.temperature,
      topK: o.top_k,
      topP: o.top_p,
      minP: o.min_p,
      // llama.cpp seeds are 32-bit; larger seeds wrap, negative ones mean "random" as in Ollama.
      seed: typeof o.seed === "number" && o.seed >= 0 ? o.seed % 2 ** 32 : undefined,
      repeatPenalty: o.repeat_penalty,
      repeatLastN: o.repeat_last_n,
      presencePenalty: o.presence_penalty,
      frequencyPenalty: o.frequency_penalty,
      penalizeNewline: o.penalize_newline,
      ...(o.speculative === false ? { speculative: false } : {}),
    },
    maxTokens: numPredict >= 0 ? numPredict : undefined,
    fillContext: numPredict === -2,
    stop: stop.filter((s) => s !== ""),
    numGpu: typeof o.num_gpu === "number" ? o.num_gpu : undefined,
    numThread: typeof o.num_thread === "number" && o.num_thread > 0 ? o.num_thread : undefined,
    numBatch: typeof o.num_batch === "number" ? o.num_batch : undefined,
    useMmap: typeof o.use_mmap === "boolean" ? o.use_mmap : undefined,
    promptLookup: o.prompt_lookup === true,
    draftPMin: typeof o.draft_p_min === "number" ? o.draft_p_min : undefined,
    draftNumPredict: typeof o.draft_num_predict === "number" && o.draft_num_predict > 0 ? o.draft_num_predict : undefined,
  };
}

function pickKnown(source: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(source)) if (KNOWN.has(k) && v !== undefined && v !== null) out[k] = v;
  return out;
}

/** How many context lengths a request may generate when SERVICE_MAX_PREDICT is 0 (auto). */
const AUTO_MAX_PREDICT_CONTEXTS = 4;

/**
 * The server-side cap on generated tokens (SERVICE_MAX_PREDICT): a model that never emits an end
 * token would otherwise stream forever (context shifting keeps room). A request's num_predict
 * below the cap still wins; the capped job ends with done_reason "length".
 */
export function capPredict(opts: ResolvedOptions, maxPredict: number, numCtx: number): ResolvedOptions {
  const cap = maxPredict > 0 ? maxPredict : AUTO_MAX_PREDICT_CONTEXTS * numCtx;
  if (opts.maxTokens !== undefined && opts.maxTokens <= cap) return opts;
  return { ...opts, maxTokens: cap };
}
