/**
 * Downloading one blob into the store, resumably.
 *
 * The bytes go to `blobs/.partial-sha256-<hex>` (written at their offsets), and the progress of
 * each range to `.partial-sha256-<hex>.json` (written atomically, after the bytes it counts).
 * A pull that stops (client gone, daemon killed, network down) leaves both, and the next pull
 * asks only for the missing ranges. Blobs larger than `partSize` are fetched as parallel ranges.
 * When every range is complete, {@link verifyBlob} hashes the file (a mismatch deletes it) and
 * {@link publishBlob} renames it onto `sha256-<hex>`. On ENOSPC the partial files are removed (507),
 * and so are partial files that received nothing (a refused redirect). Old partials are removed at
 * start (store/gc.ts).
 */
import fs from "node:fs/promises";
import { isNoSpace } from "../errors.js";
import { hashFile, writeAll } from "../store/blob-writer.js";
import { blobUrl, type RegistryRef } from "./reference.js";
import type { RegistryClient } from "./client.js";
import { REGISTRY_DEFAULTS, RegistryError, describe, discard, expectStatus, header } from "./http.js";
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

/** Downloads in progress in this process, by partial path: a second pull of a blob waits for the first. */
const inflight = new Map<string, Promise<void>>();

/**
 * Makes sure the blob's bytes are in its partial file (or the blob is already stored).
 * `onProgress(completed)` reports bytes present so far, resumed bytes included.
 */
export async function downloadBlob(client: RegistryClient, store: ModelStore, ref: RegistryRef, layer: Layer, onProgress: (completed: number) => void, signal: AbortSignal): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    if (await store.hasBlob(layer.digest)) {
      await checkStoredSize(store, layer);
      return onProgress(layer.size);
    }
    const key = store.partialPath(layer.digest);
    const running = inflight.get(key);
    if (running) {
      await running.catch(() => undefined);
      continue;
    }
    const job = fetchParts(client, store, ref, layer, onProgress, signal).catch((err: unknown) => {
      const short = layer.digest.slice(7, 19);
      // A failure of the connection (from client.send) named with the layer it happened to.
      if (err instanceof RegistryError && !/^(pull |digest mismatch)/.test(err.message)) throw new RegistryError(`pull ${short}: ${err.message}`);
      const code = (err as { code?: unknown }).code;
      const network = typeof code === "string" && (code.startsWith("UND_ERR") || NETWORK_CODES.has(code));
      if (signal.aborted || !network) throw err; // ours (RegistryError), ENOSPC (507), ...
      // undici's own errors (a stall, a reset past the retries) in words, naming the layer.
      const why = describe(err, ref.name.host);
      const stalled = (err as { code?: string }).code === "UND_ERR_BODY_TIMEOUT";
      throw new RegistryError(`pull ${short}: ${why}${stalled ? "; pull again to resume" : ""}`);
    });
    inflight.set(key, job);
    try {
      return await job;
    } finally {
      inflight.delete(key);
    }
  }
  throw new RegistryError(`could not download ${layer.digest}`);
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

/** Fetches the rest of one range and writes it at its offset. */
async function fetchPart(client: RegistryClient, ref: RegistryRef, layer: Layer, part: Part, fh: fs.FileHandle, signal: AbortSignal, progressed: () => void): Promise<void> {
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
  let got = 0;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    if (got + chunk.length > want) throw new RegistryError(`registry sent more than ${layer.size} bytes for ${layer.digest}`);
    await writeAll(fh, chunk, from + got);
    got += chunk.length;
    part.done += chunk.length; // counted only once the bytes are written
    progressed();
  }
  if (got < want) throw new RegistryError(`download of ${layer.digest} ended early`);
}

/** A blob already in the store must have the size the manifest declares (issue 13 item 12). */
async function checkStoredSize(store: ModelStore, layer: Layer): Promise<void> {
  const { size } = await fs.stat(store.blobPath(layer.digest));
  if (size !== layer.size) throw new RegistryError(`pull ${layer.digest.slice(7, 19)}: the manifest says ${layer.digest} has ${layer.size} bytes, the stored blob has ${size}`);
}

/**
 * Hashes a fully downloaded partial file; a mismatch deletes it. A layer already stored is
 * checked for its size only. Nothing is published here: {@link publishBlob} does that once every
 * layer of the pull verified, so a failed pull leaves no blob that nothing references.
 */
export async function verifyBlob(store: ModelStore, layer: Layer): Promise<void> {
  if (await store.hasBlob(layer.digest)) return checkStoredSize(store, layer);
  const file = store.partialPath(layer.digest);
  const { size } = await fs.stat(file);
  const actual = size === layer.size ? await hashFile(file) : `(${size} bytes)`;
  if (actual !== layer.digest) {
    await removePartial(store, layer.digest);
    throw new RegistryError(`digest mismatch, file must be downloaded again: want ${layer.digest}, got ${actual}`);
  }
}

/** Moves a verified partial file onto its blob name; true when it was not stored before. */
export async function publishBlob(store: ModelStore, layer: Layer): Promise<boolean> {
  if (await store.hasBlob(layer.digest)) return false;
  const file = store.partialPath(layer.digest);
  await fs.rename(file, store.blobPath(layer.digest));
  await fs.rm(`${file}.json`, { force: true });
  return true;
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
