/**
 * Downloading the blobs of a pull into the store, resumably, once for every pull that needs them.
 *
 * {@link BlobLeases} is the entry point: pulls that need the same digest at the same time share
 * one download job and its partial file (see there). The job fetches the missing ranges into the
 * partial file (ranges.ts); when every range is complete, {@link verifyBlob} hashes the file (a
 * mismatch deletes it); the pull publishes it (renames it onto `sha256-<hex>`) once every layer
 * verified. Old partials are removed at start (store/gc.ts).
 */
import fs from "node:fs/promises";
import { isNoSpace } from "../errors.js";
import { hashFile } from "../store/blob-writer.js";
import type { Layer, ModelStore } from "../store/store.js";
import type { RegistryClient } from "./client.js";
import { RegistryError, describe, isParserError } from "./http.js";
import { fetchParts, removePartial } from "./ranges.js";
import type { RegistryRef } from "./reference.js";
import type { BlobTransfer } from "./transfer.js";

/** Errors of the connection (not of the store): reported as the registry's failure. */
const NETWORK_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
  "ETIMEDOUT",
  "ENETUNREACH",
  "ENETDOWN",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "LMD_ADDRESS_REFUSED",
]);

/** A digest that pulls in progress need: its one download job, and who waits on it. */
interface Entry {
  key: string;
  job?: Promise<void>;
  state: "running" | "ok" | "failed";
  /** The signal of the pull whose client runs the job: when it aborts, so does the job. */
  owner?: AbortSignal;
  /** The source the job downloads from (a mirror or the registry). */
  origin?: string;
  listeners: Set<(completed: number) => void>;
  /** Pulls holding the entry: while any does, every pull shares its job and its partial file. */
  holders: number;
  /** A holder moved the verified partial file onto the blob's name. */
  published: boolean;
}

/** By partial file path: the same digest in two stores is two entries. */
const entries = new Map<string, Entry>();

/** How many times a pull takes over a download whose pull went away. */
const TAKEOVERS = 8;

/**
 * One pull's hold on the blobs it needs. While any pull holds a digest, every pull that needs it
 * shares one download job (one download, whoever asks) and sees its progress, and nobody else
 * starts another job on the same partial file. {@link fetch} leaves the blob stored or its partial
 * file complete and verified; {@link publish} moves it onto its name; {@link release} (always,
 * when the pull ends) lets go. A failed pull removes what {@link published} lists (unless a
 * manifest references it or another pull has pinned it); a verified partial file nobody
 * published stays, to be published by the next pull without downloading it again.
 */
export class BlobLeases {
  private readonly held = new Map<string, Entry>();
  private readonly owned: Promise<void>[] = [];

  /** Makes sure the blob is stored or its partial file is complete and verified; `onProgress(completed)` counts resumed bytes too. */
  async fetch(transfer: BlobTransfer): Promise<void> {
    const { client, store, ref, layer, onProgress, signal } = transfer;
    const entry = this.hold(store, layer.digest);
    for (let attempt = 0; attempt < TAKEOVERS; attempt++) {
      signal.throwIfAborted();
      if (!entry.job || entry.state === "failed") this.start(entry, client, store, ref, layer, signal);
      const { job, owner, origin } = entry;
      entry.listeners.add(onProgress);
      try {
        return await untilAborted(job!, signal);
      } catch (err) {
        // The pull that ran the job went away, or the job asked another source (a mirror) than
        // this pull's: this one takes over with its own, resuming from the partial file.
        // Another pull's failure at the same source is this pull's too.
        if (!signal.aborted && owner !== signal && (owner?.aborted || origin !== ref.origin)) continue;
        throw err;
      } finally {
        entry.listeners.delete(onProgress);
      }
    }
    throw new RegistryError(`pull ${layer.digest.slice(7, 19)}: every pull that downloaded it went away`);
  }

  /** Moves the verified partial file onto the blob's name; true when this call stored it. */
  async publish(store: ModelStore, layer: Layer): Promise<boolean> {
    if (await store.hasBlob(layer.digest)) return false;
    const file = store.partialPath(layer.digest);
    try {
      await fs.rename(file, store.blobPath(layer.digest));
    } catch (err) {
      // Another pull holding the same digest published it first.
      if ((err as NodeJS.ErrnoException).code === "ENOENT" && (await store.hasBlob(layer.digest))) return false;
      throw err;
    }
    await fs.rm(`${file}.json`, { force: true });
    this.hold(store, layer.digest).published = true;
    return true;
  }

