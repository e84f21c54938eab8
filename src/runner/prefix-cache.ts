/**
 * Saved prompt prefixes: the evaluated state of a slot, kept on disk so that a later load of the
 * same model (after a restart, a keep-alive expiry or an eviction) restores a long shared prefix
 * instead of evaluating it again. Runner-side; child/model.ts saves at unload and restores before a job.
 *
 * A state is only valid for the model and the settings that made it: loading a foreign one can
 * crash the process. Each state file has a metadata file beside it naming its key (the model
 * blob, adapters, context length, KV-cache type, flash attention), its tokens, size and SHA-256;
 * a state is loaded only when all of them match, and anything else is discarded with a warning.
 * Both files are written under temporary names and renamed into place, the metadata last, so a
 * crash leaves no half-written entry. Files are 0600; the least recently used go first when the
 * directory is over its cap.
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile, chmod } from "node:fs/promises";
import path from "node:path";
import type { LlamaContextSequence, Token } from "node-llama-cpp";
import type { PrefixCacheSpec } from "./types.js";

const VERSION = 1;
/** A restore must win at least this many tokens over what the slot already holds. */
const MIN_GAIN = 64;
/** Temporary files older than this are left from a runner that died while saving. */
const STALE_TMP_MS = 60 * 60 * 1000;

interface Meta {
  version: number;
  key: string;
  tokens: Token[];
  bytes: number;
  sha256: string;
}

interface Entry extends Meta {
  /** File name without its extension. */
  name: string;
}

type Warn = (message: string, data?: Record<string, unknown>) => void;

export class PrefixCache {
  private entries: Entry[] = [];

  private constructor(
    private readonly spec: PrefixCacheSpec,
    readonly key: string,
    private readonly warn: Warn,
  ) {}

  /** The cache of one load: `identity` lists what the state depends on. Reads the entries already saved for it. */
  static async open(spec: PrefixCacheSpec, identity: Record<string, unknown>, warn: Warn): Promise<PrefixCache> {
    const key = createHash("sha256").update(JSON.stringify({ version: VERSION, ...identity })).digest("hex").slice(0, 32);
    const cache = new PrefixCache(spec, key, warn);
    await mkdir(spec.dir, { recursive: true, mode: 0o700 });
    await cache.scan();
    return cache;
  }

  private async scan(): Promise<void> {
    const names = await readdir(this.spec.dir).catch(() => [] as string[]);
    const now = Date.now();
    for (const name of names) {
      if (name.endsWith(".tmp")) {
        const s = await stat(this.file(name)).catch(() => undefined);
        if (s && now - s.mtimeMs > STALE_TMP_MS) await rm(this.file(name), { force: true });
        continue;
      }
      if (!name.startsWith(`${this.key}-`) || !name.endsWith(".json")) continue;
      const base = name.slice(0, -".json".length);
      const meta = await readFile(this.file(name), "utf8").then((text) => JSON.parse(text) as Meta).catch(() => undefined);
      if (!meta || meta.version !== VERSION || meta.key !== this.key || !Array.isArray(meta.tokens) || typeof meta.sha256 !== "string") {
        await this.discard(base, "its metadata is unreadable or made for another model or settings");
        continue;
      }
      this.entries.push({ ...meta, name: base });
    }
  }

  /**
   * Before a job on `sequence`: when a saved state shares more of `tokens` than the slot holds
   * (`have` tokens), it replaces the slot's state. Returns the tokens the slot now shares with `tokens`.
   */
  async restore(sequence: LlamaContextSequence, tokens: readonly Token[], have: number, signal?: AbortSignal): Promise<number> {
    if (tokens.length < this.spec.minTokens) return have;
    let best: { entry: Entry; common: number } | undefined;
    for (const entry of this.entries) {
      const common = commonPrefix(entry.tokens, tokens);
      if (common > (best?.common ?? 0)) best = { entry, common };
    }
    if (!best || best.common < this.spec.minTokens || best.common < have + MIN_GAIN || best.entry.tokens.length > sequence.contextSize) return have;
    const { entry } = best;
    const state = this.file(`${entry.name}.state`);
    const problem = await this.check(entry, state);
    if (signal?.aborted) return have;
    if (problem) {
      await this.discard(entry.name, problem);
      return have;
    }
    await sequence.loadStateFromFile(state, { acceptRisk: true });
    const now = new Date();
    await utimes(this.file(`${entry.name}.json`), now, now).catch(() => undefined);
    return commonPrefix(sequence.contextTokens, tokens);
  }

