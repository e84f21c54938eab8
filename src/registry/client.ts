/**
 * The registry client: the Docker registry v2 / OCI distribution protocol over undici.
 *
 * - Idempotent requests (GET, HEAD) go through undici's RetryAgent: transient network errors (a
 *   reset, a stalled body) and 429/5xx are retried with a growing delay (honouring Retry-After),
 *   and a body cut off mid-way is resumed with a `Range` request from the byte where it stopped.
 *   What retrying cannot fix fails at once with its reason: an unknown host, a refused connection,
 *   an unreachable network, a registry that accepted the connection and never answered. Uploads
 *   (bodies that are streams) are not retried.
 * - Every phase is bounded (REGISTRY_DEFAULTS, docs/models.md): connect, response head, the whole
 *   manifest body, and each blob's idle time between bytes.
 * - Every address connected to is checked and pinned by {@link AddressPolicy} (blind SSRF); with
 *   HTTPS_PROXY/HTTP_PROXY set, requests go through the proxy and each target's name is checked
 *   first (registryDispatcher in http.ts).
 * - Every early exit destroys the response body it does not read, so nothing waits on it.
 * - Authentication: a 401 is answered once per request. The registry's credentials come from
 *   Docker's config.json (credentials.ts), read only when a registry asks. `Basic` is answered
 *   with them; `Bearer realm=...` by fetching a token from the realm (with the credentials as
 *   Basic when there are some, anonymously otherwise), but only when the realm is on the
 *   registry's own host (and never from https down to http), so a registry cannot send the
 *   client to hand credentials or tokens elsewhere. A second 401 is an error that says whether
 *   credentials were refused or missing. Credentials and tokens are in no message and no log.
 * - Redirects are followed by hand (at most 5): the Authorization header goes only to the
 *   registry's own host, never to a blob host it redirects to.
 * - TLS: certificates are always verified, against the default store and SERVICE_REGISTRY_CA
 *   (tls.ts); `insecure` means plain http, never unverified TLS.
 * - Manifests: `Accept` names the Docker v2 and OCI manifest types; every entry's digest and size
 *   is validated before anything is written.
 */
import type { Readable } from "node:stream";
import type tls from "node:tls";
import { RetryAgent, request, type Dispatcher } from "undici";
import { HttpError, NotFoundError } from "../errors.js";
import { displayName, printable } from "../store/names.js";
import type { Manifest } from "../store/store.js";
import type { RegistryConfig } from "../config.js";
import { AddressPolicy } from "./address.js";
import { basicAuthorization, lookupCredentials, type Credentials } from "./credentials.js";
import { describe, discard, expectStatus, header, parseChallenge, readLimited, registryDispatcher, REGISTRY_DEFAULTS, RegistryError, seconds } from "./http.js";
import { validateManifest } from "./manifest.js";
import { manifestUrl, type RegistryRef } from "./reference.js";
import { secureContextWith } from "./tls.js";

// What callers of the client used to import from here.
export { REGISTRY_DEFAULTS, RegistryError } from "./http.js";
export { validateManifest } from "./manifest.js";

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

/** Network errors worth another try: the connection worked once and broke. */
const RETRIED_CODES = ["ECONNRESET", "EPIPE", "ETIMEDOUT", "UND_ERR_SOCKET", "UND_ERR_BODY_TIMEOUT"];

export interface ClientOptions {
  /** Docker's config.json with the registries' credentials; none when unset. */
  authFile?: string;
  /** Trust for TLS besides the default store (SERVICE_REGISTRY_CA). */
  secureContext?: tls.SecureContext;
}

/** A client for `ref` with the daemon's registry settings (the CA file is read now). */
export async function openClient(ref: RegistryRef, config: RegistryConfig): Promise<RegistryClient> {
  const secureContext = config.caFile === undefined ? undefined : await secureContextWith(config.caFile, config.nodeExtraCaFile);
  return new RegistryClient(ref, { authFile: config.authFile, secureContext });
}

