/**
 * Model name → registry location, as Ollama resolves it:
 *   `llama3`                         → https://registry.ollama.ai/v2/library/llama3/manifests/latest
 *   `user/model:tag`                 → https://registry.ollama.ai/v2/user/model/manifests/tag
 *   `hf.co/<user>/<repo>:<quant>`    → https://hf.co/v2/<user>/<repo>/manifests/<quant>
 *   `<host>:<port>/<ns>/<model>:<tag>` → https://<host>:<port>/v2/<ns>/<model>/manifests/<tag>
 * `insecure: true` uses plain http (a private registry without TLS).
 */
import { parseModelName, type ModelName } from "../store/names.js";

/** Where a model lives in a registry. */
export interface RegistryRef {
  name: ModelName;
  /** `https://host[:port]` (or http with insecure). */
  origin: string;
  /** `<namespace>/<model>` (the distribution spec's repository name). */
  repository: string;
  tag: string;
}

/** Resolves a name (400 for an invalid one). */
export function registryRef(input: string, insecure = false): RegistryRef {
  const name = parseModelName(input);
  return {
    name,
    origin: `${insecure ? "http" : "https"}://${name.host.toLowerCase()}`,
    // Registries keep repository names lower-case (the distribution spec's grammar).
    repository: `${name.namespace}/${name.model}`.toLowerCase(),
    tag: name.tag,
  };
}

/** `https://host/v2/<repo>/manifests/<tag>` */
export function manifestUrl(ref: RegistryRef): string {
  return `${ref.origin}/v2/${ref.repository}/manifests/${encodeURIComponent(ref.tag)}`;
}

/** `https://host/v2/<repo>/blobs/<digest>` */
export function blobUrl(ref: RegistryRef, digest: string): string {
  return `${ref.origin}/v2/${ref.repository}/blobs/${digest}`;
}

/** `https://host/v2/<repo>/blobs/uploads/` */
export function uploadUrl(ref: RegistryRef): string {
  return `${ref.origin}/v2/${ref.repository}/blobs/uploads/`;
}
