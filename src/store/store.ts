/**
 * The model store in Ollama's on-disk layout (CONTRACT §6):
 *   <root>/manifests/<host>/<namespace>/<model>/<tag>   Docker v2 manifest (JSON)
 *   <root>/blobs/sha256-<64 hex>                        content-addressed blobs
 *
 * Reads resolve a name to its manifest and layers. Writes go to a temporary file inside the
 * store and are renamed into place only after the digest is verified, so a crash or a full
 * disk never leaves a corrupt blob or manifest. Nothing resolves outside the store: names and
 * digests are validated, and symbolic links that lead out of it are refused.
 *
 * Listing, deleting and garbage collection live in admin.ts; blob streaming in blob-writer.ts.
 */
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, constants as fsConstants, type Stats } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";
import { BadRequestError, HttpError, ModelLoadError, ModelNotFoundError, refusedWriteReason, StoreNotWritableError } from "../errors.js";
import { writeStreamVerified } from "./blob-writer.js";
import { layerKind, LayerTooLargeError, readSmallBlob } from "./layers.js";
import { displayName, manifestSegments, nameKey, parseModelName, printable, type ModelName } from "./names.js";

export const MEDIA = {
  manifest: "application/vnd.docker.distribution.manifest.v2+json",
  config: "application/vnd.docker.container.image.v1+json",
  model: "application/vnd.ollama.image.model",
  template: "application/vnd.ollama.image.template",
  system: "application/vnd.ollama.image.system",
  params: "application/vnd.ollama.image.params",
  license: "application/vnd.ollama.image.license",
  adapter: "application/vnd.ollama.image.adapter",
  projector: "application/vnd.ollama.image.projector",
  messages: "application/vnd.ollama.image.messages",
  /** A draft model for speculative decoding (Ollama's Modelfile `DRAFT <file>`). */
  draft: "application/vnd.ollama.image.draft",
} as const;

export interface Layer {
  mediaType: string;
  digest: string;
  size: number;
}

export interface Manifest {
  schemaVersion: number;
  mediaType?: string;
  config: Layer;
  layers: Layer[];
}

/** A name resolved to what a runner and the routes need. */
export interface ResolvedModel {
  name: ModelName;
  /** `model:tag` as users write it. */
  display: string;
  /** Lower-cased full name: the scheduler's key. */
  key: string;
  manifest: Manifest;
  /** Digest of the GGUF layer (`sha256:<hex>`). */
  digest: string;
  modelPath: string;
  /** Paths of the LoRA adapter layers, in manifest order: the runner applies them at load. */
  adapterPaths: string[];
  /** Path of the draft model layer (Ollama's `DRAFT <file>`), if any. */
  draftLayerPath: string | undefined;
  size: number;
  /** Options from the params layer (Modelfile PARAMETER lines). */
  params: Record<string, unknown>;
  template: string | undefined;
  system: string | undefined;
  /** The config blob's `model_family` and `parser` ("" when absent): Ollama's harmony rule reads them (template/harmony.ts). */
  family: string;
  parser: string;
  /** The config blob's `renderer` (Ollama's built-in prompt renderers; see {@link goTemplateOf}). */
  renderer: string;
  /** The MESSAGE lines (messages layer): a conversation put in front of every chat, as Ollama does. */
  messages: ModelMessage[];
  modifiedAt: Date;
}

/** What lmd reads of a model's config blob. */
export interface ModelConfig {
  family: string;
  parser: string;
  renderer: string;
}

/**
 * The Go template lmd renders a model's prompts with: its template layer, unless its config names
 * one of Ollama's built-in renderers (`RENDERER qwen3-coder`, `qwen3.5`, …: Go code in Ollama, none
 * of which lmd has). Such a model's template layer is a stub (`{{ .Prompt }}`), so it is rendered
 * by its GGUF's own chat template instead, as a model without a template layer is.
 */
export function goTemplateOf(model: { template: string | undefined; renderer: string }): string | undefined {
  return model.renderer ? undefined : model.template;
}

export interface ModelMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** A messages layer: a JSON array of `{role, content}` (what `/api/create` and MESSAGE lines store). */
function parseMessages(text: string, model: string): ModelMessage[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const valid = (m: unknown): m is ModelMessage =>
    typeof m === "object" && m !== null && ["system", "user", "assistant"].includes((m as ModelMessage).role) && typeof (m as ModelMessage).content === "string";
  if (!Array.isArray(value) || !value.every(valid)) throw new ModelLoadError(model, "invalid messages layer");
  return value.map((m) => ({ role: m.role, content: m.content }));
}

const DIGEST = /^sha256:([a-f0-9]{64})$/;

