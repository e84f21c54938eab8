/**
 * Pull-through mirrors (SERVICE_REGISTRY_MIRRORS): a pull of a registry's model asks the
 * registry's mirrors first, in the order configured, and the registry itself last. Whatever a
 * source fails at (unreachable, an error status, a 404, a blob that does not match its digest),
 * the next source is asked; the registry's own answer is the final one. Every blob is verified
 * against the manifest's digest whichever source sent it.
 */
import type { RegistryRef } from "./reference.js";

/** The sources a pull of `ref` asks, in order: each mirror of its host, then the registry. */
export function pullSources(ref: RegistryRef, mirrors: ReadonlyMap<string, readonly string[]>): RegistryRef[] {
  const own = mirrors.get(new URL(ref.origin).host) ?? mirrors.get(ref.name.host.toLowerCase()) ?? [];
  return [...own.filter((origin) => origin !== ref.origin).map((origin) => ({ ...ref, origin })), ref];
}