  /** The digests this pull holds that some pull published meanwhile (a failed pull's candidates for removal). */
  published(): string[] {
    return [...this.held].filter(([, e]) => e.published).map(([d]) => d);
  }

  /** Lets go of every digest, once the jobs this pull ran have wound down (their files closed). */
  async release(): Promise<void> {
    await Promise.allSettled(this.owned);
    for (const entry of this.held.values()) {
      if (--entry.holders === 0) entries.delete(entry.key);
    }
    this.held.clear();
  }

  private hold(store: ModelStore, digest: string): Entry {
    let entry = this.held.get(digest);
    if (entry) return entry;
    const key = store.partialPath(digest);
    entry = entries.get(key) ?? { key, state: "running", listeners: new Set(), holders: 0, published: false };
    entries.set(key, entry);
    entry.holders++;
    this.held.set(digest, entry);
    return entry;
  }

  private start(entry: Entry, client: RegistryClient, store: ModelStore, ref: RegistryRef, layer: Layer, signal: AbortSignal): void {
    const job = runJob({ client, store, ref, layer, onProgress: (n) => entry.listeners.forEach((f) => f(n)), signal });
    entry.job = job;
    entry.owner = signal;
    entry.origin = ref.origin;
    entry.state = "running";
    job.then(
      () => entry.job === job && (entry.state = "ok"),
      () => entry.job === job && (entry.state = "failed"),
    );
    this.owned.push(job.catch(() => undefined));
  }
}

/** `promise`, or a rejection with the signal's reason as soon as it aborts (the promise runs on). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

async function runJob(transfer: BlobTransfer): Promise<void> {
  const { store, ref, layer, onProgress, signal } = transfer;
  if (await store.hasBlob(layer.digest)) {
    await checkStoredSize(store, layer);
    return onProgress(layer.size);
  }
  await fetchParts(transfer).catch((err: unknown) => {
    throw explain(err, layer, ref, signal);
  });
  await verifyBlob(store, layer);
}

/** A download's failure in words, naming the layer. */
function explain(err: unknown, layer: Layer, ref: RegistryRef, signal: AbortSignal): unknown {
  const short = layer.digest.slice(7, 19);
  // A failure of the connection (from client.send) named with the layer it happened to.
  if (err instanceof RegistryError) return /^(pull |digest mismatch)/.test(err.message) ? err : new RegistryError(`pull ${short}: ${err.message}`);
  if (signal.aborted || isNoSpace(err)) return err;
  const code = (err as { code?: unknown }).code;
  const network = isParserError(err) || (typeof code === "string" && (code.startsWith("UND_ERR") || NETWORK_CODES.has(code)));
  if (!network) return err; // a failure of the store (507 and the like)
  // undici's own errors (a stall, a reset past the retries, a malformed answer) in words, naming the layer.
  const why = describe(err, ref.name.host);
  const stalled = code === "UND_ERR_BODY_TIMEOUT";
  return new RegistryError(`pull ${short}: ${why}${stalled ? "; pull again to resume" : ""}`);
}

/** A blob already in the store must have the size the manifest declares. */
async function checkStoredSize(store: ModelStore, layer: Layer): Promise<void> {
  const { size } = await fs.stat(store.blobPath(layer.digest));
  if (size !== layer.size)
    throw new RegistryError(`pull ${layer.digest.slice(7, 19)}: the manifest says ${layer.digest} has ${layer.size} bytes, the stored blob has ${size}`);
}

/**
 * Hashes a fully downloaded partial file; a mismatch deletes it. A layer already stored is
 * checked for its size only. Nothing is published here: {@link BlobLeases.publish} does that once
 * every layer of the pull verified, so a failed pull leaves no blob that nothing references.
 */
async function verifyBlob(store: ModelStore, layer: Layer): Promise<void> {
  if (await store.hasBlob(layer.digest)) return checkStoredSize(store, layer);
  const file = store.partialPath(layer.digest);
  const { size } = await fs.stat(file);
  const actual = size === layer.size ? await hashFile(file) : `(${size} bytes)`;
  if (actual !== layer.digest) {
    await removePartial(store, layer.digest);
    throw new RegistryError(`digest mismatch, file must be downloaded again: want ${layer.digest}, got ${actual}`);
  }
}
