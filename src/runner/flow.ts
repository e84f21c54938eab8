/**
 * Backpressure in the runner child: the parent sends `pause` for a job while its
 * client's socket does not drain, and `resume` once it does. A paused job asks the model for no
 * further token, so a client that stops reading stops the computation instead of making the
 * daemon buffer its output; reading again resumes it where it stopped, nothing lost.
 *
 * The pause point is between two tokens of the sequence's `evaluateWithMetadata` iterator, through
 * which every generation of a slot goes (`evaluate`, which LlamaCompletion and LlamaChat call, is
 * built on it, and so is the logprob recorder's own `evaluate`): the sequence then holds no lock and
 * has nothing queued in the context's batch, so the other sequences go on unhindered.
 */
import type { LlamaContextSequence, Token } from "node-llama-cpp";

/** One job's pause state; aborting the job resumes it, so that a cancel is never stuck behind a pause. */
export class PauseSwitch {
  private resumed: Promise<void> | undefined;
  private release: (() => void) | undefined;

  constructor(signal: AbortSignal) {
    signal.addEventListener("abort", () => this.resume(), { once: true });
  }

  pause(): void {
    this.resumed ??= new Promise<void>((resolve) => (this.release = resolve));
  }

  resume(): void {
    const release = this.release;
    this.resumed = this.release = undefined;
    release?.();
  }

  /** While paused, a promise that settles on resume; undefined while running. */
  get waiting(): Promise<void> | undefined {
    return this.resumed;
  }
}

type EvaluateWithMetadata = LlamaContextSequence["evaluateWithMetadata"];

/**
 * Makes the sequence wait, before computing each next token, for `current()` (the pause of the job
 * that holds the sequence now) to resume. Installed once per sequence at load.
 */
export function pausable(sequence: LlamaContextSequence, current: () => PauseSwitch | undefined): void {
  const evaluate = sequence.evaluateWithMetadata.bind(sequence);
  // An own property shadows the prototype's method (the sequence's other methods reach it through `this`).
  sequence.evaluateWithMetadata = async function* (
    tokens: Token[],
    metadata: Parameters<EvaluateWithMetadata>[1],
    options?: Parameters<EvaluateWithMetadata>[2],
  ) {
    const inner = evaluate(tokens, metadata, options);
    try {
      let input: void | Token | Token[] = undefined;
      for (;;) {
        const paused = current()?.waiting;
        if (paused) await paused;
        const next = await inner.next(input);
        if (next.done) return;
        input = yield next.value;
      }
    } finally {
      await inner.return();
    }
  } as EvaluateWithMetadata;
}
