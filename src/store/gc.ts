/**
 * Garbage collection of the whole store at start, as Ollama prunes at start:
 *
 * - blobs (`sha256-<hex>`) that no manifest references: left by a daemon killed between writing a
 *   create's layers and its manifest, or uploaded with `/api/blobs` for a create that never came;
 * - partial downloads (`.partial-sha256-<hex>` and its `.json` progress) that cannot be resumed —
 *   no progress file, nothing received, the blob already complete — or that were last written more
 *   than {@link PARTIAL_MAX_AGE_MS} ago. Recent ones are kept: the next pull resumes them.
 *
 * Temporary files of dead processes are removed by `ModelStore.init`. While the daemon runs,
 * failures clean up after themselves (a failed pull publishes no blob and drops partials that
 * received nothing; delete and replace remove what they unreferenced: admin.ts).
 *
 * References are read from every file under `manifests/`, whatever its name, following links;
 * when one cannot be read as a manifest, no blob is removed (better an orphan than a lost layer).
 */
import fs from "node:fs/promises";
import path from "node:path";
import { PARTIAL_PREFIX, type ModelStore } from "./store.js";

/** How long an untouched partial download is kept for resuming. */
export const PARTIAL_MAX_AGE_MS = 24 * 60 * 60 * 1000;

export interface GcResult {
  blobs: string[];
  partials: string[];
  /** A manifest could not be read: blobs were left alone. */
  skippedBlobs: boolean;
}

/** Removes orphan blobs and stale partial downloads; returns the file names removed. */
export async function collectGarbage(store: ModelStore, now = Date.now()): Promise<GcResult> {
  const refs = await referencedDigests(store.manifestsDir);
  const result: GcResult = { blobs: [], partials: [], skippedBlobs: refs === undefined };
  const entries = await fs.readdir(store.blobsDir).catch(() => [] as string[]);
  const names = new Set(entries);
  for (const name of entries) {
    const file = path.join(store.blobsDir, name);
    const blob = /^sha256-([a-f0-9]{64})$/.exec(name);
    if (blob) {
      const digest = `sha256:${blob[1]}`;
      if (refs && !refs.has(digest) && !store.isPinned(digest)) {
        await fs.rm(file, { force: true });
        result.blobs.push(name);
      }
      continue;
    }
    const partial = new RegExp(`^${PARTIAL_PREFIX.replace(".", "\\.")}(sha256-[a-f0-9]{64})(\\.json)?$`).exec(name);
    if (!partial) continue;
    if (partial[2]) {
      if (!names.has(name.slice(0, -5))) await remove(file, result); // progress without its data
      continue;
    }
    if (!(await resumable(file, names.has(partial[1]!), now))) {
      await remove(file, result);
      await remove(`${file}.json`, result);
    }
  }
  return result;
}

async function remove(file: string, result: GcResult): Promise<void> {
  const existed = await fs.rm(file).then(() => true, () => false);
  if (existed) result.partials.push(path.basename(file));
}

/** A partial download worth keeping: recent, with progress counting some bytes, its blob not complete. */
async function resumable(file: string, complete: boolean, now: number): Promise<boolean> {
  if (complete) return false;
  try {
    const [data, state] = await Promise.all([fs.stat(file), fs.stat(`${file}.json`)]);
    if (now - Math.max(data.mtimeMs, state.mtimeMs) > PARTIAL_MAX_AGE_MS) return false;
    const progress = JSON.parse(await fs.readFile(`${file}.json`, "utf8")) as { parts?: Array<{ done?: unknown }> };
    return (progress.parts ?? []).some((p) => typeof p.done === "number" && p.done > 0);
  } catch {
    return false; // no progress file, or an unreadable one: it cannot be resumed
  }
}

/** Every digest named by a manifest file; undefined when one cannot be read as a manifest. */
export async function referencedDigests(root: string): Promise<Set<string> | undefined> {
  const refs = new Set<string>();
  const walk = async (dir: string, depth: number): Promise<boolean> => {
    const entries = await fs.readdir(dir).catch(() => [] as string[]);
    for (const name of entries) {
      const file = path.join(dir, name);
      const stat = await fs.stat(file).catch(() => undefined); // follows links: a linked manifest still counts
      if (stat?.isDirectory()) {
        if (depth < 8 && !(await walk(file, depth + 1))) return false;
      } else if (stat?.isFile()) {
        if (name.startsWith(".")) continue; // a temporary manifest of a writer
        if (stat.size > 4 * 1024 * 1024) return false; // not a manifest
        try {
          const m = JSON.parse(await fs.readFile(file, "utf8")) as { config?: { digest?: unknown }; layers?: Array<{ digest?: unknown }> };
          for (const l of [m.config, ...(m.layers ?? [])]) if (typeof l?.digest === "string") refs.add(l.digest);
        } catch {
          return false;
        }
      }
    }
    return true;
  };
  return (await walk(root, 0)) ? refs : undefined;
}
