/**
 * One blob's download as ranges, resumable. The bytes go to `blobs/.partial-sha256-<hex>` (written
 * at their offsets), and the progress of each range to `.partial-sha256-<hex>.json` (written
 * atomically, after the bytes it counts). A download that stops (client gone, daemon killed,
 * network down) leaves both, and the next one asks only for the missing ranges. Blobs larger than
 * `partSize` are fetched as parallel ranges. On ENOSPC the partial files are removed (507), and so
 * are partial files that received nothing (a refused redirect).
 *
 * A response body is written as it arrives and never paused (see unpaused.ts): when the writes
 * fall more than `maxBufferedBytes` behind, the response is dropped once the bytes already
 * received are written, and the rest of the range is asked for again.
 */
import fs from "node:fs/promises";
import type { Readable } from "node:stream";
import { isNoSpace } from "../errors.js";
import { writeAll } from "../store/blob-writer.js";
import type { Layer, ModelStore } from "../store/store.js";
import type { RegistryClient } from "./client.js";
import { REGISTRY_DEFAULTS, RegistryError, discard, expectStatus, header } from "./http.js";
import { blobUrl, type RegistryRef } from "./reference.js";
import type { BlobTransfer } from "./transfer.js";

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

/** Fetches the ranges of `layer` still missing from its partial file; `onProgress(completed)` counts resumed bytes too. */
export async function fetchParts(transfer: BlobTransfer): Promise<void> {
  const { client, store, ref, layer, onProgress, signal } = transfer;
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
async function fetchPart(
  client: RegistryClient,
  ref: RegistryRef,
  layer: Layer,
  part: Part,
  fh: fs.FileHandle,
  signal: AbortSignal,
  progressed: () => void,
): Promise<void> {
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
function writeBody(
  body: Readable,
  fh: fs.FileHandle,
  offset: number,
  want: number,
  wrote: (n: number) => void,
  tooMuch: () => Error,
): Promise<"ended" | "behind"> {
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
      state.parts.every(
        (p) =>
          Number.isSafeInteger(p.start) &&
          Number.isSafeInteger(p.end) &&
          Number.isSafeInteger(p.done) &&
          p.done >= 0 &&
          p.start + p.done <= p.end + 1 &&
          p.start + p.done <= size,
      );
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
