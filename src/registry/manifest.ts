/** Validation of a registry's manifest before anything is written or downloaded. */
import { checkLayerSize } from "../store/layers.js";
import { printable } from "../store/names.js";
import { isDigest, type Layer, type Manifest } from "../store/store.js";
import { REGISTRY_DEFAULTS, RegistryError } from "./http.js";

/** Checks a manifest: schema 2, every digest `sha256:<hex>`, sizes non-negative integers, bounded layers. */
export function validateManifest(value: unknown): Manifest {
  const m = value as Partial<Manifest> | null;
  if (!m || typeof m !== "object" || m.schemaVersion !== 2 || !Array.isArray(m.layers) || !m.config)
    throw new RegistryError("invalid manifest: not a schema 2 manifest");
  if (m.layers.length > REGISTRY_DEFAULTS.maxLayers) throw new RegistryError("invalid manifest: too many layers");
  for (const l of [m.config, ...m.layers] as Array<Partial<Layer> | null>) {
    if (!l || typeof l !== "object") throw new RegistryError("invalid manifest: malformed layer");
    if (!isDigest(l.digest)) throw new RegistryError(`invalid manifest: invalid digest '${printable(String(l.digest))}'`);
    if (!Number.isSafeInteger(l.size) || (l.size as number) < 0) throw new RegistryError(`invalid manifest: invalid size for ${l.digest}`);
    if (typeof l.mediaType !== "string") throw new RegistryError(`invalid manifest: no media type for ${l.digest}`);
  }
  // Small layers are read whole into memory later: refuse oversized ones before downloading anything.
  for (const l of [m.config, ...m.layers]) {
    const tooLarge = checkLayerSize(l === m.config ? { ...l, mediaType: "config" } : l);
    if (tooLarge) throw new RegistryError(tooLarge);
  }
  return { schemaVersion: 2, mediaType: m.mediaType, config: m.config, layers: m.layers };
}
