/**
 * Per-name serialisation of the store's writers: create, copy, delete and a
 * pull's commit of one model wait for each other instead of interleaving their reads and writes
 * of one manifest (which answered 500 on ENOENT, and leaked blobs when two commits both replaced
 * the same old manifest).
 *
 * The key is `host/namespace/model` without the tag: tags of one model share a directory that a
 * delete may remove when it leaves it empty. Several names are taken in sorted order, so two
 * operations on the same pair (copy a→b while copy b→a) cannot deadlock.
 */
import { parseModelName } from "./names.js";

const chains = new WeakMap<object, Map<string, Promise<void>>>();

function keyOf(input: string): string {
  const n = parseModelName(input);
  return `${n.host}/${n.namespace}/${n.model}`.toLowerCase();
}

async function acquire(map: Map<string, Promise<void>>, key: string): Promise<() => void> {
  const previous = map.get(key) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((resolve) => (release = resolve));
  const tail = previous.then(() => mine);
  map.set(key, tail);
  await previous;
  return () => {
    release();
    if (map.get(key) === tail) map.delete(key);
  };
}

/** Runs `fn` while holding the lock of every name in `inputs` (an invalid name throws before waiting). */
export async function withNames<T>(store: object, inputs: readonly string[], fn: () => Promise<T>): Promise<T> {
  const keys = [...new Set(inputs.map(keyOf))].sort();
  let map = chains.get(store);
  if (!map) chains.set(store, (map = new Map()));
  const releases: Array<() => void> = [];
  try {
    for (const key of keys) releases.push(await acquire(map, key));
    return await fn();
  } finally {
    for (const release of releases.reverse()) release();
  }
}
