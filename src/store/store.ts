/**
 * The model store in Ollama's on-disk layout:
 *   <root>/manifests/<host>/<namespace>/<model>/<tag>   Docker v2 manifest (JSON)
 *   <root>/blobs/sha256-<64 hex>                        content-addressed blobs
 *
 * Reads resolve a name to its manifest and layers (resolve.ts, through manifest-cache.ts; what a
 * manifest is: manifest.ts). Writes go to a temporary file inside the store and are renamed into
 * place only after the digest is verified, so a crash or a full disk never leaves a corrupt blob or
 * manifest. Nothing resolves outside the store: names and digests are validated, and symbolic
 * links that lead out of it are refused. Failures are store errors (errors.ts), which know no HTTP.
 *
 * Listing, deleting and garbage collection live in admin.ts; blob streaming in blob-writer.ts.
 */
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, constants as fsConstants } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";
import { refusedWriteReason, StoreError, StoreNotWritableError } from "../errors.js";
import { writeStreamVerified } from "./blob-writer.js";
import { LayerTooLargeError, readSmallBlob } from "./layers.js";
import { digestHex, parseManifest, type Layer, type Manifest } from "./manifest.js";
import { locateManifest, ManifestCache } from "./manifest-cache.js";
import { manifestSegments, parseModelName, type ModelName } from "./names.js";
import { resolveModel, type ModelConfig, type ResolvedModel } from "./resolve.js";

export { digestHex, isDigest, MEDIA, type Layer, type Manifest } from "./manifest.js";
export { goTemplateOf, type ModelConfig, type ModelMessage, type ResolvedModel } from "./resolve.js";

/** Prefix of every temporary file; the writer's pid follows, so stale ones can be told apart. */
export const TEMP_PREFIX = ".tmp-";
/** Prefix of resumable partial downloads (kept across restarts; see registry/download.ts). */
export const PARTIAL_PREFIX = ".partial-";

export class ModelStore {
  readonly root: string;
  /** Digests that an operation in progress is about to reference: garbage collection skips them. */
  private readonly pins = new Map<string, number>();
  /** The manifest each name resolved to last (resolve reads through it). */
  readonly manifests: ManifestCache;
  /** The root's real path, once taken (insideStore). */
  private rootReal: Promise<string> | undefined;

  constructor(root: string) {
    this.root = path.resolve(root);
    this.manifests = new ManifestCache(this.manifestsDir, (file) => this.insideStore(file));
  }

  get blobsDir(): string {
    return path.join(this.root, "blobs");
  }

  get manifestsDir(): string {
    return path.join(this.root, "manifests");
  }

  /** Creates the directories and removes temporary files left by processes that are gone. */
  async init(): Promise<void> {
    await fs.mkdir(this.blobsDir, { recursive: true });
    await fs.mkdir(this.manifestsDir, { recursive: true });
    await this.removeStaleTemps();
  }

  /**
   * Throws {@link StoreNotWritableError} unless this process may create and remove files in the
   * store's directories. Called before a create, copy, delete, pull or upload does any work, so
   * that the answer names the reason instead of failing at whichever write comes first.
   */
  async requireWritable(): Promise<void> {
    for (const dir of [this.blobsDir, this.manifestsDir]) {
      try {
        await fs.access(dir, fsConstants.W_OK | fsConstants.X_OK);
      } catch (err) {
        const reason = refusedWriteReason((err as NodeJS.ErrnoException).code);
        throw reason === undefined ? err : new StoreNotWritableError(reason, err);
      }
    }
  }

  /** Path of a blob; the digest is validated first. */
  blobPath(digest: string): string {
    return path.join(this.blobsDir, `sha256-${digestHex(digest)}`);
  }

  /** Path of the resumable partial download of a blob (`.json` beside it holds its progress). */
  partialPath(digest: string): string {
    return path.join(this.blobsDir, `${PARTIAL_PREFIX}sha256-${digestHex(digest)}`);
  }

