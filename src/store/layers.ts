/**
 * Small layers (config, template, system, params, messages, license) are read whole into memory,
 * so their size is capped everywhere they enter or are read: a registry's
 * manifest is refused before any download, `/api/create` refuses an oversized field (400), and a
 * store crafted by hand fails the one model (500) instead of costing the daemon its memory.
 *
 * 1 MiB each: Ollama's real layers are a few KiB (the longest chat templates ~10 KiB, the Llama and
 * Gemma licences 7–30 KiB, the config well under 1 KiB). Model, adapter and projector layers are
 * model-sized; they are never read into the daemon's memory (the runner maps them), so they are
 * not capped here.
 *
 * Blobs are immutable (named by their digest), so what was read is cached by digest, bounded in
 * total bytes: `/api/tags` on many models reads each config once.
 */
import fs from "node:fs/promises";
import { LRUCache } from "lru-cache";

/** The cap of every small layer kind, in bytes. */
export const SMALL_LAYER_MAX = 1024 * 1024;

/** Media types (and `config`, the manifest's config entry) that are read whole: capped. */
const SMALL_KINDS = new Set(["config", "template", "system", "params", "messages", "license"]);

/** `application/vnd.ollama.image.template` → `template`; the config's media type → `config`. */
export function layerKind(mediaType: string): string {
  if (mediaType === "config" || mediaType.startsWith("application/vnd.docker.container.image") || mediaType.startsWith("application/vnd.oci.image.config"))
    return "config";
  return mediaType.replace(/^application\/vnd\.ollama\.image\./, "");
}

/** A reason when a small layer is over its cap, else undefined. Pass `mediaType: "config"` for the config entry. */
export function checkLayerSize(layer: { mediaType: string; size: number }): string | undefined {
  const kind = layerKind(layer.mediaType);
  if (!SMALL_KINDS.has(kind) || layer.size <= SMALL_LAYER_MAX) return undefined;
  return `${kind} layer of ${layer.size} bytes is over the limit of ${SMALL_LAYER_MAX}`;
}

/** A small layer read from disk larger than its cap. */
export class LayerTooLargeError extends Error {
  constructor(readonly kind: string, readonly size: number) {
    super(`${kind} layer of ${size} bytes is over the limit of ${SMALL_LAYER_MAX}`);
  }
}

/** Small blobs' texts by digest, the least recently used dropped past 16 MiB (an empty text counts 1). */
const cache = new LRUCache<string, string>({ maxSize: 16 * 1024 * 1024, sizeCalculation: (text) => Math.max(1, text.length) });

/**
 * Reads a small blob as UTF-8, at most {@link SMALL_LAYER_MAX} bytes (checked on the open file
 * before reading, so an oversized blob costs no memory), cached by digest. `locate` gives its file
 * (checked to be inside the store), asked only when the blob is not cached.
 */
export async function readSmallBlob(locate: () => Promise<string>, digest: string, kind = "layer"): Promise<string> {
  const hit = cache.get(digest);
  if (hit !== undefined) return hit;
  const fh = await fs.open(await locate(), "r");
  let text: string;
  try {
    const { size } = await fh.stat();
    if (size > SMALL_LAYER_MAX) throw new LayerTooLargeError(kind, size);
    const buf = Buffer.alloc(size);
    let got = 0;
    while (got < size) {
      const { bytesRead } = await fh.read(buf, got, size - got, got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    text = buf.subarray(0, got).toString("utf8");
  } finally {
    await fh.close();
  }
  cache.set(digest, text);
  return text;
}