  /** Saves the slot's state when it is long enough and not already saved; then keeps the directory under its cap. */
  async save(sequence: LlamaContextSequence): Promise<void> {
    const tokens = sequence.contextTokens.slice();
    if (tokens.length < this.spec.minTokens) return;
    // An entry that holds these tokens (or more after them) already serves every prompt this one would.
    if (this.entries.some((e) => e.tokens.length >= tokens.length && commonPrefix(e.tokens, tokens) === tokens.length)) return;
    const name = `${this.key}-${createHash("sha256").update(Uint32Array.from(tokens)).digest("hex").slice(0, 16)}`;
    const tmp = this.file(`${name}.${process.pid}.state.tmp`);
    try {
      const { fileSize } = await sequence.saveStateToFile(tmp);
      await chmod(tmp, 0o600);
      const meta: Meta = { version: VERSION, key: this.key, tokens, bytes: fileSize, sha256: await sha256Of(tmp) };
      const metaTmp = this.file(`${name}.${process.pid}.json.tmp`);
      await writeFile(metaTmp, JSON.stringify(meta), { mode: 0o600 });
      await rename(tmp, this.file(`${name}.state`));
      await rename(metaTmp, this.file(`${name}.json`));
      // Entries whose tokens this one extends are covered by it.
      for (const old of this.entries.filter((e) => commonPrefix(e.tokens, tokens) === e.tokens.length)) await this.remove(old.name);
      this.entries.push({ ...meta, name });
    } catch (err) {
      await rm(tmp, { force: true });
      this.warn("prompt prefix not saved", { err: err instanceof Error ? err.message : String(err) });
      return;
    }
    await this.enforceCap();
  }

  /** Deletes the least recently used entries (of every model) while the directory is over its cap. */
  private async enforceCap(): Promise<void> {
    const names = await readdir(this.spec.dir).catch(() => [] as string[]);
    const all: { base: string; bytes: number; used: number }[] = [];
    for (const name of names.filter((n) => n.endsWith(".json"))) {
      const base = name.slice(0, -".json".length);
      const [meta, state] = await Promise.all([stat(this.file(name)).catch(() => undefined), stat(this.file(`${base}.state`)).catch(() => undefined)]);
      if (meta && state) all.push({ base, bytes: state.size + meta.size, used: meta.mtimeMs });
    }
    let total = all.reduce((n, e) => n + e.bytes, 0);
    for (const e of all.sort((a, b) => a.used - b.used)) {
      if (total <= this.spec.maxBytes) break;
      await this.remove(e.base);
      total -= e.bytes;
    }
  }

  /** Why a state file cannot be loaded, or undefined when its size and digest are as recorded. */
  private async check(entry: Entry, state: string): Promise<string | undefined> {
    const s = await stat(state).catch(() => undefined);
    if (!s) return "its state file is missing";
    if (s.size !== entry.bytes) return `its state file is ${s.size} bytes, not ${entry.bytes}`;
    if ((await sha256Of(state)) !== entry.sha256) return "its state file does not match its digest";
    return undefined;
  }

  private async discard(base: string, problem: string): Promise<void> {
    this.warn("saved prompt prefix discarded", { file: `${base}.state`, problem });
    await this.remove(base);
  }

  private async remove(base: string): Promise<void> {
    this.entries = this.entries.filter((e) => e.name !== base);
    await rm(this.file(`${base}.json`), { force: true });
    await rm(this.file(`${base}.state`), { force: true });
  }

  private file(name: string): string {
    return path.join(this.spec.dir, name);
  }
}

/** How many tokens `a` and `b` share from their start. */
export function commonPrefix(a: readonly Token[], b: readonly Token[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}
