/**
 * Downloading the blobs of a pull into the store, resumably, once for every pull that needs them.
 *
 * {@link BlobLeases} is the entry point: pulls that need the same digest at the same time share
 * one download job and its partial file (see there). The bytes go to `blobs/.partial-sha256-<hex>`
 * (written at their offsets), and the progress of each range to `.partial-sha256-<hex>.json`
 * (written atomically, after the bytes it counts). A pull that stops (client gone, daemon killed,
 * network down) leaves both, and the next pull asks only for the missing ranges. Blobs larger than
 * `partSize` are fetched as parallel ranges. When every range is complete, {@link verifyBlob}
 * hashes the file (a mismatch deletes it); the pull publishes it (renames it onto `sha256-<hex>`)
 * once every layer verified. On ENOSPC the partial files are removed (507), and so are partial
 * files that received nothing (a refused redirect). Old partials are removed at start (store/gc.ts).
 *
 * A response body is written as it arrives and never paused (see `unpaused` in http.ts): when the
 * writes fall more than `maxBufferedBytes` behind, the response is dropped once the bytes already
 * received are written, and the rest of the range is asked for again.
 */
import fs from "node:fs/promises";
import type { Readable } from "node:stream";
import { isNoSpace } from "../errors.js";
import { hashFile, writeAll } from "../store/blob-writer.js";
import { blobUrl, type RegistryRef } from "./reference.js";
import type { RegistryClient } from "./client.js";
import { REGISTRY_DEFAULTS, RegistryError, describe, discard, expectStatus, header, isParserError } from "./http.js";
import type { Layer, ModelStore } from "../store/store.js";

interface Part {
  start: number;
  /** Inclusive. */
  end: number;
  done: number;
}

interface PartialState {
  digest: string;
  size: number;
  parts: Part[];
}

const SAVE_INTERVAL_MS = 250;

