/**
 * Decoding ahead (runner/decode-loop.ts). Between a token's sampling and the next decode, the
 * generation handles the token (its text, stop strings, the message to the daemon) and the loop
 * builds the next batch: on a short step (a model on a GPU) the engine waits for that JavaScript
 * every token. Decoding ahead, the loop queues the decode of each sampled token at once, as if its
 * generation had asked for it, and hands the token over only after that decode is queued, so the
 * generation's work for a token overlaps the decode of it.
 *
 * The sampling after that decode still waits until the generation asks for the token (its sampler
 * settings, repeat penalties and grammar state follow what the generation did with the token
 * before), so a generation's tokens are the ones it would get otherwise. When the generation asks
 * for something else (it stopped at a stop string or its token limit, or replaced the token) or
 * has not asked by the time the decode ends and a turn of the event loop has passed (a paused job),
 * the token's cell is taken out of the sequence's KV cache before the loop decodes anything else,
 * and the sequence records nothing of it.
 */

/** Why a provisional token's confirmation failed: it was dropped. */
export const DROPPED = Symbol("dropped");

/** A token decoded before its generation asked for it. */
export class Provisional {
  /** Part of a step's batch (else still waiting in the queue). */
  stepped = false;
  /** true: its generation asked for it; false: dropped; undefined: not known yet. */
  outcome: boolean | undefined;
  /** Resolves when the generation asks for the token, rejects with DROPPED when it is dropped. */
  readonly confirmed: Promise<void>;
  private settleWith!: (ok: boolean) => void;

  constructor() {
    this.confirmed = new Promise<void>((resolve, reject) => {
      this.settleWith = (ok) => (ok ? resolve() : reject(DROPPED));
    });
    this.confirmed.catch(() => undefined);
  }

  settle(ok: boolean): void {
    if (this.outcome !== undefined) return;
    this.outcome = ok;
    this.settleWith(ok);
  }
}

/** Whether a context's loop decodes ahead: with any layer on a GPU, where the engine waits for the CPU between steps. */
export function decodesAheadFor(gpuLayers: number): boolean {
  return gpuLayers > 0;
}
