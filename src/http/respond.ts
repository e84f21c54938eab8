/**
 * Writing responses: whole JSON/text bodies, NDJSON and SSE streams, and the client-gone signal.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";

const JSON_TYPE = "application/json; charset=utf-8";
const NDJSON_TYPE = "application/x-ndjson";
const SSE_TYPE = "text/event-stream";

/** Sends `body` as JSON with its length; for HEAD only the headers. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: OutgoingHttpHeaders = {}): void {
  send(res, status, JSON.stringify(body), { ...headers, "content-type": JSON_TYPE });
}

/** Sends plain text (`text/plain; charset=utf-8`); for HEAD only the headers. */
export function sendText(res: ServerResponse, status: number, text: string, headers: OutgoingHttpHeaders = {}): void {
  send(res, status, text, { "content-type": "text/plain; charset=utf-8", ...headers });
}

/** Sends a status with no body (`content-length: 0`, except on 204/304 which carry none). */
export function sendEmpty(res: ServerResponse, status: number, headers: OutgoingHttpHeaders = {}): void {
  const length = status === 204 || status === 304 ? {} : { "content-length": 0 };
  res.writeHead(status, { ...headers, ...length });
  res.end();
}

function send(res: ServerResponse, status: number, text: string, headers: OutgoingHttpHeaders): void {
  res.writeHead(status, { ...headers, "content-length": Buffer.byteLength(text, "utf8") });
  // A string (not a Buffer) lets Node write the head and the body in one write() instead of a
  // corked writev of two chunks: on small answers that is most of the cost of a request.
  res.end(res.req?.method === "HEAD" ? undefined : text, "utf8");
}

/**
 * An abort signal for "the client went away": the response closed before it finished. (A request's
 * own 'close' fires as soon as its body is read, so it cannot tell.)
 */
export function clientGone(req: IncomingMessage, res: ServerResponse): AbortSignal {
  const ac = new AbortController();
  // Also correct when asked late (the server creates it lazily): a response that already closed
  // without finishing means the client is gone.
  if (req.socket.destroyed || res.destroyed || res.closed) {
    if (!res.writableFinished) ac.abort();
  } else res.once("close", () => { if (!res.writableFinished) ac.abort(); });
  return ac.signal;
}

/** A response's backpressure as the engine takes it (structurally the runner's OutputFlow). */
export interface OutputFlow {
  /** True while the socket's buffer is full. */
  readonly blocked: boolean;
  /** Calls `then` once, when the socket drained or closed. */
  whenReady(then: () => void): void;
}

/**
 * The response's backpressure, for the runner: blocked while a write found the
 * socket's buffer full and 'drain' has not come yet. A generation streaming into `res` pauses meanwhile.
 */
export function outputFlow(res: ServerResponse): OutputFlow {
  return {
    get blocked() {
      return res.writableNeedDrain;
    },
    whenReady: (then) => void waitForDrain(res).then(then),
  };
}

/**
 * Bounds on a stream whose client stops reading. The generation pauses while the
 * socket does not drain ({@link outputFlow}); these bound the rest. `stallMs` is SERVICE_WRITE_TIMEOUT
 * (set once by the app): a client that takes nothing for that long is dropped and its slot freed.
 * `maxBufferedBytes` caps what waits in memory above the kernel's socket buffers: a safety net for
 * writers that do not pause (the pause leaves only a chunk or two in flight).
 */
export const streamLimits = { stallMs: 30_000, maxBufferedBytes: 1024 * 1024 };

/** Common part of the NDJSON and SSE streams: lazy 200 header, backpressure, end once. */
abstract class EventStream {
  private open = false;
  /** Armed while output waits for a client that takes nothing; fires = the client is dropped. */
  private stall: NodeJS.Timeout | undefined;
  /** The one pending wait for 'drain': writers that arrive while the socket is full share it. */
  private drained: Promise<void> | undefined;

  constructor(protected readonly res: ServerResponse) {}

  /** True once the 200 header was sent (an error can then only be the stream's last line). */
  get started(): boolean {
    return this.res.headersSent;
  }

  /** True when nothing more can be written (ended, or the client went away). */
  get closed(): boolean {
    return this.res.writableEnded || this.res.destroyed;
  }

  protected abstract headers(): OutgoingHttpHeaders;
  protected abstract frame(obj: unknown): string;

