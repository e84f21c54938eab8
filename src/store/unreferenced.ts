/**
 * Blobs no manifest references, while the daemon runs. `POST /api/blobs` stores whatever it is
 * sent under its digest, to be named by a later `/api/create`; a client that never creates (or
 * uploads a thousand distinct blobs) would otherwise fill the disk, and the start-up collection
 * (gc.ts) would only clean it at the next start. So:
 *
 * - a quota: the bytes of unreferenced blobs (not in use by a pull, create or copy in progress)
 *   plus the uploads under way may not pass `SERVICE_MAX_UNREFERENCED_BLOBS`; an upload that would
 *   is refused with 507 naming the variable, as it streams (or at once when its length is declared);
 * - a collection every {@link BLOB_GC}.intervalMs of the unreferenced blobs written more than
 *   {@link BLOB_GC}.graceMs ago (an upload that is answered "already present" renews its blob's time).
 *
 * What the quota counts is kept in memory (a scan at start, then each upload added) and the store
 * is scanned again only when an upload would pass the quota (models created since may now
 * reference blobs the count still holds) and at each collection.
 */
import fs from "node:fs/promises";
import path from "node:path";
import { StoreError } from "../errors.js";
import type { Logger } from "../logger.js";
import { referencedDigests } from "./gc.js";
import type { ModelStore } from "./store.js";

/** Grace and period of the collection (tests shorten them). */
export const BLOB_GC = { graceMs: 60 * 60 * 1000, intervalMs: 10 * 60 * 1000 };

/** An upload would take unreferenced blobs past the quota (507 at the door). */
export class BlobQuotaError extends StoreError {
  constructor(limit: number) {
    super(
      "quota",
      `unreferenced blobs would exceed SERVICE_MAX_UNREFERENCED_BLOBS (${limit} bytes): create a model from the blobs uploaded, or wait for them to be removed`,
    );
  }
}

export class UnreferencedBlobs {
  /** Unreferenced blobs by digest: their sizes and write times. */
  private known = new Map<string, { size: number; mtimeMs: number }>();
  private inflight = 0;
  private scanning: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: ModelStore,
    readonly limit: number,
    private readonly log?: Logger,
  ) {}

  /** Starts the periodic collection (the first scan also fills the count). */
  start(): void {
    if (this.timer) return;
    void this.rescan().catch(() => undefined);
    this.timer = setInterval(
      () => void this.collect().catch((err: unknown) => this.log?.warn({ err }, "collecting unreferenced blobs failed")),
      BLOB_GC.intervalMs,
    );
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Bytes counted now: unreferenced blobs and uploads under way. */
  get bytes(): number {
    let sum = this.inflight;
    for (const b of this.known.values()) sum += b.size;
    return sum;
  }

  /** Refuses at once an upload whose declared length cannot fit. */
  async admit(declared: number | undefined): Promise<void> {
    if (declared !== undefined) await this.reserve(declared, false);
  }

  /**
   * `source`, counted against the quota as it streams; the bytes are held as "under way" until
   * `done` is called with the blob's digest (or nothing, when the upload failed).
   */
  meter(source: AsyncIterable<Buffer>): { source: AsyncIterable<Buffer>; done: (blob?: { digest: string; created: boolean }) => Promise<void> } {
    let counted = 0;
    const self = this;
    async function* metered(): AsyncGenerator<Buffer> {
      for await (const chunk of source) {
        await self.reserve(chunk.length, true);
        counted += chunk.length;
        yield chunk;
      }
    }
    return {
      source: metered(),
      done: async (blob) => {
        this.inflight -= counted;
        if (!blob?.created) return;
        const stat = await fs.stat(this.store.blobPath(blob.digest)).catch(() => undefined);
        if (stat) this.known.set(blob.digest, { size: stat.size, mtimeMs: stat.mtimeMs });
      },
    };
  }

  /** An upload found its blob already there: its grace starts again. */
  async touch(digest: string): Promise<void> {
    const now = new Date();
    await fs.utimes(this.store.blobPath(digest), now, now).catch(() => undefined);
    const b = this.known.get(digest);
    if (b) b.mtimeMs = now.getTime();
  }

  /** Removes unreferenced blobs older than the grace; returns their file names. */
  async collect(now = Date.now()): Promise<string[]> {
    await this.rescan();
    const removed: string[] = [];
    for (const [digest, b] of this.known) {
      if (now - b.mtimeMs <= BLOB_GC.graceMs || this.store.isPinned(digest)) continue;
      await fs.rm(this.store.blobPath(digest), { force: true });
      this.known.delete(digest);
      removed.push(path.basename(this.store.blobPath(digest)));
    }
    if (removed.length > 0) this.log?.info({ blobs: removed }, "removed unreferenced blobs past their grace period");
    return removed;
  }

  /** Counts `n` more bytes under way, or throws 507 (after one fresh scan) when they do not fit. */
  private async reserve(n: number, hold: boolean): Promise<void> {
    if (this.bytes + n > this.limit) {
      await this.rescan();
      if (this.bytes + n > this.limit) throw new BlobQuotaError(this.limit);
    }
    if (hold) this.inflight += n;
  }

  /** Reads the store again: every blob no manifest references and nothing in progress uses. */
  private rescan(): Promise<void> {
    return (this.scanning ??= (async () => {
      try {
        const refs = await referencedDigests(this.store.manifestsDir);
        // A manifest that cannot be read: nothing is known to be unreferenced (gc.ts's rule).
        if (refs === undefined) return void (this.known = new Map());
        const known = new Map<string, { size: number; mtimeMs: number }>();
        for (const name of await fs.readdir(this.store.blobsDir).catch(() => [] as string[])) {
          const hex = /^sha256-([a-f0-9]{64})$/.exec(name)?.[1];
          if (!hex) continue;
          const digest = `sha256:${hex}`;
          if (refs.has(digest) || this.store.isPinned(digest)) continue;
          const stat = await fs.lstat(path.join(this.store.blobsDir, name)).catch(() => undefined);
          if (stat?.isFile()) known.set(digest, { size: stat.size, mtimeMs: stat.mtimeMs });
        }
        this.known = known;
      } finally {
        this.scanning = undefined;
      }
    })());
  }
}
