/**
 * Reading JSON request bodies with a size limit and an idle timeout.
 *
 * The body is streamed and counted; past the limit we stop keeping it and throw 413. We never
 * destroy the request here: that would destroy the socket and the client would get no response.
 * The server answers 413 with `connection: close` (the rest of the upload is discarded meanwhile).
 */
import type { IncomingMessage } from "node:http";
import { BadRequestError, BodyTooLargeError, HttpError } from "../errors.js";

/** How long a body may go without data before the read is abandoned with 408. */
export const BODY_IDLE_TIMEOUT_MS = 60_000;

/** Options for {@link readJson}. */
export interface ReadBodyOptions {
  /** Idle timeout in ms (no data for this long → 408). Default {@link BODY_IDLE_TIMEOUT_MS}. */
  timeoutMs?: number;
}

/**
 * Reads the body as one JSON object.
 * @throws BodyTooLargeError past `limitBytes` (also when Content-Length announces more);
 *   BadRequestError on an empty body, bad JSON, invalid UTF-8 or a non-object value;
 *   HttpError 408 when the client stops sending.
 */
export async function readJson(req: IncomingMessage, limitBytes: number, options: ReadBodyOptions = {}): Promise<Record<string, unknown>> {
  const value = await readJsonOrUndefined(req, limitBytes, options);
  if (value === undefined) throw new BadRequestError("missing request body");
  return value;
}

/** Like {@link readJson}, for endpoints whose body is optional: an empty body gives `{}`. */
export async function readJsonOrEmpty(req: IncomingMessage, limitBytes: number, options: ReadBodyOptions = {}): Promise<Record<string, unknown>> {
  return (await readJsonOrUndefined(req, limitBytes, options)) ?? {};
}

async function readJsonOrUndefined(req: IncomingMessage, limitBytes: number, options: ReadBodyOptions): Promise<Record<string, unknown> | undefined> {
  const announced = Number(req.headers["content-length"]);
  if (Number.isFinite(announced) && announced > limitBytes) throw new BodyTooLargeError(limitBytes);
  const bytes = await readBytes(req, limitBytes, options.timeoutMs ?? BODY_IDLE_TIMEOUT_MS);
  return parseObject(bytes);
}

/** Decodes and parses a body; `undefined` for an empty (or whitespace-only) one. */
export function parseObject(bytes: Uint8Array): Record<string, unknown> | undefined {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes); // also drops a leading BOM
  } catch {
    throw new BadRequestError("invalid JSON in request body: invalid UTF-8");
  }
  if (text.trim() === "") return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new BadRequestError(`invalid JSON in request body: ${(err as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new BadRequestError("invalid JSON in request body: expected an object");
  }
  return value as Record<string, unknown>;
}

/** Collects the body; rejects past `limit` bytes, after `timeoutMs` without data, or on abort. */
function readBytes(req: IncomingMessage, limit: number, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (req.readableEnded) return resolve(Buffer.alloc(0)); // already consumed: nothing left to read
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(() => fail(new HttpError(408, "request body timeout")), timeoutMs);
    const cleanup = (): void => {
      clearTimeout(timer);
      req.off("data", onData).off("end", onEnd).off("error", onClose).off("close", onClose);
    };
    const fail = (err: Error): void => {
      cleanup();
      // Keep the stream flowing with no listener: the rest of the upload is read and dropped, so the
      // socket's receive buffer drains and the client can read our error response before we close.
      req.resume();
      reject(err);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) return fail(new BodyTooLargeError(limit));
      chunks.push(chunk);
      timer.refresh();
    };
    const onEnd = (): void => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    // 'error' (aborted) or 'close' before 'end': the client went away; nobody will read a response.
    const onClose = (): void => fail(new BadRequestError("request body aborted"));
    req.on("data", onData).once("end", onEnd).once("error", onClose).once("close", onClose);
  });
}
