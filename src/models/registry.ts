/**
 * The registry client: the Docker registry v2 / OCI distribution protocol over undici.
 *
 * - Idempotent requests (GET, HEAD) go through undici's RetryAgent: network errors and 429/5xx are
 *   retried with a growing delay (honouring Retry-After), and a body cut off mid-way is resumed
 *   with a `Range` request from the byte where it stopped. Uploads (bodies that are streams)
 *   are not retried.
 * - Authentication: a 401 with `WWW-Authenticate: Bearer realm=...` is answered by fetching a
 *   token from the realm, but only when the realm is on the registry's own host (and never from
 *   https down to http), so a registry cannot send the client to fetch tokens elsewhere.
 * - Redirects are followed by hand (at most 5): the Authorization header goes only to the
 *   registry's own host, never to a blob host it redirects to.
 * - Manifests: `Accept` names the Docker v2 and OCI manifest types; every entry's digest and size
 *   is validated before anything is written.
 */
import type { Readable } from "node:stream";
import { Agent, RetryAgent, request, type Dispatcher } from "undici";
import { HttpError, NotFoundError } from "../errors.js";
import { displayName, printable } from "./names.js";
import { manifestUrl, type RegistryRef } from "./reference.js";
import { isDigest, type Layer, type Manifest } from "./store.js";

/** A registry failure, shown to the client (status 500 unless the registry said otherwise). */
export class RegistryError extends HttpError {
  constructor(message: string, status = 500) {
    super(status, message);
  }
}

/** Retry and transfer settings; tests may lower them. */
export const REGISTRY_DEFAULTS = {
  maxRetries: 4,
  minTimeoutMs: 500,
  maxTimeoutMs: 10_000,
  /** Blobs larger than this are downloaded as parallel ranges of about this size. */
  partSize: 64 * 1024 * 1024,
  /** Ranges in flight at once. */
  parallel: 4,
  /** No bytes for this long: the request is abandoned (then retried). */
  bodyTimeoutMs: 60_000,
  maxManifestBytes: 4 * 1024 * 1024,
  maxLayers: 1024,
};

const MANIFEST_ACCEPT = ["application/vnd.docker.distribution.manifest.v2+json", "application/vnd.oci.image.manifest.v1+json"].join(", ");
const MAX_REDIRECTS = 5;
const USER_AGENT = "lmd (registry client)";

export interface RegistryResponse {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: Dispatcher.ResponseData["body"];
  /** The URL that answered (after redirects). */
  url: string;
}

export interface SendOptions {
  method?: "GET" | "HEAD" | "POST" | "PATCH" | "PUT";
  headers?: Record<string, string>;
  body?: Buffer | Readable | string;
  signal?: AbortSignal;
  /** Follow 3xx answers (blob downloads); default false. */
  redirects?: boolean;
}

/** One client per pull or push: its agents, and the tokens it obtained. */
export class RegistryClient {
  private readonly agent = new Agent({ bodyTimeout: REGISTRY_DEFAULTS.bodyTimeoutMs, headersTimeout: REGISTRY_DEFAULTS.bodyTimeoutMs, connectTimeout: 30_000 });
  private readonly retrying = new RetryAgent(this.agent, {
    maxRetries: REGISTRY_DEFAULTS.maxRetries,
    minTimeout: REGISTRY_DEFAULTS.minTimeoutMs,
    maxTimeout: REGISTRY_DEFAULTS.maxTimeoutMs,
    timeoutFactor: 2,
    methods: ["GET", "HEAD"],
    statusCodes: [429, 500, 502, 503, 504],
    errorCodes: ["ECONNRESET", "ECONNREFUSED", "ENOTFOUND", "ENETDOWN", "ENETUNREACH", "EHOSTDOWN", "EHOSTUNREACH", "EPIPE", "ETIMEDOUT", "UND_ERR_SOCKET", "UND_ERR_BODY_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_CONNECT_TIMEOUT"],
  });
  private token: string | undefined;