  /**
   * Writes one event; the 200 header goes out with the first. Resolves when the socket can take
   * more (a generation is paused meanwhile through {@link outputFlow}, not by this promise).
   * Resolves at once (writing nothing) when the client is gone; callers watch `ctx.signal` to stop.
   */
  write(obj: unknown): Promise<void> {
    return this.writeRaw(this.frame(obj));
  }

  /** Writes `finalObj` (if given) and ends the response. Safe to call twice. */
  end(finalObj?: unknown): void {
    if (this.closed) return;
    this.start();
    this.res.end(finalObj === undefined ? undefined : this.frame(finalObj));
  }

  protected writeRaw(text: string): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.start();
    if (this.res.write(text)) return Promise.resolve();
    // Destroying the response aborts the request's signal (clientGone): the runner job is
    // cancelled and the slot freed, exactly as when the client disconnects.
    if (this.res.writableLength > streamLimits.maxBufferedBytes) {
      this.res.destroy();
      return Promise.resolve();
    }
    this.armStall();
    this.drained ??= waitForDrain(this.res).then(() => {
      this.drained = undefined;
    });
    return this.drained;
  }

  /** Starts the write-stall timer once per stall; the socket draining (or closing) disarms it. */
  private armStall(): void {
    if (this.stall) return;
    const res = this.res;
    const disarm = (): void => {
      clearTimeout(this.stall);
      this.stall = undefined;
      res.off("drain", disarm).off("finish", disarm).off("close", disarm);
    };
    this.stall = setTimeout(() => {
      disarm();
      if (!res.destroyed) res.destroy();
    }, streamLimits.stallMs);
    this.stall.unref();
    res.once("drain", disarm).once("finish", disarm).once("close", disarm);
  }

  private start(): void {
    if (this.open || this.res.headersSent) return;
    this.open = true;
    // x-accel-buffering: tells nginx (a documented front end) not to buffer the stream.
    this.res.writeHead(200, { ...this.headers(), "x-accel-buffering": "no" });
  }
}

/** An NDJSON stream (`application/x-ndjson`): one JSON object per line. */
export class NdjsonStream extends EventStream {
  protected headers(): OutgoingHttpHeaders {
    return { "content-type": NDJSON_TYPE };
  }

  protected frame(obj: unknown): string {
    return `${JSON.stringify(obj)}\n`;
  }
}

/** A server-sent-events stream (`text/event-stream`): `data: <json>` events, ended by `done()`. */
export class SseStream extends EventStream {
  protected headers(): OutgoingHttpHeaders {
    return { "content-type": SSE_TYPE, "cache-control": "no-cache" };
  }

  protected frame(obj: unknown): string {
    return `data: ${JSON.stringify(obj)}\n\n`;
  }

  /** Writes the OpenAI terminator `data: [DONE]` and ends the response. */
  done(): void {
    if (this.closed) return;
    void this.writeRaw("data: [DONE]\n\n");
    this.res.end();
  }
}

/** Responses streamed by {@link NamedSseStream}: their error event is named too. */
const namedStreams = new WeakSet<ServerResponse>();

/**
 * SSE with named events (`event: <type>` before each `data:`), as Anthropic's Messages stream and
 * OpenAI's Responses stream send them: the event name is the object's `type`. The Anthropic SDK
 * skips unnamed events, so an error during such a stream is sent as `event: error`.
 */
export class NamedSseStream extends SseStream {
  constructor(res: ServerResponse) {
    super(res);
    namedStreams.add(res);
  }

  protected override frame(obj: unknown): string {
    return `event: ${String((obj as { type?: unknown }).type)}\n${super.frame(obj)}`;
  }
}

/** Waits for 'drain', or for 'close' (a client that is gone never drains). */
function waitForDrain(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off("drain", done).off("close", done);
      resolve();
    };
    res.once("drain", done).once("close", done);
  });
}

/**
 * Ends a response whose 200 header is already out with the error as its last event: an NDJSON line
 * `{"error": ...}`, or an SSE `data: {"error": ...}` event when the stream is `text/event-stream`.
 */
export function endStreamWithError(res: ServerResponse, message: string): void {
  if (res.writableEnded || res.destroyed) return;
  const type = String(res.getHeader("content-type") ?? "");
  const body = JSON.stringify({ error: message });
  if (namedStreams.has(res)) return void res.end(`event: error\ndata: ${body}\n\n`);
  res.end(type.startsWith(SSE_TYPE) ? `data: ${body}\n\n` : `${body}\n`);
}
