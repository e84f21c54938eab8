/**
 * Finding a name's manifest file, and the manifest each name resolved to last. Every request
 * resolves its model, so the usual lookup is one round of file-system requests: the exact path's
 * stat and real path asked at once, and the text reused while the file is the same one (its inode,
 * size and modification time: lmd replaces a manifest by rename, a new inode; Ollama rewrites it
 * in place, a new size or modification time).
 */
import type { Stats } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { LRUCache } from "lru-cache";
import { parseManifest, type Manifest } from "./manifest.js";
import { manifestSegments, nameKey, type ModelName } from "./names.js";

/** A manifest file found for a name, with its stat. */
export interface ManifestFile {
  file: string;
  stat: Stats;
}

/** A manifest as read, with its text: two manifests of the same text name the same blobs. */
export interface ManifestText {
  manifest: Manifest;
  text: string;
}

/** Resolves a path's symbolic links, refusing one that leads out of the store (ModelStore.insideStore). */
export type InsideStore = (file: string) => Promise<string>;

/**
 * Finds the manifest file for a name: the exact path first (its stat and real path at once), then a
 * case-insensitive match of each segment (Ollama matches names case-insensitively).
 */
export async function locateManifest(dir: string, name: ModelName, inside: InsideStore): Promise<ManifestFile | undefined> {
  const direct = path.join(dir, ...manifestSegments(name));
  const real = settle(inside(direct));
  const directStat = await fs.stat(direct).catch(() => undefined);
  if (directStat?.isFile()) return { file: await unwrap(real), stat: directStat };
  let at = dir;
  for (const segment of manifestSegments(name)) {
    const exact = path.join(at, segment);
    if (await exists(exact)) {
      at = exact;
      continue;
    }
    const entries = await fs.readdir(at).catch(() => [] as string[]);
    const match = entries.find((e) => e.toLowerCase() === segment.toLowerCase());
    if (!match) return undefined;
    at = path.join(at, match);
  }
  const stat = await fs.stat(at).catch(() => undefined);
  return stat?.isFile() ? { file: await inside(at), stat } : undefined;
}

/** The manifest each name resolved to last, by name key (a few KiB each; the least recently used goes first). */
export class ManifestCache {
  private readonly byName = new LRUCache<string, { file: string; identity: string; text: string }>({ max: 256 });

  constructor(
    private readonly dir: string,
    private readonly inside: InsideStore,
  ) {}

  /** The manifest the name had when it was last looked up, without asking the file system. */
  previous(name: ModelName): ManifestText | undefined {
    const kept = this.byName.peek(nameKey(name));
    return kept && { manifest: parseManifest(kept.file, kept.text), text: kept.text };
  }

  /** The manifest stored for a name now, or undefined (none, or removed while it was being read). */
  async lookup(name: ModelName): Promise<(ManifestFile & ManifestText) | undefined> {
    const found = await locateManifest(this.dir, name, this.inside);
    if (!found) return undefined;
    const key = nameKey(name);
    const identity = `${found.stat.ino}:${found.stat.size}:${found.stat.mtimeMs}`;
    const kept = this.byName.get(key);
    let text = kept?.file === found.file && kept.identity === identity ? kept.text : undefined;
    if (text === undefined) {
      text = await fs.readFile(found.file, "utf8").catch((err: unknown) => {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        throw err;
      });
      if (text === undefined) return undefined;
      this.byName.set(key, { file: found.file, identity, text });
    }
    return { ...found, text, manifest: parseManifest(found.file, text) };
  }
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}

/** A promise that never rejects (its outcome is read later with {@link unwrap}): nothing is left unhandled meanwhile. */
export function settle<T>(promise: Promise<T>): Promise<{ value: T } | { error: unknown }> {
  return promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
}

/** The value of a {@link settle}d promise, or its error thrown. */
export async function unwrap<T>(settled: Promise<{ value: T } | { error: unknown }>): Promise<T> {
  const outcome = await settled;
  if ("error" in outcome) throw outcome.error;
  return outcome.value;
}
