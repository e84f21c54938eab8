/**
 * Model names as Ollama writes them: `[host/][namespace/]model[:tag]`, defaulting to
 * `registry.ollama.ai/library/<model>:latest`. Every part is checked against a strict
 * character set, so a name can never walk out of the store (`..`, `/`, `\`, NUL, absolute paths).
 */
import { StoreError } from "../errors.js";

export const DEFAULT_HOST = "registry.ollama.ai";
export const DEFAULT_NAMESPACE = "library";
export const DEFAULT_TAG = "latest";

export interface ModelName {
  host: string;
  namespace: string;
  model: string;
  tag: string;
}

const HOST = /^[a-z0-9]([a-z0-9.-]{0,252}[a-z0-9])?(:[0-9]{1,5})?$/i;
const PART = /^[a-z0-9][a-z0-9._-]{0,79}$/i;
const TAG = /^[a-z0-9_][a-z0-9._-]{0,79}$/i;
const MAX_NAME = 350;

/** Parses and validates a name; throws `invalid model name '<name>'` (a {@link StoreError} of kind `invalid`). */
export function parseModelName(input: string): ModelName {
  const invalid = () => new StoreError("invalid", `invalid model name '${printable(input)}'`);
  if (input.length === 0 || input.length > MAX_NAME) throw invalid();
  let rest = input;
  let tag = DEFAULT_TAG;
  const lastSlash = rest.lastIndexOf("/");
  const colon = rest.lastIndexOf(":");
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
  }
  const parts = rest.split("/");
  if (parts.length > 3) throw invalid();
  const model = parts.pop() ?? "";
  const namespace = parts.pop() ?? DEFAULT_NAMESPACE;
  const host = parts.pop() ?? DEFAULT_HOST;
  if (!HOST.test(host) || !PART.test(namespace) || !PART.test(model) || !TAG.test(tag)) throw invalid();
  // Dots alone are valid characters but never valid path parts.
  if ([namespace, model, tag].some((p) => /^\.+$/.test(p)) || host.includes("..")) throw invalid();
  return { host, namespace, model, tag };
}

/** The short form users see: `model:tag` for the default registry and namespace. */
export function displayName(name: ModelName): string {
  if (name.host === DEFAULT_HOST && name.namespace === DEFAULT_NAMESPACE) return `${name.model}:${name.tag}`;
  if (name.host === DEFAULT_HOST) return `${name.namespace}/${name.model}:${name.tag}`;
  return `${name.host}/${name.namespace}/${name.model}:${name.tag}`;
}

/** The full form, as Ollama names a model in its capability errors: `host/namespace/model:tag`. */
export function fullName(name: ModelName): string {
  return `${name.host}/${name.namespace}/${name.model}:${name.tag}`;
}

/** The full form, used as a key: `host/namespace/model:tag`, lower-cased (names match case-insensitively). */
export function nameKey(name: ModelName): string {
  return fullName(name).toLowerCase();
}

/** Path segments of the manifest under `<store>/manifests`. */
export function manifestSegments(name: ModelName): [string, string, string, string] {
  return [name.host, name.namespace, name.model, name.tag];
}

/** Echo untrusted input safely in an error message: control characters escaped, length bounded. */
export function printable(input: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are what this escapes
  const clean = input.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return clean.length > 120 ? `${clean.slice(0, 117)}...` : clean;
}