/** Validates a digest and returns its hex; throws 400 `invalid digest '<digest>'`. */
export function digestHex(digest: string): string {
  const m = DIGEST.exec(digest);
  if (!m?.[1]) throw new BadRequestError(`invalid digest '${printable(digest)}'`);
  return m[1];
}

/** True for a well-formed `sha256:<64 lower-case hex>`. */
export function isDigest(value: unknown): value is string {
  return typeof value === "string" && DIGEST.test(value);
}

/** Prefix of every temporary file; the writer's pid follows, so stale ones can be told apart. */
export const TEMP_PREFIX = ".tmp-";
/** Prefix of resumable partial downloads (kept across restarts; see registry-download.ts). */
export const PARTIAL_PREFIX = ".partial-";
/** Manifest texts kept (a few KiB each; the oldest goes first). */
const MANIFEST_CACHE_ENTRIES = 256;

export class ModelStore {
  readonly root: string;
  /** Digests that an operation in progress is about to reference: garbage collection skips them. */
  private readonly pins = new Map<string, number>();
  /** Manifest texts by file, with the identity of the file they were read from (readManifestStat). */
  private readonly manifestTexts = new Map<string, { identity: string; text: string }>();
  /** The model blob each name resolved to last (resolve checks it early). */
  private readonly modelBlobs = new Map<string, string>();
  /** The root's real path, once taken (insideStore). */
  private rootReal: Promise<string> | undefined;

  constructor(root: string) {
    this.root = path.resolve(root);
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

  /** Resolves a model name; throws 400 for an invalid name and 404 when it is not in the store. */
  async resolve(input: string): Promise<ResolvedModel> {
    const name = parseModelName(input);
    // The model blob this name had last time is checked while its manifest is looked up, and the
    // answer used when the manifest still names it: one round of file-system requests where a
    // request waited for four, one after another (each a thread hop, ~0.2-0.4 ms on an idle small host).
    const key = nameKey(name);
    const guess = this.modelBlobs.get(key);
    const guessed = guess === undefined ? undefined : settle(this.insideStore(this.blobPath(guess)));
    const found = await this.locateManifest(name);
    if (!found) throw new ModelNotFoundError(printable(input));
    // A manifest removed by a concurrent delete between finding and reading it: not found.
    const { manifest, stat } = await this.readManifestStat(found.file, found.stat).catch((err: unknown) => {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") throw new ModelNotFoundError(printable(input));
      throw err;
    });
    const modelLayer = manifest.layers.find((l) => l.mediaType === MEDIA.model);
    if (!modelLayer) throw new ModelNotFoundError(printable(input));
    const modelPath = await unwrap(guess === modelLayer.digest && guessed ? guessed : settle(this.insideStore(this.blobPath(modelLayer.digest))));
    this.modelBlobs.delete(key);
    if (this.modelBlobs.size >= MANIFEST_CACHE_ENTRIES) this.modelBlobs.delete(this.modelBlobs.keys().next().value!);
    this.modelBlobs.set(key, modelLayer.digest);
    // The adapters' and the draft's paths in one round of file-system requests.
    const draftLayer = manifest.layers.find((l) => l.mediaType === MEDIA.draft);
    const [draftLayerPath, ...adapterPaths] = await Promise.all([
      draftLayer ? this.insideStore(this.blobPath(draftLayer.digest)) : undefined,
      ...manifest.layers.filter((l) => l.mediaType === MEDIA.adapter).map((l) => this.insideStore(this.blobPath(l.digest))),
    ]);
    const [params, template, system, messages, config] = await Promise.all([
      this.readLayerJson(manifest, MEDIA.params),
      this.readLayerText(manifest, MEDIA.template),
      this.readLayerText(manifest, MEDIA.system),
      this.readLayerText(manifest, MEDIA.messages),
      this.config(manifest),
    ]).catch((err: unknown) => {
      if (err instanceof LayerTooLargeError) throw new ModelLoadError(printable(input), err.message, err);
      throw err;
    });
    return {
      name,
      display: displayName(name),
      key: nameKey(name),
      manifest,
      digest: modelLayer.digest,
      modelPath,
      adapterPaths,
      draftLayerPath,
      size: manifest.layers.reduce((n, l) => n + l.size, 0),
      params: params ?? {},
      template,
      system,
      family: config.family,
      parser: config.parser,
      renderer: config.renderer,
      messages: messages === undefined ? [] : parseMessages(messages, printable(input)),
      modifiedAt: stat.mtime,
    };
  }

  /** The manifest stored for a name, or undefined (400 for an invalid name). */
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
    return (await this.locateManifest(name))?.file;
  }

