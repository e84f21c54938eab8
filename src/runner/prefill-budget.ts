/**
 * How many prompt tokens one decode step takes while generations are running (chunked prefill with
 * a time budget). A step's duration is the gap between two tokens of every stream in it: a long
 * prompt decoded a whole batch at a time stalls the running streams for as long as those tokens
 * take, which on a CPU is long enough to feel and, under steady traffic, sets their tail latency.
 * While any generation runs, a step therefore takes only the prompt tokens that add at most
 * {@link SLICE_MS} to it at the rate recent prompt steps ran, but never fewer than
 * {@link MIN_TOKENS}, so that the prompt's steps stay efficient. A prompt with no generation beside
 * it takes the whole batch, the fastest way to its first token.
 */

/** The prompt share of a step while generations run, in milliseconds of decoding. */
export const SLICE_MS = 80;
/**
 * The fewest prompt tokens a step takes: ggml's CPU kernels work in tiles (its tiled flash attention
 * takes 64 query rows, GGML_FA_TILE_Q), and in smaller pieces a CPU decodes a prompt much slower per
 * token, the more so the longer its context (docs/benchmarks.md, mixed load).
 */
export const MIN_TOKENS = 64;
/** Weight of the newest step in the running estimate of a prompt token's cost. */
const NEWEST = 0.3;

export class PrefillBudget {
  /** Estimated decode time a prompt token adds to a step (ms); undefined until a prompt step was timed. */
  private msPerToken: number | undefined;
  /** Estimated decode time of a step of running generations' tokens alone (ms). */
  private singlesMs: number | undefined;

  /**
   * A step of `prompt` prompt tokens and `singles` generations' tokens took `ms` to decode. What the
   * prompt tokens cost is the step's time less what its generations' tokens take alone, so that the
   * longer steps of many or long-context generations are not charged to the prompt.
   */
  observe(prompt: number, singles: number, ms: number): void {
    if (!(ms > 0)) return;
    if (prompt === 0) {
      if (singles > 0) this.singlesMs = average(this.singlesMs, ms);
      return;
    }
    if (prompt < MIN_TOKENS) return;
    const own = singles > 0 ? Math.max(0, ms - (this.singlesMs ?? 0)) : ms;
    this.msPerToken = average(this.msPerToken, own / prompt);
  }

  /** How many prompt tokens the next step may take. */
  tokens(batchSize: number, generating: boolean): number {
    if (!generating || this.msPerToken === undefined) return batchSize;
    return Math.min(batchSize, Math.max(MIN_TOKENS, Math.floor(SLICE_MS / this.msPerToken)));
  }
}

function average(old: number | undefined, sample: number): number {
  return old === undefined ? sample : old * (1 - NEWEST) + sample * NEWEST;
}

/**
 * How many of a prompt's `left` tokens a step beside generations takes, `count` being what its
 * budget and the batch (`room` now, `forPrompts` once the step's generations were in) allow: no
 * piece smaller than {@link MIN_TOKENS} (or than a smaller batch) unless it is the prompt's whole
 * rest, and none that leaves a smaller rest (the piece before the last leaves exactly that many, or
 * a rest too short to split goes at once).
 */
export function promptPiece(left: number, count: number, room: number, forPrompts: number): number {
  const least = Math.min(MIN_TOKENS, forPrompts);
  if (count < left && count < least) return 0;
  const after = left - count;
  if (after === 0 || after >= least) return count;
  return left >= 2 * least ? left - least : Math.min(left, room);
}
