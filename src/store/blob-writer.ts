/**
 * Streaming a blob into the store: a temporary file in `blobs/`, sha256 computed while writing,
 * fsync, then a rename onto `sha256-<hex>`. The temporary file is removed on every failure path
 * (digest mismatch, a client gone mid-upload, ENOSPC), so no partial blob is ever left behind.
 */
import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import type { Readable } from "node:stream";
import { StoreError } from "../errors.js";

/** What the writer needs of the store (declared here so that store.ts imports this file, not the reverse). */
export interface BlobTarget {
  tempPath(): string;
  hasBlob(digest: string): Promise<boolean>;
  blobPath(digest: string): string;
}

/** Result of {@link writeStreamVerified}. */
export interface WrittenBlob {
  digest: string;
  size: number;
  /** False when the blob was already in the store (the new copy was dropped). */
  created: boolean;
}

/** Writes `source` as a blob; refuses a digest other than `expected` (when given): an `invalid` store error. */
export async function writeStreamVerified(store: BlobTarget, source: Readable | AsyncIterable<Buffer>, expected?: string): Promise<WrittenBlob> {
  const tmp = store.tempPath();
  const hash = createHash("sha256");
  let size = 0;
  try {
    const fh = await fs.open(tmp, "wx");
    try {
      for await (const chunk of source as AsyncIterable<Buffer>) {
        hash.update(chunk);
        size += chunk.length;
        await writeAll(fh, chunk); // awaiting each write is the backpressure on the source
      }
      await fh.sync();
    } finally {
      await fh.close();
    }
    const digest = `sha256:${hash.digest("hex")}`;
    if (expected !== undefined && digest !== expected) throw new StoreError("invalid", `digest mismatch, expected '${expected}', got '${digest}'`);
    if (await store.hasBlob(digest)) return { digest, size, created: false };
    await fs.rename(tmp, store.blobPath(digest));
    return { digest, size, created: true };
  } finally {
    await fs.rm(tmp, { force: true });
  }
}

/** Computes the sha256 of a file (the verification pass after a download). */
export async function hashFile(file: string, onProgress?: (bytes: number) => void): Promise<string> {
  const hash = createHash("sha256");
  const fh = await fs.open(file, "r");
  try {
    for await (const chunk of fh.createReadStream({ autoClose: false, highWaterMark: 1 << 20 })) {
      hash.update(chunk as Buffer);
      onProgress?.((chunk as Buffer).length);
    }
  } finally {
    await fh.close();
  }
  return `sha256:${hash.digest("hex")}`;
}

/** Writes the whole buffer (a short write continues where it stopped). */
export async function writeAll(fh: fs.FileHandle, chunk: Buffer, position?: number): Promise<void> {
  let done = 0;
  while (done < chunk.length) {
    const { bytesWritten } = await fh.write(chunk, done, chunk.length - done, position === undefined ? null : position + done);
    done += bytesWritten;
  }
}
