/**
 * A sequence's `evaluate` on lmd's decode loop (runner/decode-loop.ts) where the loop can serve it.
 *
 * The sampling is node-llama-cpp's own (`_resolveSamplerConfig` per token, one sampler per
 * evaluation), so temperature, top-k/p, min-p, seeds, repeat penalties, token biases and grammars
 * sample exactly as node-llama-cpp samples them. What the loop does not do goes to node-llama-cpp's
 * `evaluate` unchanged: a sequence with a token predictor (speculative decoding), a model that needs
 * context checkpoints (SWA, hybrid or recurrent memory), and tokens that would not fit in the
 * context (its context shift).
 */
import type { LlamaContextSequence, Token } from "node-llama-cpp";
import type { DecodeLoop } from "./decode-loop.js";
import type { PauseSwitch } from "./flow.js";
import type { Evaluate, EvaluateOptions, SequenceInternals } from "./llama-internals.js";
import { samplerConfigurer } from "./sampler-config.js";

/**
 * Gives `sequence` an `evaluate` that decodes on `loop` where it can (see the module comment), and
 * waits between tokens while `pause()` (the job holding the sequence now) is paused, as
 * runner/flow.ts does for node-llama-cpp's own evaluation.
 */
export function fastEvaluate(sequence: LlamaContextSequence, loop: DecodeLoop, pause: () => PauseSwitch | undefined): void {
  const inner = sequence as unknown as SequenceInternals;
  const original = sequence.evaluate.bind(sequence);
  const context = inner.context;
  sequence.evaluate = async function* (tokens: Token[], options: EvaluateOptions = {}) {
    if (inner.tokenPredictor != null || inner.needsCheckpoints) return yield* original(tokens, options);
    const { model } = inner;
    const sampler = model._takeSampler?.() ?? new model._llama._bindings.AddonSampler(model._model);
    const configure = samplerConfigurer(sampler, options, () => inner._resolveSamplerConfig(options));
    let pending = tokens;
    try {
      while (pending.length > 0) {
        // A context shift is node-llama-cpp's: it takes over for the rest of this evaluation (with a
        // sampler of its own). LlamaCompletion and LlamaChat shift the context themselves before that.
        if (inner._nextTokenIndex + pending.length > context.contextSize - 1) return yield* original(pending, options);
        const paused = pause()?.waiting;
        if (paused) await paused;
        const token = await loop.next(inner, pending, (logit) => {
          configure();
          return context._ctx.sampleToken(logit, sampler);
        });
        if (token === -1) throw new Error("Failed to sample next token");
        if (options.yieldEogToken !== true && sequence.model.isEogToken(token as Token)) return;
        const replacement: Token | Token[] | void = yield token as Token;
        pending = Array.isArray(replacement) ? replacement.slice() : replacement != null ? [replacement] : [token as Token];
      }
    } finally {
      sampler.dispose();
      model._prepareSampler?.();
    }
  } as Evaluate;
}
