/**
 * API keys: the set of allowed `X-API-Key` values, held only as SHA-256 hashes.
 *
 * Keys come from GATEWAY_API_KEYS and GATEWAY_KEYS_FILE; each entry is either a key or its hash
 * written `sha256:<64 hex>` (so a keys file need never hold a usable key). A presented key is
 * hashed and compared with every stored hash using `timingSafeEqual`, without stopping at the
 * first match, so neither the comparison nor the position of a match shows in the timing.
 * A key's id in logs and rate limits is a short prefix of its hash: it names the key without
 * revealing it, and an operator can find it in a keys file of hashes.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";

/** An allowed key: its hash and the id that logs show. */
interface StoredKey {
  hash: Buffer;
  id: string;
}

const HASH_PREFIX = "sha256:";

/** SHA-256 of a key as 32 bytes. */
export function hashKey(key: string): Buffer {
  return createHash("sha256").update(key, "utf8").digest();
}

/** The short fingerprint logs show for a key hash: `key:` + its first 12 hex digits. */
export function keyId(hash: Buffer): string {
  return `key:${hash.toString("hex").slice(0, 12)}`;
}

/** A new random key (256 bits, base64url) and the `sha256:` line that allows it. */
export function generateKey(): { key: string; hashLine: string } {
  const key = `lmd_${randomBytes(32).toString("base64url")}`;
  return { key, hashLine: `${HASH_PREFIX}${hashKey(key).toString("hex")}` };
}

/** Parses one entry (a key or `sha256:<hex>`); `source` names where it came from for errors. */
export function parseKeyEntry(entry: string, source: string): StoredKey {
  let hash: Buffer;
  if (entry.toLowerCase().startsWith(HASH_PREFIX)) {
    const hex = entry.slice(HASH_PREFIX.length);
    if (!/^[0-9a-f]{64}$/i.test(hex)) throw new Error(`${source}: '${HASH_PREFIX}' must be followed by 64 hex digits`);
    hash = Buffer.from(hex, "hex");
  } else {
    // Never put the entry itself in the message: it is a secret.
    if (entry.length < 16) throw new Error(`${source}: a key must be at least 16 characters long`);
    hash = hashKey(entry);
  }
  return { hash, id: keyId(hash) };
}

/** Reads a keys file: one entry per line; blank lines and `#` comments ignored. */
export async function readKeysFile(file: string): Promise<StoredKey[]> {
  const text = await readFile(file, "utf8");
  const keys: StoredKey[] = [];
  text.split(/\r?\n/).forEach((line, i) => {
    const entry = line.replace(/#.*$/, "").trim();
    if (entry !== "") keys.push(parseKeyEntry(entry, `${file}:${i + 1}`));
  });
  return keys;
}

/** The current set of allowed keys; replaced as a whole on reload. */
export class KeySet {
  private keys: readonly StoredKey[] = [];

  /** Number of allowed keys. */
  get size(): number {
    return this.keys.length;
  }

  /** Loads the keys from the environment list and the file (if any); throws without changing anything on error. */
  async load(envKeys: readonly string[], file: string | undefined): Promise<void> {
    const next = envKeys.map((k, i) => parseKeyEntry(k, `GATEWAY_API_KEYS entry ${i + 1}`));
    if (file) next.push(...(await readKeysFile(file)));
    this.keys = next;
  }

  /** The id of the key when it is allowed, else undefined. Constant time in the key's value. */
  match(presented: string): string | undefined {
    const hash = hashKey(presented);
    let found: string | undefined;
    for (const k of this.keys) {
      // No early exit: every stored hash is compared.
      if (timingSafeEqual(hash, k.hash) && found === undefined) found = k.id;
    }
    return found;
  }
}