/** Errors of the connection (not of the store): reported as the registry's failure. */
const NETWORK_CODES = new Set(["ECONNRESET", "ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EPIPE", "ETIMEDOUT", "ENETUNREACH", "ENETDOWN", "EHOSTUNREACH", "EHOSTDOWN", "LMD_ADDRESS_REFUSED"]);

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
  async fetch(client: RegistryClient, store: ModelStore, ref: RegistryRef, layer: Layer, onProgress: (completed: number) => void, signal: AbortSignal): Promise<void> {
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
    const job = runJob(client, store, ref, layer, (n) => entry.listeners.forEach((f) => f(n)), signal);
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

async function runJob(client: RegistryClient, store: ModelStore, ref: RegistryRef, layer: Layer, onProgress: (completed: number) => void, signal: AbortSignal): Promise<void> {
  if (await store.hasBlob(layer.digest)) {
    await checkStoredSize(store, layer);
    return onProgress(layer.size);
  }
  await fetchParts(client, store, ref, layer, onProgress, signal).catch((err: unknown) => {
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

async function fetchParts(client: RegistryClient, store: ModelStore, ref: RegistryRef, layer: Layer, onProgress: (completed: number) => void, signal: AbortSignal): Promise<void> {
  const file = store.partialPath(layer.digest);
  const stateFile = `${file}.json`;
  const loaded = await loadState(file, stateFile, layer);
  const state: PartialState = loaded ?? { digest: layer.digest, size: layer.size, parts: split(layer.size) };
  const fh = await fs.open(file, loaded ? "r+" : "w+"); // a fresh start truncates whatever was there
  // Progress is saved at most every SAVE_INTERVAL_MS, with a trailing save so that the last bytes
  // received before a stall or a SIGKILL are counted too.
  let saving = Promise.resolve();
  let lastSave = 0;
  let trailing: NodeJS.Timeout | undefined;
  const save = (force = false): Promise<void> => {
    const wait = SAVE_INTERVAL_MS - (Date.now() - lastSave);
    if (!force && wait > 0) {
      trailing ??= setTimeout(() => {
        trailing = undefined;
        void save(true).catch(() => undefined);
      }, wait);
      return saving;
    }
    clearTimeout(trailing);
    trailing = undefined;
    lastSave = Date.now();
    const text = JSON.stringify(state);
    saving = saving.then(() => writeStateAtomic(stateFile, text));
    return saving;
  };
  const completed = () => state.parts.reduce((n, p) => n + p.done, 0);
  // One failing range stops the others before the file is closed (or removed on ENOSPC).
  const stop = new AbortController();
  const onAbort = () => stop.abort(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    await save(true);
    onProgress(completed());
    const queue = state.parts.filter((p) => p.start + p.done <= p.end);
    const worker = async () => {
      for (let part = queue.shift(); part && !stop.signal.aborted; part = queue.shift()) {
        await fetchPart(client, ref, layer, part, fh, stop.signal, () => {
          onProgress(completed());
          void save();
        });
      }
    };
    const results = await Promise.allSettled(
      Array.from({ length: Math.min(REGISTRY_DEFAULTS.parallel, queue.length) }, () =>
        worker().catch((err: unknown) => {
          stop.abort(err);
          throw err;
        }),
      ),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw signal.aborted ? signal.reason : failed.reason;
    await save(true);
  } catch (err) {
    await saving.catch(() => undefined);
    // Nothing received (a refused redirect, an unreachable blob host): nothing worth resuming.
    if (isNoSpace(err) || completed() === 0) await removePartial(store, layer.digest);
    else await save(true).catch(() => undefined);
    throw err;
  } finally {
    signal.removeEventListener("abort", onAbort);
    clearTimeout(trailing);
    await saving.catch(() => undefined);
    await fh.close();
  }
}

/** Fetches the rest of one range and writes it at its offset (asking again after a response dropped for falling behind). */
async function fetchPart(client: RegistryClient, ref: RegistryRef, layer: Layer, part: Part, fh: fs.FileHandle, signal: AbortSignal, progressed: () => void): Promise<void> {
  while (part.start + part.done <= part.end) {
    const from = part.start + part.done;
    const res = await client.send(blobUrl(ref, layer.digest), { headers: { range: `bytes=${from}-${part.end}` }, redirects: true, signal });
    await expectStatus(res, [200, 206], `pull ${layer.digest.slice(7, 19)}`);
    if (res.statusCode === 200 && from !== 0) {
      // The server ignored Range: only a whole-file answer starting at 0 is usable, and only for a whole-file part.
      discard(res.body);
      throw new RegistryError("registry does not support resuming downloads (Range)");
    }
    if (res.statusCode === 206) {
      const range = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(header(res.headers, "content-range") ?? "");
      if (!range || Number(range[1]) !== from) {
        discard(res.body);
        throw new RegistryError(`registry answered the wrong range for ${layer.digest}`);
      }
    }
    const want = part.end - from + 1;
    const outcome = await writeBody(res.body, fh, from, want, (n) => {
      part.done += n; // counted only once the bytes are written
      progressed();
    }, () => new RegistryError(`registry sent more than ${layer.size} bytes for ${layer.digest}`));
    if (outcome === "ended" && part.start + part.done <= part.end) throw new RegistryError(`download of ${layer.digest} ended early`);
  }
}

/**
 * Writes a response body at `offset` as it arrives, in order, without ever pausing it. Resolves
 * "ended" when the body ended and every byte is written, "behind" when more than
 * `maxBufferedBytes` waited to be written: the body is then dropped, the bytes already received
 * are written, and the caller asks for the rest. A body error is raised once the bytes received
 * before it are written (they count towards a resume). More than `want` bytes: `tooMuch()`.
 */
function writeBody(body: Readable, fh: fs.FileHandle, offset: number, want: number, wrote: (n: number) => void, tooMuch: () => Error): Promise<"ended" | "behind"> {
  return new Promise((resolve, reject) => {
    const queue: Buffer[] = [];
    let queued = 0;
    let received = 0;
    let position = offset;
    let writing = false;
    let ended = false;
    let behind = false;
    let failure: { error: unknown } | undefined;
    let settled = false;
    const settle = () => {
      if (settled || writing) return;
      if (failure) {
        settled = true;
        return reject(failure.error);
      }
      if ((ended || behind) && queue.length === 0) {
        settled = true;
        resolve(behind ? "behind" : "ended");
      }
    };
    const stop = (error: unknown) => {
      failure ??= { error };
      discard(body);
    };
    const pump = async () => {
      if (writing) return;
      writing = true;
      try {
        while (queue.length > 0) {
          const chunk = queue.length === 1 ? queue[0]! : Buffer.concat(queue);
          queue.length = 0;
          await writeAll(fh, chunk, position);
          position += chunk.length;
          queued -= chunk.length;
          wrote(chunk.length);
        }
      } catch (err) {
        queue.length = 0;
        stop(err);
      } finally {
        writing = false;
      }
      settle();
    };
    body.on("data", (chunk: Buffer) => {
      if (failure || behind) return;
      if (received + chunk.length > want) return stop(tooMuch());
      received += chunk.length;
      queue.push(chunk);
      queued += chunk.length;
      if (queued > REGISTRY_DEFAULTS.maxBufferedBytes) {
        behind = true; // the disk is slower than the network: drop this answer, keep what arrived
        discard(body);
      }
      void pump();
    });
    body.on("end", () => {
      ended = true;
      settle();
    });
    body.on("error", (err: unknown) => {
      if (behind || failure) return settle(); // our own discard
      failure = { error: err };
      settle(); // after the queued bytes are written (pump settles when it finishes)
    });
    body.on("close", () => {
      if (!ended && !behind && !failure) failure = { error: new RegistryError("the registry's response was cut off") };
      settle();
    });
  });
}

/** A blob already in the store must have the size the manifest declares (issue 13 item 12). */
async function checkStoredSize(store: ModelStore, layer: Layer): Promise<void> {
  const { size } = await fs.stat(store.blobPath(layer.digest));
  if (size !== layer.size) throw new RegistryError(`pull ${layer.digest.slice(7, 19)}: the manifest says ${layer.digest} has ${layer.size} bytes, the stored blob has ${size}`);
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

/** Removes a blob's partial download and its progress file. */
export async function removePartial(store: ModelStore, digest: string): Promise<void> {
  const file = store.partialPath(digest);
  await Promise.all([fs.rm(file, { force: true }), fs.rm(`${file}.json`, { force: true })]);
}

function split(size: number): Part[] {
  if (size === 0) return [];
  const n = Math.max(1, Math.min(64, Math.ceil(size / REGISTRY_DEFAULTS.partSize)));
  const step = Math.ceil(size / n);
  const parts: Part[] = [];
  for (let start = 0; start < size; start += step) parts.push({ start, end: Math.min(size, start + step) - 1, done: 0 });
  return parts;
}

/** The saved progress, when it matches the layer and the partial file holds the bytes it counts. */
async function loadState(file: string, stateFile: string, layer: Layer): Promise<PartialState | undefined> {
  try {
    const state = JSON.parse(await fs.readFile(stateFile, "utf8")) as PartialState;
    const { size } = await fs.stat(file);
    const valid =
      state.digest === layer.digest &&
      state.size === layer.size &&
      Array.isArray(state.parts) &&
      state.parts.every((p) => Number.isSafeInteger(p.start) && Number.isSafeInteger(p.end) && Number.isSafeInteger(p.done) && p.done >= 0 && p.start + p.done <= p.end + 1 && p.start + p.done <= size);
    return valid ? state : undefined;
  } catch {
    return undefined; // none, or unreadable: start over
  }
}

async function writeStateAtomic(stateFile: string, text: string): Promise<void> {
  const tmp = `${stateFile}.${process.pid}.tmp`;
  await fs.writeFile(tmp, text);
  await fs.rename(tmp, stateFile);
}