  /** True when the blob is in the store (a regular file inside it). */
  async hasBlob(digest: string): Promise<boolean> {
    const stat = await fs.lstat(this.blobPath(digest)).catch(() => undefined);
    return stat?.isFile() ?? false;
  }

  /** Resolves a model name (resolve.ts); throws for an invalid name and when the model is not in the store. */
  resolve(input: string): Promise<ResolvedModel> {
    return resolveModel(this, input);
  }

  /** A blob's real path, refused when it leads out of the store. */
  blobFile(digest: string): Promise<string> {
    return this.insideStore(this.blobPath(digest));
  }

  /** The manifest stored for a name, or undefined (throws for an invalid name). */
  async findModel(input: string): Promise<{ name: ModelName; file: string; manifest: Manifest } | undefined> {
    const name = parseModelName(input);
    const file = await this.findManifest(name);
    if (!file) return undefined;
    const manifest = await this.readManifest(file).catch((err: unknown) => {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined; // deleted meanwhile
      throw err;
    });
    return manifest ? { name, file, manifest } : undefined;
  }

  /** True when the store has no manifest at all. */
  async isEmpty(): Promise<boolean> {
    const walk = async (dir: string): Promise<boolean> => {
      const entries = await fs.readdir(dir, { withFileTypes: true }).catch(() => []);
      for (const e of entries) {
        if (e.isFile()) return false;
        if (e.isDirectory() && !(await walk(path.join(dir, e.name)))) return false;
      }
      return true;
    };
    return walk(this.manifestsDir);
  }

  /**
   * Finds the manifest file for a name: the exact path first, then a case-insensitive match
   * of each segment (Ollama matches names case-insensitively).
   */
  async findManifest(name: ModelName): Promise<string | undefined> {
    return (await locateManifest(this.manifestsDir, name, (file) => this.insideStore(file)))?.file;
  }

  /** Reads and checks a manifest file: every digest must be well formed (no path tricks). */
  async readManifest(file: string): Promise<Manifest> {
    return parseManifest(file, await fs.readFile(file, "utf8"));
  }

  /** The config blob's family, parser and renderer; a config that is missing or not JSON names none. */
  async config(manifest: Manifest): Promise<ModelConfig> {
    const config = await this.readBlobText(manifest.config.digest, "config")
      .then((text) => JSON.parse(text) as unknown)
      .catch(() => undefined);
    const fields = (typeof config === "object" && config !== null ? config : {}) as Record<string, unknown>;
    const field = (key: string) => (typeof fields[key] === "string" ? fields[key] : "");
    return { family: field("model_family"), parser: field("parser"), renderer: field("renderer") };
  }

  /** Reads a small blob as text (template, system, params, config, license), capped and cached (layers.ts). */
  async readBlobText(digest: string, kind = "layer"): Promise<string> {
    return readSmallBlob(() => this.blobFile(digest), digest, kind).catch((err: unknown) => {
      if (err instanceof LayerTooLargeError) throw new StoreError("broken", `${err.message} (${digest})`);
      throw err;
    });
  }

  /** Resolves symbolic links and refuses any path that ends up outside the store. */
  async insideStore(file: string): Promise<string> {
    const [real, root] = await Promise.all([fs.realpath(file).catch(() => file), this.realRoot()]);
    if (within(real, root)) return real;
    // The root's real path is taken once; a root moved since (a link re-pointed) is taken again before refusing.
    this.rootReal = undefined;
    if (!within(real, await this.realRoot())) throw new StoreError("invalid", `path '${path.basename(file)}' leads outside the model store`);
    return real;
  }

  /** The store root's real path (a root that does not exist yet is its own, and is not kept). */
  private realRoot(): Promise<string> {
    return (this.rootReal ??= fs.realpath(this.root).catch(() => {
      this.rootReal = undefined;
      return this.root;
    }));
  }

  /**
   * Copies a local file into the store as a blob (temporary file, digest, rename) and returns its layer.
   * Used for models the daemon makes itself; uploads come through the blob endpoint.
   */
  async addBlobFromFile(file: string, mediaType: string): Promise<Layer> {
    const { digest, size } = await this.addBlobFromStream(createReadStream(file));
    return { mediaType, digest, size };
  }

