/**
 * Sampling options for node-llama-cpp's generation calls (LlamaCompletion and LlamaChat take the
 * same ones), from a job's {@link SamplingSpec}. Child-side only.
 */
import { randomInt } from "node:crypto";
import type { SamplingSpec } from "./types.js";

/** The shape both `generateCompletionWithMeta` and `LlamaChat.generateResponse` accept. */
export interface SamplingOptions {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  seed?: number;
  repeatPenalty:
    | false
    | { lastTokens: number; penalty: number; presencePenalty: number; frequencyPenalty: number; penalizeNewLine: boolean };
}

/** Maps Ollama-style sampling to node-llama-cpp's; a neutral repeat penalty is turned off entirely. */
export function samplingOptions(s: SamplingSpec, contextSize: number): SamplingOptions {
  const repeatActive = s.repeatLastN !== 0 && (s.repeatPenalty !== 1 || s.presencePenalty !== 0 || s.frequencyPenalty !== 0);
  return {
    temperature: s.temperature,
    topK: s.topK,
    topP: s.topP,
    minP: s.minP,
    // No seed: a fresh random one per request, as Ollama. node-llama-cpp's own default is the
    // current second, so two unseeded requests in the same second would give the same text.
    seed: s.seed ?? randomInt(2 ** 32),
    repeatPenalty: repeatActive
      ? {
          // repeat_last_n -1 means "the whole context", as in Ollama.
          lastTokens: s.repeatLastN < 0 ? contextSize : s.repeatLastN,
          penalty: s.repeatPenalty,
          presencePenalty: s.presencePenalty,
          frequencyPenalty: s.frequencyPenalty,
          penalizeNewLine: s.penalizeNewline,
        }
      : false,
  };
}

/** The custom stop trigger that ended a generation, as text (node-llama-cpp reports its parts). */
export function stopSequenceOf(metadata: { stopReason: string; customStopTrigger?: readonly (string | number)[] }): string | undefined {
  if (metadata.stopReason !== "customStopTrigger" || !metadata.customStopTrigger) return undefined;
  return metadata.customStopTrigger.filter((part): part is string => typeof part === "string").join("");
}
