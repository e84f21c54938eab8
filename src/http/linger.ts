/**
 * Lingering close (nginx's `lingering_close`, RFC 9112 §9.6): a refusal sent before the request
 * body was read (413, a 404 or 403 with a body still coming) closes the connection, but closing
 * a socket whose client is still sending makes the kernel answer the client's next segments with a
 * reset, which can destroy the answer before the client reads it. So after the answer: half-close
 * (FIN), keep reading and discarding what the client still sends, and close when the client is
 * done — or at a bound in time and bytes, so a client that keeps dripping cannot hold the socket.
 */
import type { IncomingMessage } from "node:http";

/** The bounds: time after the answer, and bytes discarded beyond the body limit. */
export const LINGER = Object.freeze({ ms: 2_000, extraBytes: 4 * 1024 * 1024 });

/**
 * Makes the socket of `req` linger instead of closing at once when Node closes it after the
 * answer (it calls `destroySoon()` once a `Connection: close` response is sent). Memory stays
 * flat: discarded chunks are counted and dropped.
 */
export function lingerOnClose(req: IncomingMessage, maxBodyBytes: number): void {
  const socket = req.socket;
  const budget = maxBodyBytes + LINGER.extraBytes;
  let lingering = false;
  let discarded = 0;
  let timer: NodeJS.Timeout | undefined;
  const close = () => {
    clearTimeout(timer);
    socket.destroy();
  };
  const discard = (chunk: Buffer) => {
    if (!lingering) return;
    discarded += chunk.length;
    if (discarded > budget) close();
  };
  // Listening to 'data' now, while Node's HTTP parser still owns the socket, makes the parser hand
  // the socket back to JavaScript reads (it "consumes" the handle natively otherwise).
  socket.on("data", discard);
  socket.destroySoon = function lingeringClose(): void {
    if (socket.destroyed) return;
    lingering = true;
    // The rest of the body is not a request: the HTTP parser must not see it (it would answer a
    // "parse error" with a reset), so only `discard` reads from here on.
    for (const listener of socket.listeners("data")) if (listener !== discard) socket.removeListener("data", listener as (chunk: Buffer) => void);
    // …nor read the handle natively (Node's server lets its parser "consume" it).
    const parser = (socket as unknown as { parser?: { unconsume?: () => void; _consumed?: boolean } | null }).parser;
    if (parser?._consumed) {
      parser.unconsume?.();
      parser._consumed = false;
    }
    socket.end(); // our FIN follows the answer; the client may still send
    timer = setTimeout(close, LINGER.ms);
    timer.unref();
    socket.once("end", close); // the client finished sending and closed its side
    socket.once("close", () => clearTimeout(timer));
    socket.resume();
    // Node's server stopped reading the handle when it paused the request body, and the stream's
    // own state still says "reading", so read(0) would not restart it: start the handle as net.js
    // does (marking it reading, so that the stream does not start it a second time).
    const handle = (socket as unknown as { _handle?: { reading?: boolean; readStart?: () => number } | null })._handle;
    if (handle && !handle.reading && handle.readStart) {
      handle.reading = true;
      if (handle.readStart() !== 0) close();
    }
  };
}
