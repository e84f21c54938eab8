/**
 * How a runner writes its messages to the parent (SERVICE_STREAM_INTERVAL, the load spec's
 * `streamIntervalMs`). On a small host every microsecond of CPU spent per token, in the runner, the
 * daemon or the client, is taken from the decoding threads: work moved into a decode slows it by as
 * much (docs/benchmarks/history.md, "Gathering a stream's tokens"). Each write also wakes the
 * daemon, which then reads, parses and writes one HTTP chunk. Gathering the output of ~10 ms (a few steps of one
 * stream, every sequence's tokens of those steps) into one message costs a fraction of that per
 * token; a client sees its tokens in groups about that far apart. 0 writes each one at once.
 *
 * A job's first output goes at once (its time to first token); anything that is not output goes at
 * once too, after the output gathered before it (the order of a job's messages is kept). Gathered
 * output is written right after the decode loop queues a step ({@link Outbox.atDecode}) once it
 * would otherwise wait past the interval before the next step, so that the write overlaps the
 * decode rather than delaying the next one, and a model slower than the interval (a step per token
 * longer than it) gets each token at once. A step is expected to take as long as the one before,
 * unless it carries a prompt's tokens: what waits is then written before it. The timer writes what
 * waits when no step follows (the end of a generation, a paused job, node-llama-cpp's own decoding
 * of speculative jobs); when it fires during a step, it leaves the write to the next step once, for
 * at most one more interval.
 *
 * While several of the runner's jobs stream at once, the interval is the setting times their number,
 * up to {@link MAX_STREAMS_SCALE} times: each write costs the same in the runner, the daemon and the
 * client whatever it carries, so the writes a second stay about those of one stream while the
 * streams share the cores with the decoding threads (docs/benchmarks.md, "Gathering while several
 * streams run").
 */
import type { FromRunner } from "./protocol.js";

/** What the outbox needs from its process: the write, the clock, the timers, whether a step runs. */
export interface OutboxHost {
  post(msg: FromRunner): void;
  now(): number;
  setTimer(callback: () => void, ms: number): unknown;
  clearTimer(timer: unknown): void;
  /** True while the decode loop runs a step. */
  busy(): boolean;
}

/** The most the interval is multiplied by while several jobs stream. */
export const MAX_STREAMS_SCALE = 4;

export class Outbox {
  /** SERVICE_STREAM_INTERVAL in ms. */
  intervalMs = 10;
  private waiting: FromRunner[] = [];
  /** When the oldest waiting message was queued. */
  private since = 0;
  private timer: unknown;
  /** The timer already left the write to the next step once. */
  private deferred = false;
  /** Jobs that have sent output. */
  private readonly started = new Set<number>();

  constructor(private readonly host: OutboxHost) {}

  /** How long output is gathered now: the interval times the jobs streaming, up to MAX_STREAMS_SCALE times. */
  private get gatherMs(): number {
    return this.intervalMs * Math.min(MAX_STREAMS_SCALE, Math.max(1, this.started.size));
  }

  send(msg: FromRunner): void {
    if (msg.type === "chunk" || msg.type === "thinking") {
      if (this.started.has(msg.id) && this.intervalMs > 0) {
        if (this.waiting.length === 0) {
          this.since = this.host.now();
          this.timer = this.host.setTimer(() => this.onTimer(), this.gatherMs);
        }
        this.waiting.push(msg);
        return;
      }
      this.started.add(msg.id);
    } else if ("id" in msg) this.started.delete(msg.id);
    this.flush();
    this.host.post(msg);
  }

  /** The decode loop queued a step expected to take `expectedMs` (Infinity: a prompt's): writes what would wait too long. */
  atDecode(expectedMs: number): void {
    if (this.waiting.length > 0 && this.host.now() - this.since + expectedMs >= this.gatherMs) this.flush();
  }

  /** Writes what waits, as one `batch` message when there are several. */
  flush(): void {
    if (this.timer !== undefined) this.host.clearTimer(this.timer);
    this.timer = undefined;
    this.deferred = false;
    const messages = this.waiting;
    this.waiting = [];
    if (messages.length > 1) this.host.post({ type: "batch", messages });
    else if (messages.length === 1) this.host.post(messages[0]!);
  }

  private onTimer(): void {
    this.timer = undefined;
    if (this.host.busy() && !this.deferred) {
      this.deferred = true;
      this.timer = this.host.setTimer(() => this.onTimer(), this.gatherMs);
      return;
    }
    this.flush();
  }
}
