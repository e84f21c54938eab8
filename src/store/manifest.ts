/**
 * What a manifest is: Docker's v2 image manifest as Ollama stores it (a config blob and layers,
 * each named by its sha256 digest), the media types of Ollama's layers, and the checks that keep
 * a digest from ever naming a path outside the store.
 */
import { StoreError } from "../errors.js";
import { printable } from "./names.js";

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

const DIGEST = /^sha256:([a-f0-9]{64})$/;

/** Validates a digest and returns its hex; throws `invalid digest '<digest>'` (an `invalid` store error). */
export function digestHex(digest: string): string {
  const m = DIGEST.exec(digest);
  if (!m?.[1]) throw new StoreError("invalid", `invalid digest '${printable(digest)}'`);
  return m[1];
}

/** True for a well-formed `sha256:<64 lower-case hex>`. */
export function isDigest(value: unknown): value is string {
  return typeof value === "string" && DIGEST.test(value);
}

/** A manifest's text parsed and checked: every digest must be well formed (no path tricks). */
export function parseManifest(file: string, text: string): Manifest {
  const manifest = JSON.parse(text) as Manifest;
  const bad = !manifest || typeof manifest !== "object" || !Array.isArray(manifest.layers) || !manifest.config;
  if (bad || ![manifest.config, ...manifest.layers].every((l) => isDigest(l?.digest))) throw new Error(`malformed manifest ${file}`);
  return manifest;
}