  constructor(private readonly ref: RegistryRef) {}

  async close(): Promise<void> {
    await this.retrying.close().catch(() => undefined);
  }

  /**
   * Sends a request to the registry, answering a bearer challenge once and following redirects
   * when asked. The caller reads or dumps the body.
   */
  async send(url: string, options: SendOptions = {}): Promise<RegistryResponse> {
    let res = await this.sendFollowing(url, options);
    if (res.statusCode === 401 && this.canRetryBody(options)) {
      const challenge = header(res.headers, "www-authenticate");
      await res.body.dump();
      if (!challenge) throw new RegistryError(`registry ${this.ref.name.host} requires authentication`);
      this.token = await this.fetchToken(challenge, options.signal);
      res = await this.sendFollowing(url, options);
    }
    return res;
  }

  /** Fetches and validates the manifest of the reference. 404 when the registry does not know it. */
  async fetchManifest(signal?: AbortSignal): Promise<Manifest> {
    const res = await this.send(manifestUrl(this.ref), { headers: { accept: MANIFEST_ACCEPT }, signal });
    if (res.statusCode === 404) {
      await res.body.dump();
      throw new NotFoundError(`model '${displayName(this.ref.name)}' not found in the registry`);
    }
    await expectStatus(res, [200], "pull model manifest");
    const length = Number(header(res.headers, "content-length") ?? 0);
    if (length > REGISTRY_DEFAULTS.maxManifestBytes) throw new RegistryError("invalid manifest: too large");
    const text = await readLimited(res.body, REGISTRY_DEFAULTS.maxManifestBytes);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw new RegistryError("invalid manifest: not JSON");
    }
    return validateManifest(value);
  }

  private canRetryBody(options: SendOptions): boolean {
    return options.body === undefined || typeof options.body === "string" || Buffer.isBuffer(options.body);
  }

  private async sendFollowing(url: string, options: SendOptions): Promise<RegistryResponse> {
    let current = url;
    for (let hop = 0; ; hop++) {
      const target = new URL(current);
      const sameHost = target.host === new URL(this.ref.origin).host;
      const method = options.method ?? "GET";
      const headers: Record<string, string> = { "user-agent": USER_AGENT, ...options.headers };
      if (sameHost && this.token) headers.authorization = `Bearer ${this.token}`;
      const dispatcher = method === "GET" || method === "HEAD" ? this.retrying : this.agent;
      const res = await request(target, { method, headers, body: options.body, signal: options.signal, dispatcher }).catch((err: unknown) => {
        if (options.signal?.aborted) throw err;
        throw new RegistryError(`cannot reach registry ${target.host}: ${describe(err)}`);
      });
      const location = header(res.headers, "location");
      const redirect = options.redirects && res.statusCode >= 300 && res.statusCode < 400 && location;
      if (!redirect) return { statusCode: res.statusCode, headers: res.headers, body: res.body, url: current };
      await res.body.dump();
      if (hop >= MAX_REDIRECTS) throw new RegistryError("too many redirects from the registry");
      const next = new URL(location, target);
      if (next.protocol !== "https:" && next.protocol !== "http:") throw new RegistryError("registry redirected to an unsupported URL");
      if (target.protocol === "https:" && next.protocol === "http:") throw new RegistryError("registry redirected from https to http");
      current = next.toString();
    }
  }

  /** The bearer-token flow: `GET <realm>?service=...&scope=...` → `{token}` or `{access_token}`. */
  private async fetchToken(challenge: string, signal?: AbortSignal): Promise<string> {
    const params = parseChallenge(challenge);
    if (!params || !params.realm) throw new RegistryError(`registry ${this.ref.name.host} requires authentication`);
    let realm: URL;
    try {
      realm = new URL(params.realm);
    } catch {
      throw new RegistryError("registry sent an invalid authentication realm");
    }
    const origin = new URL(this.ref.origin);
    // The realm is honoured only on the registry's own host: a token request carries the scope
    // the client wants, and later the token itself, which must not be handed to a third party.
    if (realm.hostname !== origin.hostname || (origin.protocol === "https:" && realm.protocol !== "https:")) {
      throw new RegistryError(`registry authentication realm '${printable(realm.origin)}' is not on host '${origin.host}'`);
    }
    if (params.service) realm.searchParams.set("service", params.service);
    if (params.scope) realm.searchParams.set("scope", params.scope);
    const res = await request(realm, { headers: { "user-agent": USER_AGENT }, signal, dispatcher: this.retrying }).catch((err: unknown) => {
      throw new RegistryError(`cannot reach registry ${realm.host}: ${describe(err)}`);
    });
    await expectStatus(res, [200], "registry authentication");
    const body = JSON.parse(await readLimited(res.body, 64 * 1024)) as { token?: unknown; access_token?: unknown };
    const token = body.token ?? body.access_token;
    if (typeof token !== "string" || token === "") throw new RegistryError("registry authentication returned no token");
    return token;
  }
}

