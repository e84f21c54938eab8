/**
 * Pull-through mirrors (SERVICE_REGISTRY_MIRRORS): a pull of a registry's model asks the
 * registry's mirrors first, in the order configured, and the registry itself last. Whatever a
 * source fails at (unreachable, an error status, a 404, a blob that does not match its digest),
 * the next source is asked; the registry's own answer is the final one. Every blob is verified
 * against the manifest's digest whichever source sent it.
 */
import type { Logger } from "../logger.js";
import type { RegistryClient } from "./client.js";
import type { RegistryRef } from "./reference.js";

/** The sources a pull of `ref` asks, in order: each mirror of its host, then the registry. */
export function pullSources(ref: RegistryRef, mirrors: ReadonlyMap<string, readonly string[]>): RegistryRef[] {
  const own = mirrors.get(new URL(ref.origin).host) ?? mirrors.get(ref.name.host.toLowerCase()) ?? [];
  return [...own.filter((origin) => origin !== ref.origin).map((origin) => ({ ...ref, origin })), ref];
}

/** The sources of one pull (mirrors, then the registry), with a client each, opened when first asked. */
export class PullSources {
  private index = 0;
  private readonly clients = new Map<number, Promise<RegistryClient>>();

  constructor(
    private readonly refs: RegistryRef[],
    private readonly open: (ref: RegistryRef) => Promise<RegistryClient>,
    private readonly log: Logger,
    private readonly signal: AbortSignal,
  ) {}

  /** True while the source asked is a mirror. */
  get onMirror(): boolean {
    return this.index < this.refs.length - 1;
  }

  /**
   * Runs `step` against the current source; when it fails on a mirror, moves to the next source
   * (for the rest of the pull) and runs it again there. The registry's own failure is final.
   */
  async attempt<T>(step: (client: RegistryClient, ref: RegistryRef) => Promise<T>): Promise<T> {
    for (;;) {
      const ref = this.refs[this.index]!;
      try {
        return await step(await this.client(this.index), ref);
      } catch (err) {
        if (!this.onMirror || this.signal.aborted) throw err;
        const next = this.refs[this.index + 1]!;
        this.log.warn(
          { mirror: new URL(ref.origin).host, next: new URL(next.origin).host, err: err instanceof Error ? err.message : String(err) },
          "registry mirror failed; asking the next source",
        );
        this.index++;
      }
    }
  }

  private client(i: number): Promise<RegistryClient> {
    let c = this.clients.get(i);
    if (!c) {
      c = this.open(this.refs[i]!);
      this.clients.set(i, c);
    }
    return c;
  }

  async close(): Promise<void> {
    for (const c of this.clients.values()) await c.then((client) => client.close(), () => undefined);
  }
}