  /**
   * Streams `source` into the store as a blob: temporary file, sha256 while writing, fsync, then
   * rename. With `expected`, a different digest is refused and nothing is kept. `created`
   * is false when the blob was already there. Any error (ENOSPC included) removes the temporary file.
   */
  async addBlobFromStream(source: Readable | AsyncIterable<Buffer>, expected?: string): Promise<{ digest: string; size: number; created: boolean }> {
    if (expected !== undefined) digestHex(expected);
    return writeStreamVerified(this, source, expected);
  }

  /** Writes a small blob (config, params, template) from memory. */
  async addBlob(content: string | Buffer, mediaType: string): Promise<Layer> {
    const data = typeof content === "string" ? Buffer.from(content) : content;
    const digest = `sha256:${createHash("sha256").update(data).digest("hex")}`;
    if (!(await this.hasBlob(digest))) await this.writeAtomic(this.blobPath(digest), data);
    return { mediaType, digest, size: data.length };
  }

  /** Writes a manifest for `input` atomically (over an existing one of the same name, whatever its case). */
  async writeManifest(input: string, manifest: Manifest): Promise<void> {
    const name = parseModelName(input);
    const data = Buffer.from(JSON.stringify(manifest));
    // A delete of another model removes directories it leaves empty; one of them may be ours
    // between the mkdir and the rename (ENOENT): make it again.
    for (let attempt = 0; ; attempt++) {
      const file = (await this.findManifest(name)) ?? path.join(this.manifestsDir, ...manifestSegments(name));
      try {
        await fs.mkdir(path.dirname(file), { recursive: true });
        await this.writeAtomic(file, data);
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT" || attempt >= 5) throw err;
      }
    }
  }

  /** A temporary file name inside the store, so the final rename never crosses filesystems. */
  tempPath(): string {
    return path.join(this.blobsDir, `${TEMP_PREFIX}${process.pid}-${randomBytes(6).toString("hex")}`);
  }

  /**
   * Marks digests as about to be referenced (a pull, create or copy in progress) so that a
   * concurrent delete's garbage collection keeps them. Call the returned function when done.
   */
  pin(digests: readonly string[]): () => void {
    for (const d of digests) this.pins.set(d, (this.pins.get(d) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const d of digests) {
        const n = (this.pins.get(d) ?? 1) - 1;
        if (n <= 0) this.pins.delete(d);
        else this.pins.set(d, n);
      }
    };
  }

  /** True while an operation in progress has pinned the digest. */
  isPinned(digest: string): boolean {
    return this.pins.has(digest);
  }

  private async writeAtomic(file: string, data: Buffer): Promise<void> {
    const tmp = this.tempPath();
    try {
      const fh = await fs.open(tmp, "wx");
      try {
        await fh.writeFile(data);
        await fh.sync(); // the rename must never publish a file whose data is not on disk
      } finally {
        await fh.close();
      }
      await fs.rename(tmp, file);
    } finally {
      await fs.rm(tmp, { force: true });
    }
  }

  /** Removes `.tmp-<pid>-*` files whose writer process no longer exists (a crash, a SIGKILL). */
  private async removeStaleTemps(): Promise<void> {
    const entries = await fs.readdir(this.blobsDir).catch(() => [] as string[]);
    for (const e of entries) {
      // `.tmp-<pid>-*` (blobs, manifests) and `*.<pid>.tmp` (progress files of partial downloads)
      const m = /^\.tmp-(\d+)-|\.(\d+)\.tmp$/.exec(e);
      const pid = m?.[1] ?? m?.[2];
      if (pid && !processAlive(Number(pid))) await fs.rm(path.join(this.blobsDir, e), { force: true });
    }
  }
}

function processAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** True when `real` is `root` or a path under it. */
function within(real: string, root: string): boolean {
  return real === root || real.startsWith(root + path.sep);
}