/** One client per pull or push: its agents, and the authorization it obtained. */
export class RegistryClient {
  private readonly policy: AddressPolicy;
  private readonly agent: Dispatcher;
  private readonly retrying: RetryAgent;
  /** `Bearer <token>` or `Basic <credentials>`, sent to the registry's own host only. */
  private authorization: string | undefined;
  /** The registry's `host[:port]` as connected to (a mirror's, for a mirror's client). */
  readonly host: string;

  constructor(private readonly ref: RegistryRef, private readonly options: ClientOptions = {}) {
    this.host = new URL(ref.origin).host;
    this.policy = new AddressPolicy(new URL(ref.origin).hostname);
    this.agent = registryDispatcher({ policy: this.policy, secureContext: options.secureContext });
    this.retrying = new RetryAgent(this.agent, {
      maxRetries: REGISTRY_DEFAULTS.maxRetries,
      minTimeout: REGISTRY_DEFAULTS.minTimeoutMs,
      maxTimeout: REGISTRY_DEFAULTS.maxTimeoutMs,
      timeoutFactor: 2,
      methods: ["GET", "HEAD"],
      statusCodes: [429, 500, 502, 503, 504],
      errorCodes: RETRIED_CODES,
    });
  }

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
      const challenge = header(res.headers, "www-authenticate") ?? "";
      discard(res.body);
      const refused = await this.authenticate(challenge, options.signal);
      res = await this.sendFollowing(url, options);
      if (res.statusCode === 401) await expectStatus(res, [], refused);
    }
    return res;
  }

  /**
   * Answers a challenge: sets the authorization later requests carry. Returns what a second 401
   * means (credentials refused, or none to offer).
   */
  private async authenticate(challenge: string, signal?: AbortSignal): Promise<string> {
    const file = this.options.authFile;
    const found =
      file === undefined ? { credentials: undefined, missing: "no credentials file (SERVICE_REGISTRY_AUTH)" } : await lookupCredentials(file, this.host);
    const { credentials } = found;
    const refused = credentials
      ? `registry ${this.host} refused the credentials for it in ${file}`
      : `registry ${this.host} requires authentication: ${found.missing}`;
    if (/^\s*basic\b/i.test(challenge)) {
      if (!credentials) throw new RegistryError(refused);
      this.authorization = basicAuthorization(credentials);
    } else if (/^\s*bearer\b/i.test(challenge)) {
      this.authorization = `Bearer ${await this.fetchToken(challenge, credentials, refused, signal)}`;
    } else {
      const scheme = printable(challenge.split(/\s/)[0] ?? "");
      throw new RegistryError(
        challenge === ""
          ? `registry ${this.host} requires authentication and names no scheme (no WWW-Authenticate)`
          : `registry ${this.host} asks for an authentication scheme lmd does not support: ${scheme}`,
      );
    }
    return refused;
  }

  /**
   * Fetches and validates the manifest of the reference. 404 when the registry does not know it;
   * every other failure is `pull model manifest: <reason>`, as Ollama words it.
   */
  async fetchManifest(signal?: AbortSignal): Promise<Manifest> {
    try {
      const res = await this.send(manifestUrl(this.ref), { headers: { accept: MANIFEST_ACCEPT }, signal });
      if (res.statusCode === 404) {
        discard(res.body);
        throw new NotFoundError(`model '${displayName(this.ref.name)}' not found in the registry`);
      }
      await expectStatus(res, [200], "");
      const length = Number(header(res.headers, "content-length") ?? 0);
      if (length > REGISTRY_DEFAULTS.maxManifestBytes) {
        discard(res.body); // unread, it would hold the connection (and close()) until the registry gives up
        throw new RegistryError(`manifest too large (${length} bytes, limit ${REGISTRY_DEFAULTS.maxManifestBytes})`);
      }
      const text = await readLimited(
        res.body,
        REGISTRY_DEFAULTS.maxManifestBytes,
        REGISTRY_DEFAULTS.manifestTimeoutMs,
        `registry ${this.host} did not send the manifest within ${seconds(REGISTRY_DEFAULTS.manifestTimeoutMs)}`,
      );
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        throw new RegistryError("invalid manifest: not JSON");
      }
      return validateManifest(value);
    } catch (err) {
      if (err instanceof NotFoundError || signal?.aborted || !(err instanceof Error)) throw err;
      const message = err instanceof HttpError ? err.message : describe(err, this.host);
      throw new RegistryError(`pull model manifest: ${message}`);
    }
  }

  private canRetryBody(options: SendOptions): boolean {
    return options.body === undefined || typeof options.body === "string" || Buffer.isBuffer(options.body);
  }

  private async sendFollowing(url: string, options: SendOptions): Promise<RegistryResponse> {
    let current = url;
    await this.policy.init().catch((err: unknown) => {
      throw new RegistryError(describe(err, this.host));
    });
    for (let hop = 0; ; hop++) {
      const target = new URL(current);
      try {
        this.policy.checkLiteral(target.hostname);
      } catch (err) {
        throw new RegistryError(`registry redirect refused: ${(err as Error).message}`);
      }
      const sameHost = target.host === new URL(this.ref.origin).host;
      const method = options.method ?? "GET";
      const headers: Record<string, string> = { "user-agent": USER_AGENT, ...options.headers };
      if (sameHost && this.authorization) headers.authorization = this.authorization;
      const dispatcher = method === "GET" || method === "HEAD" ? this.retrying : this.agent;
      const res = await request(target, { method, headers, body: options.body, signal: options.signal, dispatcher }).catch((err: unknown) => {
        if (options.signal?.aborted) throw err;
        throw new RegistryError(describe(err, target.host));
      });
      const location = header(res.headers, "location");
      const redirect = options.redirects && res.statusCode >= 300 && res.statusCode < 400 && location;
      if (!redirect) return { statusCode: res.statusCode, headers: res.headers, body: res.body, url: current };
      discard(res.body);
      if (hop >= MAX_REDIRECTS) throw new RegistryError("too many redirects from the registry");
      const next = new URL(location, target);
      if (next.protocol !== "https:" && next.protocol !== "http:") throw new RegistryError("registry redirected to an unsupported URL");
      if (target.protocol === "https:" && next.protocol === "http:") throw new RegistryError("registry redirected from https to http");
      current = next.toString();
    }
  }

  /**
   * The bearer-token flow: `GET <realm>?service=...&scope=...` → `{token}` or `{access_token}`,
   * with the credentials as Basic authentication when there are some (`refused` is the error when
   * the realm does not accept them, or asks for credentials there are none of).
   */
  private async fetchToken(challenge: string, credentials: Credentials | undefined, refused: string, signal?: AbortSignal): Promise<string> {
    const params = parseChallenge(challenge);
    if (!params || !params.realm) throw new RegistryError(`registry ${this.host} requires authentication`);
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
    const headers: Record<string, string> = { "user-agent": USER_AGENT };
    if (credentials) {
      realm.searchParams.set("account", credentials.username);
      headers.authorization = basicAuthorization(credentials);
    }
    const res = await request(realm, { headers, signal, dispatcher: this.retrying }).catch((err: unknown) => {
      throw new RegistryError(describe(err, realm.host));
    });
    if (res.statusCode === 401 || res.statusCode === 403) await expectStatus(res, [], refused);
    await expectStatus(res, [200], "registry authentication");
    let body: { token?: unknown; access_token?: unknown };
    try {
      body = JSON.parse(await readLimited(res.body, 64 * 1024, REGISTRY_DEFAULTS.manifestTimeoutMs)) as typeof body;
    } catch (err) {
      if (err instanceof HttpError) throw err;
      throw new RegistryError("registry authentication returned invalid JSON");
    }
    const token = body.token ?? body.access_token;
    if (typeof token !== "string" || token === "") throw new RegistryError("registry authentication returned no token");
    return token;
  }
}
