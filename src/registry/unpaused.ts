/**
 * An undici interceptor that never lets a response pause the HTTP/1 parser; every registry request
 * goes through it (dispatcher.ts).
 */
import type { Duplex } from "node:stream";
import type { Dispatcher } from "undici";
import { RegistryError } from "./settings.js";

/**
 * Never lets a response pause undici's HTTP/1 parser. Undici 7 throws an assertion from a socket's
 * 'end' handler when the peer closes a connection (HTTP/1.0, `Connection: close`) while a reader
 * that fell behind has paused the parser: nothing can catch it, and the process stops. (Undici 8
 * fixes it, and needs Node 22.) So a handler's pause is kept here instead ({@link Unpaused}): what
 * arrives meanwhile waits in a bounded queue, and the parser reads on. Readers keep up on their
 * own (download.ts writes a blob as it arrives; readLimited stops at its limit). An exception
 * thrown by a handler fails its own request instead of reaching the socket.
 */
export const unpaused: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (opts, handler) =>
  dispatch(opts, handler.onRequestStart ? new Unpaused(handler) : unpausedLegacy(handler as LegacyHandler));

type Headers = Record<string, string | string[] | undefined>;

/** What may wait for a paused reader (a reader keeping up holds far less: about one body buffer). */
const QUEUE_LIMIT = 64 * 1024 * 1024;

/** The handler interface undici's own request() handler still speaks (uploads dispatch it directly). */
interface LegacyHandler {
  onConnect?(abort: (err?: Error) => void, context?: unknown): void;
  onHeaders?(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean | void;
  onData?(chunk: Buffer): boolean | void;
  onComplete?(trailers: Buffer[] | null): void;
  onError?(err: Error): void;
  onUpgrade?(statusCode: number, headers: Buffer[] | string[] | null, socket: unknown): void;
  onResponseStarted?(): void;
  onBodySent?(chunk: unknown): void;
}

function unpausedLegacy(inner: LegacyHandler): Dispatcher.DispatchHandler {
  let abort: (err?: Error) => void = () => undefined;
  const guard = (call: () => unknown): boolean => {
    try {
      call();
    } catch (err) {
      abort(err instanceof Error ? err : new Error(String(err)));
    }
    return true; // never false: false pauses the parser
  };
  const handler: LegacyHandler = {
    onConnect: (a, context) => {
      abort = a;
      inner.onConnect?.(a, context);
    },
    onHeaders: (statusCode, headers, resume, statusText) => guard(() => inner.onHeaders?.(statusCode, headers, resume, statusText)),
    onData: (chunk) => guard(() => inner.onData?.(chunk)),
    onComplete: (trailers) => void guard(() => inner.onComplete?.(trailers)),
    onError: (err) => inner.onError?.(err),
    onUpgrade: (statusCode, headers, socket) => inner.onUpgrade?.(statusCode, headers, socket),
    onResponseStarted: () => inner.onResponseStarted?.(),
    onBodySent: (chunk) => inner.onBodySent?.(chunk),
  };
  return handler as unknown as Dispatcher.DispatchHandler;
}

/**
 * Passes a response on to `inner`, honouring its pause() without pausing the connection: what
 * arrives while it is paused (data, the end, an error) is queued and handed on, in order, when it
 * resumes. More than {@link QUEUE_LIMIT} queued aborts the request.
 */
class Unpaused implements Dispatcher.DispatchHandler {
  private outer: Dispatcher.DispatchController | undefined;
  private wrapped: Dispatcher.DispatchController | undefined;
  private paused = false;
  private draining = false;
  private readonly queue: Array<() => void> = [];
  private queuedBytes = 0;

  constructor(private readonly inner: Dispatcher.DispatchHandler) {}

  /** The controller the inner handler sees (none before a connection). */
  private wrap(controller: Dispatcher.DispatchController): Dispatcher.DispatchController {
    if (!controller) return controller;
    if (this.outer !== controller || !this.wrapped) {
      this.outer = controller;
      const self = this;
      this.wrapped = {
        abort: (reason: Error) => controller.abort(reason),
        pause: () => {
          self.paused = true;
        },
        resume: () => {
          self.paused = false;
          self.drain();
        },
        get aborted() {
          return controller.aborted;
        },
        get paused() {
          return self.paused;
        },
        get reason() {
          return controller.reason;
        },
      };
    }
    return this.wrapped;
  }

  /** Runs `call` now, or queues it behind what waits while the inner handler is paused. */
  private deliver(call: () => void, bytes = 0): void {
    if (!this.paused && this.queue.length === 0) return call();
    this.queue.push(call);
    this.queuedBytes += bytes;
    if (this.queuedBytes > QUEUE_LIMIT) this.outer?.abort(new RegistryError("a registry response was not read in time"));
  }

  private drain(): void {
    if (this.draining) return;
    this.draining = true;
    try {
      while (!this.paused && this.queue.length > 0) this.queue.shift()!();
      if (this.queue.length === 0) this.queuedBytes = 0;
    } finally {
      this.draining = false;
    }
  }

  /** An exception from the inner handler fails its own request; it never reaches the socket. */
  private guard(controller: Dispatcher.DispatchController, call: () => void): () => void {
    return () => {
      try {
        call();
      } catch (err) {
        if (!controller) throw err;
        controller.abort(err instanceof Error ? err : new Error(String(err)));
      }
    };
  }

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.guard(controller, () => this.inner.onRequestStart?.(this.wrap(controller), context))();
  }

  onRequestUpgrade(controller: Dispatcher.DispatchController, statusCode: number, headers: Headers, socket: Duplex): void {
    this.inner.onRequestUpgrade?.(this.wrap(controller), statusCode, headers as never, socket);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: Headers, statusMessage?: string): void {
    this.deliver(this.guard(controller, () => this.inner.onResponseStart?.(this.wrap(controller), statusCode, headers as never, statusMessage)));
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.deliver(this.guard(controller, () => this.inner.onResponseData?.(this.wrap(controller), chunk)), chunk.length);
  }

  onResponseEnd(controller: Dispatcher.DispatchController, trailers: Headers): void {
    this.deliver(() => {
      try {
        this.inner.onResponseEnd?.(this.wrap(controller), trailers as never);
      } catch (err) {
        // As undici does: a handler that throws at the end gets the error (a retry handler retries on it).
        this.inner.onResponseError?.(this.wrap(controller), err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  onResponseError(controller: Dispatcher.DispatchController, err: Error): void {
    const call = () => this.inner.onResponseError?.(this.wrap(controller), err);
    if (!controller?.aborted) return this.deliver(call);
    // Aborted (a reader that let go of the body, a signal): nobody wants what waits.
    this.queue.length = 0;
    this.paused = false;
    call();
  }
}