  /** {@link findManifest}, with the file's stat. */
  private async locateManifest(name: ModelName): Promise<{ file: string; stat: Stats } | undefined> {
    // The exact path in one look (the usual case), its stat and real path at once, before the walk
    // that matches each segment's case.
    const direct = path.join(this.manifestsDir, ...manifestSegments(name));
    const inside = settle(this.insideStore(direct));
    const directStat = await fs.stat(direct).catch(() => undefined);
    if (directStat?.isFile()) return { file: await unwrap(inside), stat: directStat };
    let dir = this.manifestsDir;
    for (const segment of manifestSegments(name)) {
      const exact = path.join(dir, segment);
      if (await exists(exact)) {
        dir = exact;
        continue;
      }
      const entries = await fs.readdir(dir).catch(() => [] as string[]);
      const match = entries.find((e) => e.toLowerCase() === segment.toLowerCase());
      if (!match) return undefined;
      dir = path.join(dir, match);
    }
    const stat = await fs.stat(dir).catch(() => undefined);
    return stat?.isFile() ? { file: await this.insideStore(dir), stat } : undefined;
  }

  /** Reads and checks a manifest file: every digest must be well formed (no path tricks). */
  async readManifest(file: string): Promise<Manifest> {
    return parseManifest(file, await fs.readFile(file, "utf8"));
  }

  /**
   * A manifest with its file's stat. The text is kept per file and reused while the file is the
   * same one (inode, size, modification time): lmd replaces a manifest by rename (a new inode), Ollama
   * rewrites it in place (a new size or modification time). Every request resolves its model; this
   * saves it four file-system round trips. `known` is the file's stat when the caller has it.
   */
  private async readManifestStat(file: string, known?: Stats): Promise<{ manifest: Manifest; stat: Stats }> {
    const stat = known ?? (await fs.stat(file));
    const identity = `${stat.ino}:${stat.size}:${stat.mtimeMs}`;
    const cached = this.manifestTexts.get(file);
    if (cached?.identity === identity) return { manifest: parseManifest(file, cached.text), stat };
    const text = await fs.readFile(file, "utf8");
    this.manifestTexts.delete(file);
    if (this.manifestTexts.size >= MANIFEST_CACHE_ENTRIES) this.manifestTexts.delete(this.manifestTexts.keys().next().value!);
    this.manifestTexts.set(file, { identity, text });
    return { manifest: parseManifest(file, text), stat };
  }

  private async readLayerText(manifest: Manifest, mediaType: string): Promise<string | undefined> {
    const layer = manifest.layers.find((l) => l.mediaType === mediaType);
    if (!layer) return undefined;
    return readSmallBlob(() => this.insideStore(this.blobPath(layer.digest)), layer.digest, layerKind(mediaType));
  }

  private async readLayerJson(manifest: Manifest, mediaType: string): Promise<Record<string, unknown> | undefined> {
    const text = await this.readLayerText(manifest, mediaType);
    return text === undefined ? undefined : (JSON.parse(text) as Record<string, unknown>);
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
    return readSmallBlob(() => this.insideStore(this.blobPath(digest)), digest, kind).catch((err: unknown) => {
      if (err instanceof LayerTooLargeError) throw new HttpError(500, `${err.message} (${digest})`);
      throw err;
    });
  }

  /** Resolves symbolic links and refuses any path that ends up outside the store. */
  async insideStore(file: string): Promise<string> {
    const [real, root] = await Promise.all([fs.realpath(file).catch(() => file), this.realRoot()]);
    if (within(real, root)) return real;
    // The root's real path is taken once; a root moved since (a link re-pointed) is taken again before refusing.
    this.rootReal = undefined;
    if (!within(real, await this.realRoot())) throw new BadRequestError(`path '${path.basename(file)}' leads outside the model store`);
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
   * rename. With `expected`, a different digest is refused (400) and nothing is kept. `created`
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

/** A manifest's text parsed and checked: every digest must be well formed (no path tricks). */
function parseManifest(file: string, text: string): Manifest {
  const manifest = JSON.parse(text) as Manifest;
  const bad = !manifest || typeof manifest !== "object" || !Array.isArray(manifest.layers) || !manifest.config;
  if (bad || ![manifest.config, ...manifest.layers].every((l) => isDigest(l?.digest))) throw new Error(`malformed manifest ${file}`);
  return manifest;
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}

/** True when `real` is `root` or a path under it. */
function within(real: string, root: string): boolean {
  return real === root || real.startsWith(root + path.sep);
}

/** A promise that never rejects (its outcome is read later with {@link unwrap}): nothing is left unhandled meanwhile. */
function settle<T>(promise: Promise<T>): Promise<{ value: T } | { error: unknown }> {
  return promise.then((value) => ({ value }), (error: unknown) => ({ error }));
}

async function unwrap<T>(settled: Promise<{ value: T } | { error: unknown }>): Promise<T> {
  const outcome = await settled;
  if ("error" in outcome) throw outcome.error;
  return outcome.value;
}
