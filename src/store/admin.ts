/**
 * Store administration: listing models, replacing and deleting manifests, and removing blobs
 * that no manifest references any more.
 *
 * Garbage collection only considers the layers of the manifest that was removed or replaced
 * (as Ollama does), never the whole blobs directory: a blob uploaded through `/api/blobs` for a
 * `create` that has not happened yet is not referenced by anything and must survive. Digests
 * pinned by an operation in progress (pull, create, copy) are kept too.
 */
import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { ModelNotFoundError } from "../errors.js";
import { displayName, nameKey, parseModelName, printable, type ModelName } from "./names.js";
import type { Manifest, ModelStore } from "./store.js";

/** One model as `/api/tags` lists it. */
export interface StoredModel {
  name: ModelName;
  display: string;
  key: string;
  manifest: Manifest;
  /** sha256 hex of the manifest file (Ollama's `digest` in `/api/tags`). */
  manifestDigest: string;
  /** Sum of the layer sizes and the config. */
  size: number;
  modifiedAt: Date;
}

/** Every readable manifest under `manifests/<host>/<namespace>/<model>/<tag>`; others are skipped. */
export async function listModels(store: ModelStore): Promise<StoredModel[]> {
  const out: StoredModel[] = [];
  for (const segments of await manifestPaths(store.manifestsDir, 4)) {
    const [host, namespace, model, tag] = segments as [string, string, string, string];
    let name: ModelName;
    try {
      name = parseModelName(`${host}/${namespace}/${model}:${tag}`);
    } catch {
      continue; // not a name we could have written; leave it alone
    }
    const file = path.join(store.manifestsDir, ...segments);
    try {
      const [bytes, stat] = await Promise.all([fs.readFile(file), fs.stat(file)]);
      const manifest = await store.readManifest(file);
      out.push({
        name,
        display: displayName(name),
        key: nameKey(name),
        manifest,
        manifestDigest: createHash("sha256").update(bytes).digest("hex"),
        size: manifest.config.size + manifest.layers.reduce((n, l) => n + l.size, 0),
        modifiedAt: stat.mtime,
      });
    } catch {
      continue; // unreadable or malformed manifest: not listed
    }
  }
  return out.sort((a, b) => b.modifiedAt.getTime() - a.modifiedAt.getTime());
}

/** Relative paths (as segment arrays) of regular files exactly `depth` levels below `root`. */
async function manifestPaths(root: string, depth: number, prefix: string[] = []): Promise<string[][]> {
  const entries = await fs.readdir(path.join(root, ...prefix), { withFileTypes: true }).catch(() => []);
  const out: string[][] = [];
  for (const e of entries) {
    if (e.name.startsWith(".")) continue;
    const segs = [...prefix, e.name];
    if (segs.length === depth) {
      if (e.isFile()) out.push(segs);
    } else if (e.isDirectory()) out.push(...(await manifestPaths(root, depth, segs)));
  }
  return out;
}

/** Every digest (config and layers) the manifest references. */
export function manifestDigests(manifest: Manifest): string[] {
  return [manifest.config.digest, ...manifest.layers.map((l) => l.digest)];
}

const gcLocks = new WeakMap<ModelStore, Promise<unknown>>();

/** Runs `fn` after every earlier store mutation of this kind (deletes and GC never interleave). */
function serialized<T>(store: ModelStore, fn: () => Promise<T>): Promise<T> {
  const previous = gcLocks.get(store) ?? Promise.resolve();
  const next = previous.then(fn, fn);
  gcLocks.set(store, next.catch(() => undefined));
  return next;
}

/** Removes those of `candidates` that no manifest references and nothing has pinned; returns them. */
export function removeUnreferenced(store: ModelStore, candidates: readonly string[]): Promise<string[]> {
  return serialized(store, async () => {
    const used = new Set<string>();
    for (const m of await listModels(store)) for (const d of manifestDigests(m.manifest)) used.add(d);
    const removed: string[] = [];
    for (const digest of new Set(candidates)) {
      if (used.has(digest) || store.isPinned(digest)) continue;
      await fs.rm(store.blobPath(digest), { force: true });
      removed.push(digest);
    }
    return removed;
  });
}

/**
 * Writes the manifest of `input` (atomically) and then removes the blobs of the manifest it
 * replaced that nothing references any more.
 */
export async function commitManifest(store: ModelStore, input: string, manifest: Manifest): Promise<void> {
  const old = await store.findModel(input).catch(() => undefined);
  await store.writeManifest(input, manifest);
  if (old) await removeUnreferenced(store, manifestDigests(old.manifest));
}

/** Deletes a model's manifest (and empty parent directories) and its now unreferenced blobs. */
export async function deleteModel(store: ModelStore, input: string): Promise<Manifest> {
  const found = await store.findModel(input);
  if (!found) throw new ModelNotFoundError(printable(input), false);
  await fs.rm(found.file);
  await removeEmptyParents(await fs.realpath(store.manifestsDir), path.dirname(found.file));
  await removeUnreferenced(store, manifestDigests(found.manifest));
  return found.manifest;
}

async function removeEmptyParents(root: string, dir: string): Promise<void> {
  let current = dir;
  while (current.startsWith(root + path.sep)) {
    const ok = await fs.rmdir(current).then(() => true, () => false); // fails when not empty
    if (!ok) return;
    current = path.dirname(current);
  }
}