/** Checks a manifest: schema 2, every digest `sha256:<hex>`, sizes non-negative integers, bounded layers. */
export function validateManifest(value: unknown): Manifest {
  const m = value as Partial<Manifest> | null;
  if (!m || typeof m !== "object" || m.schemaVersion !== 2 || !Array.isArray(m.layers) || !m.config) throw new RegistryError("invalid manifest: not a schema 2 manifest");
  if (m.layers.length > REGISTRY_DEFAULTS.maxLayers) throw new RegistryError("invalid manifest: too many layers");
  for (const l of [m.config, ...m.layers] as Array<Partial<Layer> | null>) {
    if (!l || typeof l !== "object") throw new RegistryError("invalid manifest: malformed layer");
    if (!isDigest(l.digest)) throw new RegistryError(`invalid manifest: invalid digest '${printable(String(l.digest))}'`);
    if (!Number.isSafeInteger(l.size) || (l.size as number) < 0) throw new RegistryError(`invalid manifest: invalid size for ${l.digest}`);
    if (typeof l.mediaType !== "string") throw new RegistryError(`invalid manifest: no media type for ${l.digest}`);
  }
  return { schemaVersion: 2, mediaType: m.mediaType, config: m.config, layers: m.layers };
}

/** Throws a RegistryError unless the status is expected; reads the registry's error text. */
export async function expectStatus(res: Pick<RegistryResponse, "statusCode" | "body">, ok: number[], what: string): Promise<void> {
  if (ok.includes(res.statusCode)) return;
  const text = await readLimited(res.body, 4096).catch(() => "");
  let detail = `status ${res.statusCode}`;
  try {
    const errors = (JSON.parse(text) as { errors?: Array<{ message?: string; code?: string }> }).errors;
    const first = errors?.[0];
    if (first) detail = `${first.message ?? first.code ?? detail} (status ${res.statusCode})`;
  } catch {
    // not JSON: keep the status
  }
  throw new RegistryError(`${what}: ${printable(detail)}`);
}

/** Reads a whole body as text, refusing more than `limit` bytes. */
export async function readLimited(body: AsyncIterable<Buffer>, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) throw new RegistryError("registry response too large");
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

export function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** `Bearer realm="...",service="...",scope="..."` → its parameters. */
export function parseChallenge(value: string): Record<string, string> | undefined {
  const m = /^\s*Bearer\s+(.*)$/i.exec(value);
  if (!m?.[1]) return undefined;
  const out: Record<string, string> = {};
  for (const p of m[1].matchAll(/([a-zA-Z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))/g)) {
    if (p[1]) out[p[1].toLowerCase()] = (p[2] ?? p[3] ?? "").replace(/\\(.)/g, "$1");
  }
  return out;
}

function describe(err: unknown): string {
  const e = err as { code?: string; message?: string; statusCode?: number };
  if (e?.statusCode) return `status ${e.statusCode}`;
  return printable(e?.code ?? e?.message ?? String(err));
}
