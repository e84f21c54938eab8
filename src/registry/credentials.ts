/**
 * Registry credentials from a file in Docker's `config.json` format, so that the file `docker
 * login` writes works as it is:
 *
 *   { "auths": { "registry.example.com:5000": { "auth": "<base64 of user:password>" } } }
 *
 * An entry may also give `username` and `password`. Keys are matched by host (and port): a key
 * written as a URL (`https://registry.example.com/v1/`) matches its host. Entries kept by a
 * credential helper (`credsStore`, `credHelpers`) are not in the file and are not read; the
 * error that needs them says so.
 *
 * The file is read when a registry asks for authentication (each pull or push), so a new
 * `docker login` needs no restart. A missing file means no credentials. Credentials in a file
 * every user can read are refused (other entries of such a file are not needed and not refused).
 */
import fs from "node:fs/promises";
import { printable } from "../store/names.js";
import { RegistryError } from "./http.js";

export interface Credentials {
  username: string;
  password: string;
}

/** What the file offers for one host. */
export interface CredentialLookup {
  credentials: Credentials | undefined;
  /** Why there are none, in words, for the error that needed them. */
  missing?: string;
}

interface AuthEntry {
  auth?: unknown;
  username?: unknown;
  password?: unknown;
}

interface DockerConfig {
  auths?: Record<string, AuthEntry>;
  credsStore?: unknown;
  credHelpers?: Record<string, unknown>;
}

/** `https://Host:5000/v1/` → `host:5000`. */
export function authKeyHost(key: string): string {
  let k = key.trim().toLowerCase();
  k = k.replace(/^[a-z][a-z0-9+.-]*:\/\//, "");
  const slash = k.indexOf("/");
  return slash < 0 ? k : k.slice(0, slash);
}

/** Reads `file` and returns the credentials for `host` (`host[:port]`). */
export async function lookupCredentials(file: string, host: string): Promise<CredentialLookup> {
  const want = host.toLowerCase();
  let text: string;
  let mode: number;
  try {
    const handle = await fs.open(file, "r");
    try {
      mode = (await handle.stat()).mode;
      text = await handle.readFile("utf8");
    } finally {
      await handle.close();
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return { credentials: undefined, missing: `no credentials file ${file} (SERVICE_REGISTRY_AUTH)` };
    throw new RegistryError(`cannot read registry credentials file ${file}: ${code ?? (err as Error).message}`);
  }
  if (text.trim() === "") return { credentials: undefined, missing: `no credentials for ${printable(want)} in ${file} (empty)` };
  let config: DockerConfig;
  try {
    config = JSON.parse(text) as DockerConfig;
    if (typeof config !== "object" || config === null) throw new Error("not an object");
  } catch {
    throw new RegistryError(`registry credentials file ${file} is not JSON in Docker's config.json format`);
  }
  for (const [key, entry] of Object.entries(config.auths ?? {})) {
    if (authKeyHost(key) !== want || typeof entry !== "object" || entry === null) continue;
    const found = decodeEntry(entry);
    if (!found) continue;
    if ((mode & 0o004) !== 0)
      throw new RegistryError(`registry credentials file ${file} is readable by every user (mode ${(mode & 0o777).toString(8)}): chmod 600 it`);
    return { credentials: found };
  }
  const helper = config.credHelpers && Object.keys(config.credHelpers).some((k) => authKeyHost(k) === want);
  const why = helper || config.credsStore ? " (docker login kept them in a credential helper, which lmd does not run: write an auths entry)" : "";
  return { credentials: undefined, missing: `no credentials for ${printable(want)} in ${file}${why}` };
}

/** `auth` (base64 of `user:password`) or `username` + `password`; undefined when neither is usable. */
function decodeEntry(entry: AuthEntry): Credentials | undefined {
  if (typeof entry.auth === "string" && entry.auth !== "") {
    const plain = Buffer.from(entry.auth, "base64").toString("utf8");
    const colon = plain.indexOf(":");
    if (colon > 0) return { username: plain.slice(0, colon), password: plain.slice(colon + 1) };
  }
  if (typeof entry.username === "string" && entry.username !== "" && typeof entry.password === "string") {
    return { username: entry.username, password: entry.password };
  }
  return undefined;
}

/** The `Authorization` value of HTTP Basic authentication. */
export function basicAuthorization(c: Credentials): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`, "utf8").toString("base64")}`;
}
