/**
 * The context length a model runs with, decided in one place for the load, the automatic
 * `num_predict` cap and the prompt's rendering (its history cut to fit): the request's `num_ctx`,
 * else the policy file's (its `num_ctx`, then its default `options`), else the model's own
 * `PARAMETER num_ctx`, else SERVICE_CONTEXT_LENGTH; never more than the model was trained for.
 */
import type { ModelPolicy } from "./policy.js";

export interface ContextSources {
  /** The request's `options.num_ctx`. */
  request?: unknown;
  /** The model's entry in the policy file, if any. */
  policy?: Pick<ModelPolicy, "numCtx" | "options"> | undefined;
  /** The model's PARAMETERs. */
  params: Record<string, unknown>;
  /** SERVICE_CONTEXT_LENGTH. */
  fallback: number;
}

/**
 * The context length asked for; with `trained` (the model's trained context, 0 or undefined when
 * unknown) the one the model gets, since llama.cpp caps a context at what the model was trained for.
 */
export function contextLength(sources: ContextSources, trained?: number): number {
  const { request, policy, params, fallback } = sources;
  // A stored model's own num_ctx counts only when positive (a pulled manifest's params are not checked as a create's are).
  const own = numberParam(params.num_ctx);
  const asked = numberParam(request) ?? policy?.numCtx ?? numberParam(policy?.options.num_ctx) ?? (own !== undefined && own >= 1 ? own : undefined) ?? fallback;
  return withinTrained(asked, trained);
}

/** A context length as it takes effect on a model trained for `trained` tokens (0 or undefined: unknown, no cap). */
export function withinTrained(asked: number, trained: number | undefined): number {
  return trained !== undefined && trained > 0 ? Math.min(asked, trained) : asked;
}

/** A model or policy parameter when it is a finite number. */
export function numberParam(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}
